"""Checks made outside the timed window: bytes read back, sizes reported, memory needed.

Every downloaded byte is compared with the payload regenerated from (seed, index), so
no copy of what was written is kept. Buffers a download lands in are allocated and
their pages touched before the window (:func:`prefaulted`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np

from storeprobe.errors import ConfigurationError
from storeprobe.request import Buffer, Outcome, Request
from storeprobe.staging import Staging
from storeprobe.units import format_size
from storeprobe.workload import Workload

__all__ = [
    "ShortTransferError",
    "VerificationError",
    "available_memory",
    "check_memory",
    "check_sizes",
    "prefaulted",
    "verify_outcomes",
    "verify_staged",
]


class VerificationError(OSError):
    """What was read back differs from what was written (bytes, length or size)."""


class ShortTransferError(OSError):
    """A timed window moved another number of bytes than its workload has."""


def prefaulted(size: int) -> bytearray:
    """A zeroed buffer whose pages are already mapped, so filling it costs no page faults."""
    buffer = bytearray(size)
    if size >= 4096:
        np.frombuffer(buffer, dtype=np.uint8)[::4096] = 0  # touch every page
    return buffer


def verify_outcomes(
    workload: Workload,
    requests: Sequence[Request],
    outcomes: Sequence[Outcome],
    index_of: dict[str, int],
) -> None:
    """Raise :class:`VerificationError` naming the first object whose bytes differ."""
    lengths: dict[int, int] = {}
    for request, outcome in zip(requests, outcomes, strict=True):
        index = index_of[request.key]
        offset = request.start or 0
        data: Buffer | None = outcome.data
        if data is None:
            raise VerificationError(f"object {index}: no data was returned for offset {offset}")
        lengths[index] = lengths.get(index, 0) + len(data)
        bad = workload.mismatch(index, data, offset)
        if bad is not None:
            raise VerificationError(
                f"verification failed: object {index} differs from what was written at byte {bad}"
            )
    for index, length in lengths.items():
        if length != workload.size_of(index):
            raise VerificationError(
                f"verification failed: object {index} read back {length} bytes, "
                f"wrote {workload.size_of(index)}"
            )


def verify_staged(workload: Workload, staging: Staging) -> None:
    """Raise if the staged object differs from the payload (read 1 MiB at a time)."""
    for offset, chunk in staging.chunks():
        bad = workload.mismatch(0, chunk, offset)
        if bad is not None:
            raise VerificationError(
                f"verification failed: object 0 differs from what was written at byte {bad}"
            )


def check_sizes(
    requests: Sequence[Request], outcomes: Sequence[Outcome], expected: int | Sequence[int]
) -> None:
    """Raise unless every HEAD reported ``expected`` bytes (one size for all, or each
    request's own), so the setup upload is complete."""
    each = [expected] * len(requests) if isinstance(expected, int) else list(expected)
    for request, outcome, expected in zip(requests, outcomes, each, strict=True):
        if outcome.size != expected:
            raise VerificationError(
                f"{request.key} holds {outcome.size} bytes after the setup upload, expected "
                f"{expected}: the storage did not keep what was written"
            )


def available_memory() -> int | None:
    """Bytes of memory available to new allocations (Linux MemAvailable), or None."""
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def check_memory(workload: Workload, needed: int, holds: str) -> None:
    """Refuse a workload whose ``needed`` bytes exceed 80 % of the available memory."""
    available = available_memory()
    if available is not None and needed > 0.8 * available:
        raise ConfigurationError(
            f"workload {workload.describe()} needs {format_size(needed)} of memory "
            f"(the probe holds {holds}); about {available / 1024**3:.1f} GiB is "
            "available: use fewer or smaller objects, or more streams so that one object "
            "is split and staged through a local file"
        )
