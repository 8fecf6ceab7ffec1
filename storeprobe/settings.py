"""How a probe runs: one frozen, picklable value passed whole to every scenario.

:class:`Settings` holds what a :class:`~storeprobe.probe.Probe` was asked (streams,
repeats, warm-up repeats, verification, timeout, part size, staging threshold, label,
seed, the untimed work's concurrency), validated
once at construction. The measurement (uploads and downloads), the metadata probes, the
backup scenarios and the Dask workers all take it as it is; none copies its fields. What
cannot travel to another process (the clock, a progress callback, the target's open
filesystem) is passed beside it.
"""

from __future__ import annotations

from typing import Any

import attrs
from attrs import field, frozen

from storeprobe.errors import ConfigurationError
from storeprobe.units import GiB, format_size, parse_size

__all__ = ["DEFAULT_PREP_STREAMS", "MAX_REPEATS", "MAX_STREAMS", "WARMUP", "Settings"]

#: Most requests in flight a probe accepts.
MAX_STREAMS = 1024
#: Most repeats a probe accepts.
MAX_REPEATS = 1000
#: Requests in flight for the untimed work around the windows (preparation uploads, size
#: checks, absence checks, deletes, cleanup), unless ``prep_streams`` says otherwise.
DEFAULT_PREP_STREAMS = 32


def in_range(low: int, high: int, hint: str) -> Any:
    """An attrs validator: an int (not a bool) from ``low`` to ``high``."""

    def check(_: Any, attribute: attrs.Attribute[int], value: int) -> None:
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise ConfigurationError(
                f"{attribute.name} must be an int from {low} to {high}, not {value!r}: {hint}"
            )

    return check


def check_timeout(_: Any, __: Any, value: float | None) -> None:
    """An attrs validator: a positive number of seconds, or None."""
    if value is not None and (
        isinstance(value, bool) or not isinstance(value, int | float) or not value > 0
    ):
        raise ConfigurationError(
            f"timeout must be a positive number of seconds or None, not {value!r}"
        )


def part_size(value: int | str | None) -> int | None:
    """An attrs converter: bytes from an int or a size string, None kept."""
    return None if value is None else parse_size(value)


#: The largest part a split upload takes (S3's limit: 5 GiB per part), in bytes.
MAX_PART_SIZE = 5 * GiB


def check_part_size(_: Any, __: Any, value: int | None) -> None:
    """An attrs validator: a part size in bytes between 1 and :data:`MAX_PART_SIZE`, or
    None (a client's own minimum, S3's 5 MiB, is checked by the probe that knows it)."""
    if value is not None and value < 1:
        raise ConfigurationError(f"part_size must be positive, not {value}")
    if value is not None and value > MAX_PART_SIZE:
        raise ConfigurationError(
            f"part_size {value:,} bytes is above {format_size(MAX_PART_SIZE)}, the largest "
            "part S3 accepts: use at most 5 GiB"
        )


def check_stage_above(_: Any, __: Any, value: int) -> None:
    """An attrs validator: a positive staging threshold in bytes."""
    if value < 1:
        raise ConfigurationError(f"stage_above must be positive, not {value}")


def check_seed(_: Any, __: Any, value: int | None) -> None:
    """An attrs validator: a seed in [0, 2**63), or None."""
    if value is not None and (
        isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**63
    ):
        raise ConfigurationError(f"seed must be an int in [0, 2**63) or None, not {value!r}")


#: the validator of ``prep_streams`` (the Settings' and the Probe's)
PREP_STREAMS = in_range(
    1,
    MAX_STREAMS,
    f"requests in flight for the untimed work around the windows; {DEFAULT_PREP_STREAMS} "
    "is the default (1: one request at a time, as the windows at streams=1)",
)

#: the validator of ``warmup`` (the Settings' and the Probe's)
WARMUP = in_range(
    0,
    MAX_REPEATS,
    "warm-up repeats run before the measured ones and count in no figure; use 0 (none) "
    "or 1 (the first connections' handshakes paid outside the figures)",
)


@frozen(kw_only=True)
class Settings:
    """A probe's settings (see :class:`~storeprobe.probe.Probe` for each one's meaning).

    ``streams``: requests in flight; ``repeats``: timed repetitions; ``warmup``: repeats
    run first, exactly as the measured ones, kept apart in the Result
    (``warmup_samples``) and counted in no figure; ``verify``: check
    every byte read back; ``timeout``: seconds per request and per untimed step (None:
    none); ``part_size``: bytes per part when one object is split (None: the default);
    ``stage_above``: bytes from which one object is staged through a local file;
    ``label``: the environment's name in reports; ``seed``: the bytes' seed for workloads
    without one (None: fresh per measurement); ``prep_streams``: requests in flight for
    the untimed work outside the windows (preparation uploads, size and absence checks,
    deletes, cleanup), whatever ``streams`` is.
    """

    streams: int = field(default=1, validator=in_range(1, MAX_STREAMS, "use e.g. 1, 4 or 16"))
    repeats: int = field(default=3, validator=in_range(1, MAX_REPEATS, "3 is the usual choice"))
    warmup: int = field(default=0, validator=WARMUP)
    verify: bool = True
    timeout: float | None = field(default=300.0, validator=check_timeout)
    part_size: int | None = field(default=None, converter=part_size, validator=check_part_size)
    stage_above: int = field(default=GiB, converter=parse_size, validator=check_stage_above)
    label: str | None = None
    seed: int | None = field(default=None, validator=check_seed)
    prep_streams: int = field(default=DEFAULT_PREP_STREAMS, validator=PREP_STREAMS)

    def evolve(self, **changes: Any) -> Settings:
        """The same settings with ``changes`` (validated again)."""
        return attrs.evolve(self, **changes)
