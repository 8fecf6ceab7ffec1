"""Many clients on Dask: the window arithmetic, the clock offsets, and real runs of a
LocalCluster of two process workers against the local S3 server (rclone serve s3)."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from distributed import Client

from storeprobe import Code, Probe, Workload, dump_results, load_results
from storeprobe.distributed import (
    SCHEDULER_CONNECT_TIMEOUT_S,
    Window,
    aggregate,
    cluster,
    estimate_offset,
)
from storeprobe.errors import ConfigurationError, TargetUnreachableError
from storeprobe.execution import HOLD, delete_names, hold_prefix
from storeprobe.result import Sample
from storeprobe.subject import Subject, Unit
from tests.conftest import s3_options
from tests.helpers import payload, tree
from tests.http_proxy import CountingProxy
from tests.servers import S3_SECRET, Server

WORKLOAD = Workload(count=8, size="64KiB")


def sample(offsets: list[int], latencies: list[int], nbytes: list[int]) -> Sample:
    starts, lengths = np.array(offsets, np.int64), np.array(latencies, np.int64)
    return Sample(
        nbytes=sum(nbytes),
        elapsed_ns=int((starts + lengths).max() - starts.min()),
        latencies_ns=lengths,
        max_in_flight=1,
        retries=0,
        offsets_ns=starts,
        request_bytes=np.array(nbytes, np.int64),
        workers=np.zeros(len(nbytes), np.int64),
        requests_by_kind={"put": len(nbytes)},
        bytes_sent=sum(nbytes),
    )


# -- arithmetic, with known clocks -------------------------------------------------------------
def test_the_offset_is_read_from_the_shortest_round_trip() -> None:
    # the worker's clock runs 1 000 000 ns ahead; the second round trip is the shortest
    readings = [(0, 1_000_900, 1_000), (5_000, 1_005_100, 5_200), (9_000, 1_010_000, 11_000)]
    offset, uncertainty = estimate_offset(readings)
    assert offset == 1_005_100 - 5_100 == 1_000_000
    assert uncertainty == 100
    with pytest.raises(ValueError, match="no readings"):
        estimate_offset([])


def test_the_aggregate_window_runs_from_the_earliest_start_to_the_latest_end() -> None:
    # worker 0: window [1 000, 1 600] on the common base; worker 1: [1 200, 2 000]
    first = sample([0, 100], [500, 500], [10, 20])
    second = sample([0], [800], [40])
    windows = [Window(1_000, 1_600), Window(1_200, 2_000)]
    merged, spread = aggregate([first, second], windows)
    assert merged.nbytes == 70
    assert merged.elapsed_ns == 1_000
    assert spread == 200
    assert merged.offsets_ns.tolist() == [0, 100, 200]
    assert merged.latencies_ns.tolist() == [500, 500, 800]
    assert merged.workers.tolist() == [0, 0, 1]
    assert merged.requests_by_kind == {"put": 3}
    assert merged.bytes_sent == 70
    assert merged.cpu_ns is None
    # bytes over the common window: 70 bytes in 1 000 ns
    assert merged.bytes_per_s == pytest.approx(70 / 1e-6)


def test_offsets_move_each_worker_onto_the_coordinators_clock() -> None:
    # the same instant read on two clocks: worker 1's clock is 5 000 ns behind
    first = sample([0], [1_000], [8])
    second = sample([0], [1_000], [8])
    offsets = (0, -5_000)
    on_worker_clocks = [(10_000, 11_000), (5_000, 6_000)]
    windows = [Window(s - o, e - o) for (s, e), o in zip(on_worker_clocks, offsets, strict=True)]
    merged, spread = aggregate([first, second], windows)
    assert spread == 0
    assert merged.elapsed_ns == 1_000


# -- bad input ---------------------------------------------------------------------------------
def test_a_distributed_probe_says_what_it_needs() -> None:
    import fsspec

    with pytest.raises(ConfigurationError, match="memory:// lives inside one process"):
        Probe.from_url("memory://bench").distributed(workers=2)
    with pytest.raises(ConfigurationError, match="made from a URL"):
        Probe(fsspec.filesystem("file"), "/tmp").distributed(workers=2)
    with pytest.raises(ConfigurationError, match="workers must be a positive int"):
        Probe.from_url("file:///tmp").distributed(workers=0)
    with pytest.raises(ConfigurationError, match="say how many workers"):
        Probe.from_url("file:///tmp").distributed()


# -- real runs ---------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def two_workers() -> Iterator[Client]:
    with cluster(2) as client:
        yield client


def test_a_scheduler_is_reached_by_its_address(two_workers: Client) -> None:
    assert two_workers.scheduler is not None  # a connected client
    address = two_workers.scheduler.address
    with cluster(scheduler=address, connect_timeout=SCHEDULER_CONNECT_TIMEOUT_S) as client:
        assert len(client.run_on_scheduler(_worker_addresses)) == 2


def _worker_addresses(dask_scheduler: Any) -> list[str]:
    return sorted(dask_scheduler.workers)


def test_a_port_where_no_scheduler_answers_fails_within_the_timeout() -> None:
    import socket
    import time

    with socket.socket() as silent:  # accepts connections (the kernel does), never speaks
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        address = f"tcp://127.0.0.1:{silent.getsockname()[1]}"
        began = time.monotonic()
        with (
            pytest.raises(TargetUnreachableError, match=r"no answer within 0\.5 s"),
            cluster(scheduler=address, connect_timeout=0.5),
        ):
            pass
        # Dask alone would wait for the handshake for ever; the bound is the timeout
        assert time.monotonic() - began < 30


def test_a_scheduler_address_dask_cannot_parse_is_a_usage_error() -> None:
    with (
        pytest.raises(ConfigurationError, match="is not a Dask address"),
        cluster(scheduler="tcp://127.0.0.1:port"),
    ):
        pass


def s3_probe(endpoint: str, **options: Any) -> Probe:
    return Probe.from_url("s3://bench/fleet", s3_options(endpoint), **options)


def test_the_held_object_keeps_the_run_prefix_while_a_worker_empties_its_folder(
    s3_server: Server, s3_bucket_dir: Path
) -> None:
    # rclone serve s3 keeps objects as files and removes a folder, and its emptied parents,
    # with the folder's last object: without the held object a worker deleting its last
    # object removes the run prefix another worker is creating its folder in
    target = s3_probe(s3_server.endpoint).target
    prefix = target.new_prefix()
    held = hold_prefix(target, prefix, 30.0)
    assert held == f"{prefix}/{HOLD}"
    fs = target.backend.fs
    fs.pipe_file(f"{prefix}/w0/r0-0000000", b"x" * 1024)
    fs.rm_file(f"{prefix}/w0/r0-0000000")
    run = s3_bucket_dir / prefix.removeprefix("bench/")
    assert run.is_dir()
    assert [path.name for path in run.iterdir()] == [HOLD]
    assert delete_names(target, [held], streams=1, clock=time.perf_counter_ns, timeout=30.0) == []
    assert not run.exists()


@pytest.mark.parametrize("operation", ["upload", "download"])
def test_two_workers_move_their_bytes_on_one_window(
    two_workers: Client, s3_server: Server, s3_bucket_dir: Path, operation: str
) -> None:
    before = tree(s3_bucket_dir)
    probe = s3_probe(s3_server.endpoint, streams=2, repeats=2)
    result = probe.distributed(client=two_workers).measure(operation, WORKLOAD)  # type: ignore[arg-type]
    assert result.ok, result.errors
    fleet = result.fleet
    assert fleet is not None
    assert fleet.workers == 2
    assert result.streams == 4
    assert fleet.streams_per_worker == 2
    assert len(result.samples) == 2
    assert len(fleet.start_spread_ns) == 2
    members = [member.result for member in fleet.members]
    assert all(member is not None and member.ok for member in members)
    for repeat, merged in enumerate(result.samples):
        parts = [member.samples[repeat] for member in members if member is not None]
        assert merged.nbytes == sum(part.nbytes for part in parts) == 2 * WORKLOAD.total_bytes
        # the common window holds each worker's window: never shorter than the longest
        assert merged.elapsed_ns >= max(part.elapsed_ns for part in parts)
        assert sorted(set(merged.workers.tolist())) == [0, 1]
    # the aggregate counts the fleet's objects; each member holds its own workload
    assert result.subject == Subject(
        unit=Unit.BYTES_PER_S,
        operations=2 * WORKLOAD.count,
        label="2 workers × 8 × 64 KiB",
        shape="16 × 64 KiB",
        description="2 workers × 8 × 64 KiB (16 × 64 KiB)",
        object_size=64 * 1024,
    )
    assert result.workload is None
    assert [payload(m).total_bytes for m in members if m is not None] == [WORKLOAD.total_bytes] * 2
    # on one machine the clocks agree: every offset lies within its uncertainty of 0
    for member in fleet.members:
        assert abs(member.offset_ns) <= member.uncertainty_ns
    # each worker wrote its own content: no two workers' seeds are the same
    seeds = {payload(member).seed for member in members if member is not None}
    assert len(seeds) == 2
    # the result survives its JSON document, workers included
    again = load_results(dump_results([result]))[0]
    assert again.fleet == result.fleet
    assert tree(s3_bucket_dir) == before


def test_workers_warm_up_outside_the_common_windows(
    two_workers: Client, s3_server: Server, s3_bucket_dir: Path
) -> None:
    before = tree(s3_bucket_dir)
    probe = s3_probe(s3_server.endpoint, repeats=2, warmup=1)
    result = probe.distributed(client=two_workers).upload(WORKLOAD)

    assert result.ok, result.errors
    assert len(result.samples) == 2  # the common windows: the measured repeats only
    assert result.fleet is not None
    members = [member.result for member in result.fleet.members]
    assert all(member is not None and member.ok for member in members)
    assert all(member is not None and len(member.warmup_samples) == 1 for member in members)
    assert all(member is not None and len(member.samples) == 2 for member in members)
    assert tree(s3_bucket_dir) == before


def test_credentials_never_reach_logs_keys_or_results(
    two_workers: Client, s3_server: Server, s3_bucket_dir: Path
) -> None:
    probe = s3_probe(s3_server.endpoint, repeats=1)
    distributed = probe.distributed(client=two_workers)
    result = distributed.upload(WORKLOAD)
    assert result.ok, result.errors
    # a task that fails with the recipe among its arguments: Dask logs the arguments
    recipe = probe.target.recipe
    future = two_workers.submit(_fail_with, recipe, key="storeprobe-failing-on-purpose", pure=False)
    with pytest.raises(RuntimeError, match="on purpose"):
        future.result()
    client: Any = two_workers  # distributed's logs and run_on_scheduler have no annotations
    texts = [
        repr(distributed),
        repr(recipe),
        dump_results([result]),
        str(client.get_scheduler_logs()),
        str(client.get_worker_logs()),
        str(client.run_on_scheduler(_task_keys)),
    ]
    assert "options=<" in texts[1]
    for text in texts:
        assert S3_SECRET not in text


def _fail_with(recipe: object) -> None:
    raise RuntimeError(f"failing on purpose with {recipe!r}")


def _task_keys(dask_scheduler: Any) -> list[str]:
    return [str(key) for key in dask_scheduler.tasks]


def test_a_killed_worker_is_an_error_and_every_prefix_is_cleaned(
    s3_bucket_dir: Path, counting_proxy: CountingProxy
) -> None:
    before = tree(s3_bucket_dir)
    with cluster(2) as client:
        pids: dict[str, int] = client.run(os.getpid)
        victim = pids[sorted(pids)[1]]  # the coordinator's w1: the second address
        killed: list[str] = []

        def kill_w1(method: str, path: str, number: int) -> None:
            if "/w1/" in path and method == "PUT" and not killed:
                killed.append(path)
                os.kill(victim, signal.SIGKILL)

        counting_proxy.fail_when = kill_w1
        try:
            probe = s3_probe(f"http://127.0.0.1:{counting_proxy.port}", repeats=3)
            result = probe.distributed(client=client).upload(Workload(count=32, size="16KiB"))
        finally:
            counting_proxy.fail_when = None
    assert killed, "worker w1 never wrote"
    assert not result.ok
    failed = [notice for notice in result.errors if notice.code is Code.WORKER_FAILED]
    assert failed
    assert "w1" in failed[0].message
    assert "lost" in failed[0].message
    assert result.samples == ()  # never a figure from one worker called the fleet's
    assert result.fleet is not None
    assert result.fleet.members[1].result is None
    assert tree(s3_bucket_dir) == before


def test_the_command_line_runs_a_probe_on_two_workers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from storeprobe.cli import main

    saved = tmp_path / "fleet.json"
    target = tmp_path / "target"
    target.mkdir()
    argv = ["run", str(target), "--workers", "2", "--workload", "4x64KiB", "--repeats", "1"]
    assert main([*argv, "--per-worker", "--json", str(saved)]) == 0
    out = capsys.readouterr().out
    assert "2 workers × 4 × 64 KiB" in out
    assert "each worker" in out
    results = load_results(saved.read_text())
    assert [r.fleet.workers for r in results if r.fleet is not None] == [2, 2]
    assert list(target.iterdir()) == []
