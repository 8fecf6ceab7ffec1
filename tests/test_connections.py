"""Connections are reused across repeats: the first window pays for them, later ones do not.

``rclone serve s3`` on loopback behind a TCP proxy that counts, server side, the
connections it accepts (:class:`tests.delay_proxy.DelayProxy` with no delay). A
:class:`~storeprobe.measurement.Gate` that holds nothing reads the count as each window
opens and after it closes. 3 repeats of 32 small uploads, through obstore and s3fs:

- at one stream, the untimed work before the first window (the root check, the
  conditional-write check, one request at a time) has opened the connection the windows
  use: no window opens one, and nothing opens one between windows;
- at 8 streams, the first window opens the connections its 8 requests in flight need
  beyond the one already open; the later windows open none;
- with ``warmup=1`` the warm-up repeat pays them: no measured window opens one.

A count over a whole probe is not a fair test: obstore sometimes opens a second
connection during the untimed work before the first window (seen here: 6 or 7 of 6
probes, the 5 connects of the environment's round-trip figure included), whatever the
number of repeats.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from storeprobe import Probe, Workload
from storeprobe.measurement import Measurement
from tests.conftest import s3_options
from tests.delay_proxy import DelayProxy
from tests.servers import Server

pytestmark = pytest.mark.s3

WORKLOAD = Workload(count=32, size="1KiB", seed=1)


@pytest.fixture
def proxy(s3_server: Server) -> Iterator[DelayProxy]:
    counting = DelayProxy(s3_server.port, delay_s=0).start()
    yield counting
    counting.stop()


class _Counting:
    """A :class:`~storeprobe.measurement.Gate` that holds nothing: it reads the proxy's
    connection count as each measured window opens and after it closes."""

    def __init__(self, proxy: DelayProxy) -> None:
        self.proxy = proxy
        self.before: list[int] = []
        self.after: list[int] = []

    def wait(self, repeat: int) -> None:
        self.before.append(self.proxy.connections)

    def opened(self, repeat: int, start_ns: int, end_ns: int) -> None:
        self.after.append(self.proxy.connections)

    def abandon(self, repeat: int) -> None:
        raise AssertionError(f"repeat {repeat + 1} failed")


def _windows(proxy: DelayProxy, client: str, streams: int, warmup: int) -> _Counting:
    """The connection counts around each measured window of a fresh probe's upload."""
    options = s3_options(f"http://127.0.0.1:{proxy.port}")
    probe = Probe.from_url(
        "s3://bench/connections",
        options,
        client=client,
        streams=streams,
        prep_streams=1,
        repeats=3,
        warmup=warmup,
    )
    gate = _Counting(proxy)
    start = proxy.connections
    result = Measurement(
        target=probe.target,
        operation="upload",
        workload=WORKLOAD,
        settings=probe.settings,
        clock=probe.clock,
        callback=None,
        gate=gate,
    ).run()
    assert result.ok, result.errors
    assert result.backend == client
    assert len(result.samples) == 3
    assert len(result.warmup_samples) == warmup
    assert all(sample.requests_by_kind == {"put": 32} for sample in result.samples)
    assert gate.before[0] > start  # the probe went through the proxy
    return gate


@pytest.mark.parametrize("client", ["obstore", "s3fs"])
@pytest.mark.parametrize(("streams", "warmup"), [(1, 0), (8, 0), (8, 1)])
def test_later_repeats_reuse_the_first_repeats_connections(
    proxy: DelayProxy, client: str, streams: int, warmup: int
) -> None:
    gate = _windows(proxy, client, streams, warmup)

    opened = [after - before for before, after in zip(gate.before, gate.after, strict=True)]
    between = [gate.before[n + 1] - gate.after[n] for n in range(2)]
    # from the end of the first measured window on, nothing opens a connection: 64 PUTs,
    # their deletes and the next repeats' untimed requests reuse those already open
    assert opened[1:] == [0, 0], opened
    assert between == [0, 0], between
    if streams == 1 or warmup:
        assert opened[0] == 0, opened  # paid before: by the untimed work, or the warm-up
    else:
        # 8 requests in flight after one at a time: the first window opens at least one
        # (7 here: one was open) and pays its handshakes
        assert 1 <= opened[0] <= streams, opened
