"""Accuracy on a link of known speed and latency.

Bandwidth: a network namespace whose loopback is shaped by tbf to 40 Mbit/s runs
``rclone serve s3``; inside it, one raw TCP transfer measures the payload rate the link
really carries (TCP/IP headers take ~4 % of the shaped rate), and storeprobe's large
upload and download (best of 3, the default) must read within ±5 % of that reference.

Latency: a proxy of our own delays every byte by 40 ms each way; the per-request latency
and time to first byte of small downloads must show at least the added 80 ms round trip.

Round trips: behind a 20 ms round trip (10 ms each way), the small-object upload and
download at one stream take within 3 % of the time a bare obstore loop takes for the same
requests through the same proxy (:mod:`tests.bare_obstore`), the two measured in
alternation and compared by a figure the load of this shared machine hardly moves (see
``_undisturbed_s``); and never faster than the link allows: each request waits at least
one round trip, so at one stream objects/s ≤ 1 / RTT.
"""

from __future__ import annotations

import contextlib
import statistics
from pathlib import Path
from typing import Literal

import pytest

from storeprobe import Probe, Result, Sample, Workload
from tests.bare_obstore import BareObstore, Window
from tests.conftest import s3_options
from tests.delay_proxy import DelayProxy, delay_process
from tests.servers import Server
from tests.shaped_link import shaped_link

#: timings compared: no other test runs beside these (tests/quiet.py)
pytestmark = pytest.mark.quiet

SIZE = 16 * 1024**2
RATE_MBIT = 40


def test_large_transfers_read_within_5_percent_of_the_link(tmp_path: Path) -> None:
    with shaped_link(RATE_MBIT) as link, link.rclone_s3(tmp_path / "s3root") as endpoint:
        reference = link.raw_tcp_rate(SIZE)
        for operation in ("upload", "download"):
            # the probe's headline figure, best of 3 as by default: one stalled transfer
            # (seen once in CI: -11 %) is what repeats are for
            result = Result.from_dict(link.probe(endpoint, SIZE, operation, repeats=3))
            assert result.ok, result.errors
            error = result.bytes_per_s / reference - 1
            assert abs(error) <= 0.05, f"{operation}: {error:+.2%} against raw TCP"
    # the reference itself is below the nominal rate by the header overhead, not more
    assert 0.90 * RATE_MBIT * 1e6 / 8 <= reference <= RATE_MBIT * 1e6 / 8


def test_added_latency_shows_in_latency_and_time_to_first_byte(s3_server: Server) -> None:
    workload = Workload(count=12, size="4KiB")
    direct = Probe.from_url("s3://bench/latency", s3_options(s3_server.endpoint), repeats=1)
    baseline = direct.download(workload)
    proxy = DelayProxy(s3_server.port, delay_s=0.040).start()
    try:
        delayed = Probe.from_url(
            "s3://bench/latency", s3_options(f"http://127.0.0.1:{proxy.port}"), repeats=1
        ).download(workload)
    finally:
        proxy.stop()
    assert baseline.ok
    assert delayed.ok
    added = 0.080e9  # ns: 40 ms each way
    assert delayed.latency.p50 is not None
    assert baseline.latency.p50 is not None
    assert delayed.ttfb.p50 is not None
    assert baseline.ttfb.p50 is not None
    assert delayed.latency.p50 >= added
    assert delayed.ttfb.p50 >= added
    assert delayed.latency.p50 - baseline.latency.p50 >= 0.9 * added
    assert delayed.ttfb.n == workload.count


ROUND_TRIP_S = 0.020
#: 32 objects: a window of about 0.7 s, of which the 20 ms round trips are 90 %
ROUND_TRIP_WORKLOAD = Workload(count=32, size="16KiB", seed=21)
ROUNDS = 4


def _undisturbed_s(latencies_s: list[float], gaps_s: list[float], count: int) -> float:
    """A window of ``count`` requests at one stream, as an unloaded machine would time it:
    ``count`` times the least-disturbed request, plus the median gap between requests.

    At one stream a window is exactly the sum of its requests' latencies plus the gaps
    between them. On this shared 2-core machine other work delays some requests of
    either side by milliseconds: at a load average of 12-14, windows of the same client
    ranged over 0.73-1.37 s, the best of five windows of one side differed from the
    other's by up to 10 %, and the first quartile of every request's latency (all windows
    pooled, the sides alternated) by up to 7.7 %, while the fastest request of each side
    differed by under 2 %. A client that added time to every request, or between requests,
    moves this figure as it would the best window; time added to some requests only is
    what the request count and the physical bound below check."""
    return count * min(latencies_s) + statistics.median(gaps_s)


@pytest.mark.parametrize("operation", ["upload", "download"])
def test_small_objects_behind_a_round_trip_read_as_a_bare_client(
    s3_server: Server, operation: Literal["upload", "download"]
) -> None:
    workload, count = ROUND_TRIP_WORKLOAD, ROUND_TRIP_WORKLOAD.count
    # the proxy in a process of its own: in this one it would compete with the clients it
    # delays for the interpreter's lock (see delay_process)
    proxy = contextlib.ExitStack()
    port = proxy.enter_context(delay_process(s3_server.port, ROUND_TRIP_S / 2))
    endpoint = f"http://127.0.0.1:{port}"
    bare = BareObstore(endpoint)
    payloads = [workload.payload_bytes(i) for i in range(count)]
    samples: list[Sample] = []
    windows: list[Window] = []
    try:
        probe = Probe.from_url("s3://bench/round-trip", s3_options(endpoint), repeats=1)
        for turn in range(ROUNDS):  # alternated: storeprobe, bare, bare, storeprobe, ...
            for side in ("probe", "bare") if turn % 2 == 0 else ("bare", "probe"):
                if side == "bare":
                    windows.append(bare.window(operation, payloads))
                    continue
                result = probe.measure(operation, workload)
                assert result.ok, result.errors
                # the requests of the bare loop: one whole-object request each, one at a time
                (sample,) = result.samples
                assert sample.requests_by_kind == {"put" if operation == "upload" else "get": count}
                assert sample.max_in_flight == 1
                # the physical bound: each request waits at least one round trip
                assert result.objects_per_s <= 1 / ROUND_TRIP_S
                assert sample.latencies_ns.min() >= ROUND_TRIP_S * 1e9
                samples.append(sample)
    finally:
        bare.close()
        proxy.close()
    probe_latencies = [float(ns) / 1e9 for s in samples for ns in s.latencies_ns]
    # the window holds every request whole: the gaps between them are never negative
    probe_gaps = [(s.elapsed_ns - int(s.latencies_ns.sum())) / 1e9 for s in samples]
    assert min(probe_gaps) >= 0
    bare_latencies = [latency for window in windows for latency in window.latencies]
    bare_gaps = [window.seconds - sum(window.latencies) for window in windows]
    assert min(bare_latencies) >= ROUND_TRIP_S  # the proxy adds what it says

    probe_s = _undisturbed_s(probe_latencies, probe_gaps, count)
    bare_s = _undisturbed_s(bare_latencies, bare_gaps, count)
    ratio = bare_s / probe_s  # storeprobe's throughput ÷ the bare loop's
    best = min(s.seconds for s in samples), min(window.seconds for window in windows)
    assert abs(ratio - 1) <= 0.03, (
        f"{operation}: storeprobe {probe_s:.4f} s, bare obstore {bare_s:.4f} s undisturbed "
        f"for {count} objects ({ratio - 1:+.2%}); best windows {best[0]:.4f} / {best[1]:.4f} s"
    )
