"""Datasets that evolve: file trees and disk images, versioned, with reproducible content.

A backup probe needs more than N fresh objects of one size: it needs a tree of files
whose sizes look like real ones, and its next version, where some files changed, some
were added and some deleted; or a disk image of which a few blocks were rewritten.
Everything here is pure computation (no I/O, except :meth:`Tree.from_directory`, which
reads sizes and never content):

- :class:`Sizes`: a distribution of file sizes (fixed, uniform, lognormal, an explicit
  list, a histogram);
- :class:`File`: one file of a version: path, size and *generation*;
- :class:`Tree`: files under a directory, generated, shaped like a source tree, or
  taken from a real directory; :meth:`Tree.evolve` gives the next version;
- :class:`Image`: one large file (``disk.img``) in blocks, each with its generation;
  :meth:`Image.evolve` rewrites a fraction of the blocks in place;
- :class:`Changes`: what differs between two versions (:meth:`Tree.diff`).

Content is generated like :mod:`storeprobe.workload` payloads (numpy SFC64, one
independently seeded 1 MiB block at a time, so incompressible and producible in
pieces), from a different domain constant:

- a tree file's bytes are a function of ``(seed, path, generation)`` only, so a file
  that did not change keeps its exact bytes in every later version, a changed file gets
  new bytes, and any version's file can be regenerated (and verified) from any tree of
  the same seed;
- an image's block ``b`` is a function of ``(seed, b, generations[b])``.

A file's generation is the version that last wrote it: 0 for the files of the first
version, ``v`` for a file added or changed by the evolution that made version ``v``.
"""

from __future__ import annotations

import hashlib
import itertools
import math
import os
from collections.abc import Iterable, Sequence
from typing import Any, Literal, Protocol, runtime_checkable

import attrs
import numpy as np
import numpy.typing as npt
from attrs import field, frozen

from storeprobe.errors import ConfigurationError
from storeprobe.units import KiB, MiB, format_size, parse_size
from storeprobe.workload import GENERATION_BLOCK, MAX_COUNT, MAX_SIZE, filled_buffer

__all__ = [
    "IMAGE_PATH",
    "SOURCE_TREE",
    "Changes",
    "Dataset",
    "File",
    "Image",
    "Sizes",
    "SourceTreeShape",
    "Tree",
    "dataset_from_dict",
]

#: The one file of an :class:`Image`.
IMAGE_PATH = "disk.img"
_TREE_DOMAIN = 0xDA7A5E71  # tree file content; workload payloads use another constant
_IMAGE_DOMAIN = 0xD15C1A6E  # image block content
_EVOLVE_DOMAIN = 0xE701BE5  # the random choices of Tree.evolve and Image.evolve
_LAYOUT_DOMAIN = 0x1A7017  # the random layout and sizes of Tree.generate / source_tree
_SIZE_CHANGE_SIGMA = 0.05  # a changed file's size is multiplied by exp(N(0, 0.05))
_CLUSTER_RUNS = 4  # Image.evolve(pattern="clustered") rewrites at most this many runs
_MIN_BLOCK = 512
_MAX_BLOCK = 64 * MiB

Buffer = bytes | bytearray | memoryview
Int64Array = npt.NDArray[np.int64]


# -- validators ---------------------------------------------------------------------


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


def _check_seed(value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 2**63:
        raise ConfigurationError(f"seed must be an int in [0, 2**63), not {value!r}")


def _valid_seed(_: object, attribute: attrs.Attribute[int], value: int) -> None:
    _check_seed(value)


def _valid_version(_: object, attribute: attrs.Attribute[int], value: int) -> None:
    _int(attribute.name, value)


def _valid_name(_: object, attribute: attrs.Attribute[str | None], value: str | None) -> None:
    if value is None:
        return
    if not isinstance(value, str) or not value or not value.isprintable() or len(value) > 64:
        raise ConfigurationError(f"dataset name must be 1-64 printable characters, not {value!r}")


def _valid_path(_: object, attribute: attrs.Attribute[str], value: str) -> None:
    if not isinstance(value, str) or not value:
        raise ConfigurationError(f"a file path must be a non-empty str, not {value!r}")
    parts = value.split("/")
    if "\0" in value or any(part in ("", ".", "..") for part in parts):
        raise ConfigurationError(
            f"file path {value!r} must be relative and '/'-separated, with no empty, "
            "'.' or '..' component and no NUL: write it like 'src/lib/a.c'"
        )
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ConfigurationError(
            f"file path {value!r} is not valid UTF-8: rename the file or exclude it"
        ) from exc


def _valid_file_size(_: object, attribute: attrs.Attribute[int], value: int) -> None:
    _int("file size", value, 0, MAX_SIZE)


def _valid_generation(_: object, attribute: attrs.Attribute[int], value: int) -> None:
    _int("generation", value)


def _fraction_or_count(name: str, value: float | int, total: int, *, limit: bool) -> int:
    """A float in [0, 1] is a fraction of ``total`` (rounded); an int is a count."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigurationError(
            f"{name} must be a fraction (float in [0, 1]) or a count (int), not {value!r}"
        )
    if isinstance(value, float):
        if not 0.0 <= value <= 1.0:
            raise ConfigurationError(
                f"{name}={value!r}: a float is a fraction of the {total:,} files and must be "
                f"in [0, 1]; pass an int for a count of files"
            )
        return math.floor(value * total + 0.5)
    if value < 0 or (limit and value > total):
        bound = f"between 0 and the {total:,} files of the tree" if limit else "at least 0"
        raise ConfigurationError(f"{name}={value:,}: a count of files must be {bound}")
    return value


def _evolve_rng(seed: int, version: int, given: int | None) -> np.random.Generator:
    if given is not None:
        _check_seed(given)
    entropy = [_EVOLVE_DOMAIN, seed, version, 0 if given is None else 1, given or 0]
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(entropy)))


# -- content ------------------------------------------------------------------------


def _path_key(path: str) -> int:
    """A stable 64-bit hash of ``path`` (the same in every process and Python version)."""
    return int.from_bytes(hashlib.blake2b(path.encode("utf-8"), digest_size=8).digest(), "little")


def _fill_stream(entropy: list[int], start: int, target: npt.NDArray[np.uint8]) -> None:
    """Bytes ``[start, start + len(target))`` of the stream seeded by ``entropy``.

    The stream is a sequence of 1 MiB blocks, block ``b`` drawn from SFC64 seeded by
    ``entropy + [b]`` (as :meth:`storeprobe.workload.Workload.fill` does).
    """
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


def _target(out: memoryview | bytearray, start: int, size: int) -> npt.NDArray[np.uint8]:
    view = memoryview(out).cast("B")
    stop = start + len(view)
    if start < 0 or stop > size:
        raise ConfigurationError(f"byte range [{start}, {stop}) outside a file of {size:,} bytes")
    return np.frombuffer(view, dtype=np.uint8)


def _mismatch(dataset: Dataset, file: File, data: Buffer, offset: int) -> int | None:
    view = memoryview(data).cast("B")
    limit = max(min(len(view), file.size - offset), 0)
    step = 4 * GENERATION_BLOCK
    for position in range(0, limit, step):
        take = min(step, limit - position)
        expected = dataset.payload(file, offset + position, offset + position + take)
        got = np.frombuffer(view[position : position + take], dtype=np.uint8)
        want = np.frombuffer(expected, dtype=np.uint8)
        if not np.array_equal(got, want):
            return offset + position + int(np.argmax(got != want))
    if offset + len(view) > file.size:
        return file.size
    return None


def _payload(dataset: Dataset, file: File, start: int, stop: int | None) -> bytes:
    stop = file.size if stop is None else stop
    return filled_buffer(
        max(stop - start, 0), lambda view: dataset.fill(file, start, view)
    ).getvalue()


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


# -- files, changes, the protocol -----------------------------------------------------


@frozen
class File:
    """One file of a dataset version.

    ``path`` is relative and ``/``-separated; the same ``(path, generation)`` always has
    the same bytes (for a given dataset seed), and ``generation`` changes when the file
    does: it is the version that last wrote the file.
    """

    path: str = field(validator=_valid_path)
    size: int = field(validator=_valid_file_size)
    generation: int = field(default=0, validator=_valid_generation)


@frozen(kw_only=True)
class Changes:
    """What differs from a previous version to this one (files of this version, except
    ``deleted``, which are the previous version's)."""

    added: tuple[File, ...] = ()
    changed: tuple[File, ...] = ()
    deleted: tuple[File, ...] = ()
    unchanged: tuple[File, ...] = ()
    #: bytes rewritten in place inside changed files (an image's changed blocks);
    #: None when a changed file counts whole (a tree)
    rewritten_bytes: int | None = None

    @property
    def changed_bytes(self) -> int:
        """Bytes of added and changed files: what an incremental backup must move at least.

        For an image, the changed blocks × block size (the bytes that differ), not the
        whole image.
        """
        added = sum(file.size for file in self.added)
        if self.rewritten_bytes is not None:
            return added + self.rewritten_bytes
        return added + sum(file.size for file in self.changed)

    @property
    def deleted_bytes(self) -> int:
        """Bytes of the deleted files (in the previous version)."""
        return sum(file.size for file in self.deleted)

    def describe(self) -> str:
        """``"+12 ~340 -11 =5400 files, 4.2 MiB to move"``."""
        return (
            f"+{len(self.added)} ~{len(self.changed)} -{len(self.deleted)} "
            f"={len(self.unchanged)} files, {_approximate(self.changed_bytes)} to move"
        )


@runtime_checkable
class Dataset(Protocol):
    """What a backup probe needs of a dataset version: its files and their bytes."""

    @property
    def files(self) -> tuple[File, ...]:
        """The files, sorted by path."""
        ...

    @property
    def seed(self) -> int:
        """The content seed (the same in every version)."""
        ...

    @property
    def version(self) -> int:
        """0 for the first version, +1 per evolution."""
        ...

    @property
    def total_bytes(self) -> int:
        """Bytes in all files."""
        ...

    def fill(self, file: File, start: int, out: memoryview | bytearray) -> None:
        """Write bytes ``[start, start + len(out))`` of ``file`` into ``out``."""
        ...

    def payload(self, file: File, start: int = 0, stop: int | None = None) -> bytes:
        """Bytes ``[start, stop)`` of ``file`` (default: all of it)."""
        ...

    def mismatch(self, file: File, data: Buffer, offset: int = 0) -> int | None:
        """Offset in ``file`` of the first byte where ``data`` (at ``offset``) differs."""
        ...

    def describe(self) -> str:
        """A one-line description."""
        ...


def _approximate(nbytes: int) -> str:
    for unit, factor in (("GiB", 1024 * MiB), ("MiB", MiB), ("KiB", KiB)):
        if nbytes >= factor:
            return f"{nbytes / factor:.1f} {unit}"
    return f"{nbytes} B"


# -- trees --------------------------------------------------------------------------


def _valid_files(
    instance: Tree, attribute: attrs.Attribute[tuple[File, ...]], value: object
) -> None:
    if not isinstance(value, tuple) or not value:
        raise ConfigurationError("a tree needs at least one file (a tuple of File)")
    directories: set[str] = set()
    previous = ""
    for file in value:
        if not isinstance(file, File):
            raise ConfigurationError(f"a tree holds File objects, not {file!r}")
        if file.path <= previous:
            raise ConfigurationError(
                f"tree files must be sorted by path with no duplicate: {file.path!r} "
                f"comes after {previous!r} (use Tree.of(files) to sort)"
            )
        previous = file.path
        head = file.path
        while "/" in head:
            head = head.rsplit("/", 1)[0]
            if head in directories:
                break
            directories.add(head)
    clash = directories.intersection(file.path for file in value)
    if clash:
        raise ConfigurationError(
            f"{sorted(clash)[0]!r} is both a file and a directory: rename one of them"
        )


@frozen(kw_only=True)
class Tree:
    """Files under a directory, version ``version`` of a dataset with content seed ``seed``.

    Build one with :meth:`generate`, :meth:`source_tree` or :meth:`from_directory`; the
    next version comes from :meth:`evolve`. File bytes are a function of
    ``(seed, path, generation)``.
    """

    files: tuple[File, ...] = field(validator=_valid_files)
    seed: int = field(default=0, validator=_valid_seed)
    version: int = field(default=0, validator=_valid_version)
    name: str | None = field(default=None, validator=_valid_name)

    def __attrs_post_init__(self) -> None:
        newest = max(file.generation for file in self.files)
        if newest > self.version:
            raise ConfigurationError(
                f"a file of generation {newest} cannot be in version {self.version}: "
                "a generation is the version that wrote the file"
            )

    def __repr__(self) -> str:
        return f"<Tree {self.describe()}>"

    @classmethod
    def of(
        cls,
        files: Iterable[File],
        *,
        seed: int = 0,
        version: int = 0,
        name: str | None = None,
    ) -> Tree:
        """A tree of ``files`` in any order (they are sorted by path)."""
        ordered = sorted(files, key=lambda file: file.path)
        return cls(files=tuple(ordered), seed=seed, version=version, name=name)

    @classmethod
    def generate(
        cls,
        count: int,
        sizes: Sizes,
        *,
        seed: int = 0,
        fanout: int = 16,
        depth: int = 3,
        name: str | None = None,
    ) -> Tree:
        """``count`` files with sizes from ``sizes`` in a nested layout, all from ``seed``.

        Directories form a full tree: ``fanout`` subdirectories per directory down to
        ``depth`` levels (``d03/d11/d00``); each file goes into one of these directories
        at random (all directories equally likely, the root included) and is named
        ``f000123.dat``. The layout and the sizes are deterministic from ``seed``.
        """
        count = _int("count", count, 1, MAX_COUNT)
        if not isinstance(sizes, Sizes):
            raise ConfigurationError(
                f"sizes must be a Sizes (e.g. Sizes.fixed('4KiB')), not {sizes!r}"
            )
        rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([_LAYOUT_DOMAIN, seed])))
        drawn = sizes.draw(count, rng)
        paths = _layout(count, rng, fanout=fanout, depth=depth, extensions=((".dat", 1.0),))
        return cls.of(
            (File(path, int(size)) for path, size in zip(paths, drawn, strict=True)),
            seed=seed,
            name=name,
        )

    @classmethod
    def source_tree(
        cls, *, scale: float | None = None, size: int | str | None = None, seed: int = 0
    ) -> Tree:
        """A tree shaped like the Linux kernel source tree (see :data:`SOURCE_TREE`).

        ``scale=1.0`` is the whole tree, 58 000 files and 1.76 GB (1.64 GiB); both files
        and bytes scale linearly. ``size="64MiB"`` picks the scale that gives that total.
        By default (neither given) the total is 256 MiB, about 8 800 files.

        Sizes: a lognormal body (median 7 KiB, sigma 1.5, at most 1 MiB) and a long tail
        of 0.16 % of the files log-uniform between 1 and 16 MiB (about 30 % of the
        bytes); the tail is then scaled to its 30 % of the total and the body by one
        common factor near 1 to the rest, so the total is exactly the scale's share of
        1.76 GB (below about 300 files there is no tail file). Directories: about
        14 files per directory on average, three levels deep. These are approximations
        of public statistics of the Linux repository (see :data:`SOURCE_TREE` and
        ``docs/backup.md``); measure a checkout with :meth:`from_directory` to compare.
        """
        shape = SOURCE_TREE
        if scale is not None and size is not None:
            raise ConfigurationError("give scale or size, not both")
        if size is not None:
            scale = _size("size", size, 1) / shape.total_bytes
        elif scale is None:
            scale = 256 * MiB / shape.total_bytes
        if isinstance(scale, bool) or not isinstance(scale, int | float) or not 0 < scale <= 100:
            raise ConfigurationError(
                f"scale must be a number in (0, 100], e.g. 0.25, not {scale!r}"
            )
        count = max(1, math.floor(shape.count * scale + 0.5))
        total = max(count, math.floor(shape.total_bytes * scale + 0.5))
        rng = np.random.Generator(
            np.random.PCG64(np.random.SeedSequence([_LAYOUT_DOMAIN, seed, 1]))
        )
        drawn = shape.draw(count, total, rng)
        fanout = max(2, round((count / shape.files_per_directory) ** (1 / 3)))
        paths = _layout(count, rng, fanout=fanout, depth=3, extensions=shape.extensions)
        return cls.of(
            (File(path, int(size)) for path, size in zip(paths, drawn, strict=True)),
            seed=seed,
            name="source-tree",
        )

    @classmethod
    def from_directory(
        cls, path: str | os.PathLike[str], *, seed: int = 0, exclude: Iterable[str] = ()
    ) -> Tree:
        """The relative paths and sizes of the regular files under ``path``, never content.

        Symbolic links (to files or directories) and special files are skipped; entries
        named in ``exclude`` (e.g. ``{".git"}``) are skipped at any depth. Content is then
        generated from ``seed`` like any tree's. Only directory listings and ``lstat`` are
        read: no file is opened.
        """
        root = os.fspath(path)
        if not os.path.isdir(root):
            raise ConfigurationError(f"{root!r} is not a directory: pass the root of a tree")
        skip = frozenset(exclude)
        files: list[File] = []
        pending = [("", root)]
        while pending:
            prefix, directory = pending.pop()
            try:
                with os.scandir(directory) as entries:
                    listed = list(entries)
                for entry in listed:
                    if entry.name in skip or entry.is_symlink():
                        continue
                    relative = f"{prefix}{entry.name}"
                    if entry.is_dir(follow_symlinks=False):
                        pending.append((relative + "/", entry.path))
                    elif entry.is_file(follow_symlinks=False):
                        size = entry.stat(follow_symlinks=False).st_size
                        files.append(File(relative, size))
            except OSError as exc:
                raise ConfigurationError(
                    f"cannot list {directory!r} ({exc.strerror}): make it readable or exclude it"
                ) from exc
        if not files:
            raise ConfigurationError(f"no regular file under {root!r}: a tree needs one")
        name = os.path.basename(os.path.abspath(root))
        valid = bool(name) and name.isprintable() and len(name) <= 64
        return cls.of(files, seed=seed, name=name if valid else None)

    # -- figures --------------------------------------------------------------------

    @property
    def total_bytes(self) -> int:
        """Bytes in all files."""
        return sum(file.size for file in self.files)

    @property
    def sizes(self) -> Int64Array:
        """The file sizes in path order (int64)."""
        return np.fromiter(
            (file.size for file in self.files), dtype=np.int64, count=len(self.files)
        )

    def describe(self) -> str:
        """``"source-tree v0: 8846 files, 256.0 MiB"``."""
        label = "tree" if self.name is None else self.name
        return f"{label} v{self.version}: {len(self.files)} files, {_approximate(self.total_bytes)}"

    # -- content --------------------------------------------------------------------

    def fill(self, file: File, start: int, out: memoryview | bytearray) -> None:
        """Write bytes ``[start, start + len(out))`` of ``file`` into ``out``.

        The bytes depend on ``(seed, file.path, file.generation)`` only, so a file of
        any version of this tree can be produced from any other version.
        """
        target = _target(out, start, file.size)
        _fill_stream(
            [_TREE_DOMAIN, self.seed, _path_key(file.path), file.generation], start, target
        )

    def payload(self, file: File, start: int = 0, stop: int | None = None) -> bytes:
        """Bytes ``[start, stop)`` of ``file`` (default: the whole file)."""
        return _payload(self, file, start, stop)

    def mismatch(self, file: File, data: Buffer, offset: int = 0) -> int | None:
        """Offset in the file of the first byte where ``data`` differs, or None.

        ``data`` is compared with bytes ``[offset, offset + len(data))`` of ``file``;
        bytes past its end differ at ``file.size``. A whole-file check must also compare
        lengths.
        """
        return _mismatch(self, file, data, offset)

    # -- versions -------------------------------------------------------------------

    def evolve(
        self,
        *,
        changed: float | int = 0.05,
        added: float | int = 0.01,
        deleted: float | int = 0.01,
        sizes: Sizes | None = None,
        seed: int | None = None,
    ) -> Tree:
        """The next version: some files changed, some added, some deleted.

        A float in [0, 1] is a fraction of the current file count (rounded to nearest),
        an int a count of files. Changed and deleted files are chosen apart, at random.

        - changed files get generation ``version + 1`` (new bytes) and a size drawn from
          ``sizes`` if given, else their size × ``exp(N(0, 0.05))`` (most edits keep the
          size close; some keep it exactly, as a backup comparing sizes alone would miss);
        - added files go into directories that hold files (busy ones more likely), named
          ``v<version>-<n><extension of a neighbour>``, sizes from ``sizes`` if given,
          else drawn from the current sizes;
        - deleted files are removed.

        Deterministic from ``(self, seed)``; by default ``seed`` derives from
        ``(self.seed, self.version)``. The content seed is kept.
        """
        if sizes is not None and not isinstance(sizes, Sizes):
            raise ConfigurationError(f"sizes must be a Sizes or None, not {sizes!r}")
        total = len(self.files)
        n_changed = _fraction_or_count("changed", changed, total, limit=True)
        n_deleted = _fraction_or_count("deleted", deleted, total, limit=True)
        n_added = _fraction_or_count("added", added, total, limit=False)
        if n_changed + n_deleted > total:
            raise ConfigurationError(
                f"changed ({n_changed:,}) and deleted ({n_deleted:,}) files are distinct: "
                f"together at most the {total:,} files of the tree"
            )
        if n_deleted == total and n_added == 0:
            raise ConfigurationError(
                "evolving would leave an empty tree: delete fewer files or add some"
            )
        if total - n_deleted + n_added > MAX_COUNT:
            raise ConfigurationError(f"a tree holds at most {MAX_COUNT:,} files: add fewer")
        version = self.version + 1
        rng = _evolve_rng(self.seed, self.version, seed)
        order = rng.permutation(total)
        gone = set(order[:n_deleted].tolist())
        touched = order[n_deleted : n_deleted + n_changed]
        current = self.sizes
        if sizes is not None:
            new_sizes = sizes.draw(n_changed, rng)
        else:
            factors = np.exp(rng.normal(0.0, _SIZE_CHANGE_SIGMA, size=n_changed))
            new_sizes = np.rint(current[touched] * factors).astype(np.int64)
        files = list(self.files)
        for index, size in zip(touched.tolist(), new_sizes.tolist(), strict=True):
            files[index] = File(files[index].path, int(size), version)
        kept = [file for index, file in enumerate(files) if index not in gone]
        kept.extend(self._additions(n_added, sizes, rng, version))
        return Tree.of(kept, seed=self.seed, version=version, name=self.name)

    def _additions(
        self, count: int, sizes: Sizes | None, rng: np.random.Generator, version: int
    ) -> list[File]:
        if count == 0:
            return []
        taken = {file.path for file in self.files}
        for file in self.files:
            head = file.path
            while "/" in head:
                head = head.rsplit("/", 1)[0]
                taken.add(head)
        neighbours = rng.integers(0, len(self.files), size=count)
        drawn = sizes.draw(count, rng) if sizes is not None else rng.choice(self.sizes, count)
        added: list[File] = []
        serial = 0
        for neighbour, size in zip(neighbours.tolist(), drawn.tolist(), strict=True):
            template = self.files[neighbour].path
            directory, _, leaf = template.rpartition("/")
            dot = leaf.rfind(".")
            extension = leaf[dot:] if dot > 0 else ""
            while True:
                leaf_name = f"v{version}-{serial:06d}{extension}"
                path = f"{directory}/{leaf_name}" if directory else leaf_name
                serial += 1
                if path not in taken:
                    break
            taken.add(path)
            added.append(File(path, int(size), version))
        return added

    def diff(self, previous: Tree) -> Changes:
        """What changed from ``previous`` (an earlier version of this tree) to this one.

        A file is changed when its size or generation differs; ``changed`` holds this
        version's files, ``deleted`` the previous version's.
        """
        if not isinstance(previous, Tree):
            raise ConfigurationError(f"a tree diffs against a Tree, not {type(previous).__name__}")
        if previous.seed != self.seed:
            raise ConfigurationError(
                f"trees of seeds {previous.seed} and {self.seed} share no content: "
                "diff versions of one tree (made by evolve)"
            )
        before = {file.path: file for file in previous.files}
        added, changed, unchanged = [], [], []
        for file in self.files:
            old = before.pop(file.path, None)
            if old is None:
                added.append(file)
            elif old == file:
                unchanged.append(file)
            else:
                changed.append(file)
        deleted = sorted(before.values(), key=lambda file: file.path)
        return Changes(
            added=tuple(added),
            changed=tuple(changed),
            deleted=tuple(deleted),
            unchanged=tuple(unchanged),
        )

    # -- serialisation --------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict; files as three parallel lists (paths, sizes, generations)."""
        return {
            "kind": "tree",
            "name": self.name,
            "seed": self.seed,
            "version": self.version,
            "paths": [file.path for file in self.files],
            "sizes": [file.size for file in self.files],
            "generations": [file.generation for file in self.files],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Tree:
        """Inverse of :meth:`to_dict`."""
        _expect_kind(data, "tree", ("name", "seed", "version", "paths", "sizes", "generations"))
        paths, sizes, generations = data["paths"], data["sizes"], data["generations"]
        if not len(paths) == len(sizes) == len(generations):
            raise ConfigurationError("a tree dict needs paths, sizes and generations of one length")
        files = (File(*entry) for entry in zip(paths, sizes, generations, strict=True))
        return cls(
            files=tuple(files), seed=data["seed"], version=data["version"], name=data["name"]
        )


def _expect_kind(data: object, kind: str, keys: Sequence[str]) -> None:
    if not isinstance(data, dict) or data.get("kind") != kind:
        raise ConfigurationError(f"not a {kind} dict (its 'kind' must be {kind!r})")
    missing = [key for key in keys if key not in data]
    if missing:
        raise ConfigurationError(f"{kind} dict lacks {', '.join(missing)}")


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
            _fill_stream(entropy, offset, target[position - start : position - start + take])
            position += take

    def payload(self, file: File, start: int = 0, stop: int | None = None) -> bytes:
        """Bytes ``[start, stop)`` of the image (default: all of it)."""
        return _payload(self, file, start, stop)

    def mismatch(self, file: File, data: Buffer, offset: int = 0) -> int | None:
        """Offset of the first byte where ``data`` (at ``offset``) differs, or None."""
        return _mismatch(self, file, data, offset)

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
        which a block-level incremental backup must move at least.
        """
        blocks = self.changed_blocks(previous)
        if blocks.size == 0:
            return Changes(unchanged=self.files, rewritten_bytes=0)
        return Changes(changed=self.files, rewritten_bytes=int(blocks.size) * self.block_size)

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


def dataset_from_dict(data: dict[str, Any]) -> Tree | Image:
    """A :class:`Tree` or :class:`Image` from its ``to_dict()`` (by its ``kind``)."""
    kind = data.get("kind") if isinstance(data, dict) else None
    if kind == "tree":
        return Tree.from_dict(data)
    if kind == "image":
        return Image.from_dict(data)
    raise ConfigurationError(f"unknown dataset kind {kind!r}: expected 'tree' or 'image'")
