"""The exceptions storeprobe raises.

Every exception is a :class:`StoreProbeError` and also the builtin exception a caller
would naturally catch, so ``except ValueError`` and ``except OSError`` keep working::

    StoreProbeError
    ├── ConfigurationError (ValueError)      bad workload, size string, option or label
    │   └── UnitError (ValueError)           a size string that is malformed or ambiguous
    ├── MissingDependencyError (ImportError) a protocol's fsspec package, or librsync, is missing
    ├── ResultFormatError (ValueError)       a results document that cannot be loaded
    └── TargetError (OSError)                the storage cannot be used as asked
        ├── TargetUnreachableError (ConnectionError)
        ├── TargetPermissionError (PermissionError)
        └── TargetNotFoundError (FileNotFoundError)

    StoreProbeWarning (UserWarning)          issued when one object's transfer cannot be
                                             split (code cannot-split); every warning is
                                             also a Notice on Result.warnings

Messages say what is wrong and what to do about it, and never contain a secret.
"""

from __future__ import annotations

__all__ = [
    "ConfigurationError",
    "MissingDependencyError",
    "ResultFormatError",
    "StoreProbeError",
    "StoreProbeWarning",
    "TargetError",
    "TargetNotFoundError",
    "TargetPermissionError",
    "TargetUnreachableError",
    "UnitError",
]


class StoreProbeError(Exception):
    """Base class of every error storeprobe raises on purpose."""


class ConfigurationError(StoreProbeError, ValueError):
    """A workload, option or argument is invalid; raised at construction, before any I/O."""


class UnitError(ConfigurationError):
    """A size string is malformed or ambiguous (``"16 KB"``, ``"1.5MiB"``, ``"MiB"``)."""


class MissingDependencyError(StoreProbeError, ImportError):
    """The fsspec implementation (or optional feature) needs a package that is not installed."""


class ResultFormatError(StoreProbeError, ValueError):
    """A results document has an unknown schema version or is malformed."""


class TargetError(StoreProbeError, OSError):
    """The storage target cannot be used as asked."""


class TargetUnreachableError(TargetError, ConnectionError):
    """The storage does not answer (connection refused, DNS failure, timeout)."""


class TargetPermissionError(TargetError, PermissionError):
    """The storage refused the credentials or the operation."""


class TargetNotFoundError(TargetError, FileNotFoundError):
    """The bucket, container or root directory does not exist."""


class StoreProbeWarning(UserWarning):
    """A measurement that is not what was asked (e.g. an upload that could not be split)."""
