from __future__ import annotations

import re
import zlib
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from storeprobe import ConfigurationError, Sizes, Workload
from storeprobe.payload import GENERATION_BLOCK
from storeprobe.units import KiB, MiB


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
def test_bad_workloads_are_value_errors(kwargs: dict[str, Any]) -> None:
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


# -- sizes drawn from a distribution ----------------------------------------------------------
LOGNORMAL = Sizes.lognormal("16KiB", 1.5)


def test_drawn_sizes_come_from_the_seed() -> None:
    a = Workload(count=1000, sizes=LOGNORMAL, seed=5)
    again = Workload(count=1000, sizes=LOGNORMAL, seed=5)
    assert np.array_equal(a.object_sizes, again.object_sizes)
    assert not np.array_equal(a.object_sizes, a.with_seed(6).object_sizes)
    assert [a.size_of(i) for i in range(a.count)] == a.object_sizes.tolist()
    assert a.total_bytes == int(a.object_sizes.sum())
    assert a.largest == int(a.object_sizes.max())
    assert a.size == 16 * KiB  # the median stands for all (units, identities)
    assert not a.object_sizes.flags.writeable


def test_drawn_sizes_follow_the_distribution() -> None:
    sizes = Workload(count=20_000, sizes=LOGNORMAL, seed=1).object_sizes
    logs = np.log(sizes.astype(np.float64))
    assert abs(np.median(sizes) / (16 * KiB) - 1) < 0.05
    assert abs(float(logs.std()) - 1.5) < 0.05
    uniform = Workload(count=5_000, sizes=Sizes.uniform("4KiB", "1MiB"), seed=2).object_sizes
    assert int(uniform.min()) >= 4 * KiB
    assert int(uniform.max()) <= MiB
    assert abs(float(uniform.mean()) / ((4 * KiB + MiB) / 2) - 1) < 0.05


def test_each_object_has_its_own_size_and_bytes() -> None:
    workload = Workload(count=8, sizes=Sizes.uniform(1, "300KiB"), seed=3)
    for index in range(workload.count):
        payload = workload.payload(index)
        assert len(payload) == workload.size_of(index)
        assert workload.mismatch(index, payload) is None
        assert workload.mismatch(index, payload + b"x") == workload.size_of(index)
        assert b"".join(piece for _, piece in workload.pieces(index, 7000)) == payload
    with pytest.raises(ConfigurationError, match="outside object"):
        workload.payload(0, 0, workload.size_of(0) + 1)


def test_a_repeats_fresh_bytes_keep_the_sizes() -> None:
    workload = Workload(count=50, sizes=LOGNORMAL, seed=9)
    repeat = workload.with_payload_seed(10)
    assert np.array_equal(repeat.object_sizes, workload.object_sizes)
    assert repeat.payload(0) != workload.payload(0)
    assert repeat.with_payload_seed(11).size_seed == 9
    assert Workload.from_dict(repeat.to_dict()) == repeat


def test_a_distribution_workload_round_trips_and_reads() -> None:
    workload = Workload(count=1000, sizes=Sizes.lognormal("16KiB", 1.5, "1MiB"), seed=4)
    data = workload.to_dict()
    assert data["sizes"] == {"kind": "lognormal", "median": 16384, "sigma": 1.5, "maximum": MiB}
    assert data["total_bytes"] == workload.total_bytes
    assert Workload.from_dict(data) == workload
    assert workload.label == "1000 × lognormal(16 KiB, σ 1.5, ≤ 1 MiB)"
    assert Workload.parse("1000xlognormal:16KiB,1.5,1MiB", seed=4) == workload
    assert Workload.parse("10xuniform:4KiB-1MiB").label == "10 × uniform(4 KiB–1 MiB)"
    # a fixed-size workload's document is unchanged (no sizes, no total)
    assert Workload(count=2, size="1KiB", seed=0).to_dict() == {
        "count": 2,
        "size": 1024,
        "seed": 0,
        "name": None,
    }
    with pytest.raises(ConfigurationError, match="not the 1 recorded"):
        Workload.from_dict({**data, "total_bytes": 1})


@pytest.mark.parametrize(
    ("spec", "fragment"),
    [
        ("100xlognormal:16KiB", "MEDIAN,SIGMA"),
        ("100xlognormal:16KiB,x", "is not a number"),
        ("100xlognormal:16KiB,11", "between 0 and 10"),
        ("100xlognormal:16KiB,1.5,1KiB", "at least the median"),
        ("100xuniform:4KiB", "LOW-HIGH"),
        ("100xuniform:1MiB-4KiB", "low <= high"),
        ("100xuniform:0-4KiB", "empty objects"),
        ("100xgauss:1,2", "'lognormal:16KiB,1.5'"),
        ("1000xlognormal:1GiB,10", "give a maximum"),
    ],
)
def test_bad_size_specs_say_what_to_write(spec: str, fragment: str) -> None:
    with pytest.raises(ConfigurationError, match=re.escape(fragment)):
        Workload.parse(spec)


def test_size_or_sizes_not_both_nor_neither() -> None:
    with pytest.raises(ConfigurationError, match="not both"):
        Workload(count=10, size="1KiB", sizes=LOGNORMAL)
    with pytest.raises(ConfigurationError, match="needs size"):
        Workload(count=10)
    with pytest.raises(ConfigurationError, match="must be a Sizes"):
        Workload(count=10, sizes="lognormal:16KiB,1.5")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "sizes",
    [
        Sizes.lognormal("16KiB", 1.5),
        Sizes.lognormal(1000, 0.5, 5000),
        Sizes.uniform("4KiB", "1MiB"),
        Sizes.fixed(7),
        Sizes.explicit([1, 2, 3]),
        Sizes.histogram([(100, 1), (1000, 3)]),
    ],
)
def test_sizes_round_trip(sizes: Sizes) -> None:
    assert Sizes.from_dict(sizes.to_dict()) == sizes
    if sizes.kind in ("lognormal", "uniform"):
        assert Sizes.parse(sizes.spec) == sizes
