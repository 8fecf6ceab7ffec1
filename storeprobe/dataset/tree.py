"""File trees: generated, shaped like a source tree, or taken from a real directory.

Why one module (~500 lines): one class, :class:`Tree`, with its constructors, evolution
and diff; layouts and the source-tree shape are :mod:`.layout`, content :mod:`._common`,
the regions of in-place rewrites :mod:`.regions`."""

from __future__ import annotations

import math
import os
from collections.abc import Iterable
from typing import Any

import attrs
import numpy as np
from attrs import field, frozen

from storeprobe.dataset._common import (
    _LAYOUT_DOMAIN,
    _SIZE_CHANGE_SIGMA,
    _TREE_DOMAIN,
    Buffer,
    Changes,
    File,
    _approximate,
    _evolve_rng,
    _expect_kind,
    _fraction_or_count,
    _path_key,
    _target,
    _valid_name,
    _valid_seed,
    _valid_version,
)
from storeprobe.dataset.layout import SOURCE_TREE, _layout
from storeprobe.dataset.regions import Region, rewritten_regions, span, union
from storeprobe.errors import ConfigurationError
from storeprobe.payload import fill_stream
from storeprobe.payload import mismatch as mismatch_of
from storeprobe.payload import payload as payload_of
from storeprobe.sizes import MAX_COUNT, Int64Array, Sizes, _int, _size
from storeprobe.units import MiB

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


def _evolution(
    total: int,
    changed: float | int,
    added: float | int,
    deleted: float | int,
    sizes: Sizes | None,
    rewrite: float,
) -> tuple[int, int, int]:
    """The files an evolution of a tree of ``total`` files changes, deletes and adds
    (see :meth:`Tree.evolve`), its arguments checked."""
    if sizes is not None and not isinstance(sizes, Sizes):
        raise ConfigurationError(f"sizes must be a Sizes or None, not {sizes!r}")
    if isinstance(rewrite, bool) or not isinstance(rewrite, int | float):
        raise ConfigurationError(
            f"rewrite must be a fraction of the changed files (a float in [0, 1]), not {rewrite!r}"
        )
    if not 0 <= rewrite <= 1:
        raise ConfigurationError(
            f"rewrite={rewrite!r}: the fraction of changed files rewritten in place "
            "must be in [0, 1] (e.g. 0.5)"
        )
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
    return n_changed, n_deleted, n_added


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

    def size_of(self, file: File) -> int:
        """``file``'s size in bytes (:class:`~storeprobe.payload.Payloads`)."""
        return file.size

    def fill(self, file: File, start: int, out: memoryview | bytearray) -> None:
        """Write bytes ``[start, start + len(out))`` of ``file`` into ``out``.

        The bytes depend on ``(seed, file.path, file.generation, file.history)`` only, so
        a file of any version of this tree can be produced from any other version. A file
        written whole at generation ``g`` is the content stream of ``(seed, path, g)``; a
        file rewritten in place is its :attr:`~File.origin`'s stream with the regions of
        each later write (:meth:`regions`) taken from that write's stream.
        """
        target = _target(out, start, file.size)
        key = _path_key(file.path)
        fill_stream([_TREE_DOMAIN, self.seed, key, file.origin], start, target)
        stop = start + len(target)
        for generation in file.writes[1:]:
            for low, high in rewritten_regions(self.seed, key, generation, file.size):
                low, high = max(low, start), min(high, stop)
                if low < high:
                    entropy = [_TREE_DOMAIN, self.seed, key, generation]
                    fill_stream(entropy, low, target[low - start : high - start])

    def regions(self, file: File) -> tuple[Region, ...]:
        """The byte ranges ``[start, stop)`` the last write of ``file`` rewrote in place
        (sorted, disjoint); ``()`` for a file written whole."""
        if not file.history:
            return ()
        return rewritten_regions(self.seed, _path_key(file.path), file.generation, file.size)

    def changed_regions(self, file: File, previous: File) -> tuple[Region, ...] | None:
        """The byte ranges of ``file`` that may differ from ``previous``, the same path in
        an earlier version; ``None`` when it was written whole since (all of it differs).

        ``()`` when the file did not change; otherwise the union of the regions of every
        in-place rewrite since ``previous`` (bytes outside them are equal; inside, each
        byte differs with probability 255/256).
        """
        if file.path != previous.path:
            raise ConfigurationError(
                f"{file.path!r} and {previous.path!r} are different files: compare one path"
            )
        if file == previous:
            return ()
        now, then = file.writes, previous.writes
        if not file.history or file.size != previous.size or now[: len(then)] != then:
            return None
        key = _path_key(file.path)
        return union(
            rewritten_regions(self.seed, key, generation, file.size)
            for generation in now[len(then) :]
        )

    def payload(self, file: File, start: int = 0, stop: int | None = None) -> bytes:
        """Bytes ``[start, stop)`` of ``file`` (default: the whole file)."""
        return payload_of(self, file, start, stop)

    def mismatch(self, file: File, data: Buffer, offset: int = 0) -> int | None:
        """Offset in the file of the first byte where ``data`` differs, or None.

        ``data`` is compared with bytes ``[offset, offset + len(data))`` of ``file``;
        bytes past its end differ at ``file.size``. A whole-file check must also compare
        lengths.
        """
        return mismatch_of(self, file, data, offset)

    # -- versions -------------------------------------------------------------------

    def evolve(
        self,
        *,
        changed: float | int = 0.05,
        added: float | int = 0.01,
        deleted: float | int = 0.01,
        sizes: Sizes | None = None,
        seed: int | None = None,
        rewrite: float = 0.0,
    ) -> Tree:
        """The next version: some files changed, some added, some deleted.

        A float in [0, 1] is a fraction of the current file count (rounded to nearest),
        an int a count of files. Changed and deleted files are chosen apart, at random.

        - changed files get generation ``version + 1`` (new bytes) and a size drawn from
          ``sizes`` if given, else their size × ``exp(N(0, 0.05))`` (most edits keep the
          size close; some keep it exactly, as a backup comparing sizes alone would miss);
        - but a fraction ``rewrite`` of the changed files (rounded to nearest; empty files
          excepted) is rewritten in place instead: same size, the same bytes except in a
          few regions (:mod:`storeprobe.dataset.regions`: 1 to 4 regions of 16 B to
          16 KiB, at most an eighth of the file each), so binary deltas of them are
          small; ``diff().changed_bytes`` counts only those regions for them;
        - added files go into directories that hold files (busy ones more likely), named
          ``v<version>-<n><extension of a neighbour>``, sizes from ``sizes`` if given,
          else drawn from the current sizes;
        - deleted files are removed.

        Deterministic from ``(self, seed)``; by default ``seed`` derives from
        ``(self.seed, self.version)``. The content seed is kept.
        """
        total = len(self.files)
        n_changed, n_deleted, n_added = _evolution(total, changed, added, deleted, sizes, rewrite)
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
        in_place = math.floor(rewrite * n_changed + 0.5)
        files = list(self.files)
        for rank, (index, size) in enumerate(
            zip(touched.tolist(), new_sizes.tolist(), strict=True)
        ):
            old = files[index]
            if rank < in_place and old.size > 0:
                files[index] = File(old.path, old.size, version, old.writes)
            else:
                files[index] = File(old.path, int(size), version)
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
        version's files, ``deleted`` the previous version's. Changed files rewritten only
        in place since ``previous`` are also in ``in_place``, and then
        ``rewritten_bytes`` (so ``changed_bytes``) counts their :meth:`changed_regions`
        and the other changed files whole.
        """
        if not isinstance(previous, Tree):
            raise ConfigurationError(f"a tree diffs against a Tree, not {type(previous).__name__}")
        if previous.seed != self.seed:
            raise ConfigurationError(
                f"trees of seeds {previous.seed} and {self.seed} share no content: "
                "diff versions of one tree (made by evolve)"
            )
        before = {file.path: file for file in previous.files}
        added, changed, unchanged, in_place = [], [], [], []
        differing = 0
        for file in self.files:
            old = before.pop(file.path, None)
            if old is None:
                added.append(file)
            elif old == file:
                unchanged.append(file)
            else:
                changed.append(file)
                regions = self.changed_regions(file, old) if file.history else None
                if regions is None:
                    differing += file.size
                else:
                    in_place.append(file)
                    differing += span(regions)
        deleted = sorted(before.values(), key=lambda file: file.path)
        return Changes(
            added=tuple(added),
            changed=tuple(changed),
            deleted=tuple(deleted),
            unchanged=tuple(unchanged),
            rewritten_bytes=differing if in_place else None,
            in_place=tuple(in_place),
        )

    # -- serialisation --------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict; files as parallel lists (paths, sizes, generations, and
        ``histories`` when a file was rewritten in place)."""
        data: dict[str, Any] = {
            "kind": "tree",
            "name": self.name,
            "seed": self.seed,
            "version": self.version,
            "paths": [file.path for file in self.files],
            "sizes": [file.size for file in self.files],
            "generations": [file.generation for file in self.files],
        }
        if any(file.history for file in self.files):
            data["histories"] = [list(file.history) for file in self.files]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Tree:
        """Inverse of :meth:`to_dict`."""
        _expect_kind(data, "tree", ("name", "seed", "version", "paths", "sizes", "generations"))
        paths, sizes, generations = data["paths"], data["sizes"], data["generations"]
        histories = data.get("histories") or [()] * len(paths)
        if not len(paths) == len(sizes) == len(generations) == len(histories):
            raise ConfigurationError(
                "a tree dict needs paths, sizes, generations (and histories) of one length"
            )
        files = (File(*entry) for entry in zip(paths, sizes, generations, histories, strict=True))
        return cls(
            files=tuple(files), seed=data["seed"], version=data["version"], name=data["name"]
        )
