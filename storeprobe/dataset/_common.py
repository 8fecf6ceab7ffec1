"""What every dataset shares: files, changes, the protocol, content generation, checks."""

from __future__ import annotations

import hashlib
import itertools
import math
from collections.abc import Iterator, Sequence
from typing import Protocol, runtime_checkable

import attrs
import numpy as np
import numpy.typing as npt
from attrs import field, frozen

from storeprobe.errors import ConfigurationError
from storeprobe.payload import GENERATION_BLOCK, Payloads, pieces
from storeprobe.sizes import MAX_SIZE, _int
from storeprobe.units import KiB, MiB

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


# -- validators ---------------------------------------------------------------------


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


def _target(out: memoryview | bytearray, start: int, size: int) -> npt.NDArray[np.uint8]:
    view = memoryview(out).cast("B")
    stop = start + len(view)
    if start < 0 or stop > size:
        raise ConfigurationError(f"byte range [{start}, {stop}) outside a file of {size:,} bytes")
    return np.frombuffer(view, dtype=np.uint8)


# -- files, changes, the protocol -----------------------------------------------------


def _history(value: object) -> tuple[int, ...]:
    if isinstance(value, tuple) and not value:
        return ()
    if isinstance(value, str | bytes) or not isinstance(value, Sequence):
        raise ConfigurationError(f"a file's history is a sequence of generations, not {value!r}")
    return tuple(_int("history generation", entry) for entry in value)


def _valid_history(
    instance: File, attribute: attrs.Attribute[tuple[int, ...]], value: tuple[int, ...]
) -> None:
    writes = (*value, instance.generation)
    if any(later <= earlier for earlier, later in itertools.pairwise(writes)):
        raise ConfigurationError(
            f"{instance.path!r}: history {value} and generation {instance.generation} must "
            "be increasing (each is a version that wrote the file)"
        )


@frozen
class File:
    """One file of a dataset version.

    ``path`` is relative and ``/``-separated; the same ``(path, generation, history)``
    always has the same bytes (for a given dataset seed), and ``generation`` changes when
    the file does: it is the version that last wrote the file, whole or in place.

    ``history`` is empty when ``generation`` wrote the whole file. When it rewrote a few
    regions in place (:meth:`Tree.evolve` with ``rewrite``), ``history`` holds the
    generations under that rewrite: first the version that wrote the file whole
    (:attr:`origin`), then each earlier in-place rewrite, in order. The size of a file
    rewritten in place is its size when it was written whole.
    """

    path: str = field(validator=_valid_path)
    size: int = field(validator=_valid_file_size)
    generation: int = field(default=0, validator=_valid_generation)
    history: tuple[int, ...] = field(default=(), converter=_history, validator=_valid_history)

    @property
    def writes(self) -> tuple[int, ...]:
        """Every version that wrote the file, in order: :attr:`origin`, then each in-place
        rewrite; ``(generation,)`` for a file written whole."""
        return (*self.history, self.generation)

    @property
    def origin(self) -> int:
        """The version that wrote the file whole (``generation`` unless rewritten in place)."""
        return self.history[0] if self.history else self.generation

    @property
    def in_place(self) -> bool:
        """True when the last write rewrote regions in place (``history`` is not empty)."""
        return bool(self.history)


@frozen(kw_only=True)
class Changes:
    """What differs from a previous version to this one (files of this version, except
    ``deleted``, which are the previous version's)."""

    added: tuple[File, ...] = ()
    changed: tuple[File, ...] = ()
    deleted: tuple[File, ...] = ()
    unchanged: tuple[File, ...] = ()
    #: the bytes of the changed files that differ: an image's changed blocks × block
    #: size; for a tree with files rewritten in place, their rewritten regions plus the
    #: whole size of the others. None when every changed file counts whole (a tree
    #: without in-place rewrites)
    rewritten_bytes: int | None = None
    #: the changed files whose bytes differ only in regions rewritten in place (a subset
    #: of ``changed``: a tree's files rewritten in place, a changed image); a binary
    #: delta against the previous version is small for these
    in_place: tuple[File, ...] = ()

    @property
    def changed_bytes(self) -> int:
        """Bytes of added and changed files: what an incremental backup must move at least.

        For an image, the changed blocks × block size (the bytes that differ), not the
        whole image; for a tree file rewritten in place, its rewritten regions.
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
class Dataset(Payloads[File], Protocol):
    """What a backup probe needs of a dataset version: its files and their bytes (a
    :class:`~storeprobe.payload.Payloads` whose items are its files)."""

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

    def size_of(self, file: File) -> int:
        """``file``'s size in bytes."""
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


def content(
    dataset: Dataset, file: File, *, piece_size: int = GENERATION_BLOCK
) -> Iterator[memoryview]:
    """The bytes of ``file`` in order, in pieces of at most ``piece_size`` (1 MiB).

    One buffer is reused: a piece is valid until the next one is drawn, so memory stays
    at ``piece_size`` for a file of any size. Functions that read each piece before
    asking for the next (:func:`storeprobe.delta.signature`, ``delta``, ``measure_delta``,
    a hash's ``update``, a file's ``write``) take it as it is; copy a piece to keep it.
    """
    return pieces(dataset, file, _int("piece_size", piece_size, 1, 1 << 30))


def _approximate(nbytes: int) -> str:
    for unit, factor in (("GiB", 1024 * MiB), ("MiB", MiB), ("KiB", KiB)):
        if nbytes >= factor:
            return f"{nbytes / factor:.1f} {unit}"
    return f"{nbytes} B"


def _expect_kind(data: object, kind: str, keys: Sequence[str]) -> None:
    if not isinstance(data, dict) or data.get("kind") != kind:
        raise ConfigurationError(f"not a {kind} dict (its 'kind' must be {kind!r})")
    missing = [key for key in keys if key not in data]
    if missing:
        raise ConfigurationError(f"{kind} dict lacks {', '.join(missing)}")
