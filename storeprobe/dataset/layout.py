"""Where a generated tree's files go and how big they are: directory layouts, and the
shape of a source tree like the Linux kernel's (:data:`SOURCE_TREE`)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from attrs import frozen

from storeprobe.errors import ConfigurationError
from storeprobe.sizes import Int64Array, Sizes, _int
from storeprobe.units import KiB, MiB

__all__ = ["SOURCE_TREE", "SourceTreeShape"]


def _layout(
    count: int,
    rng: np.random.Generator,
    *,
    fanout: int,
    depth: int,
    extensions: Sequence[tuple[str, float]],
) -> list[str]:
    """``count`` distinct file paths in a full directory tree of ``fanout`` and ``depth``."""
    fanout = _int("fanout", fanout, 1, 1000)
    depth = _int("depth", depth, 0, 16)
    if fanout**depth > 10**9:
        raise ConfigurationError(f"fanout**depth = {fanout**depth:,} directories: make them fewer")
    width = max(2, len(str(fanout - 1)))
    level_sizes = [fanout**level for level in range(depth + 1)]
    starts = np.cumsum([0, *level_sizes])
    chosen = rng.integers(0, int(starts[-1]), size=count)
    names = [name for name, _ in extensions]
    weights = np.array([weight for _, weight in extensions], dtype=np.float64)
    suffixes = rng.choice(len(names), size=count, p=weights / weights.sum())
    digits = max(6, len(str(count - 1)))
    paths = []
    for index, (directory, suffix) in enumerate(
        zip(chosen.tolist(), suffixes.tolist(), strict=True)
    ):
        level = int(np.searchsorted(starts, directory, side="right")) - 1
        position = directory - int(starts[level])
        parts = []
        for _ in range(level):
            position, digit = divmod(position, fanout)
            parts.append(f"d{digit:0{width}d}")
        parts.append(f"f{index:0{digits}d}{names[suffix]}")
        paths.append("/".join(parts))
    return paths


@frozen(kw_only=True)
class SourceTreeShape:
    """The parameters of :meth:`Tree.source_tree` (see ``docs/backup.md`` for sources)."""

    #: files at scale 1.0
    count: int
    #: bytes at scale 1.0
    total_bytes: int
    #: the lognormal body of the size distribution
    body: Sizes
    #: the share of files in the long tail, and its log-uniform range in bytes
    tail_fraction: float
    tail_low: int
    tail_high: int
    files_per_directory: float
    extensions: tuple[tuple[str, float], ...]

    @property
    def tail_share(self) -> float:
        """The share of the bytes in the tail (its expected bytes over the total)."""
        low, high = self.tail_low, self.tail_high
        tail_mean = (high - low) / math.log(high / low)
        return self.tail_fraction * self.count * tail_mean / self.total_bytes

    def draw(self, count: int, total: int, rng: np.random.Generator) -> Int64Array:
        """``count`` sizes adding up to ``total``.

        The tail is stratified (one draw per equal slice of its log range) and scaled to
        its share of ``total``; the body is scaled by one common factor to the rest. So
        even a small tree keeps the proportions: a single tail file of a few hundred
        files never eats half the bytes.
        """
        tail = min(count - 1, math.floor(self.tail_fraction * count + 0.5))
        tail_sizes = np.zeros(0, dtype=np.int64)
        if tail > 0:
            slices = (np.arange(tail) + rng.random(tail)) / tail
            low, high = math.log(self.tail_low), math.log(self.tail_high)
            drawn = np.exp(low + (high - low) * slices)
            drawn *= self.tail_share * total / drawn.sum()
            tail_sizes = np.rint(np.clip(drawn, self.tail_low, self.tail_high)).astype(np.int64)
            tail_sizes = np.minimum(tail_sizes, max((total - count) // tail, 1))
        body = self.body.draw(count - tail, rng)
        room = total - int(tail_sizes.sum())
        factor = max(room, body.size) / int(body.sum())
        body = np.maximum(np.rint(body * factor), 1).astype(np.int64)
        # the rounding residue (at most half a byte per file) goes to the largest file
        largest = int(np.argmax(body))
        body[largest] = max(1, int(body[largest]) + room - int(body.sum()))
        sizes = np.concatenate([body, tail_sizes])
        rng.shuffle(sizes)
        return sizes


#: The Linux-kernel-like shape of :meth:`Tree.source_tree`; approximations, see its docs.
SOURCE_TREE = SourceTreeShape(
    count=58_000,
    total_bytes=1_760_000_000,
    body=Sizes.lognormal(median=7 * KiB, sigma=1.5, maximum=MiB),
    tail_fraction=0.0016,
    tail_low=MiB,
    tail_high=16 * MiB,
    files_per_directory=14.0,
    extensions=(
        (".c", 0.42),
        (".h", 0.34),
        (".rst", 0.05),
        (".dts", 0.05),
        (".yaml", 0.05),
        (".S", 0.02),
        ("", 0.07),
    ),
)
