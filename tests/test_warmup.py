"""Warm-up repeats (``warmup=N``, ``--warmup N``): run as measured ones, counted in nothing.

An injected clock makes the first window slow (cold connections, as on a real network):
with a warm-up repeat it lands in ``warmup_samples`` and no figure, statistic or warning
counts it; without one it is a measured repeat and the ``warm-up`` warning advises
``warmup=1`` (``--warmup 1`` on the command line).
"""

from __future__ import annotations

import json
import math
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fsspec.implementations.memory import MemoryFileSystem

from storeprobe import ConfigurationError, Probe, Result, Settings, Workload
from storeprobe.cli import main
from storeprobe.html_report import run_command
from storeprobe.notices import Code
from storeprobe.render import results_table
from storeprobe.stats import stability_notices

#: 4 objects at one stream: two clock reads per request, 8 per window
WORKLOAD = Workload(count=4, size="1KiB", seed=5)
READS_PER_WINDOW = 2 * WORKLOAD.count


class ColdFirstClock:
    """A ns clock that steps ``cold`` for its first ``reads`` reads, then ``warm``."""

    def __init__(self, reads: int, cold: int = 1000, warm: int = 10) -> None:
        self.now = 0
        self.count = 0
        self.reads, self.cold, self.warm = reads, cold, warm
        self.lock = threading.Lock()

    def __call__(self) -> int:
        with self.lock:
            self.count += 1
            self.now += self.cold if self.count <= self.reads else self.warm
            return self.now


@pytest.fixture
def memfs() -> MemoryFileSystem:
    fs = MemoryFileSystem(skip_instance_cache=True)
    MemoryFileSystem.store.clear()
    MemoryFileSystem.pseudo_dirs[:] = [""]
    fs.mkdir("/bench")
    return fs


def _probe(fs: MemoryFileSystem, warmup: int, repeats: int = 3) -> Probe:
    clock = ColdFirstClock(READS_PER_WINDOW)
    return Probe(fs, "/bench", repeats=repeats, warmup=warmup, clock=clock, prep_streams=1)


@pytest.mark.parametrize("bad", [-1, 1.5, True, "1", 1001])
def test_warmup_must_be_an_int_from_0(bad: Any) -> None:
    with pytest.raises(ConfigurationError, match=r"warmup must be an int from 0 to 1000"):
        Settings(warmup=bad)
    with pytest.raises(ConfigurationError, match=r"warmup must be an int from 0"):
        Probe(MemoryFileSystem(), "/bench", warmup=bad)
    assert Settings().warmup == 0
    assert Settings(warmup=0).warmup == 0


def test_a_warm_up_repeat_runs_as_the_others_and_counts_in_nothing(
    memfs: MemoryFileSystem,
) -> None:
    result = _probe(memfs, warmup=1).upload(WORKLOAD)

    assert result.ok, result.errors
    cold = READS_PER_WINDOW * 1000 - 1000  # the first window: every read stepped 1000 ns
    warm = READS_PER_WINDOW * 10 - 10
    assert [s.elapsed_ns for s in result.warmup_samples] == [cold]
    assert [s.elapsed_ns for s in result.samples] == [warm] * 3
    # the same window as a measured one: its requests and bytes
    (warmup,) = result.warmup_samples
    assert warmup.nbytes == result.samples[0].nbytes == WORKLOAD.total_bytes
    assert warmup.requests_by_kind == result.samples[0].requests_by_kind
    # no figure counts it
    assert result.best_seconds == result.median_seconds == warm / 1e9
    assert result.throughput.n == 3
    assert result.throughput.cv == 0
    assert result.latency.n == 3 * WORKLOAD.count
    codes = {notice.code for notice in result.warnings}
    assert not codes & {Code.WARM_UP, Code.HIGH_VARIATION}, codes
    # everything written is gone: the warm-up's own names too
    assert memfs.find("/bench") == []


def test_a_download_warms_up_verified(memfs: MemoryFileSystem) -> None:
    result = Probe(memfs, "/bench", repeats=2, warmup=1, prep_streams=1).download(WORKLOAD)

    assert result.ok, result.errors
    assert len(result.warmup_samples) == 1
    assert len(result.samples) == 2
    assert result.warmup_samples[0].requests_by_kind == result.samples[0].requests_by_kind
    assert memfs.find("/bench") == []


def test_without_a_warm_up_the_notice_advises_one(memfs: MemoryFileSystem) -> None:
    result = _probe(memfs, warmup=0).upload(WORKLOAD)

    assert result.warmup_samples == ()
    assert result.samples[0].elapsed_ns > result.samples[1].elapsed_ns
    (notice,) = [n for n in result.warnings if n.code is Code.WARM_UP]
    assert notice.repeat == 1
    assert notice.fix == "discard it or add a warm-up repeat (warmup=1)"
    assert notice.cli_fix == "discard it or add a warm-up repeat (--warmup 1)"
    assert (notice.option, notice.value) == ("warmup", "1")


def test_the_notice_is_not_given_after_a_warm_up() -> None:
    arrays = (np.array([1.0, 1.6, 1.6, 1.6]), np.array([1.6e9, 1e9, 1e9, 1e9]))
    cpu = np.full(4, math.nan)
    codes = [
        [
            n.code
            for n in stability_notices(
                *arrays, cpu, operation="upload", remote=False, warmup=warmup
            )
        ]
        for warmup in (0, 1)  # 0: the default
    ]
    assert Code.WARM_UP in codes[0]
    assert Code.WARM_UP not in codes[1]


def test_warm_up_samples_round_trip_and_old_documents_load(memfs: MemoryFileSystem) -> None:
    result = _probe(memfs, warmup=2).upload(WORKLOAD)
    assert len(result.warmup_samples) == 2

    again = Result.from_json(result.to_json())
    assert again == result
    assert [s.elapsed_ns for s in again.warmup_samples] == [
        s.elapsed_ns for s in result.warmup_samples
    ]
    document = json.loads(result.to_json())
    (record,) = document["results"]
    del record["warmup_samples"]  # a document written before warm-ups existed
    old = Result.from_json(json.dumps(document))
    assert old.warmup_samples == ()
    assert old.samples == result.samples


def test_the_line_and_the_table_say_how_many_warm_ups_ran(memfs: MemoryFileSystem) -> None:
    warmed = _probe(memfs, warmup=1).upload(WORKLOAD)
    plain = _probe(memfs, warmup=0, repeats=2).upload(WORKLOAD)

    assert " best of 3 after 1 warm-up (median " in str(warmed)
    assert "warm-up" not in str(plain).split(";")[0]
    rows = [[cell.text for cell in row] for row in results_table([warmed, plain]).rows]
    assert rows[0][-1] == "3/3 +1 warm-up"
    assert rows[1][-1] == "2/2"
    assert "warm-up repeats" in warmed._repr_html_()
    assert "--repeats 3 --warmup 1" in run_command([warmed])
    assert "--warmup" not in run_command([plain])


def test_a_failed_warm_up_is_an_error_named_as_one(memfs: MemoryFileSystem) -> None:
    calls = {"n": 0}
    original = memfs.pipe_file

    def fail_first(path: str, value: bytes, *args: Any, **kwargs: Any) -> None:
        calls["n"] += 1
        if calls["n"] == 1:
            raise OSError("injected failure")
        original(path, value, *args, **kwargs)

    memfs.pipe_file = fail_first
    result = Probe(memfs, "/bench", repeats=2, warmup=1, prep_streams=1).upload(WORKLOAD)

    assert len(result.samples) == 2
    assert result.warmup_samples == ()
    (error,) = result.errors
    assert error.repeat is None
    assert error.message.startswith("warm-up repeat 1: ")
    assert "injected failure" in error.message


def test_metadata_probes_warm_up_too(memfs: MemoryFileSystem) -> None:
    result = Probe(memfs, "/bench", repeats=2, warmup=1).metadata("head", count=3)

    assert result.ok, result.errors
    assert len(result.warmup_samples) == 1
    assert len(result.samples) == 2
    assert memfs.find("/bench") == []


@pytest.mark.parametrize("command", ["run", "sweep"])
def test_the_cli_runs_warm_ups(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "results.json"
    argv = [command, "memory://cli-warmup", "--workload", "2x1KiB", "--repeats", "2"]
    if command == "sweep":
        argv += ["--operation", "upload", "--streams", "1"]
    assert main([*argv, "--warmup", "1", "--no-progress", "--json", str(out)]) == 0

    shown = capsys.readouterr().out
    assert "2/2 +1 warm-up" in shown
    entries = json.loads(out.read_text())["results"]
    assert entries
    assert all(len(entry["warmup_samples"]) == 1 for entry in entries)
    assert all(len(entry["samples"]) == 2 for entry in entries)


def test_the_cli_refuses_a_negative_warmup(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--warmup", "-1"]) == 2
    assert "--warmup -1 is out of range" in capsys.readouterr().err
