"""Accuracy on a link of known speed and latency.

Bandwidth: a network namespace whose loopback is shaped by tbf to 40 Mbit/s runs
``rclone serve s3``; inside it, one raw TCP transfer measures the payload rate the link
really carries (TCP/IP headers take ~4 % of the shaped rate), and storeprobe's large
upload and download (best of 3, the default) must read within ±5 % of that reference.

Latency: a proxy of our own delays every byte by 40 ms each way; the per-request latency
and time to first byte of small downloads must show at least the added 80 ms round trip.
"""

from __future__ import annotations

from pathlib import Path

from storeprobe import Probe, Result, Workload
from tests.conftest import s3_options
from tests.delay_proxy import DelayProxy
from tests.servers import Server
from tests.shaped_link import shaped_link

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
