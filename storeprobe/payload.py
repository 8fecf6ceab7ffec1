"""Payloads: the bytes storeprobe writes and checks, for a workload's objects and a
dataset's files alike.

Every payload is a *stream* of 1 MiB blocks (:data:`GENERATION_BLOCK`), block ``b``
drawn from numpy's SFC64 seeded by ``entropy + [b]``: incompressible, unique to its
entropy, and producible from any offset without the bytes before it, so an object or a
file of any size streams through a small buffer and a read can be checked without a copy
kept. A workload's object ``i`` is the stream of ``(domain, seed, i)``
(:class:`storeprobe.workload.Workload`); a tree's file the stream of ``(domain, seed,
path, generation)``, an image's block that of ``(domain, seed, block, generation)``
(:mod:`storeprobe.dataset`).

:class:`Payloads` is the one protocol they share: *items* (a workload's object index, a
dataset's :class:`~storeprobe.dataset.File`), each with a size in bytes and its bytes
written into a caller's buffer. :func:`payload`, :func:`mismatch` and :func:`pieces` work
on any of them, so a workload is the simplest dataset: its items are numbered objects of
one version.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator
from typing import Protocol, TypeVar

import numpy as np
import numpy.typing as npt

from storeprobe.errors import ConfigurationError
from storeprobe.units import MiB

__all__ = [
    "GENERATION_BLOCK",
    "Payloads",
    "fill_stream",
    "filled_buffer",
    "first_mismatch",
    "mismatch",
    "payload",
    "pieces",
]

#: bytes drawn from one seeded generator: the unit in which a payload stream is produced
GENERATION_BLOCK = 1 * MiB

Item = TypeVar("Item", contravariant=True)
_Item = TypeVar("_Item")


class Payloads(Protocol[Item]):
    """Items with a size and reproducible bytes: a workload (items: object indexes) or a
    dataset version (items: its files)."""

    def size_of(self, item: Item) -> int:
        """The item's size in bytes."""
        ...

    def fill(self, item: Item, start: int, out: memoryview | bytearray) -> None:
        """Write bytes ``[start, start + len(out))`` of ``item`` into ``out``."""
        ...


def fill_stream(entropy: list[int], start: int, target: npt.NDArray[np.uint8]) -> None:
    """Write bytes ``[start, start + len(target))`` of the stream seeded by ``entropy``
    into ``target``: block ``b`` (1 MiB) is SFC64 seeded by ``entropy + [b]``."""
    stop = start + len(target)
    position = start
    while position < stop:
        block, offset = divmod(position, GENERATION_BLOCK)
        take = min(GENERATION_BLOCK - offset, stop - position)
        words = -(-(offset + take) // 8)
        generator = np.random.SFC64(np.random.SeedSequence([*entropy, block]))
        raw = generator.random_raw(words).view(np.uint8)
        target[position - start : position - start + take] = raw[offset : offset + take]
        position += take


def payload(source: Payloads[_Item], item: _Item, start: int = 0, stop: int | None = None) -> bytes:
    """Bytes ``[start, stop)`` of ``item`` (default: all of it) as immutable ``bytes``,
    generated in place (no second copy is ever alive)."""
    stop = source.size_of(item) if stop is None else stop
    return filled_buffer(
        max(stop - start, 0), lambda view: source.fill(item, start, view)
    ).getvalue()


def mismatch(
    source: Payloads[_Item], item: _Item, data: bytes | bytearray | memoryview, start: int = 0
) -> int | None:
    """Offset in ``item`` of the first byte where ``data`` (standing at ``start``)
    differs from its payload, or None; bytes past its end differ at its size. A
    whole-item check must also compare lengths. The payload is generated 4 MiB at a
    time into one scratch buffer, so no copy of the whole item is made."""
    limit = max(min(len(memoryview(data).cast("B")), source.size_of(item) - start), 0)
    scratch = memoryview(bytearray(min(limit, 4 * GENERATION_BLOCK)))

    def expected(a: int, b: int) -> memoryview:
        want = scratch[: b - a]
        source.fill(item, a, want)
        return want

    return first_mismatch(data, source.size_of(item), start, expected)


def pieces(
    source: Payloads[_Item], item: _Item, piece_size: int = GENERATION_BLOCK
) -> Iterator[memoryview]:
    """The bytes of ``item`` in order, in pieces of at most ``piece_size`` bytes.

    One buffer is reused: a piece is valid until the next one is drawn, so memory stays at
    ``piece_size`` for an item of any size. Copy a piece to keep it.
    """
    if not isinstance(piece_size, int) or isinstance(piece_size, bool) or piece_size < 1:
        raise ConfigurationError(f"piece_size must be a positive int, not {piece_size!r}")
    size = source.size_of(item)
    buffer = memoryview(bytearray(min(piece_size, max(size, 1))))
    for start in range(0, size, piece_size):
        view = buffer[: min(piece_size, size - start)]
        source.fill(item, start, view)
        yield view


def first_mismatch(
    data: bytes | bytearray | memoryview,
    size: int,
    start: int,
    expected: Callable[[int, int], bytes | bytearray | memoryview],
) -> int | None:
    """Offset of the first byte where ``data`` differs from what ``expected(a, b)``
    regenerates for bytes ``[a, b)`` of an object of ``size`` bytes, ``data`` standing at
    ``start``; bytes past the end differ at ``size``. Compared 4 MiB at a time (equal
    pieces compared with numpy, a differing one searched), so no copy of
    the whole object is made."""
    view = memoryview(data).cast("B")
    limit = max(min(len(view), size - start), 0)
    step = 4 * GENERATION_BLOCK
    for offset in range(0, limit, step):
        take = min(step, limit - offset)
        got = np.frombuffer(view[offset : offset + take], dtype=np.uint8)
        want = np.frombuffer(expected(start + offset, start + offset + take), dtype=np.uint8)
        # numpy compares 4 MiB in about 0.2 ms; memoryview's == unpacks each byte (7 ms)
        if not np.array_equal(got, want):
            return start + offset + int(np.argmax(got != want))
    if start + len(view) > size:
        return size
    return None


def filled_buffer(size: int, fill: Callable[[memoryview], None]) -> io.BytesIO:
    """A BytesIO of ``size`` bytes written in place by ``fill`` (no zeroed copy first).

    ``io.BytesIO(bytes(size))`` would copy its initial bytes on the first ``getbuffer``,
    so two objects' worth of memory would be alive at once; growing an empty BytesIO to
    ``size`` allocates once, and ``getvalue()`` then hands that same buffer out as bytes.
    """
    buffer = io.BytesIO()
    if size:
        buffer.seek(size - 1)
        buffer.write(b"\0")
        with buffer.getbuffer() as view:
            fill(view)
    return buffer
