"""An HTTP proxy in front of a real server (S3, GCS, Azure) that pushes back on every
Nth request.

:class:`ThrottlingProxy` is a :class:`~tests.http_proxy.CountingProxy` (bytes forwarded
verbatim to the real server, keep-alive kept) that answers every ``every``-th request
itself, as S3 answers throttled requests: ``503 SlowDown`` or ``429`` (``statuses`` in
turn: the first request pushed back gets the first, the next the second, ...) with an S3
error body, after reading the request's body, on a connection kept open. With ``where``
(method, path → bool) only the requests it picks are counted and pushed back. ``pushed_back``
records the method, path and status of each request it answered so, ``seen`` the
method, path and status (0: forwarded to the server) of every request, in order.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from tests.http_proxy import CountingProxy, _headers, _pump_body, _Sink

__all__ = ["ThrottlingProxy"]

_REASONS = {503: (b"Service Unavailable", b"SlowDown"), 429: (b"Too Many Requests", b"SlowDown")}


class ThrottlingProxy(CountingProxy):
    """Forward to ``upstream_port``; answer every ``every``-th request (of those ``where``
    picks) with ``status``, or with each of ``statuses`` in turn."""

    def __init__(
        self,
        upstream_port: int,
        every: int = 12,
        status: int = 503,
        statuses: Sequence[int] | None = None,
        where: Callable[[str, str], bool] | None = None,
    ) -> None:
        super().__init__(upstream_port)
        self.every = every
        self.statuses = tuple(statuses) if statuses else (status,)
        self.where = where
        #: (method, path, status) of each request answered with a pushback, in order
        self.pushed_back: list[tuple[str, str, int]] = []
        #: (method, path, status) of every request: 0 for one forwarded to the server
        self.seen: list[tuple[str, str, int]] = []
        self._seen = 0

    async def _exchange(
        self,
        head: bytes,
        client_r: asyncio.StreamReader,
        client_w: asyncio.StreamWriter,
        up_r: asyncio.StreamReader,
        up_w: asyncio.StreamWriter,
    ) -> None:
        method, path = (part.decode("latin-1") for part in head.split(b" ", 2)[:2])
        picked = self.where is None or self.where(method, path)
        self._seen += picked
        if not picked or self.every <= 0 or self._seen % self.every:
            self.seen.append((method, path, 0))
            await super()._exchange(head, client_r, client_w, up_r, up_w)
            return
        status = self.statuses[len(self.pushed_back) % len(self.statuses)]
        self.seen.append((method, path, status))
        headers = _headers(head)
        if "100-continue" in headers.get("expect", "").lower():
            client_w.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            await client_w.drain()
        await _pump_body(headers, client_r, _Sink())  # type: ignore[arg-type]
        self.pushed_back.append((method, path, status))
        reason, code = _REASONS[status]
        body = (
            b"<?xml version='1.0' encoding='UTF-8'?><Error><Code>%s</Code>"
            b"<Message>Please reduce your request rate.</Message></Error>" % code
        )
        client_w.write(
            b"HTTP/1.1 %d %s\r\nContent-Type: application/xml\r\nContent-Length: %d\r\n\r\n%s"
            % (status, reason, len(body), body)
        )
        await client_w.drain()
