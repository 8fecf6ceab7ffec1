"""Give the process's freed heap memory back to the operating system (glibc's ``malloc_trim``).

A backup scenario's windows allocate and free about a window's bytes each (bodies made
before a window, the bytes a read lands). With more than one stream the requests run on
worker threads, and glibc gives each thread its own arena: memory a thread's requests
allocated and the scenario later freed stays in that arena, reserved by the process and
counted in its RSS, where the next window's allocations on another thread cannot reuse
it. On a 14 500-file tree (six versions, ``files``, the local disk) the peak RSS was
263 MiB at one stream and 443 MiB at four; trimming after each large window made it 252 MiB
at four (``benchmarks/heap_trim.py``). :func:`release` trims, untimed, after a window
that moved at least :data:`TRIM_ABOVE` bytes.

Where the C library is not glibc (musl, macOS, Windows) there is no ``malloc_trim``:
:func:`release` does nothing and says so by returning False.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
from collections.abc import Callable

__all__ = ["TRIM_ABOVE", "release", "trims"]

#: a window that moved fewer bytes than this (sent plus received) is not followed by a
#: trim: its allocations are too small to matter, and a trim walks every arena (5 to
#: 20 ms on a heap of 200 MiB)
TRIM_ABOVE = 8 * 1024 * 1024


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim``, or None where the C library has none."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        trim = libc.malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    function: Callable[[int], int] = trim
    return function


def trims() -> bool:
    """True when this process's C library can give freed heap memory back (glibc)."""
    return _malloc_trim() is not None


def release(moved: int) -> bool:
    """After a window that moved ``moved`` bytes: give the freed heap memory of every
    arena back to the operating system when ``moved`` is at least :data:`TRIM_ABOVE`.
    True when a trim ran."""
    trim = _malloc_trim()
    if trim is None or moved < TRIM_ABOVE:
        return False
    trim(0)
    return True
