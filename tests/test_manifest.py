"""storeprobe.manifest: what a backup stores for a dataset version (one object per file,
or one per distinct content-defined chunk), the manifest naming them, and the bytes each
stored object regenerates."""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from storeprobe.dataset import File, Image, Tree
from storeprobe.errors import ConfigurationError
from storeprobe.manifest import (
    HASH_TOGETHER,
    Blobs,
    Chunking,
    Pieces,
    VersionMap,
    cut_windows,
    digest_windows,
    file_key,
    filled_reads,
    map_chunks,
    map_files,
)
from storeprobe.sizes import Sizes
from storeprobe.units import KiB, MiB


@pytest.fixture
def tree() -> Tree:
    return Tree.generate(12, Sizes.fixed("24KiB"), seed=5)


def _file_bytes(version: VersionMap, path: str) -> bytes:
    """A file put back together from the stored objects its layout names."""
    keys = list(version.objects)
    pieces = Pieces([version.objects[key].piece for key in keys])
    return b"".join(pieces.payload_bytes(keys.index(key)) for key, _ in version.layout[path])


# -- Chunking -----------------------------------------------------------------------------
def test_chunking_takes_an_average_from_256_bytes_to_256_mib() -> None:
    assert Chunking().average == 4 * MiB
    assert Chunking.of("1MiB").average == MiB
    assert Chunking.of(256).average == 256
    for bad in (255, 256 * MiB + 1):
        with pytest.raises(ConfigurationError, match="from 256 B to 256 MiB, not"):
            Chunking(average=bad)


def test_chunks_cover_the_data_in_order_within_the_size_bounds() -> None:
    data = np.random.default_rng(1).bytes(300 * KiB)
    chunking = Chunking(average=4 * KiB)
    cuts = chunking.cut(data)
    assert cuts[0][0] == 0
    assert all(a + n == b for (a, n), (b, _) in itertools.pairwise(cuts))
    assert sum(length for _, length in cuts) == len(data)
    assert all(KiB <= length <= 16 * KiB for _, length in cuts[:-1])
    assert chunking.cut(b"") == [(0, 0)]


def test_chunks_cut_window_by_window_are_the_chunks_of_the_whole() -> None:
    data = np.random.default_rng(2).bytes(200 * KiB)
    chunking = Chunking(average=KiB)

    def read(start: int, stop: int) -> bytes:
        return data[start:stop]

    whole = [(offset, data[offset : offset + length]) for offset, length in chunking.cut(data)]
    # the method's own window (at least eight average chunks), and a plain small window
    assert list(chunking.cut_windows(read, len(data), window=8 * KiB)) == whole
    assert list(cut_windows(chunking.cut, read, len(data), window=20 * KiB)) == whole
    assert list(chunking.cut_windows(read, 0)) == [(0, b"")]


class _CountingPool(ThreadPoolExecutor):
    """A pool that counts the chunks handed to it."""

    handed = 0

    def map(  # type: ignore[override]
        self, fn: Callable[[bytes], str], *iterables: Iterable[bytes], **kwargs: object
    ) -> Iterator[str]:
        (items,) = iterables
        listed = list(items)
        self.handed += len(listed)
        return super().map(fn, listed)


def _hex(chunk: bytes) -> str:
    return hashlib.blake2b(chunk, digest_size=16).hexdigest()


def _hex_view(chunk: memoryview) -> str:
    return hashlib.blake2b(chunk, digest_size=16).hexdigest()


def test_a_large_windows_chunks_are_hashed_on_the_pool_in_order() -> None:
    """Windows above HASH_TOGETHER go to the pool, smaller ones are hashed inline; both
    give each chunk's (offset, length, digest) in order, as hashing the cut chunks, also
    when every window is read into the same buffer (as ``filled_reads`` does)."""
    chunking = Chunking(average=64 * KiB)  # chunks of at most 256 KiB
    window = HASH_TOGETHER + MiB
    # three windows, each above HASH_TOGETHER: the third starts at most two chunks before
    # 2 × window, so it holds HASH_TOGETHER + 512 KiB to one window
    data = np.random.default_rng(3).bytes(2 * window + HASH_TOGETHER + 512 * KiB)

    def read(start: int, stop: int) -> bytes:
        return data[start:stop]

    buffer = bytearray(window)

    def reused(start: int, stop: int) -> memoryview:
        view = memoryview(buffer)[: stop - start]
        view[:] = data[start:stop]
        return view

    serial = [
        (offset, len(chunk), _hex(chunk)) for offset, chunk in chunking.cut_windows(read, len(data))
    ]
    with _CountingPool(2) as pool:
        found = list(digest_windows(chunking.cut, reused, len(data), _hex_view, pool, window))
        assert found == serial
        assert pool.handed == len(serial) > 1
        pool.handed = 0
        assert list(chunking.digest_windows(read, len(data), _hex, pool)) == serial
        assert pool.handed == len(serial)
        # windows of 2 MiB hold less than HASH_TOGETHER: nothing goes to the pool
        pool.handed = 0
        small = list(digest_windows(chunking.cut, read, len(data), _hex, pool, 2 * MiB))
        assert small == serial
        assert pool.handed == 0
    assert list(chunking.digest_windows(read, len(data), _hex, None)) == serial
    assert list(chunking.digest_windows(read, 0, _hex, None)) == [(0, 0, _hex(b""))]


def test_map_chunks_hashes_a_large_window_on_the_pool_as_in_one_thread() -> None:
    """A 20 MiB image is one window above HASH_TOGETHER: its chunks go to the pool, and
    the keys are those of hashing each chunk of the whole in order."""
    image = Image.create("20MiB", block_size="64KiB", seed=6)
    chunking = Chunking(average=256 * KiB)
    (file,) = image.files
    data = image.payload(file)
    expected = [
        (f"p/chunks/{_hex(data[offset : offset + length])}", length)
        for offset, length in chunking.cut(data)
    ]
    assert len(data) > HASH_TOGETHER
    assert map_chunks("p", image, chunking).layout[file.path] == expected


# -- map_files ----------------------------------------------------------------------------
def test_filled_reads_give_the_files_bytes_in_one_reused_buffer() -> None:
    """Each read is the file's bytes there, in the same buffer as the read before (grown
    for a longer read), and the bytes read are counted; the chunks of a file cut through
    it are those of its whole bytes."""
    tree = Tree.generate(1, Sizes.fixed("3MiB"), seed=9)
    (file,) = tree.files
    counted: list[int] = []
    read = filled_reads(tree, file, counted.append)
    first = read(0, 100 * KiB)
    assert first == tree.payload(file, 0, 100 * KiB)
    second = read(200 * KiB, 300 * KiB)
    assert second == tree.payload(file, 200 * KiB, 300 * KiB)
    assert second.obj is first.obj  # the same buffer, rewritten
    longer = read(1 * MiB, 3 * MiB)
    assert longer == tree.payload(file, 1 * MiB, 3 * MiB)
    assert counted == [100 * KiB, 100 * KiB, 2 * MiB]
    chunking = Chunking(average=64 * KiB)
    whole = tree.payload(file)
    expected = [(offset, whole[offset : offset + length]) for offset, length in chunking.cut(whole)]
    got = [
        (offset, bytes(chunk))  # copied: a chunk is valid until the next window is read
        for offset, chunk in chunking.cut_windows(filled_reads(tree, file), file.size, 700 * KiB)
    ]
    assert got == expected


def test_file_key_quotes_the_whole_path_and_names_the_generation() -> None:
    file = File(path="dir a/b%c.txt", size=3, generation=4)
    assert file_key("bench/run", file) == "bench/run/files/dir%20a%2Fb%25c.txt@4"


def test_map_files_stores_one_object_per_file_that_regenerates_it(tree: Tree) -> None:
    version = map_files("bench/run", tree)
    assert len(version.objects) == len(tree.files)
    assert version.manifest_key == "bench/run/manifests/v0000.json"
    for file in tree.files:
        key = file_key("bench/run", file)
        assert version.layout[file.path] == [(key, file.size)]
        assert version.objects[key].size == file.size
        assert _file_bytes(version, file.path) == tree.payload(file)


def test_an_unchanged_file_keeps_its_object_in_the_next_version(tree: Tree) -> None:
    evolved = tree.evolve(changed=3, added=1, deleted=1, seed=1)
    before, after = map_files("p", tree), map_files("p", evolved)
    kept = set(before.objects) & set(after.objects)
    unchanged = {f.path for f in evolved.files} & {f.path for f in tree.files}
    changed = {f.path for f in evolved.files if f.generation == evolved.version}
    assert len(kept) == len(unchanged - changed)
    assert after.manifest_key == "p/manifests/v0001.json"


def test_the_manifest_names_each_files_size_and_objects(tree: Tree) -> None:
    version = map_files("p", tree)
    manifest = json.loads(version.manifest())
    assert manifest["version"] == 0
    assert set(manifest["files"]) == {file.path for file in tree.files}
    first = tree.files[0]
    assert manifest["files"][first.path] == {
        "size": first.size,
        "objects": [[file_key("p", first), first.size]],
    }


# -- map_chunks ---------------------------------------------------------------------------
def test_map_chunks_over_a_previous_map_shares_what_is_unchanged(tree: Tree) -> None:
    """A map made over an earlier version's map is the map made alone (objects in the same
    order, the same manifest) and shares the earlier one's chunks and unchanged files."""
    chunking = Chunking(average=4 * KiB)
    first = map_chunks("p", tree, chunking)
    later = tree.evolve(seed=2)
    alone = map_chunks("p", later, chunking)
    shared = map_chunks("p", later, chunking, previous=first)
    assert shared.manifest() == alone.manifest()
    assert list(shared.objects) == list(alone.objects)
    assert {k: s.size for k, s in shared.objects.items()} == {
        k: s.size for k, s in alone.objects.items()
    }
    for key, stored in shared.objects.items():  # the same bytes, wherever they come from
        assert Pieces([stored.piece]).payload_bytes(0) == Pieces(
            [alone.objects[key].piece]
        ).payload_bytes(0)
    unchanged = [f.path for f in later.files if f in tree.files]
    assert unchanged
    assert all(shared.layout[path] is first.layout[path] for path in unchanged)
    common = set(first.objects) & set(shared.objects)
    assert common
    assert all(shared.objects[key] is first.objects[key] for key in common)


def test_map_chunks_names_each_distinct_chunk_by_its_hash(tree: Tree) -> None:
    version = map_chunks("p", tree, Chunking(average=4 * KiB))
    for key, stored in version.objects.items():
        body = Pieces([stored.piece]).payload_bytes(0)
        assert len(body) == stored.size
        assert key == f"p/chunks/{hashlib.blake2b(body, digest_size=16).hexdigest()}"
    for file in tree.files:
        assert sum(length for _, length in version.layout[file.path]) == file.size
        assert _file_bytes(version, file.path) == tree.payload(file)


def test_a_file_rewritten_in_place_shares_most_chunks_with_its_last_version() -> None:
    tree = Tree.generate(4, Sizes.fixed("256KiB"), seed=9)
    evolved = tree.evolve(changed=1, added=0, deleted=0, rewrite=1.0, seed=3)
    chunking = Chunking(average=4 * KiB)
    before, after = map_chunks("p", tree, chunking), map_chunks("p", evolved, chunking)
    (rewritten,) = [f for f in evolved.files if f.generation == evolved.version]
    keys = [key for key, _ in after.layout[rewritten.path]]
    new = [key for key in keys if key not in before.objects]
    assert 0 < len(new) < len(keys) / 2
    assert _file_bytes(after, rewritten.path) == evolved.payload(rewritten)


# -- Blobs --------------------------------------------------------------------------------
def test_blobs_serve_bytes_already_made() -> None:
    blobs = Blobs([b"manifest-0", b"xy"])
    assert blobs.payload_bytes(0) == b"manifest-0"
    assert blobs.payload_bytes(0, 2, 5) == b"nif"
    assert blobs.payload(1) == bytearray(b"xy")
    out = bytearray(4)
    blobs.fill(0, 4, out)
    assert out == b"fest"
