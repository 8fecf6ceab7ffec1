"""Distributions of file sizes, in bytes."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Literal

import numpy as np
from attrs import frozen

from storeprobe.dataset._common import (
    Int64Array,
    _int,
    _size,
)
from storeprobe.errors import ConfigurationError
from storeprobe.units import format_size
from storeprobe.workload import MAX_COUNT

# -- sizes --------------------------------------------------------------------------

SizeKind = Literal["fixed", "uniform", "lognormal", "explicit", "histogram"]


@frozen(kw_only=True)
class Sizes:
    """A distribution of file sizes in bytes; build one with a classmethod.

    ``fixed``, ``uniform``, ``explicit`` and ``histogram`` may give empty (0-byte) files
    when asked to, as real trees have them; ``lognormal`` never does (at least 1 byte).
    """

    kind: SizeKind
    #: fixed: (size,); uniform: (low, high); explicit: the sizes; histogram: upper bounds
    values: tuple[int, ...] = ()
    #: histogram: the number of files in each bin
    weights: tuple[int, ...] = ()
    median: int = 0
    sigma: float = 0.0
    maximum: int | None = None

    @classmethod
    def fixed(cls, size: int | str) -> Sizes:
        """Every file ``size`` bytes (``"16KiB"`` or an int; 0 makes empty files)."""
        return cls(kind="fixed", values=(_size("size", size),))

    @classmethod
    def uniform(cls, low: int | str, high: int | str) -> Sizes:
        """Sizes uniform over the integers ``[low, high]`` (both included)."""
        low_b, high_b = _size("low", low), _size("high", high)
        if low_b > high_b:
            raise ConfigurationError(f"uniform sizes need low <= high, not {low_b:,} > {high_b:,}")
        return cls(kind="uniform", values=(low_b, high_b))

    @classmethod
    def lognormal(cls, median: int | str, sigma: float, maximum: int | str | None = None) -> Sizes:
        """``exp(N(ln median, sigma))`` rounded, at least 1 byte, redrawn above ``maximum``.

        The mean is ``median · exp(sigma² / 2)`` before truncation: sigma 1.5 gives a
        mean about three times the median, the long tail of real trees.
        """
        median_b = _size("median", median, 1)
        if isinstance(sigma, bool) or not isinstance(sigma, int | float):
            raise ConfigurationError(f"sigma must be a float, not {sigma!r}")
        if not (math.isfinite(sigma) and 0 <= sigma <= 10):
            raise ConfigurationError(f"sigma must be between 0 and 10 (e.g. 1.5), not {sigma!r}")
        maximum_b = None if maximum is None else _size("maximum", maximum, 1)
        if maximum_b is not None and maximum_b < median_b:
            raise ConfigurationError(
                f"maximum ({maximum_b:,} bytes) must be at least the median ({median_b:,} bytes)"
            )
        return cls(kind="lognormal", median=median_b, sigma=float(sigma), maximum=maximum_b)

    @classmethod
    def explicit(cls, sizes: Sequence[int | str]) -> Sizes:
        """Exactly these sizes: ``draw(len(sizes))`` returns them in order.

        Drawing ``count`` sizes gives each one ``count // len(sizes)`` times, then a
        random selection of the rest without replacement.
        """
        if isinstance(sizes, str) or len(sizes) == 0:
            raise ConfigurationError("explicit sizes need a non-empty list such as [100, '4KiB']")
        return cls(kind="explicit", values=tuple(_size("size", size) for size in sizes))

    @classmethod
    def histogram(cls, bins: Sequence[tuple[int | str, int]]) -> Sizes:
        """``(upper bound, count)`` pairs, bounds increasing; sizes uniform within a bin.

        The first bin covers ``[0, bound]``, the next ones ``(previous bound, bound]``;
        counts are relative weights (e.g. how many files of a real tree fall in each bin).
        """
        if len(bins) == 0:
            raise ConfigurationError("a histogram needs (upper bound, count) pairs, none given")
        bounds = tuple(_size("histogram bound", bound) for bound, _ in bins)
        counts = tuple(_int("histogram count", count) for _, count in bins)
        if any(low >= high for low, high in itertools.pairwise(bounds)):
            raise ConfigurationError(f"histogram bounds must increase strictly, not {bounds}")
        if sum(counts) == 0:
            raise ConfigurationError("histogram counts are all 0: give at least one bin a file")
        return cls(kind="histogram", values=bounds, weights=counts)

    def draw(self, count: int, rng: np.random.Generator) -> Int64Array:
        """``count`` sizes (int64 bytes, all >= 0) drawn with ``rng``."""
        count = _int("count", count, 0, MAX_COUNT)
        if self.kind == "fixed":
            return np.full(count, self.values[0], dtype=np.int64)
        if self.kind == "uniform":
            low, high = self.values
            return rng.integers(low, high, size=count, endpoint=True, dtype=np.int64)
        if self.kind == "lognormal":
            return self._lognormal(count, rng)
        if self.kind == "explicit":
            values = np.array(self.values, dtype=np.int64)
            repeats, rest = divmod(count, len(values))
            extra = rng.choice(values, size=rest, replace=False)
            return np.concatenate([np.tile(values, repeats), extra]).astype(np.int64)
        bounds = np.array(self.values, dtype=np.int64)
        weights = np.array(self.weights, dtype=np.float64)
        chosen = rng.choice(len(bounds), size=count, p=weights / weights.sum())
        lows = np.concatenate([[0], bounds[:-1] + 1])[chosen]
        return rng.integers(lows, bounds[chosen], endpoint=True, dtype=np.int64)

    def _lognormal(self, count: int, rng: np.random.Generator) -> Int64Array:
        mu = math.log(self.median)
        sizes = np.rint(np.exp(rng.normal(mu, self.sigma, size=count)))
        while self.maximum is not None:
            over = np.flatnonzero(sizes > self.maximum)
            if over.size == 0:
                break
            sizes[over] = np.rint(np.exp(rng.normal(mu, self.sigma, size=over.size)))
        return np.maximum(sizes, 1).astype(np.int64)

    def describe(self) -> str:
        """``"lognormal(median 8 KiB, sigma 1.5, at most 1 MiB)"`` and the like."""
        if self.kind == "fixed":
            return f"fixed({format_size(self.values[0])})"
        if self.kind == "uniform":
            return f"uniform({format_size(self.values[0])}..{format_size(self.values[1])})"
        if self.kind == "lognormal":
            cap = "" if self.maximum is None else f", at most {format_size(self.maximum)}"
            return f"lognormal(median {format_size(self.median)}, sigma {self.sigma:g}{cap})"
        if self.kind == "explicit":
            return f"explicit({len(self.values)} sizes)"
        return f"histogram({len(self.values)} bins)"
