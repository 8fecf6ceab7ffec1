"""Where a measurement was made: host, CPUs, platform, software versions, time, label."""

from __future__ import annotations

import datetime as dt
import importlib.metadata
import os
import platform
import socket
import sys
from typing import Any

from attrs import field, frozen

from storeprobe.errors import ConfigurationError

__all__ = ["Environment", "check_label"]

_PACKAGES = (
    "storeprobe",
    "fsspec",
    "numpy",
    "s3fs",
    "obstore",
    "gcsfs",
    "adlfs",
    "sshfs",
    "aiobotocore",
    "botocore",
)
MAX_LABEL = 64


def check_label(label: str | None) -> str | None:
    """Return ``label`` if it is None or 1-64 printable characters, else raise."""
    if label is None:
        return None
    if not isinstance(label, str) or not label or len(label) > MAX_LABEL:
        raise ConfigurationError(
            f"label must be a string of 1 to {MAX_LABEL} characters, not {label!r}"
        )
    if not label.isprintable():
        raise ConfigurationError(
            f"label {label!r} contains control characters: use printable text such as 'home-ssd'"
        )
    return label


def _validate_label(_: object, __: object, value: str | None) -> None:
    check_label(value)


def _versions() -> dict[str, str]:
    versions: dict[str, str] = {}
    for name in _PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return versions


@frozen(kw_only=True)
class Environment:
    """The machine and software a Result was measured with. ``capture()`` reads them."""

    hostname: str
    cpu_count: int
    platform: str
    python: str
    packages: dict[str, str] = field(factory=dict, hash=False)
    utc: str = ""
    label: str | None = field(default=None, validator=_validate_label)

    @classmethod
    def capture(cls, label: str | None = None) -> Environment:
        """Read the current host, CPU count, platform, versions and UTC time."""
        return cls(
            hostname=socket.gethostname(),
            cpu_count=os.cpu_count() or 0,
            platform=platform.platform(),
            python=sys.version.split()[0],
            packages=_versions(),
            utc=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            label=check_label(label),
        )

    @property
    def name(self) -> str:
        """The label if one was given, else the host name."""
        return self.label or self.hostname

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of every field."""
        return {
            "hostname": self.hostname,
            "cpu_count": self.cpu_count,
            "platform": self.platform,
            "python": self.python,
            "packages": dict(self.packages),
            "utc": self.utc,
            "label": self.label,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Environment:
        """Inverse of :meth:`to_dict`."""
        return cls(**data)
