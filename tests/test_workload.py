from __future__ import annotations

import zlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from storeprobe import ConfigurationError, Workload
from storeprobe.workload import GENERATION_BLOCK


def test_seed_workloads() -> None:
    small, large = Workload.small(), Workload.large()
    assert (small.count, small.size, small.total_bytes) == (256, 16 * 1024, 4 * 1024**2)
    assert (large.count, large.size, large.total_bytes) == (1, 256 * 1024**2, 256 * 1024**2)
    assert small.describe() == "small (256 × 16 KiB)"
    assert Workload(count=3, size="16kB").size == 16_000
    assert Workload(count=3, size="1MiB").label == "3 × 1 MiB"


@pytest.mark.parametrize(
    "kwargs",
    [
        {"count": 0, "size": 1},
        {"count": -1, "size": 1},
        {"count": 1, "size": 0},
        {"count": 1, "size": -5},
        {"count": 1, "size": "16 KB"},
        {"count": 1, "size": "1.5MiB"},
        {"count": 10**9, "size": 1},
        {"count": 1, "size": "6TiB"},
        {"count": 1.5, "size": 1},
        {"count": True, "size": 1},
        {"count": 1, "size": 1, "seed": -1},
        {"count": 1, "size": 1, "name": "bad\nname"},
    ],
)
def test_bad_workloads_are_value_errors(kwargs: dict) -> None:
    with pytest.raises(ConfigurationError) as info:
        Workload(**kwargs)
    assert isinstance(info.value, ValueError)


def test_parse_specs() -> None:
    assert Workload.parse("small") == Workload.small()
    assert Workload.parse("large") == Workload.large()
    assert Workload.parse("10x1MiB") == Workload(count=10, size=1024**2)
    with pytest.raises(ConfigurationError, match="COUNTxSIZE"):
        Workload.parse("ten files")


def test_payload_is_incompressible() -> None:
    data = bytes(Workload.large().payload(0, 0, 8 * 1024**2))
    assert len(zlib.compress(data)) > 0.99 * len(data)


def test_payloads_unique_per_4kib_block() -> None:
    workload = Workload(count=64, size=64 * 1024)
    blocks = set()
    for index in range(workload.count):
        data = bytes(workload.payload(index))
        for offset in range(0, len(data), 4096):
            blocks.add(data[offset : offset + 4096])
    assert len(blocks) == workload.total_bytes // 4096


def test_payload_reproducible_from_seed_and_index() -> None:
    a, b = Workload(count=4, size=100_000, seed=7), Workload(count=4, size=100_000, seed=7)
    assert a.payload(2) == b.payload(2)
    assert a.payload(2) != a.payload(3)
    assert a.payload(2) != Workload(count=4, size=100_000, seed=8).payload(2)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 3 * GENERATION_BLOCK), st.integers(0, 3 * GENERATION_BLOCK))
def test_ranges_agree_with_whole_object(start: int, length: int) -> None:
    workload = Workload(count=2, size=3 * GENERATION_BLOCK + 123, seed=3)
    whole = _whole(workload)
    stop = min(start + length, workload.size)
    assert workload.payload(1, start, stop) == whole[start:stop]


_CACHE: dict[Workload, bytes] = {}


def _whole(workload: Workload) -> bytes:
    if workload not in _CACHE:
        _CACHE[workload] = bytes(workload.payload(1))
    return _CACHE[workload]


def test_pieces_concatenate_to_payload() -> None:
    workload = Workload(count=1, size=5 * 1024**2 + 17)
    pieces = list(workload.pieces(0, 2 * 1024**2))
    assert [offset for offset, _ in pieces] == [0, 2 * 1024**2, 4 * 1024**2]
    assert b"".join(piece for _, piece in pieces) == workload.payload(0)


def test_mismatch_finds_the_first_wrong_byte() -> None:
    workload = Workload(count=1, size=3 * GENERATION_BLOCK)
    data = workload.payload(0)
    assert workload.mismatch(0, data) is None
    data[GENERATION_BLOCK + 5] ^= 0xFF
    assert workload.mismatch(0, data) == GENERATION_BLOCK + 5
    tail = workload.payload(0, 100, 200)
    assert workload.mismatch(0, tail, 100) is None
    assert workload.mismatch(0, tail, 101) == 101
    assert workload.mismatch(0, data + b"x") is not None


def test_generation_is_chunked_not_whole() -> None:
    # a piece of a huge object costs only its own bytes
    workload = Workload(count=1, size="4TiB")
    piece = workload.payload(0, 2 * 1024**4, 2 * 1024**4 + 1024)
    assert len(piece) == 1024
    assert np.frombuffer(piece, np.uint8).std() > 50


def test_roundtrip_dict() -> None:
    workload = Workload(count=3, size="2MiB", seed=11, name="mine")
    assert Workload.from_dict(workload.to_dict()) == workload


def test_payload_bytes_is_the_payload_as_bytes() -> None:
    workload = Workload(count=2, size="3MiB", seed=11)
    data = workload.payload_bytes(1, 100, 2 * 1024**2 + 7)
    assert isinstance(data, bytes)
    assert data == bytes(workload.payload(1, 100, 2 * 1024**2 + 7))
    assert workload.payload_bytes(0, 5, 5) == b""
