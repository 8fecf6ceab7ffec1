"""Disk images: one large file in blocks, rewritten in place version after version."""

from __future__ import annotations

import math
from typing import Any, Literal

import attrs
import numpy as np
import numpy.typing as npt
from attrs import field, frozen

from storeprobe.dataset._common import (
    _CLUSTER_RUNS,
    _IMAGE_DOMAIN,
    _MAX_BLOCK,
    _MIN_BLOCK,
    IMAGE_PATH,
    Buffer,
    Changes,
    File,
    _approximate,
    _evolve_rng,
    _expect_kind,
    _target,
    _valid_seed,
    _valid_version,
)
from storeprobe.errors import ConfigurationError
from storeprobe.payload import fill_stream
from storeprobe.payload import mismatch as mismatch_of
from storeprobe.payload import payload as payload_of
from storeprobe.sizes import Int64Array, _int
from storeprobe.units import format_size, parse_size
from storeprobe.workload import MAX_SIZE

# -- images -------------------------------------------------------------------------


def _generations(value: object) -> Int64Array:
    try:
        array = np.array(value, dtype=np.int64, copy=True)
    except (TypeError, ValueError, OverflowError) as exc:
        raise ConfigurationError(f"image generations must be integers: {exc}") from exc
    if array.ndim != 1:
        raise ConfigurationError("image generations must be a one-dimensional array")
    array.setflags(write=False)
    return array


@frozen(kw_only=True)
class Image:
    """One large file, ``disk.img``, of ``size`` bytes in blocks of ``block_size``.

    Each block has a generation (the version that last wrote it); block ``b``'s bytes are
    a function of ``(seed, b, generations[b])``. :meth:`evolve` rewrites blocks in place,
    as a VM writes to its disk between two snapshots. The default block of 64 KiB is a
    common allocation unit of image formats and file systems: small writes dirty few
    blocks, and the block table of a few GiB image stays under 100 000 entries.
    """

    size: int
    block_size: int
    seed: int = field(default=0, validator=_valid_seed)
    version: int = field(default=0, validator=_valid_version)
    generations: Int64Array = field(converter=_generations, eq=attrs.cmp_using(eq=np.array_equal))

    def __attrs_post_init__(self) -> None:
        _int("size", self.size, 1, MAX_SIZE)
        block = _int("block_size", self.block_size, _MIN_BLOCK, _MAX_BLOCK)
        if block & (block - 1):
            raise ConfigurationError(
                f"block_size must be a power of two (e.g. 64KiB), not {block:,}"
            )
        if self.size % block:
            below = self.size - self.size % block
            raise ConfigurationError(
                f"image size {self.size:,} is not a multiple of block_size {format_size(block)}: "
                f"use {below + block}" + (f" or {below}" if below else "")
            )
        if len(self.generations) != self.size // block:
            raise ConfigurationError(
                f"an image of {self.size // block:,} blocks needs as many generations, "
                f"not {len(self.generations):,}"
            )
        if len(self.generations) and (
            self.generations.min() < 0 or self.generations.max() > self.version
        ):
            raise ConfigurationError(f"block generations must be in [0, version={self.version}]")

    def __repr__(self) -> str:
        return f"<Image {self.describe()}>"

    @classmethod
    def create(
        cls, size: int | str = "1GiB", *, block_size: int | str = "64KiB", seed: int = 0
    ) -> Image:
        """Version 0 of an image of ``size`` bytes (a multiple of ``block_size``)."""
        size_b, block_b = parse_size(size), parse_size(block_size)
        blocks = size_b // block_b if block_b > 0 and size_b > 0 else 0
        return cls(
            size=size_b, block_size=block_b, seed=seed, generations=np.zeros(blocks, np.int64)
        )

    @property
    def block_count(self) -> int:
        """Number of blocks."""
        return self.size // self.block_size

    @property
    def file(self) -> File:
        """The image file; its generation is the newest block generation."""
        return File(IMAGE_PATH, self.size, int(self.generations.max()))

    @property
    def files(self) -> tuple[File, ...]:
        """``(File("disk.img", size, generation),)``."""
        return (self.file,)

    @property
    def total_bytes(self) -> int:
        """The image size."""
        return self.size

    def describe(self) -> str:
        """``"image v2: 1.0 GiB in 16384 blocks of 64 KiB"``."""
        return (
            f"image v{self.version}: {_approximate(self.size)} in {self.block_count} blocks "
            f"of {format_size(self.block_size)}"
        )

    # -- content --------------------------------------------------------------------

    def size_of(self, file: File) -> int:
        """``file``'s size in bytes (:class:`~storeprobe.payload.Payloads`)."""
        return file.size

    def fill(self, file: File, start: int, out: memoryview | bytearray) -> None:
        """Write bytes ``[start, start + len(out))`` of the image into ``out``.

        ``file`` must be this version's file (``image.file``); an earlier version's
        bytes come from that version's Image.
        """
        if file != self.file:
            raise ConfigurationError(
                f"{file!r} is not this image's file ({self.file!r}): fill from the Image "
                "of that version"
            )
        target = _target(out, start, self.size)
        position, stop = start, start + len(target)
        while position < stop:
            block, offset = divmod(position, self.block_size)
            take = min(self.block_size - offset, stop - position)
            entropy = [_IMAGE_DOMAIN, self.seed, block, int(self.generations[block])]
            fill_stream(entropy, offset, target[position - start : position - start + take])
            position += take

    def payload(self, file: File, start: int = 0, stop: int | None = None) -> bytes:
        """Bytes ``[start, stop)`` of the image (default: all of it)."""
        return payload_of(self, file, start, stop)

    def mismatch(self, file: File, data: Buffer, offset: int = 0) -> int | None:
        """Offset of the first byte where ``data`` (at ``offset``) differs, or None."""
        return mismatch_of(self, file, data, offset)

    # -- versions -------------------------------------------------------------------

    def evolve(
        self,
        *,
        fraction: float = 0.01,
        pattern: Literal["spread", "clustered"] = "spread",
        seed: int | None = None,
    ) -> Image:
        """The next version, ``fraction`` of the blocks rewritten in place.

        The count is ``fraction × block_count`` rounded to nearest, at least one block
        when ``fraction > 0``. ``"spread"``: blocks chosen at random over the image;
        ``"clustered"``: the same count in at most four contiguous runs of about equal
        length, at random places (a file rewritten, a log appended). Deterministic from
        ``(self, seed)``; by default ``seed`` derives from ``(self.seed, self.version)``.
        """
        if isinstance(fraction, bool) or not isinstance(fraction, int | float):
            raise ConfigurationError(f"fraction must be a float in [0, 1], not {fraction!r}")
        if not 0 <= fraction <= 1:
            raise ConfigurationError(f"fraction must be in [0, 1] (e.g. 0.01), not {fraction!r}")
        if pattern not in ("spread", "clustered"):
            raise ConfigurationError(f"pattern must be 'spread' or 'clustered', not {pattern!r}")
        blocks = self.block_count
        count = math.floor(fraction * blocks + 0.5)
        if fraction > 0:
            count = max(count, 1)
        rng = _evolve_rng(self.seed, self.version, seed)
        if pattern == "spread":
            chosen = rng.choice(blocks, size=count, replace=False)
        else:
            chosen = _runs(blocks, count, min(count, _CLUSTER_RUNS), rng)
        generations = self.generations.copy()
        generations[chosen] = self.version + 1
        return attrs.evolve(self, version=self.version + 1, generations=generations)

    def changed_blocks(self, previous: Image) -> npt.NDArray[np.intp]:
        """Indices of the blocks that differ from ``previous`` (sorted)."""
        self._check_same_disk(previous)
        return np.flatnonzero(self.generations != previous.generations)

    def diff(self, previous: Image) -> Changes:
        """The image as changed (or unchanged) since ``previous``.

        ``changed_bytes`` is the changed blocks × block size: the bytes that differ,
        which a block-level incremental backup must move at least. A changed image is
        also in ``in_place``: it was rewritten in place.
        """
        blocks = self.changed_blocks(previous)
        if blocks.size == 0:
            return Changes(unchanged=self.files, rewritten_bytes=0)
        return Changes(
            changed=self.files,
            rewritten_bytes=int(blocks.size) * self.block_size,
            in_place=self.files,
        )

    def _check_same_disk(self, previous: object) -> None:
        if not isinstance(previous, Image):
            raise ConfigurationError(
                f"an image diffs against an Image, not {type(previous).__name__}"
            )
        if (previous.size, previous.block_size, previous.seed) != (
            self.size,
            self.block_size,
            self.seed,
        ):
            raise ConfigurationError(
                "these images differ in size, block size or seed: diff versions of one image "
                "(made by evolve)"
            )

    # -- serialisation --------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict; block generations as a list."""
        return {
            "kind": "image",
            "size": self.size,
            "block_size": self.block_size,
            "seed": self.seed,
            "version": self.version,
            "generations": self.generations.tolist(),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Image:
        """Inverse of :meth:`to_dict`."""
        _expect_kind(data, "image", ("size", "block_size", "seed", "version", "generations"))
        return cls(
            size=data["size"],
            block_size=data["block_size"],
            seed=data["seed"],
            version=data["version"],
            generations=data["generations"],
        )


def _runs(blocks: int, count: int, runs: int, rng: np.random.Generator) -> npt.NDArray[np.int64]:
    """``count`` block indices in ``runs`` non-overlapping contiguous runs at random places."""
    if count == 0:
        return np.zeros(0, dtype=np.int64)
    lengths = np.full(runs, count // runs, dtype=np.int64)
    lengths[: count % runs] += 1
    gaps = np.sort(rng.integers(0, blocks - count, size=runs, endpoint=True))
    starts = gaps + np.concatenate([[0], np.cumsum(lengths)[:-1]])
    return np.concatenate(
        [np.arange(s, s + n) for s, n in zip(starts.tolist(), lengths.tolist(), strict=True)]
    )
