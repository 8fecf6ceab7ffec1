"""Probe end to end on memory:// and file://, with an injected clock for exact figures."""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path
from typing import Any, ClassVar

import pytest
from fsspec.callbacks import Callback
from fsspec.implementations.local import LocalFileSystem
from fsspec.implementations.memory import MemoryFileSystem

from storeprobe import (
    ConfigurationError,
    Probe,
    Result,
    StoreProbeWarning,
    TargetNotFoundError,
    Workload,
)
from storeprobe.backends import SyncBackend
from storeprobe.notices import Code
from storeprobe.request import Kind, Part, Request
from tests.helpers import StepClock, payload

TINY = Workload(count=8, size="4KiB")


@pytest.fixture
def memfs() -> MemoryFileSystem:
    fs = MemoryFileSystem(skip_instance_cache=True)
    MemoryFileSystem.store.clear()
    MemoryFileSystem.pseudo_dirs[:] = [""]
    return fs


def test_injected_clock_gives_exact_figures(memfs: MemoryFileSystem) -> None:
    probe = Probe(memfs, "/bench", repeats=3, clock=StepClock(10))
    result = probe.upload(Workload.small())
    # one request at a time: two clock reads per request, 256 requests per repeat
    assert [sample.elapsed_ns for sample in result.samples] == [256 * 20 - 10] * 3
    assert result.best_seconds == pytest.approx(5110e-9)
    assert result.bytes_per_s == 4 * 1024**2 / 5110e-9
    assert result.kib_per_s == result.bytes_per_s / 1024
    assert result.mib_per_s == result.bytes_per_s / 1024**2
    assert result.mibit_per_s == 8 * result.bytes_per_s / 1024**2
    assert result.objects_per_s == 256 / 5110e-9
    assert all(sample.latencies_ns.tolist() == [10] * 256 for sample in result.samples)
    assert result.effective_streams == 1
    assert result.ok


@pytest.mark.parametrize("streams", [1, 4])
@pytest.mark.parametrize("operation", ["upload", "download"])
@pytest.mark.parametrize("workload", [TINY, Workload(count=1, size="3MiB")], ids=["many", "one"])
def test_memory_probes_run_verified_and_clean(
    memfs: MemoryFileSystem, streams: int, operation: str, workload: Workload
) -> None:
    memfs.pipe_file("/bench/neighbour.bin", b"keep me")
    probe = Probe(memfs, "/bench", streams=streams, repeats=2)
    if workload.count == 1 and streams == 4 and operation == "upload":
        with pytest.warns(StoreProbeWarning, match="cannot split"):
            result = probe.measure(operation, workload)  # type: ignore[arg-type]
    else:
        result = probe.measure(operation, workload)  # type: ignore[arg-type]
    assert result.ok, result.errors
    assert len(result.samples) == 2
    assert all(sample.nbytes == workload.total_bytes for sample in result.samples)
    assert sorted(MemoryFileSystem.store) == ["/bench/neighbour.bin"]
    assert memfs.cat_file("/bench/neighbour.bin") == b"keep me"
    if workload.count == 1 and streams == 4 and operation == "upload":
        # memory cannot split one object's upload: say so, never pretend
        assert result.effective_streams == 1
        assert Code.CANNOT_SPLIT in [w.code for w in result.warnings]
    elif workload.count == 1 and streams == 4:
        assert result.effective_streams == 3  # 3 MiB in parts of 1 MiB
        assert all(1 <= sample.max_in_flight <= 3 for sample in result.samples)
    else:
        # memory calls are too quick to overlap reliably; the limit is what is proven here
        # (the engine tests and the S3 proxy test prove the limit is reached)
        assert result.effective_streams == streams
        assert all(1 <= sample.max_in_flight <= streams for sample in result.samples)


class FailingMemoryFS(MemoryFileSystem):  # type: ignore[misc]  # fsspec ships no type hints
    """A memory filesystem whose N-th write fails, as a full disk would."""

    fail_at = 5
    writes = 0

    def pipe_file(self, path: str, value: Any, mode: str = "overwrite", **kwargs: Any) -> None:
        type(self).writes += 1
        if type(self).writes == self.fail_at:
            raise OSError(28, "No space left on device")
        super().pipe_file(path, value, mode=mode, **kwargs)


class CorruptingMemoryFS(MemoryFileSystem):  # type: ignore[misc]  # fsspec ships no type hints
    """A memory filesystem that returns one wrong byte on every read."""

    def cat_file(self, path: str, start: Any = None, end: Any = None, **kwargs: Any) -> bytes:
        data = bytearray(super().cat_file(path, start, end, **kwargs))
        data[len(data) // 2] ^= 1
        return bytes(data)


def test_failure_mid_run_is_recorded_and_cleaned_up(memfs: MemoryFileSystem) -> None:
    memfs.pipe_file("/bench/neighbour.bin", b"keep me")
    FailingMemoryFS.writes = 0
    result = Probe(FailingMemoryFS(skip_instance_cache=True), "/bench", repeats=3).upload(TINY)
    assert len(result.errors) == 1
    assert result.errors[0].repeat == 1
    assert result.errors[0].code is Code.REQUEST_FAILED
    assert "No space left" in result.errors[0].message
    assert len(result.samples) == 2
    assert not result.ok
    assert sorted(MemoryFileSystem.store) == ["/bench/neighbour.bin"]
    assert memfs.cat_file("/bench/neighbour.bin") == b"keep me"


def test_verification_failure_is_an_error_never_a_pass(memfs: MemoryFileSystem) -> None:
    memfs.pipe_file("/bench/neighbour.bin", b"keep me")
    result = Probe(CorruptingMemoryFS(skip_instance_cache=True), "/bench", repeats=2).download(TINY)
    assert not result.samples
    assert len(result.errors) == 2
    assert all(error.code is Code.VERIFICATION_FAILED for error in result.errors)
    assert [error.repeat for error in result.errors] == [1, 2]
    assert sorted(MemoryFileSystem.store) == ["/bench/neighbour.bin"]
    assert "failed" in str(result)


def test_verify_false_skips_the_check(memfs: MemoryFileSystem) -> None:
    fs = CorruptingMemoryFS(skip_instance_cache=True)
    assert Probe(fs, "/bench", repeats=1, verify=False).download(TINY).ok


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"streams": 0}, "streams"),
        ({"streams": -1}, "streams"),
        ({"streams": 10_000}, "streams"),
        ({"repeats": 0}, "repeats"),
        ({"timeout": 0}, "timeout"),
        ({"timeout": -1.0}, "timeout"),
        ({"part_size": "1.5MiB"}, "cannot parse"),
        ({"label": "a\x1bb"}, "control characters"),
    ],
)
def test_bad_options_fail_at_construction(
    memfs: MemoryFileSystem, kwargs: dict[str, Any], fragment: str
) -> None:
    with pytest.raises(ConfigurationError, match=fragment) as info:
        Probe(memfs, "/bench", **kwargs)
    assert isinstance(info.value, ValueError)


def test_path_with_scheme_is_rejected(memfs: MemoryFileSystem) -> None:
    with pytest.raises(ConfigurationError, match="from_url"):
        Probe(memfs, "s3://bucket/dir")


def test_bad_workload_argument(memfs: MemoryFileSystem) -> None:
    probe = Probe(memfs, "/bench")
    with pytest.raises(ConfigurationError, match="Workload"):
        probe.upload("small")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="operation"):
        probe.measure("copy", TINY)  # type: ignore[arg-type]


def test_file_probes_write_only_under_their_prefix(tmp_path: Path) -> None:
    neighbour = tmp_path / "neighbour.bin"
    neighbour.write_bytes(b"precious")
    probe = Probe.from_url(f"file://{tmp_path}", streams=4, repeats=2)
    results = probe.run([TINY, Workload(count=1, size="8MiB")])
    assert [r.probe for r in results] == [
        "upload 8 × 4 KiB",
        "download 8 × 4 KiB",
        "upload 1 × 8 MiB",
        "download 1 × 8 MiB",
    ]
    assert all(result.ok for result in results), [r.errors for r in results]
    assert str(results[2].strategy) == "one object in 8 parts of 1 MiB, 4 at a time"
    assert all(1 <= sample.max_in_flight <= 4 for sample in results[2].samples)
    assert os.listdir(tmp_path) == ["neighbour.bin"]
    assert neighbour.read_bytes() == b"precious"
    assert results[0].url == f"file://{tmp_path}"


def test_file_writes_are_create_only(tmp_path: Path) -> None:
    probe = Probe(LocalFileSystem(), str(tmp_path))
    existing = tmp_path / "taken"
    existing.write_bytes(b"mine")
    backend = probe.target.backend
    assert isinstance(backend, SyncBackend)
    put = Request(kind=Kind.PUT, key=str(existing), body=Part(0, 0, 6))
    job = backend.job(put, b"theirs", None, time.perf_counter_ns)
    with pytest.raises(FileExistsError):
        job.call()
    assert existing.read_bytes() == b"mine"


def test_missing_local_root_is_a_clear_error(tmp_path: Path) -> None:
    probe = Probe.from_url(str(tmp_path / "nope"), repeats=1)
    with pytest.raises(TargetNotFoundError, match="does not exist") as info:
        probe.upload(TINY)
    assert isinstance(info.value, FileNotFoundError)


def test_convenience_methods_use_the_seed_workloads(tmp_path: Path) -> None:
    probe = Probe.from_url(str(tmp_path), repeats=1)
    results: list[Result] = [probe.upload_small(), probe.download_small()]
    assert [payload(r).with_seed(0) for r in results] == [Workload.small(seed=0)] * 2
    assert all(r.ok for r in results)
    large = probe.download_large()
    assert payload(large).with_seed(0) == Workload.large(seed=0)
    assert payload(large).seed is not None  # the run recorded the seed it drew
    assert large.ok
    assert os.listdir(tmp_path) == []


class RecordingMemoryFS(MemoryFileSystem):  # type: ignore[misc]  # fsspec ships no type hints
    """A memory filesystem that remembers the digest of every object written to it."""

    written: ClassVar[list[tuple[str, str]]] = []

    def pipe_file(self, path: str, value: bytes, mode: str = "overwrite", **kwargs: Any) -> None:
        RecordingMemoryFS.written.append(
            (path.rsplit("/", 1)[-1], hashlib.sha256(value).hexdigest())
        )
        super().pipe_file(path, value, mode=mode, **kwargs)


def _digests(probe: Probe, workload: Workload) -> dict[str, str]:
    RecordingMemoryFS.written = []
    assert probe.upload(workload).ok
    return dict(RecordingMemoryFS.written)


def test_each_run_writes_fresh_bytes_unless_a_seed_is_given() -> None:
    fs = RecordingMemoryFS(skip_instance_cache=True)
    workload = Workload(count=3, size=1024)
    unseeded = Probe(fs, "/seeds", repeats=2)
    first, second = _digests(unseeded, workload), _digests(unseeded, workload)
    assert set(first) == set(second) == {f"r{r}-{i:07d}" for r in (0, 1) for i in range(3)}
    assert not set(first.values()) & set(second.values())  # two runs, no byte shared
    # repeats within one run differ too
    assert not {first[f"r0-{i:07d}"] for i in range(3)} & {first[f"r1-{i:07d}"] for i in range(3)}
    seeded = Probe(fs, "/seeds", repeats=2, seed=42)
    again = Probe(fs, "/seeds", repeats=2, seed=42)
    assert _digests(seeded, workload) == _digests(again, workload)
    result = seeded.upload(workload)
    assert payload(result).seed == 42  # recorded, so the run's bytes can be reproduced
    # a workload's own seed wins over the probe's
    assert payload(seeded.upload(workload.with_seed(7))).seed == 7


def test_a_drawn_seed_is_recorded_and_reproduces_the_bytes() -> None:
    fs = RecordingMemoryFS(skip_instance_cache=True)
    workload = Workload(count=2, size=2048)
    RecordingMemoryFS.written = []
    result = Probe(fs, "/seeds", repeats=1).upload(workload)
    drawn = dict(RecordingMemoryFS.written)
    assert payload(result).seed is not None
    assert _digests(Probe(fs, "/seeds", repeats=1, seed=payload(result).seed), workload) == drawn


class CountingCallback(Callback):  # type: ignore[misc]  # fsspec ships no type hints
    """Counts the progress updates it receives and the thread that sent them."""

    def __init__(self) -> None:
        super().__init__()
        self.updates = 0

    def call(self, *args: Any, **kwargs: Any) -> None:
        self.updates += 1


def test_progress_is_drawn_off_the_timed_path_at_most_ten_times_a_second() -> None:
    callback = CountingCallback()
    probe = Probe(MemoryFileSystem(skip_instance_cache=True), "/progress", callback=callback)
    result = probe.upload(Workload(count=3000, size=256))
    assert result.ok
    window_s = sum(sample.seconds for sample in result.samples)
    # before: one update per request (9 000); now ≤ 10 per second of window, plus per
    # repeat the size, the first (0), the last (the total) and one tick at the edge
    assert callback.updates <= 10 * window_s + 4 * len(result.samples)
    assert callback.size == Workload(count=3000, size=256).total_bytes
    assert callback.value == callback.size


def test_cannot_split_warning_points_at_the_callers_line(memfs: MemoryFileSystem) -> None:
    probe = Probe(memfs, "/bench", streams=4, repeats=1)
    with pytest.warns(StoreProbeWarning) as caught:
        probe.upload(Workload(count=1, size="3MiB"))
    assert [Path(w.filename).name for w in caught] == [Path(__file__).name]
