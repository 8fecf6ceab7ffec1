from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from storeprobe import (
    Code,
    ConfigurationError,
    Environment,
    Notice,
    Result,
    ResultFormatError,
    Sample,
    Subject,
    Workload,
    load_results,
)
from storeprobe.result import SCHEMA_VERSION, dump_results

FIXTURES = Path(__file__).parent / "fixtures"


def make_result(elapsed: list[int], workload: Workload | None = None, **kwargs: object) -> Result:
    workload = workload or Workload.small()
    fields: dict[str, object] = {
        "operation": "upload",
        "subject": Subject.of(workload),
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
        "upload small (256 × 16 KiB) s3://bench/dir, 1 stream: 8192 KiB/s best of 3 "
        "(median 4096 KiB/s, 0.500 s)"
    )
    assert "8192 KiB/s" in repr(result)


def test_repr_uses_the_unit_of_str() -> None:
    result = make_result([1_000_000_000], Workload.large(), operation="download")
    assert "256.0 MiB/s" in str(result)
    assert "256.0 MiB/s" in repr(result)
    assert "KiB/s" not in repr(result)
    assert len(repr(result)) < 120


def test_large_workloads_read_in_mib() -> None:
    result = make_result([1_000_000_000], Workload.large(), operation="download")
    assert str(result).startswith(
        "download large (1 × 256 MiB) s3://bench/dir, 1 stream: 256.0 MiB/s"
    )


def test_no_samples_is_not_a_number() -> None:
    boom = Notice(code=Code.REQUEST_FAILED, message="OSError: boom", repeat=1)
    result = make_result([], errors=(boom,))
    assert not result.ok
    with pytest.raises(ValueError, match="no successful sample"):
        _ = result.bytes_per_s
    assert str(result) == (
        "upload small (256 × 16 KiB) s3://bench/dir, 1 stream: failed "
        "(1 error; first: repeat 1: request-failed: OSError: boom)"
    )


HIGH = Notice(
    code=Code.HIGH_VARIATION,
    message="throughput varies by 14 %",
    fix="run more repeats (repeats=10) and compare medians",
)


def test_warnings_and_errors_are_notices() -> None:
    failed = Notice(code=Code.TIMEOUT, message="no answer within 2 s", repeat=2)
    result = make_result([10**9, 10**9], warnings=[HIGH, HIGH.to_dict()], errors=[failed.to_dict()])
    assert result.warnings == (HIGH, HIGH)
    assert result.errors == (failed,)
    assert [n.code for n in result.notices] == [
        Code.TIMEOUT,
        Code.HIGH_VARIATION,
        Code.HIGH_VARIATION,
    ]
    assert str(result).endswith("1 failed repeat; 2 warnings: high-variation")
    summary = result.summary().splitlines()
    assert summary[0] == str(result)
    high = (
        "  warning: high-variation: throughput varies by 14 %: run more repeats "
        "(repeats=10) and compare medians"
    )
    assert summary[1:] == ["  error: repeat 2: timeout: no answer within 2 s", high, high]
    assert "repeat 2: timeout" in result._repr_html_()
    # a text is refused: only schema-1 documents carry texts, and loading converts them
    with pytest.raises(ConfigurationError, match="Notice, not the text"):
        make_result([1], warnings=["cleanup could not delete 1 item"])
    with pytest.raises(ConfigurationError, match="wrap a single one"):
        make_result([1], warnings=HIGH)
    with pytest.raises(ConfigurationError, match="Notice or its dict, not int"):
        make_result([1], warnings=[3])
    with pytest.raises(ValueError, match="no-such-code"):
        make_result([1], warnings=[{"code": "no-such-code", "message": "x"}])


def test_json_round_trip_is_exact() -> None:
    failed = Notice(code=Code.VERIFICATION_FAILED, message="object 3 differs", repeat=1)
    result = make_result([3, 5, 4], warnings=(HIGH,), errors=(failed,))
    text = dump_results([result, result])
    assert load_results(text) == [result, result]
    assert Result.from_json(result.to_json()) == result
    document = json.loads(text)
    assert document["version"] == SCHEMA_VERSION == 4
    assert document["results"][0]["samples"][0]["latencies_ns"] == [3]
    assert document["results"][0]["warnings"] == [HIGH.to_dict()]
    assert document["results"][0]["errors"] == [
        {"code": "verification-failed", "message": "object 3 differs", "fix": "", "repeat": 1}
    ]


def test_samples_count_requests_by_kind_and_bytes_each_way() -> None:
    multipart = {"create-multipart": 1, "put-part": 52, "complete-multipart": 1}
    samples = [
        Sample(
            nbytes=100,
            elapsed_ns=10,
            latencies_ns=[1],
            requests_by_kind=multipart,
            bytes_sent=100,
        ),
        Sample(nbytes=100, elapsed_ns=20, latencies_ns=[1], requests_by_kind={"put-part": 2}),
    ]
    result = make_result([], samples=samples)
    assert result.requests_by_kind == {
        "create-multipart": 1,
        "put-part": 54,
        "complete-multipart": 1,
    }
    assert samples[0].bytes_sent == 100
    assert samples[0].bytes_received == 0
    assert samples[1].requests_by_kind == {"put-part": 2}
    assert Sample(nbytes=1, elapsed_ns=1, latencies_ns=[1]).requests_by_kind == {}
    assert hash(samples[0]) == hash(attrs_evolve_same(samples[0]))
    loaded = Result.from_json(result.to_json())
    assert loaded == result
    assert loaded.samples[0].requests_by_kind == multipart
    record = json.loads(result.to_json())["results"][0]["samples"][0]
    assert (record["requests_by_kind"], record["bytes_sent"], record["bytes_received"]) == (
        multipart,
        100,
        0,
    )
    with pytest.raises(ConfigurationError, match="negative"):
        Sample(nbytes=1, elapsed_ns=1, latencies_ns=[1], requests_by_kind={"put": -1})
    with pytest.raises(ConfigurationError, match="request kind"):
        Sample(nbytes=1, elapsed_ns=1, latencies_ns=[1], requests_by_kind={"put": 1.5})  # type: ignore[dict-item]  # a float count, on purpose


def attrs_evolve_same(sample: Sample) -> Sample:
    import attrs

    return attrs.evolve(sample)


def test_a_version_1_document_written_by_the_first_release_loads() -> None:
    path = FIXTURES / "results-v1.json"
    assert json.loads(path.read_text())["version"] == 1
    results = load_results(path)
    assert [r.operation for r in results] == ["upload", "download"]
    upload, download = results
    assert upload.ok
    assert upload.warnings
    assert all(n.code == Code.UNCLASSIFIED and n.fix == "" for n in upload.notices)
    assert upload.warnings[0].message.startswith("high variation: throughput varies by")
    assert not download.ok
    assert download.errors == (
        Notice(
            code=Code.UNCLASSIFIED,
            message="repeat 2: OSError: [Errno 28] No space left on device",
        ),
    )
    assert upload.samples[0].requests_by_kind == {}
    assert (upload.samples[0].bytes_sent, upload.samples[0].bytes_received) == (0, 0)
    assert upload.environment.label == "fixture-machine"
    assert upload.workload == Workload(count=4, size="1KiB", seed=0)
    # once loaded, it is written as the current version and reads back the same
    assert load_results(dump_results(results)) == results
    assert load_results(path.read_text()) == results


def test_samples_compare_arrays_by_value() -> None:
    a = Sample(nbytes=1, elapsed_ns=2, latencies_ns=np.array([1, 2]))
    assert a == Sample(nbytes=1, elapsed_ns=2, latencies_ns=[1, 2])
    assert a != Sample(nbytes=1, elapsed_ns=2, latencies_ns=[1, 3])


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("{", "bad JSON in the JSON text given"),
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


def test_load_results_takes_a_path_or_the_text(tmp_path: Path) -> None:
    result = make_result([1, 2])
    path = tmp_path / "results.json"
    path.write_text(dump_results([result]))
    assert load_results(path) == [result]
    assert load_results(str(path)) == [result]
    assert load_results(path.read_text()) == [result]
    assert Result.from_json(path) == result
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    with pytest.raises(ResultFormatError, match=r"bad JSON in file .*broken\.json"):
        load_results(broken)
    with pytest.raises(ResultFormatError, match=r"bad JSON in file .*broken\.json"):
        load_results(str(broken))
    with pytest.raises(ResultFormatError, match=r"neither JSON text .* nor the path"):
        load_results(str(tmp_path / "absent.json"))
    with pytest.raises(FileNotFoundError):
        load_results(tmp_path / "absent.json")


def test_truncated_document_is_refused() -> None:
    text = dump_results([make_result([1])])
    with pytest.raises(ResultFormatError):
        load_results(text[: len(text) // 2])
