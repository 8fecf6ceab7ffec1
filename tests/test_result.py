from __future__ import annotations

import json

import numpy as np
import pytest

from storeprobe import Environment, Result, ResultFormatError, Sample, Workload, load_results
from storeprobe.result import SCHEMA_VERSION, dump_results


def make_result(elapsed: list[int], workload: Workload | None = None, **kwargs: object) -> Result:
    workload = workload or Workload.small()
    fields: dict[str, object] = {
        "operation": "upload",
        "workload": workload,
        "url": "s3://bench/dir",
        "protocol": "s3",
        "backend": "s3fs",
        "streams": 1,
        "effective_streams": 1,
        "strategy": "objects: one request per object, 1 at a time",
        "samples": [
            Sample(nbytes=workload.total_bytes, elapsed_ns=ns, latencies_ns=[ns], max_in_flight=1)
            for ns in elapsed
        ],
        "environment": Environment(
            hostname="h", cpu_count=2, platform="p", python="3.11", label="home"
        ),
    }
    fields.update(kwargs)
    return Result(**fields)  # type: ignore[arg-type]


def test_figures_are_from_the_best_repeat_in_1024_units() -> None:
    # 4 MiB in 0.5 s (best), 1 s, 2 s
    result = make_result([1_000_000_000, 500_000_000, 2_000_000_000])
    assert result.best_seconds == 0.5
    assert result.median_seconds == 1.0
    assert result.bytes_per_s == 8 * 1024**2
    assert result.kib_per_s == 8192.0
    assert result.mib_per_s == 8.0
    assert result.mibit_per_s == 64.0
    assert result.median_kib_per_s == 4096.0
    assert result.median_mib_per_s == 4.0
    assert result.median_mibit_per_s == 32.0
    assert result.objects_per_s == 512.0
    assert str(result) == (
        "upload small (256 × 16 KiB) s3://bench/dir, 1 stream: 8192.00 KiB/s best of 3 "
        "(median 4096.00 KiB/s, 0.500 s)"
    )
    assert "8192.00 KiB/s" in repr(result)


def test_large_workloads_read_in_mib() -> None:
    result = make_result([1_000_000_000], Workload.large(), operation="download")
    assert str(result).startswith(
        "download large (1 × 256 MiB) s3://bench/dir, 1 stream: 256.00 MiB/s"
    )


def test_no_samples_is_not_a_number() -> None:
    result = make_result([], errors=("repeat 1: OSError: boom",))
    assert not result.ok
    with pytest.raises(ValueError, match="no successful sample"):
        _ = result.bytes_per_s
    assert "failed" in str(result)


def test_json_round_trip_is_exact() -> None:
    result = make_result([3, 5, 4], warnings=("w",), errors=("e",))
    text = dump_results([result, result])
    assert load_results(text) == [result, result]
    assert Result.from_json(result.to_json()) == result
    document = json.loads(text)
    assert document["version"] == SCHEMA_VERSION
    assert document["results"][0]["samples"][0]["latencies_ns"] == [3]


def test_samples_compare_arrays_by_value() -> None:
    a = Sample(nbytes=1, elapsed_ns=2, latencies_ns=np.array([1, 2]))
    assert a == Sample(nbytes=1, elapsed_ns=2, latencies_ns=[1, 2])
    assert a != Sample(nbytes=1, elapsed_ns=2, latencies_ns=[1, 3])


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("{", "bad JSON"),
        ("[]", "no 'schema'"),
        ('{"schema": "storeprobe.results", "version": 99, "results": []}', "version 99"),
        ('{"schema": "storeprobe.results", "version": 1}', "no 'results'"),
        (
            '{"schema": "storeprobe.results", "version": 1, "results": [{"operation": "upload"}]}',
            "malformed",
        ),
    ],
)
def test_bad_documents_are_refused(text: str, fragment: str) -> None:
    with pytest.raises(ResultFormatError, match=fragment):
        load_results(text)


def test_truncated_document_is_refused() -> None:
    text = dump_results([make_result([1])])
    with pytest.raises(ResultFormatError):
        load_results(text[: len(text) // 2])
