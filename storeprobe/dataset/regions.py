"""In-place rewrites of tree files: which byte ranges a version rewrote, and their union.

A tree file rewritten in place (:meth:`Tree.evolve` with ``rewrite``) keeps its size and
most of its bytes, as an edited document, a database page file or a VM disk does: the
rewrite at version ``g`` replaces a few regions with bytes of the content stream of
``(seed, path, g)`` at the same offsets. Which regions is a function of
``(seed, path, g, size)`` only, so any version's bytes are regenerated on demand and
nothing is stored:

- between 1 and :data:`MAX_REGIONS` regions (uniform), at uniform random offsets;
- each of a length log-uniform between :data:`MIN_REGION` and :data:`MAX_REGION` bytes,
  at most an eighth of the file (at least 1 byte); regions may overlap, and
  :func:`rewritten_regions` gives their union, sorted and disjoint.

So a rewrite changes at most ``4 × 16 KiB`` of a large file and at most half of a small
one; a delta of the file against its previous version carries about those bytes.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable

import numpy as np

from storeprobe.units import KiB

__all__ = [
    "MAX_REGION",
    "MAX_REGIONS",
    "MIN_REGION",
    "Region",
    "rewritten_regions",
    "span",
    "union",
]

_REWRITE_DOMAIN = 0x5EC7104  # the regions of an in-place rewrite
#: at most this many regions per in-place rewrite
MAX_REGIONS = 4
#: the shortest region drawn, in bytes
MIN_REGION = 16
#: the longest region drawn, in bytes
MAX_REGION = 16 * KiB

#: a byte range ``[start, stop)`` of a file
Region = tuple[int, int]


@functools.lru_cache(maxsize=4096)
def rewritten_regions(seed: int, path_key: int, generation: int, size: int) -> tuple[Region, ...]:
    """The regions the in-place rewrite at ``generation`` writes, sorted and disjoint.

    ``path_key`` is the file's path hash (the one its content stream is seeded by).
    Empty for an empty file.
    """
    if size <= 0:
        return ()
    entropy = [_REWRITE_DOMAIN, seed, path_key, generation]
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence(entropy)))
    count = int(rng.integers(1, MAX_REGIONS, endpoint=True))
    low, high = math.log(MIN_REGION), math.log(MAX_REGION)
    lengths = np.exp(rng.uniform(low, high, size=count))
    longest = max(1, size // 8)
    lengths = np.clip(np.rint(lengths), 1, longest).astype(np.int64)
    starts = rng.integers(0, size - lengths, endpoint=True)
    return _union(zip(starts.tolist(), (starts + lengths).tolist(), strict=True))


def _union(regions: Iterable[Region]) -> tuple[Region, ...]:
    merged: list[list[int]] = []
    for start, stop in sorted(regions):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], stop)
        else:
            merged.append([start, stop])
    return tuple((start, stop) for start, stop in merged)


def union(groups: Iterable[Iterable[Region]]) -> tuple[Region, ...]:
    """The union of several groups of regions, sorted and disjoint."""
    return _union(region for group in groups for region in group)


def span(regions: Iterable[Region]) -> int:
    """Bytes covered by ``regions`` (disjoint, as :func:`rewritten_regions` gives them)."""
    return sum(stop - start for start, stop in regions)
