"""Retries and pushback counted on every HTTP client, through a proxy that pushes back.

:class:`~tests.throttle_proxy.ThrottlingProxy` sits in front of a real server
(``rclone serve s3``, gcp-storage-emulator, Azurite) and answers every Nth request with
``503 SlowDown`` or ``429``, in turn. Through s3fs botocore retries them and storeprobe
counts them by botocore's event; through gcsfs its ``retry_request`` retries them and
storeprobe counts each attempt inside that loop; through adlfs the Azure SDK's retry
policy retries them and storeprobe counts through its ``retry_hook``; through obstore
(S3, and Azure in front of Azurite) storeprobe retries them itself
(:mod:`storeprobe.backends.obstore_retries`) and counts them. Every way, each Result's
``Sample.retries`` equals the number of timed requests the proxy pushed back on,
``Sample.responses`` the timed requests the proxy saw (each got an answer: its own or
the server's), ``busy_fraction`` their ratio, all counted on the proxy's side, and the
Result carries a ``retried`` notice. sshfs is not here: neither sshfs nor asyncssh
retries anything (docs/backends.md).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import attrs
import obstore.exceptions
import pytest

from storeprobe import Probe, Result, Tree, Workload
from storeprobe.backends.obstore_retries import Retrier, RetryPolicy, retryable
from storeprobe.notices import Code
from storeprobe.request import Outcome
from tests.conftest import gcs_options, s3_options
from tests.helpers import gcs_emulator_seed
from tests.http_proxy import CountingProxy
from tests.servers import Server, azure_connection_string
from tests.throttle_proxy import ThrottlingProxy

WORKLOAD = Workload(count=30, size="1KiB")


@pytest.fixture(params=[503, 429])
def throttling(request: pytest.FixtureRequest, s3_server: Server) -> Iterator[ThrottlingProxy]:
    proxy = ThrottlingProxy(s3_server.port, every=12, status=request.param).start()
    yield proxy
    proxy.stop()


def _timed(proxy: ThrottlingProxy, method: str) -> int:
    """Requests of the timed window (names ``.../r0-NNNNNNN``) the proxy pushed back on."""
    return sum(1 for m, path, _ in proxy.pushed_back if m == method and "/r0-" in path)


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
    assert not retryable(_error(501))  # not implemented: the fallback decides, at once
    assert retryable(obstore.exceptions.GenericError("HTTP error: error sending request"))
    untrusted = "HTTP error: error sending request ... InvalidCertificate(UnknownIssuer)"
    assert not retryable(obstore.exceptions.GenericError(untrusted))
    assert not retryable(ValueError("503"))  # only obstore's errors
    # transport errors by object_store's kind, read from the error's debug form: not
    # sent or not answered, always; cut off or timed out, when sending again is harmless
    for kind, always in (("Connect", True), ("Request", True), ("Interrupted", False)):
        error = _transport(kind)
        assert retryable(error)
        assert retryable(error, idempotent=False) is always
    assert retryable(_transport("Timeout"))
    assert not retryable(_transport("Decode"))
    assert not retryable(_transport("Unknown"))
    # a GET's body cut off is retried whatever its kind, as object_store's GET stream is
    assert retryable(_transport("Unknown"), read=True)
    assert retryable(_transport("Decode"), read=True)
    bare = (
        "Generic S3 error: Error performing GET http://h/b/k in 22ms - HTTP error: "
        "request or response body error"
    )
    assert retryable(obstore.exceptions.GenericError(bare), read=True)  # no debug form
    assert not retryable(obstore.exceptions.GenericError(bare))
    assert not retryable(FileNotFoundError("Object at location k not found"))  # a 404


def _transport(kind: str) -> Exception:
    """An obstore error for a transport failure of ``kind``, as obstore words one (the
    text of a GET whose answer a server cut off by a reset, kind Interrupted)."""
    return obstore.exceptions.GenericError(
        "Generic S3 error: HTTP error: request or response body error\n\nDebug source:\n"
        'Generic {\n    store: "S3",\n    source: HttpError {\n'
        f"        kind: {kind},\n        source: reqwest::Error {{\n"
        "            kind: Body,\n            source: hyper::Error(Body, Os { code: 104, "
        "kind: ConnectionReset }),\n        },\n    },\n}"
    )


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

    async def wrapped() -> Outcome:
        return await retrier.wrap(call)()

    assert asyncio.run(wrapped()) == Outcome(sent=1)
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


# --- every client: retries, answers and the busy share, proxy-side counts -------------
#: a request on one of the timed window's objects (``.../r0-NNNNNNN``)
_OBJECT = re.compile(r"/r0-\d")


def _s3_window(method: str, path: str) -> str | None:
    """Which timed window ("up", "down") a request belongs to, or None (S3, Azure)."""
    if not _OBJECT.search(path):
        return None
    return {"PUT": "up", "GET": "down"}.get(method)


def _gcs_window(method: str, path: str) -> str | None:
    """Likewise for gcsfs: its uploads name the object in the body, not the URL."""
    if method == "POST" and path.startswith("/upload/storage/v1/b/bench/o?"):
        return "up"
    if method == "GET" and path.startswith("/download/") and "%2Fr0-" in path:
        return "down"
    return None


def _s3(client: str) -> Callable[[int], Probe]:
    def make(port: int) -> Probe:
        options = s3_options(f"http://127.0.0.1:{port}")
        return Probe.from_url("s3://bench/busy", options, client=client, repeats=1)

    return make


#: gcp-storage-emulator drops a trailing \r from an upload's body: a seed whose 3 × 1 KiB
#: it stores intact (with a fresh seed, 3 in 256 downloads came back one byte short)
GCS_SEED = gcs_emulator_seed((Workload(count=3, size="1KiB"), 0), repeats=1)


def _gcsfs(port: int) -> Probe:
    options = gcs_options(port)
    return Probe.from_url("gs://bench/busy", options, client="gcsfs", repeats=1, seed=GCS_SEED)


def _azure(client: str) -> Callable[[int], Probe]:
    def make(port: int) -> Probe:
        options = {"connection_string": azure_connection_string(port)}
        if client == "obstore":
            return Probe.from_url("abfs://bench/busy", options, repeats=1)
        import adlfs

        fs = adlfs.AzureBlobFileSystem(**options, skip_instance_cache=True)
        # the SDK's ExponentialRetry sleeps 15 s ± 3 s before its first retry: its own
        # (public) knobs made short here, so the test takes seconds; nothing else changes
        policy = fs.service_client._config.retry_policy
        policy.initial_backoff, policy.increment_base, policy.random_jitter_range = 0.05, 0, 0.05
        return Probe(fs, "bench/busy", repeats=1)

    return make


Window = Callable[[str, str], "str | None"]
SMALL = Workload(count=20, size="1KiB")
BOTH = (503, 429)
#: client: server fixture, probe maker, workload, every Nth request of a window pushed
#: back, with which statuses in turn (counted across both windows), and which window a
#: request belongs to. gcsfs sleeps 1-2 s before its first retry of a request (its
#: retry_request's own backoff): 3 objects there, one pushback per window (503, then
#: 429). The Azure SDK retries 503 but not 429 (Azure Storage throttles with 503
#: ServerBusy): adlfs is pushed back with 503 only (429: the next test).
CLIENTS: dict[str, tuple[str, Callable[[int], Probe], Workload, int, tuple[int, ...], Window]] = {
    "obstore-s3": ("s3_server", _s3("obstore"), SMALL, 6, BOTH, _s3_window),
    "s3fs": ("s3_server", _s3("s3fs"), SMALL, 6, BOTH, _s3_window),
    "gcsfs": ("gcs_server", _gcsfs, Workload(count=3, size="1KiB"), 3, BOTH, _gcs_window),
    "adlfs": ("azure_server", _azure("adlfs"), SMALL, 6, (503,), _s3_window),
    "obstore-azure": ("azure_server", _azure("obstore"), SMALL, 6, BOTH, _s3_window),
}


@pytest.mark.parametrize("name", list(CLIENTS))
def test_retries_and_pushback_match_the_proxy(name: str, request: pytest.FixtureRequest) -> None:
    fixture, make, workload, every, statuses, window = CLIENTS[name]
    server: Server = request.getfixturevalue(fixture)
    now = ["up"]  # only requests of the current window's kind are pushed back
    proxy = ThrottlingProxy(
        server.port,
        every=every,
        statuses=statuses,
        where=lambda method, path: window(method, path) == now[0],
    ).start()
    try:
        probe = make(proxy.port)
        assert probe.target.client == name.split("-")[0]
        up = probe.upload(workload)
        uploaded = len(proxy.seen)
        now[0] = "down"
        down = probe.download(workload)  # its untimed upload first: PUTs not in "down"
    finally:
        proxy.stop()
    # the status the proxy gave each request of each timed window (0: the server answered)
    seen = {
        "up": [s for m, p, s in proxy.seen[:uploaded] if window(m, p) == "up"],
        "down": [s for m, p, s in proxy.seen[uploaded:] if window(m, p) == "down"],
    }

    assert up.ok, up.errors
    assert down.ok, down.errors
    for result, given in ((up, seen["up"]), (down, seen["down"])):
        pushed = [status for status in given if status]
        assert pushed, given  # the proxy pushed back inside this window
        (sample,) = result.samples
        assert sample.retries == len(pushed)  # each pushback retried once, and only those
        assert sample.responses == len(given) == workload.count + len(pushed)
        assert sample.pushed_back == len(pushed)
        assert result.busy_fraction == len(pushed) / len(given)
        assert Code.RETRIED in {notice.code for notice in result.warnings}
    # each status in turn (503 and 429 where the client retries both): all counted
    assert {status for status in seen["up"] + seen["down"] if status} == set(statuses)


def test_adlfs_does_not_retry_429(azure_server: Server) -> None:
    """The Azure SDK's policy retries 5xx and 408, not 429: the repeat fails, counted."""
    proxy = ThrottlingProxy(
        azure_server.port, every=5, status=429, where=lambda m, p: _s3_window(m, p) == "up"
    ).start()
    try:
        result = _azure("adlfs")(proxy.port).upload(SMALL)
    finally:
        proxy.stop()
    assert [status for _, _, status in proxy.pushed_back] == [429]  # the first ended it
    assert not result.ok
    assert "Please reduce your request rate" in result.errors[0].message


# --- the busy share on a Result: its figure, JSON, and where it is shown ---------------
def _busy_result(counts: list[tuple[int | None, int | None]]) -> Result:
    from tests.test_result import make_result

    result = make_result([1_000_000] * len(counts))
    samples = [
        attrs.evolve(sample, responses=answers, pushed_back=pushed)
        for sample, (answers, pushed) in zip(result.samples, counts, strict=True)
    ]
    return attrs.evolve(result, samples=samples)


def test_the_busy_share_is_pushback_over_answers_of_every_repeat() -> None:
    result = _busy_result([(10, 2), (14, 1)])
    assert [s.busy_fraction for s in result.samples] == [0.2, 1 / 14]
    assert result.busy_fraction == 3 / 24  # counts added, never shares averaged
    assert _busy_result([(10, 0)]).busy_fraction == 0.0
    assert _busy_result([(None, None)]).busy_fraction is None  # the client does not tell
    assert _busy_result([(10, 2), (None, None)]).busy_fraction is None  # not all repeats
    assert _busy_result([(0, 0)]).busy_fraction is None  # nothing answered


def test_the_busy_counts_round_trip_and_old_files_load_without_them() -> None:
    from storeprobe.result import dump_results, load_results

    result = _busy_result([(10, 2)])
    assert load_results(dump_results([result])) == [result]
    document = json.loads(dump_results([result]))
    for sample in document["results"][0]["samples"]:
        assert (sample.pop("responses"), sample.pop("pushed_back")) == (10, 2)
    (old,) = load_results(json.dumps(document))  # written before the counts existed
    assert (old.samples[0].responses, old.samples[0].pushed_back, old.busy_fraction) == (
        None,
        None,
        None,
    )


def test_the_busy_share_is_shown_only_when_the_server_pushed_back() -> None:
    from storeprobe import ResultSet

    pushed, calm = _busy_result([(8, 1)]), _busy_result([(8, 0)])
    assert str(pushed).endswith(", server busy 12.50 %")
    assert "busy" not in str(calm)
    table = ResultSet([pushed, calm]).summary(format="markdown")
    assert table.splitlines()[0].split("|")[-2].strip() == "busy"
    assert "12.50 %" in table
    assert "busy" not in ResultSet([calm]).summary(format="markdown")


def test_storeprobe_report_shows_the_busy_share(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from storeprobe.cli import main
    from storeprobe.result import dump_results

    path = tmp_path / "results.json"
    path.write_text(dump_results([_busy_result([(8, 1), (12, 1)])]))
    assert main(["report", str(path)]) == 0
    out = capsys.readouterr().out
    assert "server busy: answers pushed back (503, 429)" in out
    row = next(line for line in out.splitlines() if "2/20" in line)
    assert "10.00 %" in row  # (1 + 1) / (8 + 12): counts added over the repeats

    path.write_text(dump_results([_busy_result([(8, 0)])]))
    assert main(["report", str(path)]) == 0
    assert "busy" not in capsys.readouterr().out


def test_which_failed_gcsfs_attempts_had_an_answer() -> None:
    """gcsfs turns a status into an exception type (validate_response): read it back."""
    import aiohttp
    import requests
    from gcsfs.retry import HttpError, validate_response

    from storeprobe.backends.gcsfs import _answer

    def raised(status: int, body: bytes = b"") -> BaseException:
        try:
            validate_response(status, body, "b/bench/o/k")
        except Exception as exc:
            return exc
        raise AssertionError(f"gcsfs took status {status} for a success")

    assert _answer(raised(503, b"SlowDown")) == (True, 503)
    assert _answer(raised(429, b"SlowDown")) == (True, 429)
    assert _answer(raised(404)) == (True, 404)
    assert _answer(raised(412)) == (True, 412)
    assert _answer(raised(502)) == (True, 502)
    assert _answer(raised(403)) == (True, None)
    assert _answer(HttpError({"code": 500, "message": "x"})) == (True, 500)
    assert _answer(aiohttp.ServerDisconnectedError()) == (False, None)  # no answer
    assert _answer(ConnectionResetError()) == (False, None)
    assert _answer(TimeoutError()) == (False, None)
    assert isinstance(raised(502), requests.exceptions.ProxyError)


@pytest.mark.s3
@pytest.mark.parametrize("client", ["obstore", "s3fs"])
def test_backup_steps_count_the_retries_of_their_windows(client: str, s3_server: Server) -> None:
    # a backup step is the sum of many windows: each window's retries and pushbacks go on
    # the step's sample, as a probe's window's do (a step once dropped them: None)
    tree = Tree.source_tree(size="1MiB", seed=3)
    proxy = ThrottlingProxy(s3_server.port, every=7, where=lambda method, _: method == "PUT")
    proxy.start()
    try:
        probe = Probe.from_url(
            "s3://bench/steps", s3_options(f"http://127.0.0.1:{proxy.port}"), client=client
        )
        backup, restore = probe.backup_restore(tree, versions=[tree], method="files")
    finally:
        proxy.stop()
    assert backup.ok, backup.errors
    assert restore.ok, restore.errors
    pushed = len(proxy.pushed_back)
    assert pushed >= 2, proxy.seen  # PUTs are the backup's only writes: all in its windows
    (sample,) = backup.samples
    assert sample.retries == sample.pushed_back == pushed
    assert Code.RETRIED in {notice.code for notice in backup.warnings}
    # each request answered once, and each pushed-back attempt once more
    assert sample.responses == sum(backup.requests_by_kind.values()) + pushed
    (read,) = restore.samples
    assert (read.retries, read.pushed_back) == (0, 0)
    assert read.responses == sum(restore.requests_by_kind.values())


@pytest.mark.s3
def test_an_answer_cut_off_is_retried_and_counted(counting_proxy: CountingProxy) -> None:
    # object_store retries an idempotent request whose answer a reset or a close cut
    # off (kind Interrupted); storeprobe's obstore stores retry nothing by themselves, so
    # the Retrier does it, as obstore would have, and counts it
    cut: list[str] = []

    def cut_once(method: str, path: str, number: int) -> bool:
        if method == "GET" and path.endswith("/r0-0000005") and not cut:
            cut.append(path)
            return True
        return False

    counting_proxy.cut_when = cut_once
    options = s3_options(f"http://127.0.0.1:{counting_proxy.port}")
    probe = Probe.from_url("s3://bench/cut", options, repeats=1)
    assert probe.target.client == "obstore"
    down = probe.download(Workload(count=12, size="64KiB"))
    assert down.ok, down.errors
    assert cut  # the proxy cut one answer off inside the window
    (sample,) = down.samples
    assert sample.retries == 1
    assert sample.responses == 12 + 1  # the cut answer began: an answer, retried
    assert sample.requests_by_kind == {"get": 12}
    assert Code.RETRIED in {notice.code for notice in down.warnings}


@pytest.mark.s3
def test_s3fs_waits_for_a_slow_answer_instead_of_resending(
    counting_proxy: CountingProxy,
) -> None:
    # botocore's own read timeout (s3fs sets 15 s) used to resend a part whose answer took
    # longer: a retry no storage asked for, which rclone serve s3 cannot take once the
    # part's bytes reached its backend (it failed the upload: InvalidPart). As on obstore,
    # the probe's timeout (300 s) governs: the slow answer is waited for.
    held: list[str] = []

    def first_part(method: str, path: str, number: int) -> float:
        if method == "PUT" and "/r0-" in path and "partNumber=1&" in f"{path}&" and not held:
            held.append(path)
            return 16.0  # longer than s3fs's 15 s
        return 0.0

    counting_proxy.delay_when = first_part
    options = s3_options(f"http://127.0.0.1:{counting_proxy.port}")
    probe = Probe.from_url(
        "s3://bench/slow-answer", options, client="s3fs", streams=3, repeats=1, part_size="5MiB"
    )
    up = probe.upload(Workload(count=1, size="15MiB"))
    assert up.ok, up.errors
    assert held  # the answer to the first part was held past s3fs's 15 s
    (sample,) = up.samples
    assert sample.retries == 0
    parts = [p for m, p in counting_proxy.targets if m == "PUT" and "partNumber=" in p]
    assert len(parts) == 3  # 3 × 5 MiB, each sent once
    assert Code.RETRIED not in {notice.code for notice in up.warnings}


@pytest.mark.s3
def test_a_read_timeout_given_to_s3fs_is_kept(counting_proxy: CountingProxy) -> None:
    held: list[str] = []

    def first_part(method: str, path: str, number: int) -> float:
        if method == "PUT" and "/r0-" in path and "partNumber=1&" in f"{path}&" and not held:
            held.append(path)
            return 3.0  # longer than the 1 s asked for below
        return 0.0

    counting_proxy.delay_when = first_part
    options = {
        **s3_options(f"http://127.0.0.1:{counting_proxy.port}"),
        "config_kwargs": {"read_timeout": 1},
    }
    probe = Probe.from_url(
        "s3://bench/read-timeout", options, client="s3fs", streams=3, repeats=1, part_size="5MiB"
    )
    up = probe.upload(Workload(count=1, size="15MiB"))
    assert up.ok, up.errors  # the server had taken the part: sent again, it is the same
    assert held
    (sample,) = up.samples
    parts = [p for m, p in counting_proxy.targets if m == "PUT" and "partNumber=" in p]
    # the first part sent again at least once (any part may be, on a loaded machine, whose
    # answer takes over 1 s): every part sent beyond the three is a counted retry
    assert parts.count(held[0]) >= 2
    assert sample.retries == len(parts) - 3
