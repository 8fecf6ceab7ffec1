"""One payload protocol: a workload's objects and a dataset's files are items of a
:class:`~storeprobe.payload.Payloads`, read, checked and streamed by the same functions."""

from __future__ import annotations

import pytest

from storeprobe import ConfigurationError, Workload
from storeprobe.dataset import Dataset, File, Image, Sizes, Tree, content
from storeprobe.payload import GENERATION_BLOCK, Payloads, mismatch, payload, pieces

WORKLOAD = Workload(count=3, size=GENERATION_BLOCK + 5, seed=11)
TREE = Tree.generate(6, Sizes.fixed("3KiB"), seed=4)
IMAGE = Image.create("256KiB", block_size="64KiB", seed=2).evolve(fraction=0.5)


def _whole_object(source: Payloads[int], item: int) -> bytes:
    return b"".join(bytes(piece) for piece in pieces(source, item, 70_000))


def _whole_file(source: Payloads[File], item: File) -> bytes:
    return b"".join(bytes(piece) for piece in pieces(source, item, 70_000))


def test_a_workload_is_read_as_a_dataset_is() -> None:
    """The functions give what each source's own methods give."""
    for index in range(WORKLOAD.count):
        whole = WORKLOAD.payload_bytes(index)
        assert payload(WORKLOAD, index) == whole
        assert _whole_object(WORKLOAD, index) == whole
        assert (
            payload(WORKLOAD, index, 10, GENERATION_BLOCK + 3) == whole[10 : GENERATION_BLOCK + 3]
        )
        assert mismatch(WORKLOAD, index, whole) is None
    for dataset in (TREE, IMAGE):
        assert isinstance(dataset, Dataset)
        for file in dataset.files:
            assert dataset.size_of(file) == file.size
            assert payload(dataset, file) == dataset.payload(file)
            assert _whole_file(dataset, file) == dataset.payload(file)
            assert b"".join(bytes(p) for p in content(dataset, file, piece_size=999)) == (
                dataset.payload(file)
            )


def test_mismatch_finds_the_first_differing_byte_and_a_long_read() -> None:
    data = bytearray(payload(WORKLOAD, 1, 100, 5000))
    data[1234] ^= 0xFF
    assert mismatch(WORKLOAD, 1, data, 100) == 1334
    size = WORKLOAD.size_of(2)
    assert mismatch(WORKLOAD, 2, payload(WORKLOAD, 2) + b"x") == size  # past the end


def test_pieces_reuse_one_buffer() -> None:
    seen = {id(piece.obj) for piece in pieces(WORKLOAD, 0, 4096)}
    assert len(seen) == 1
    assert sum(len(piece) for piece in pieces(WORKLOAD, 0, 4096)) == WORKLOAD.size_of(0)


@pytest.mark.parametrize("bad", [0, -1, 1.5, True])
def test_a_bad_piece_size_is_named(bad: object) -> None:
    with pytest.raises(ConfigurationError, match="piece_size must be a positive int"):
        next(pieces(WORKLOAD, 0, bad))  # type: ignore[arg-type]


def test_the_streams_are_pinned() -> None:
    """Bytes written by the code before this module (5964149): the streams every payload
    is drawn from must never change, or recorded seeds stop reproducing runs."""
    assert (
        payload(Workload(count=2, size=16, seed=1), 1).hex() == "bdd1fb53202c389b43d7d74d72fa238b"
    )
    tree = Tree.generate(2, Sizes.fixed(16), seed=3)
    assert tree.files[0].path == "d07/d05/d05/f000000.dat"
    assert payload(tree, tree.files[0]).hex() == "7bdc84e9829ce9dff7e75755146ce887"
