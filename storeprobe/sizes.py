"""Distributions of object and file sizes, in bytes, and the bounds every size obeys.

One :class:`Sizes` serves both kinds of size a probe needs: the files of a dataset's
tree (:mod:`storeprobe.dataset`) and the objects of a :class:`~storeprobe.workload.Workload`
whose sizes are drawn (warp's ``--obj.randsize``, elbencho's size ranges). Drawing is
pure computation with a caller's numpy generator, so the same seed gives the same sizes.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
from attrs import frozen

from storeprobe.errors import ConfigurationError
from storeprobe.units import TiB, format_size, parse_size

__all__ = ["MAX_COUNT", "MAX_SIZE", "Sizes"]

#: Largest object count a workload accepts (and most sizes one draw gives).
MAX_COUNT = 10_000_000
#: Largest object size a workload accepts (the S3 object limit), in bytes.
MAX_SIZE = 5 * TiB

Int64Array = npt.NDArray[np.int64]
_SPEC = re.compile(r"(?P<kind>[a-z]+):(?P<args>.+)")
_SPEC_EXAMPLES = "'lognormal:16KiB,1.5' (median, sigma[, maximum]) or 'uniform:4KiB-1MiB'"


def _int(name: str, value: object, low: int = 0, high: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise ConfigurationError(f"{name} must be an int, not {value!r}")
    number = int(value)
    if number < low or (high is not None and number > high):
        bound = f"between {low:,} and {high:,}" if high is not None else f"at least {low:,}"
        raise ConfigurationError(f"{name} must be {bound}, not {number:,}")
    return number


def _size(name: str, value: int | str, low: int = 0) -> int:
    return _int(name, parse_size(value), low, MAX_SIZE)


# -- sizes --------------------------------------------------------------------------

SizeKind = Literal["fixed", "uniform", "lognormal", "explicit", "histogram"]


@frozen(kw_only=True)
class Sizes:
    """A distribution of object or file sizes in bytes; build one with a classmethod
    (or :meth:`parse` from the command line's form).

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

    @classmethod
    def parse(cls, spec: str) -> Sizes:
        """A distribution from ``"lognormal:16KiB,1.5"`` (median, sigma and an optional
        maximum: ``"lognormal:16KiB,1.5,1MiB"``) or ``"uniform:4KiB-1MiB"`` (both ends
        included), the forms ``--workload COUNTxSIZES`` takes on the command line."""
        match = _SPEC.fullmatch(spec) if isinstance(spec, str) else None
        if match is None or match["kind"] not in ("lognormal", "uniform"):
            raise ConfigurationError(f"cannot parse sizes {spec!r}: use {_SPEC_EXAMPLES}")
        args = match["args"]
        if match["kind"] == "uniform":
            low, sep, high = args.partition("-")
            if not sep or not low or not high:
                raise ConfigurationError(
                    f"cannot parse uniform sizes {spec!r}: give LOW-HIGH such as "
                    "'uniform:4KiB-1MiB'"
                )
            return cls.uniform(low, high)
        fields = args.split(",")
        if len(fields) not in (2, 3):
            raise ConfigurationError(
                f"cannot parse lognormal sizes {spec!r}: give MEDIAN,SIGMA[,MAXIMUM] such as "
                "'lognormal:16KiB,1.5' or 'lognormal:16KiB,1.5,1MiB'"
            )
        try:
            sigma = float(fields[1])
        except ValueError:
            raise ConfigurationError(
                f"sigma {fields[1]!r} in {spec!r} is not a number: write it like "
                "'lognormal:16KiB,1.5'"
            ) from None
        return cls.lognormal(fields[0], sigma, fields[2] if len(fields) == 3 else None)

    @property
    def spec(self) -> str:
        """The :meth:`parse` form (``"lognormal:16KiB,1.5"``); explicit and histogram
        sizes, which have none, give their :meth:`describe`."""
        if self.kind == "uniform":
            return f"uniform:{_compact(self.values[0])}-{_compact(self.values[1])}"
        if self.kind == "lognormal":
            cap = "" if self.maximum is None else f",{_compact(self.maximum)}"
            return f"lognormal:{_compact(self.median)},{self.sigma:g}{cap}"
        return self.describe()

    @property
    def label(self) -> str:
        """A short readable form for tables: ``"lognormal(16 KiB, σ 1.5)"``,
        ``"uniform(4 KiB–1 MiB)"``, ``"16 KiB"`` for a fixed size."""
        if self.kind == "fixed":
            return format_size(self.values[0])
        if self.kind == "uniform":
            return f"uniform({format_size(self.values[0])}–{format_size(self.values[1])})"
        if self.kind == "lognormal":
            cap = "" if self.maximum is None else f", ≤ {format_size(self.maximum)}"
            return f"lognormal({format_size(self.median)}, σ {self.sigma:g}{cap})"
        return self.describe()

    @property
    def typical(self) -> int:
        """The distribution's median size in bytes, before any truncation (the middle of
        a uniform range, the median of explicit sizes, the bound of a histogram's median
        bin): the one size that stands for all, e.g. to choose KiB/s or MiB/s."""
        if self.kind == "fixed":
            return self.values[0]
        if self.kind == "uniform":
            return (self.values[0] + self.values[1]) // 2
        if self.kind == "lognormal":
            return self.median
        if self.kind == "explicit":
            return int(np.median(np.array(self.values, dtype=np.int64)))
        half = sum(self.weights) / 2
        cumulative = itertools.accumulate(self.weights)
        return next(v for v, c in zip(self.values, cumulative, strict=True) if c >= half)

    @property
    def smallest(self) -> int:
        """The smallest size a draw can give, in bytes."""
        if self.kind == "lognormal":
            return 1
        if self.kind == "histogram":
            return 0
        return min(self.values)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict: kind and its parameters (sizes in bytes)."""
        data: dict[str, Any] = {"kind": self.kind}
        if self.kind == "lognormal":
            data.update(median=self.median, sigma=self.sigma, maximum=self.maximum)
        else:
            data["values"] = list(self.values)
        if self.kind == "histogram":
            data["weights"] = list(self.weights)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Sizes:
        """Inverse of :meth:`to_dict`, through the validating classmethods."""
        kind = data.get("kind") if isinstance(data, dict) else None
        if kind == "lognormal":
            return cls.lognormal(data["median"], data["sigma"], data.get("maximum"))
        if kind == "fixed":
            return cls.fixed(data["values"][0])
        if kind == "uniform":
            low, high = data["values"]
            return cls.uniform(low, high)
        if kind == "explicit":
            return cls.explicit(data["values"])
        if kind == "histogram":
            return cls.histogram(list(zip(data["values"], data["weights"], strict=True)))
        raise ConfigurationError(
            f"unknown sizes kind {kind!r}: expected fixed, uniform, lognormal, explicit "
            "or histogram"
        )

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
        # above MAX_SIZE a size means nothing (and past 2**63 its cast would wrap): keep
        # it just above, for the caller's bound check to name
        return np.clip(sizes, 1, MAX_SIZE + 1).astype(np.int64)

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


def _compact(size: int) -> str:
    """``16384`` → ``"16KiB"`` when a binary unit divides it exactly, else the bytes."""
    for unit, factor in (("TiB", 1024**4), ("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if size >= factor and size % factor == 0:
            return f"{size // factor}{unit}"
    return str(size)
