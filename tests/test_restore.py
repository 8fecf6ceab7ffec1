"""storeprobe.assembly and storeprobe.restore on the local disk: a version written from
fetched objects (and from the previous version's files already there), and the check
that a directory holds exactly a version, byte for byte, naming what differs."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from storeprobe import Workload, assembly
from storeprobe.assembly import assemble
from storeprobe.dataset import Image, Tree
from storeprobe.manifest import Chunking, Pieces, VersionMap, map_chunks, map_files
from storeprobe.restore import (
    SETTLED_NS,
    Verified,
    in_place,
    verify_restore,
    write_all,
    write_fetched,
    write_files,
)
from storeprobe.sizes import Sizes
from storeprobe.staging import Staging
from storeprobe.units import KiB
from storeprobe.verification import VerificationError

Layout = dict[str, list[tuple[str, int]]]


@pytest.fixture
def tree() -> Tree:
    return Tree.generate(10, Sizes.fixed("16KiB"), seed=11)


def _served(version: VersionMap, asked: list[str]) -> Iterator[tuple[str, bytes]]:
    """The version's objects in the order it first uses each key, as a restore fetches
    them; ``asked`` records each one taken."""
    keys = list(version.objects)
    pieces = Pieces([version.objects[key].piece for key in keys])
    seen: set[str] = set()
    for layout in version.layout.values():
        for key, _ in layout:
            if key not in seen:
                seen.add(key)
                asked.append(key)
                yield key, pieces.payload_bytes(keys.index(key))


def _only(
    version: VersionMap, keys: set[str], asked: list[str] | None = None
) -> Iterator[tuple[str, bytes]]:
    for key, body in _served(version, []):
        if key in keys:
            if asked is not None:
                asked.append(key)
            yield key, body


# -- assemble -----------------------------------------------------------------------------
def test_a_first_restore_writes_every_file_of_the_version(tree: Tree, tmp_path: Path) -> None:
    version = map_files("p", tree)
    asked: list[str] = []
    assemble(version, None, tmp_path, set(), _served(version, asked))
    assert len(asked) == len(tree.files)
    verify_restore(tree, tmp_path)
    assert not list(tmp_path.rglob("*.storeprobe-part"))


@pytest.mark.parametrize("method", ["files", "chunks"])
def test_an_incremental_restore_fetches_only_what_the_directory_lacks(
    tree: Tree, tmp_path: Path, method: str
) -> None:
    def mapped(dataset: Tree) -> VersionMap:
        if method == "files":
            return map_files("p", dataset)
        return map_chunks("p", dataset, Chunking(average=4 * KiB))

    evolved = tree.evolve(changed=2, added=1, deleted=1, seed=2)
    before, after = mapped(tree), mapped(evolved)
    assemble(before, None, tmp_path, set(), _served(before, []))
    old = {file.path: file for file in tree.files}
    unchanged = {file.path for file in evolved.files if old.get(file.path) == file}
    needed = {
        key
        for path, layout in after.layout.items()
        if path not in unchanged
        for key, _ in layout
        if key not in before.objects
    }
    assemble(after, before, tmp_path, unchanged, _only(after, needed))
    verify_restore(evolved, tmp_path)
    gone = set(old) - {file.path for file in evolved.files}
    assert gone
    assert not any((tmp_path / path).exists() for path in gone)


def test_an_object_used_twice_in_one_file_is_fetched_once(tree: Tree, tmp_path: Path) -> None:
    version = VersionMap(
        dataset=tree,
        objects={},
        layout={"twice.bin": [("k1", 3), ("k1", 3), ("k2", 2)]},
        manifest_key="p/manifests/v0000.json",
    )
    fetched = iter([("k1", b"abc"), ("k2", b"de")])
    assemble(version, None, tmp_path, set(), fetched)
    assert (tmp_path / "twice.bin").read_bytes() == b"abcabcde"


def test_a_local_object_of_the_wrong_length_is_refused(tree: Tree, tmp_path: Path) -> None:
    previous = VersionMap(dataset=tree, objects={}, layout={"a": [("k", 4)]}, manifest_key="m0")
    version = VersionMap(
        dataset=tree, objects={}, layout={"a": [("k", 4)], "b": [("k", 4)]}, manifest_key="m1"
    )
    (tmp_path / "a").write_bytes(b"ab")  # the previous version's file was cut short
    with pytest.raises(OSError, match="object k has 2 bytes locally, expected 4"):
        assemble(version, previous, tmp_path, {"a"}, iter([]))


def test_an_image_changed_in_place_is_patched_where_it_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its chunks that stay at their offsets are not written again: the file is patched
    (the same inode), only the objects it lacks are fetched, and it is byte for byte the
    new version."""
    first = Image.create("4MiB", block_size="4KiB", seed=3)
    second = first.evolve(fraction=0.01)
    chunking = Chunking(average=64 * KiB)
    before, after = map_chunks("p", first, chunking), map_chunks("p", second, chunking)
    assemble(before, None, tmp_path, set(), _served(before, []))
    inode = (tmp_path / "disk.img").stat().st_ino
    needed = set(after.objects) - set(before.objects)
    asked: list[str] = []
    written: list[int] = []
    write_at = assembly._write_at

    def counted(fd: int, data: bytes | memoryview, offset: int) -> None:
        written.append(len(data))
        write_at(fd, data, offset)

    monkeypatch.setattr(assembly, "_write_at", counted)
    assemble(after, before, tmp_path, set(), _only(after, needed, asked))
    assert (tmp_path / "disk.img").stat().st_ino == inode
    assert set(asked) == needed
    assert 0 < len(needed) < len(after.objects) / 2
    # only the new chunks' bytes were written, each where the new version has it
    (layout,) = after.layout.values()
    assert sum(written) == sum(length for key, length in layout if key in needed)
    verify_restore(second, tmp_path)


def _held(tmp_path: Path, tree: Tree, files: dict[str, bytes], layout: Layout) -> VersionMap:
    for path, data in files.items():
        (tmp_path / path).write_bytes(data)
    return VersionMap(dataset=tree, objects={}, layout=layout, manifest_key="m0")


def test_objects_moving_inside_a_file_are_read_before_they_are_written_over(
    tree: Tree, tmp_path: Path
) -> None:
    """k1 stays at 0, k2 and k3 swap: a patch would write k3 over k2 before reading k2,
    so the file is written whole."""
    previous = _held(tmp_path, tree, {"a": b"abcdefghi"}, {"a": [("k1", 3), ("k2", 3), ("k3", 3)]})
    layout = {"a": [("k1", 3), ("k3", 3), ("k2", 3)]}
    version = VersionMap(dataset=tree, objects={}, layout=layout, manifest_key="m1")
    assemble(version, previous, tmp_path, set(), iter([]))
    assert (tmp_path / "a").read_bytes() == b"abcghidef"


def test_an_object_a_later_file_needs_survives_its_first_file_being_rewritten(
    tree: Tree, tmp_path: Path
) -> None:
    """``a`` held k1 alone and changes first; ``c``, written after it, needs k1: it is
    kept aside before ``a`` is written, and the aside is gone at the end."""
    previous = _held(
        tmp_path, tree, {"a": b"abc", "b": b"def"}, {"a": [("k1", 3)], "b": [("k2", 3)]}
    )
    layout = {"a": [("k3", 3)], "b": [("k2", 3)], "c": [("k1", 3)]}
    version = VersionMap(dataset=tree, objects={}, layout=layout, manifest_key="m1")
    assemble(version, previous, tmp_path, {"b"}, iter([("k3", b"xyz")]))
    found = {path.name: path.read_bytes() for path in tmp_path.iterdir()}
    assert found == {"a": b"xyz", "b": b"def", "c": b"abc"}


def test_an_object_neither_held_nor_fetched_is_named(tree: Tree, tmp_path: Path) -> None:
    version = VersionMap(dataset=tree, objects={}, layout={"a": [("k", 3)]}, manifest_key="m")
    with pytest.raises(OSError, match="object k is neither held in the directory nor among"):
        assemble(version, None, tmp_path, set(), iter([]))


# -- verify_restore -----------------------------------------------------------------------
def _flip(path: Path, at: int) -> None:
    """Flip the byte at offset ``at`` of the file at ``path`` (it differs whatever it was)."""
    data = bytearray(path.read_bytes())
    data[at] ^= 0xFF
    path.write_bytes(bytes(data))


def _restored(tree: Tree, directory: Path) -> None:
    write_files(directory, {file.path: tree.payload(file) for file in tree.files}, [])


def test_verify_restore_counts_extra_and_missing_files(tree: Tree, tmp_path: Path) -> None:
    _restored(tree, tmp_path)
    (tmp_path / "stray.txt").write_bytes(b"x")
    (tmp_path / tree.files[0].path).unlink()
    (tmp_path / tree.files[1].path).unlink()
    with pytest.raises(VerificationError, match="restore differs: 1 extra, 2 missing files"):
        verify_restore(tree, tmp_path)


def test_verify_restore_names_the_file_the_version_and_the_first_bad_byte(
    tree: Tree, tmp_path: Path
) -> None:
    _restored(tree, tmp_path)
    file = tree.files[3]
    _flip(tmp_path / file.path, 1000)
    with pytest.raises(
        VerificationError,
        match=f"verification failed: {file.path} differs from version 0 at byte 1000",
    ):
        verify_restore(tree, tmp_path)


def test_verify_restore_names_the_first_differing_file_in_the_versions_order(
    tree: Tree, tmp_path: Path
) -> None:
    """Files are checked several at once: of two that differ, the one first in the
    version's order is named, whichever thread finished first."""
    _restored(tree, tmp_path)
    first, last = tree.files[1], tree.files[-1]
    for file in (last, first):
        _flip(tmp_path / file.path, 10)
    with pytest.raises(VerificationError, match=f"{first.path} differs .* at byte 10"):
        verify_restore(tree, tmp_path)


def test_verify_restore_names_a_file_of_the_wrong_length(tree: Tree, tmp_path: Path) -> None:
    _restored(tree, tmp_path)
    file = tree.files[2]
    with open(tmp_path / file.path, "ab") as out:
        out.write(b"more")
    with pytest.raises(VerificationError, match=f"{file.path} differs .* at its length"):
        verify_restore(tree, tmp_path)


def test_a_file_verified_before_is_checked_by_its_digest_and_a_change_still_found(
    tree: Tree, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Across the restores of one scenario, a tree file checked byte for byte once is
    read and its SHA-256 digest compared (its bytes not generated again); a byte
    changed since is still named, at its offset."""
    evolved = tree.evolve(changed=3, added=1, deleted=1, seed=2)
    before = set(tree.files)
    changed = {f.path for f in evolved.files if f not in before}  # changed or added
    assert 0 < len(changed) < len(evolved.files)
    generated: list[str] = []
    mismatch = Tree.mismatch

    def counted(self: Tree, file: Any, data: Any, offset: int = 0) -> int | None:
        generated.append(file.path)
        return mismatch(self, file, data, offset)

    monkeypatch.setattr(Tree, "mismatch", counted)
    verified = Verified()  # its clock: now, so no file has settled
    _restored(tree, tmp_path)
    verify_restore(tree, tmp_path, verified)
    assert sorted(generated) == sorted(f.path for f in tree.files)
    assert len(verified.digests) == len(tree.files)
    assert verified.settled == {}
    generated.clear()
    write_files(tmp_path, {f.path: evolved.payload(f) for f in evolved.files}, [])
    removed = {f.path for f in tree.files} - {f.path for f in evolved.files}
    for gone in removed:
        (tmp_path / gone).unlink()
    verify_restore(evolved, tmp_path, verified)
    assert set(generated) == changed  # only what the new version changed is generated
    kept = next(f for f in evolved.files if f.path not in changed)
    _flip(tmp_path / kept.path, 1234)
    with pytest.raises(
        VerificationError,
        match=f"verification failed: {kept.path} differs from version 1 at byte 1234",
    ):
        verify_restore(evolved, tmp_path, verified)


def test_a_file_settled_and_unchanged_since_its_check_is_not_read_again(
    tree: Tree, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file last changed more than SETTLED_NS before it was checked, with the same
    inode, size and times since, is not opened again; one rewritten since (the same
    size, a byte flipped in place) is read and named; one changed just before its check
    is read every time."""
    _restored(tree, tmp_path)
    times = [os.stat(tmp_path / f.path).st_ctime_ns for f in tree.files]
    opened: list[str] = []
    real_open = os.open

    def recorded(path: Any, flags: int, mode: int = 0o777) -> int:
        opened.append(str(path))
        return real_open(path, flags, mode)

    monkeypatch.setattr(os, "open", recorded)
    fresh = Verified(clock=lambda: max(times))  # every file changed just now
    verify_restore(tree, tmp_path, fresh)
    verify_restore(tree, tmp_path, fresh)
    assert fresh.settled == {}
    assert len(opened) == 2 * len(tree.files)
    verified = Verified(clock=lambda: max(times) + SETTLED_NS + 1)  # all settled
    verify_restore(tree, tmp_path, verified)
    assert sorted(verified.settled) == sorted(f.path for f in tree.files)
    opened.clear()
    verify_restore(tree, tmp_path, verified)
    assert opened == []
    file = tree.files[4]
    path = tmp_path / file.path
    with open(path, "r+b") as handle:  # the same size, written in place
        handle.seek(77)
        byte = handle.read(1)[0]
        handle.seek(77)
        handle.write(bytes([byte ^ 0xFF]))
    with pytest.raises(VerificationError, match=f"{file.path} differs .* at byte 77"):
        verify_restore(tree, tmp_path, verified)
    assert opened == [str(path)] * 2  # read for its digest, then for the first bad byte


# -- write_files, write_fetched -----------------------------------------------------------
def test_write_files_writes_and_removes_and_leaves_no_temporary(tmp_path: Path) -> None:
    (tmp_path / "old.txt").write_bytes(b"old")
    write_files(tmp_path, {"a/b/c.txt": b"c", "d.txt": b"d"}, ["old.txt"])
    files = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file())
    assert files == ["a/b/c.txt", "d.txt"]
    assert (tmp_path / "a/b/c.txt").read_bytes() == b"c"


def test_write_fetched_writes_bytes_or_a_staging_file_and_closes_it(tmp_path: Path) -> None:
    write_fetched(tmp_path / "x" / "small", b"small")
    assert (tmp_path / "x" / "small").read_bytes() == b"small"
    workload = Workload(count=1, size="3MiB", seed=4)  # copied 1 MiB at a time
    staging = Staging.of_payload(workload, 0)
    staged = Path(staging.path)
    write_fetched(tmp_path / "y" / "large", staging)
    assert (tmp_path / "y" / "large").read_bytes() == workload.payload_bytes(0)
    assert not staged.exists()  # the staging file is closed and deleted


def test_write_all_writes_files_at_once_and_closes_every_staging_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The files go on several threads (the first two calls meet at a barrier, which a
    one-at-a-time writer never reaches); an error is raised once every other file is
    written and every staging file closed."""
    from storeprobe import restore

    meet = threading.Barrier(2, timeout=30)
    calls = [0]
    lock = threading.Lock()
    original = restore.write_fetched

    def write(path: Path, body: bytes | memoryview | Staging) -> None:
        with lock:
            calls[0] += 1
            first_two = calls[0] <= 2
        if first_two:
            meet.wait()
        original(path, body)

    monkeypatch.setattr(restore, "write_fetched", write)
    workload = Workload(count=2, size="2MiB", seed=5)
    stagings = [Staging.of_payload(workload, i) for i in range(2)]
    (tmp_path / "blocked").write_bytes(b"a file, not a folder")
    # the failing file first, the staging files last: none is left out for the error
    files: list[tuple[Path, bytes | memoryview | Staging]] = [
        (tmp_path / "blocked" / "under", b"x")  # its folder is a file
    ]
    files += [(tmp_path / f"d{n % 3}" / f"f{n}", f"file {n}".encode()) for n in range(200)]
    files += [(tmp_path / f"big{i}", staging) for i, staging in enumerate(stagings)]
    with pytest.raises(NotADirectoryError):
        write_all(files)
    for n in range(200):
        assert (tmp_path / f"d{n % 3}" / f"f{n}").read_bytes() == f"file {n}".encode()
    for i, staging in enumerate(stagings):
        assert (tmp_path / f"big{i}").read_bytes() == workload.payload_bytes(i)
        assert not Path(staging.path).exists()


def test_in_place_renames_over_the_destination_or_deletes(tmp_path: Path) -> None:
    for name in ("a", "b", "c"):
        (tmp_path / name).write_bytes(b"old " + name.encode())
        (tmp_path / f"{name}.part").write_bytes(b"new " + name.encode())
    in_place([(tmp_path / "a.part", tmp_path / "a"), (tmp_path / "b.part", tmp_path / "b")])
    in_place([(tmp_path / "c.part", None)])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "b", "c"]
    assert (tmp_path / "a").read_bytes() == b"new a"
    assert (tmp_path / "b").read_bytes() == b"new b"
    assert (tmp_path / "c").read_bytes() == b"old c"
