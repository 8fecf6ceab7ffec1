"""A small HTTP/1.1 forwarding proxy that counts requests in flight.

It sits between a client and a real server on loopback, forwards bytes verbatim (one
upstream connection per client connection, keep-alive preserved, ``100 Continue``
passed through) and counts a request as in flight from the moment its request head
has arrived until its response has been forwarded completely. Tests read
``max_in_flight`` and ``requests`` to prove how many requests a probe really keeps
in flight, and ``signed_regions`` for the region each request was signed for. It can
also fail, hang or cut off the answer of the requests a test picks, and hold the first
requests a test picks until they are all in flight together (``gather``: a wait for a
state, so a count of requests in flight does not depend on how fast a busy machine
starts them). It runs its own event loop in a thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import threading
from collections.abc import Callable
from typing import Self

__all__ = ["CountingProxy", "transfers"]


def transfers(operation: str) -> Callable[[str, str], bool]:
    """The requests that move a workload's bytes (its objects are ``r<repeat>-<index>``,
    whole or in parts): PUTs for an upload, GETs for a download, for
    ``CountingProxy.gather``. A probe's one-request checks before the run
    (``conditional-write-check``, ``range-read-check``), listings and HEADs are left out."""
    method_moving = "PUT" if operation == "upload" else "GET"

    def accepts(method: str, path: str) -> bool:
        key = path.partition("?")[0]
        return method == method_moving and _WORKLOAD_OBJECT.search(key) is not None

    return accepts


_WORKLOAD_OBJECT = re.compile(r"/r\d+-\d+$")


async def _read_head(reader: asyncio.StreamReader) -> bytes | None:
    try:
        return await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, ConnectionError):
        return None


def _headers(head: bytes) -> dict[str, str]:
    lines = head.decode("latin-1").split("\r\n")[1:]
    headers: dict[str, str] = {}
    for line in lines:
        if ":" in line:
            name, value = line.split(":", 1)
            headers[name.strip().lower()] = value.strip()
    return headers


async def _pump_body(
    headers: dict[str, str], reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> bool:
    """Copy one message body framed by ``headers``; False if it runs to end of stream."""
    if headers.get("transfer-encoding", "").lower().endswith("chunked"):
        while True:
            line = await reader.readuntil(b"\r\n")
            writer.write(line)
            size = int(line.split(b";")[0].strip(), 16)
            if size == 0:
                while True:  # trailers, then the blank line
                    trailer = await reader.readuntil(b"\r\n")
                    writer.write(trailer)
                    if trailer == b"\r\n":
                        break
                await writer.drain()
                return True
            writer.write(await reader.readexactly(size + 2))
            await writer.drain()
    length = int(headers.get("content-length", "0"))
    while length > 0:
        chunk = await reader.read(min(length, 1 << 20))
        if not chunk:
            raise ConnectionError("body ended early")
        writer.write(chunk)
        await writer.drain()
        length -= len(chunk)
    return True


async def _forward_request_body(
    headers: dict[str, str], client_r: asyncio.StreamReader, up_w: asyncio.StreamWriter
) -> bool:
    """Forward a request's body upstream; when the client's side ends before the body
    does (the client gave the request up), close the upstream connection too, as the
    client's own close would have reached a server it talked to directly: else the
    server waits for the rest of the body, the proxy for the server's answer, and the
    connection hangs until the proxy stops."""
    try:
        return await _pump_body(headers, client_r, up_w)
    except (ConnectionError, asyncio.IncompleteReadError):
        up_w.close()
        raise


class _Gathering:
    """The first ``count`` requests ``when`` accepts, each held until all are in flight."""

    def __init__(self, count: int, when: Callable[[str, str], bool], timeout: float) -> None:
        self.count = count
        self.when = when
        self.timeout = timeout
        self.arrived = 0
        #: True when the wait ran out before ``count`` were in flight together
        self.timed_out = False
        self._all_in = asyncio.Event()

    async def arrive(self, method: str, path: str) -> None:
        if self._all_in.is_set() or not self.when(method, path):
            return
        self.arrived += 1
        if self.arrived >= self.count:
            self._all_in.set()
            return
        try:
            await asyncio.wait_for(self._all_in.wait(), self.timeout)
        except TimeoutError:
            self.timed_out = True  # the client never had them in flight at once
            self._all_in.set()


class _Sink:
    """A writer that drops what it is given (the body of a request answered here)."""

    def write(self, data: bytes) -> None:
        return None

    async def drain(self) -> None:
        return None


class CountingProxy:
    """Forward ``127.0.0.1:<port>`` to ``127.0.0.1:<upstream_port>``, counting requests."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.port = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self.requests = 0
        self.methods: list[str] = []
        #: the method and path (with its query) of each request, in order
        self.targets: list[tuple[str, str]] = []
        #: the region of each signed request (SigV4's credential scope), in order
        self.signed_regions: list[str] = []
        #: called with (method, path, request number); a status code makes the proxy
        #: answer that status itself (an S3-style error body) and close the connection
        self.fail_when: Callable[[str, str, int], int | None] | None = None
        #: a request header (lower case) answered with 501 NotImplemented when present
        self.refuse_header: str | None = None
        #: called likewise; True makes the proxy swallow the request and never answer
        self.hang_when: Callable[[str, str, int], bool] | None = None
        #: called likewise; True makes the proxy forward the answer's head and half its
        #: body, then close the connection (an answer cut off, as a reset link cuts it)
        self.cut_when: Callable[[str, str, int], bool] | None = None
        #: called likewise; a number of seconds makes the proxy hold the answer that long
        #: after the server gave it (a storage slow to answer), then forward it whole
        self.delay_when: Callable[[str, str, int], float] | None = None
        #: set by ``gather``: the requests held until they are in flight together
        self.gathering: _Gathering | None = None
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server: asyncio.base_events.Server | None = None

    def start(self) -> Self:
        self._thread.start()
        future = asyncio.run_coroutine_threadsafe(self._start(), self._loop)
        future.result(10)
        return self

    async def _start(self) -> None:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    def reset(self) -> None:
        self.max_in_flight = self.in_flight
        self.requests = 0
        self.methods = []
        self.targets = []
        self.signed_regions = []
        self.gathering = None

    def gather(self, count: int, when: Callable[[str, str], bool], timeout: float = 30) -> None:
        """Hold the next ``count`` requests ``when(method, path)`` accepts until all of
        them are in flight together, then let them and every later request go.

        A client that keeps ``count`` requests in flight at once makes ``max_in_flight``
        reach ``count`` for certain; one that does not leaves them waiting ``timeout``
        seconds, after which they go on and ``gathering.timed_out`` is True.
        """
        self.gathering = _Gathering(count, when, timeout)

    def stop(self) -> None:
        async def close() -> None:
            if self._server is not None:
                self._server.close()
            current = asyncio.current_task()
            tasks = [task for task in asyncio.all_tasks() if task is not current]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(close(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    async def _handle(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        try:
            up_r, up_w = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        except OSError:
            client_w.close()
            return
        try:
            while True:
                head = await _read_head(client_r)
                if head is None:
                    return
                await self._exchange(head, client_r, client_w, up_r, up_w)
        except (ConnectionError, asyncio.IncompleteReadError, ValueError, asyncio.CancelledError):
            return
        finally:
            for writer in (client_w, up_w):
                with contextlib.suppress(Exception):
                    writer.close()

    async def _exchange(
        self,
        head: bytes,
        client_r: asyncio.StreamReader,
        client_w: asyncio.StreamWriter,
        up_r: asyncio.StreamReader,
        up_w: asyncio.StreamWriter,
    ) -> None:
        raw_method, path = head.split(b" ", 2)[:2]
        method = raw_method.decode("latin-1")
        self.in_flight += 1
        self.requests += 1
        self.methods.append(method)
        self.targets.append((method, path.decode("latin-1")))
        scope = _headers(head).get("authorization", "").partition("Credential=")[2].split("/")
        if len(scope) > 2:  # KEY/DATE/REGION/SERVICE/aws4_request
            self.signed_regions.append(scope[2])
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        if self.gathering is not None:
            await self.gathering.arrive(method, path.decode("latin-1"))
        status = (
            self.fail_when(method, path.decode("latin-1"), self.requests)
            if self.fail_when
            else None
        )
        if status is None and self.refuse_header and self.refuse_header in _headers(head):
            status = 501  # a provider whose S3 API does not implement this header
        if self.hang_when is not None and self.hang_when(
            method, path.decode("latin-1"), self.requests
        ):
            self.in_flight -= 1
            await asyncio.sleep(3600)  # cancelled when the proxy stops
        if status is not None:
            headers = _headers(head)
            if "100-continue" not in headers.get("expect", "").lower():
                # a server reads the body it was sent before it answers: closing with the
                # body unread would reset the connection, and the client would see a
                # failure to send, not this answer (an error to Expect: 100-continue
                # goes before the body, which the client then never sends)
                await _pump_body(headers, client_r, _Sink())  # type: ignore[arg-type]
            self.in_flight -= 1
            code = b"NotImplemented" if status == 501 else b"AccessDenied"
            body = (
                b"<?xml version='1.0'?><Error><Code>%s</Code>"
                b"<Message>injected</Message></Error>" % code
            )
            client_w.write(
                b"HTTP/1.1 %d Injected\r\nContent-Type: application/xml\r\nContent-Length: %d\r\n"
                b"Connection: close\r\n\r\n%s" % (status, len(body), body)
            )
            await client_w.drain()
            raise ConnectionError("injected failure: connection closed")
        try:
            up_w.write(head)
            await up_w.drain()
            request_body = asyncio.ensure_future(
                _forward_request_body(_headers(head), client_r, up_w)
            )
            while True:
                response_head = await _read_head(up_r)
                if response_head is None:
                    raise ConnectionError("upstream closed")
                status = int(response_head.split(b" ", 2)[1])
                if status >= 200 and self.delay_when is not None:
                    await asyncio.sleep(
                        self.delay_when(method, path.decode("latin-1"), self.requests)
                    )
                client_w.write(response_head)
                await client_w.drain()
                if 100 <= status < 200:
                    continue
                break
            headers = _headers(response_head)
            if self.cut_when is not None and self.cut_when(
                method, path.decode("latin-1"), self.requests
            ):
                half = int(headers.get("content-length", "0")) // 2
                client_w.write(await up_r.readexactly(half))
                await client_w.drain()
                raise ConnectionError("answer cut off")
            if method != "HEAD" and status not in (204, 304):
                if "content-length" in headers or "chunked" in headers.get("transfer-encoding", ""):
                    await _pump_body(headers, up_r, client_w)
                else:  # body until close
                    while chunk := await up_r.read(1 << 20):
                        client_w.write(chunk)
                        await client_w.drain()
                    raise ConnectionError("response delimited by close")
            if not request_body.done():
                # a final answer before the body was read (e.g. an error to Expect:
                # 100-continue): give the client a moment, then drop the connection
                try:
                    await asyncio.wait_for(request_body, 5)
                except TimeoutError:
                    raise ConnectionError("request body never completed") from None
            await request_body
        finally:
            self.in_flight -= 1
