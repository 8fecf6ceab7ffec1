"""Warnings and errors as data: a stable code, the message, what to do, and the repeat.

A :class:`Notice` is what a Result says about itself. Tests and users match its
``code`` (a :class:`Code`, stable across releases), never a substring of its message::

    >>> notice = Notice(code=Code.HIGH_VARIATION, message="throughput varies by 14 %",
    ...                 fix="run more repeats (repeats=10) and compare medians",
    ...                 option="repeats", value="10")
    >>> str(notice)
    'high-variation: throughput varies by 14 %: run more repeats (repeats=10) and compare medians'
    >>> notice.cli_text
    'high-variation: throughput varies by 14 %: run more repeats (--repeats 10) and compare medians'

A fix that names a setting carries it as data (``option``, ``value``), so each surface
spells it as its readers type it: ``repeats=10`` in Python, ``--repeats 10`` on the
command line (:attr:`Notice.cli_fix`).

Codes are listed, with what each means, on the docs page ``docs/concepts.md``.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from typing import Any

from attrs import field, frozen

from storeprobe.errors import ConfigurationError

__all__ = ["Code", "Notice", "NoticeLike", "notices_of"]


class Code(enum.StrEnum):
    """The stable code of a :class:`Notice`."""

    # -- warnings: the figure means less than it seems ----------------------------------
    #: throughput varies by more than 10 % (coefficient of variation) over the repeats
    HIGH_VARIATION = "high-variation"
    #: the first repeat was much slower than the others
    WARM_UP = "warm-up"
    #: the timed window is too short to time reliably
    WINDOW_TOO_SHORT = "window-too-short"
    #: the probe's process used a whole CPU core: the client was the limit
    CLIENT_BOUND = "client-bound"
    #: a download faster than any network: a cache answered
    CACHE_SUSPECTED = "cache-suspected"
    #: the client retried failed requests inside the timed window
    RETRIED = "retried"
    #: one object's transfer could not be split: it was single-streamed
    CANNOT_SPLIT = "cannot-split"
    #: fewer objects or parts than streams: fewer requests were in flight
    FEW_REQUESTS = "few-requests"
    #: byte ranges were read with s3fs because the server answers ranged GETs with 200
    RANGES_VIA_S3FS = "ranges-via-s3fs"
    #: the storage refused conditional writes: existence was checked with HEAD instead
    NO_CONDITIONAL_WRITE = "no-conditional-write"
    #: this platform cannot evict files from the page cache before a download
    NO_CACHE_EVICTION = "no-cache-eviction"
    #: the slowest time slice of a repeat fell below a quarter of the median slice
    #: (a stall or throttling: see storeprobe.timeline)
    STALL = "stall"
    #: cleanup could not delete everything the probe wrote
    CLEANUP_INCOMPLETE = "cleanup-incomplete"
    #: the storage options did not translate to obstore, the default client for the URL:
    #: another client measured (s3fs or adlfs), and the message says which option forced it
    CLIENT_FALLBACK = "client-fallback"
    #: certificates were not verified (``client_kwargs={"verify": False}``)
    TLS_UNVERIFIED = "tls-unverified"
    #: s3fs sent checksums only where S3 requires them, on an endpoint that is not AWS
    #: (S3-compatible servers refuse botocore's default aws-chunked bodies)
    CHECKSUMS_WHEN_REQUIRED = "checksums-when-required"
    #: the workers of a distributed probe started their windows far apart
    START_SPREAD = "start-spread"
    #: a worker's clock offset is uncertain by a large part of the window
    CLOCK_UNCERTAIN = "clock-uncertain"
    # -- errors: a repeat failed ---------------------------------------------------------
    #: a request failed (the message names the error the storage or client gave)
    REQUEST_FAILED = "request-failed"
    #: a request got no answer within the probe's timeout
    TIMEOUT = "timeout"
    #: the bytes read back differ from those written, or their count does
    VERIFICATION_FAILED = "verification-failed"
    #: the storage moved another number of bytes than the workload has
    SHORT_TRANSFER = "short-transfer"
    #: a scenario step that did not run because an earlier step failed
    NOT_RUN = "not-run"
    #: a worker of a distributed probe failed or was lost: the aggregate is not reported
    WORKER_FAILED = "worker-failed"
    #: the local target is a memory filesystem (tmpfs, ramfs): the figure is RAM speed,
    #: not a disk's
    MEMORY_FILESYSTEM = "memory-filesystem"
    #: a notice from a results document written before codes existed (schema 1)
    UNCLASSIFIED = "unclassified"


def _code(value: Code | str) -> Code:
    return Code(value)


@frozen(kw_only=True)
class Notice:
    """One warning or error of a Result.

    ``code`` is stable (see :class:`Code`); ``message`` says what happened, ``fix`` what
    to do about it (may be empty), spelled for Python; ``repeat`` is the 1-based repeat
    it concerns, or None when it concerns the whole probe. ``option`` and ``value`` name
    the setting the fix changes (``"repeats"``, ``"10"``), written ``option=value`` in
    ``fix``; :attr:`cli_fix` spells it ``--option value``.
    """

    code: Code = field(converter=_code)
    message: str
    fix: str = ""
    repeat: int | None = None
    option: str = ""
    value: str = ""

    @property
    def cli_fix(self) -> str:
        """The fix as a command-line user types it: ``--repeats 10``, not ``repeats=10``."""
        if not self.option:
            return self.fix
        flag = "--" + self.option.replace("_", "-")
        bare = self.value.strip("'\"")
        return self.fix.replace(f"{self.option}={self.value}", f"{flag} {bare}")

    def _text(self, fix: str) -> str:
        where = f"repeat {self.repeat}: " if self.repeat is not None else ""
        return f"{where}{self.code.value}: {self.message}" + (f": {fix}" if fix else "")

    def __str__(self) -> str:
        return self._text(self.fix)

    @property
    def cli_text(self) -> str:
        """``str(notice)`` with the fix spelled for the command line (:attr:`cli_fix`)."""
        return self._text(self.cli_fix)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (``option`` and ``value`` only when the fix names a setting)."""
        data: dict[str, Any] = {
            "code": self.code.value,
            "message": self.message,
            "fix": self.fix,
            "repeat": self.repeat,
        }
        if self.option:
            data["option"] = self.option
            data["value"] = self.value
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Notice:
        """Inverse of :meth:`to_dict`."""
        return cls(
            code=data["code"],
            message=data["message"],
            fix=data.get("fix", ""),
            repeat=data.get("repeat"),
            option=data.get("option", ""),
            value=data.get("value", ""),
        )


#: what a Result's ``errors`` and ``warnings`` accept: a Notice or its dict
NoticeLike = Notice | Mapping[str, Any]


def _notice(value: NoticeLike) -> Notice:
    if isinstance(value, Notice):
        return value
    if isinstance(value, Mapping):
        return Notice.from_dict(dict(value))
    if isinstance(value, str):
        raise ConfigurationError(
            f"a warning or error is a Notice, not the text {value!r}: use "
            "Notice(code=Code..., message=..., fix=...) (documents of schema 1 are "
            "converted by load_results)"
        )
    raise ConfigurationError(
        f"a warning or error is a Notice or its dict, not {type(value).__name__}"
    )


def notices_of(value: Iterable[NoticeLike]) -> tuple[Notice, ...]:
    """Notices, or their dicts, as a tuple of Notices (the converter of a Result's
    ``errors`` and ``warnings``); a text or a single notice is refused."""
    if isinstance(value, str | Notice | Mapping):  # one notice, or a text, not a sequence
        raise ConfigurationError(
            "warnings and errors are sequences of notices: wrap a single one in a tuple"
        )
    return tuple(_notice(item) for item in value)
