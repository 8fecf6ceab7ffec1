"""Retries counted on every S3 client, through a proxy that pushes back.

:class:`~tests.throttle_proxy.ThrottlingProxy` sits in front of a real S3 server
(``rclone serve s3``) and answers every 12th request with ``503 SlowDown`` (or ``429``).
Through s3fs botocore retries them and storeprobe counts them by botocore's event;
through obstore (S3, and Azure in front of Azurite) storeprobe retries them itself
(:mod:`storeprobe.backends.obstore_retries`) and counts them. Either way each Result's
``Sample.retries`` equals the number of timed requests the proxy pushed back on, counted
on the proxy's side, and carries a ``retried`` notice.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import obstore.exceptions
import pytest

from storeprobe import Probe, Workload
from storeprobe.backends.obstore_retries import Retrier, RetryPolicy, retryable
from storeprobe.notices import Code
from storeprobe.request import Outcome
from tests.conftest import s3_options
from tests.servers import Server
from tests.throttle_proxy import ThrottlingProxy

WORKLOAD = Workload(count=30, size="1KiB")


@pytest.fixture(params=[503, 429])
def throttling(request: pytest.FixtureRequest, s3_server: Server) -> Iterator[ThrottlingProxy]:
    proxy = ThrottlingProxy(s3_server.port, every=12, status=request.param).start()
    yield proxy
    proxy.stop()


def _timed(proxy: ThrottlingProxy, method: str) -> int:
    """Requests of the timed window (names ``.../r0-NNNNNNN``) the proxy pushed back on."""
    return sum(1 for m, path in proxy.pushed_back if m == method and "/r0-" in path)


@pytest.mark.s3
@pytest.mark.parametrize("client", ["obstore", "s3fs"])
def test_retries_are_counted(client: str, throttling: ThrottlingProxy) -> None:
    options = s3_options(f"http://127.0.0.1:{throttling.port}")
    probe = Probe.from_url("s3://bench/retries", options, client=client, repeats=1)
    assert probe.target.client == client

    up = probe.upload(WORKLOAD)
    pushed_up = _timed(throttling, "PUT")
    down = probe.download(WORKLOAD)
    pushed_down = _timed(throttling, "GET")

    assert up.ok, up.errors
    assert down.ok, down.errors
    assert pushed_up >= 2  # 30 PUTs: the proxy pushed back on some inside the window
    assert pushed_down >= 2
    assert [sample.retries for sample in up.samples] == [pushed_up]
    assert [sample.retries for sample in down.samples] == [pushed_down]
    assert Code.RETRIED in {notice.code for notice in up.warnings}
    assert Code.RETRIED in {notice.code for notice in down.warnings}


def _error(status: int) -> Exception:
    return obstore.exceptions.GenericError(
        f"Error performing PUT http://127.0.0.1/bench/k - Server returned non-2xx status "
        f"code: {status} Service Unavailable: <Error><Code>SlowDown</Code></Error>"
    )


def test_what_is_retried() -> None:
    assert retryable(_error(503))
    assert retryable(_error(500))
    assert retryable(_error(429))
    assert not retryable(_error(403))
    assert not retryable(_error(404))
    assert retryable(obstore.exceptions.GenericError("HTTP error: error sending request"))
    untrusted = "HTTP error: error sending request ... InvalidCertificate(UnknownIssuer)"
    assert not retryable(obstore.exceptions.GenericError(untrusted))
    assert not retryable(ValueError("503"))  # only obstore's errors


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def _retrier(clock: _Clock, **policy: Any) -> Retrier:
    return Retrier(
        policy=RetryPolicy(**policy),
        sleep=clock.sleep,
        monotonic=lambda: clock.now,
        uniform=lambda low, high: high,  # the longest delay object_store's backoff draws
    )


def test_backoff_and_limits() -> None:
    clock = _Clock()
    retrier = _retrier(clock)
    failures = iter([_error(503)] * 3)

    def call() -> str:
        failure = next(failures, None)
        if failure is not None:
            raise failure
        return "done"

    assert retrier.run(call) == "done"
    assert retrier.retries == 3
    assert clock.slept == [0.1, 0.2, 0.4]  # 100 ms, then up to twice the previous

    def always() -> str:
        raise _error(503)

    with pytest.raises(obstore.exceptions.GenericError):
        retrier.run(always)
    assert retrier.retries == 3 + 4  # at most 4 retries, then the error

    def forbidden() -> str:
        raise _error(403)

    with pytest.raises(obstore.exceptions.GenericError):
        retrier.run(forbidden)
    assert retrier.retries == 7  # never retried


def test_no_retry_after_the_retry_timeout() -> None:
    clock = _Clock()
    retrier = _retrier(clock, retry_timeout_s=0.25, max_backoff_s=1.0)

    def always() -> str:
        raise _error(503)

    with pytest.raises(obstore.exceptions.GenericError):
        retrier.run(always)
    assert clock.slept == [0.1, 0.2]  # the third retry would start after 0.3 s
    assert retrier.retries == 2


def test_the_async_wrapper_retries_likewise() -> None:
    import asyncio

    clock = _Clock()
    calls = []

    async def asleep(seconds: float) -> None:
        clock.sleep(seconds)

    retrier = Retrier(sleep=clock.sleep, async_sleep=asleep, monotonic=lambda: clock.now)

    async def call() -> Outcome:
        calls.append(1)
        if len(calls) == 1:
            raise _error(503)
        return Outcome(sent=1)

    assert asyncio.run(retrier.wrap(call)()) == Outcome(sent=1)
    assert (len(calls), retrier.retries, clock.slept) == (2, 1, [0.1])


def test_obstore_retries_are_counted_on_azure(azure_server: Server) -> None:
    from tests.servers import azure_connection_string

    proxy = ThrottlingProxy(azure_server.port, every=12, status=503).start()
    try:
        options = {"connection_string": azure_connection_string(proxy.port)}
        probe = Probe.from_url("abfs://bench/retries", options, repeats=1)
        assert probe.target.client == "obstore"

        result = probe.upload(WORKLOAD)
        pushed = _timed(proxy, "PUT")
    finally:
        proxy.stop()

    assert result.ok, result.errors
    assert pushed >= 2
    assert [sample.retries for sample in result.samples] == [pushed]
    assert Code.RETRIED in {notice.code for notice in result.warnings}
