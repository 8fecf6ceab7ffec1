"""A TCP proxy that adds a fixed one-way delay to every byte, in both directions.

netem is not available in this kernel, so latency is added here: each chunk read from
one side is written to the other ``delay_s`` seconds later, order preserved. A request
and its response therefore take at least ``2 × delay_s`` more than without the proxy
(``delay_s=0``: none).

It counts, server side, the TCP connections it accepts (``connections``): a test proves
with it how often a client connects. With ``tls`` (a server ``ssl.SSLContext``) it
terminates TLS: clients speak HTTPS to it, it speaks plain TCP to the upstream (for a
server that cannot serve TLS itself, such as gcp-storage-emulator).

asyncio's sleeps end on the selector's timeout, which Linux's epoll takes in whole
milliseconds rounded up: a wait of 2.09 ms lasts 3 ms, one of 1.99 ms lasts 2 ms, so a
delay that is not a whole number of milliseconds is rounded up by up to 1 ms each way.
``precise=True`` sleeps in asyncio only until ``PRECISE_MARGIN_S`` before the chunk is
due and the rest with :func:`time.sleep` (nanosleep, microseconds), blocking the proxy's
own event loop for at most that margin per chunk: right for one connection at a time
(benchmarks/gate.py), wrong for many in flight, whose chunks it would serialise.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

__all__ = ["PRECISE_MARGIN_S", "DelayProxy", "delay_process"]

PRECISE_MARGIN_S = 0.0015  # > the 1 ms epoll rounding, plus a little lateness


class DelayProxy:
    def __init__(
        self,
        upstream_port: int,
        delay_s: float,
        *,
        tls: ssl.SSLContext | None = None,
        precise: bool = False,
    ) -> None:
        self.upstream_port = upstream_port
        self.delay_s = delay_s  # read for every chunk: may be changed while running
        self.tls = tls
        self.precise = precise
        self.port = 0
        #: TCP connections accepted from clients so far
        self.connections = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server: asyncio.base_events.Server | None = None

    def start(self) -> DelayProxy:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(10)
        return self

    async def _start(self) -> None:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0, ssl=self.tls)
        self.port = self._server.sockets[0].getsockname()[1]

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

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

        async def deliver() -> None:
            while True:
                due, chunk = await queue.get()
                wait = due - time.monotonic()
                if self.precise:
                    if wait > PRECISE_MARGIN_S:
                        await asyncio.sleep(wait - PRECISE_MARGIN_S)
                    rest = due - time.monotonic()
                    if rest > 0:
                        time.sleep(rest)
                elif wait > 0:
                    await asyncio.sleep(wait)
                if not chunk:
                    with contextlib.suppress(Exception):
                        if writer.can_write_eof():
                            writer.write_eof()
                        else:  # TLS has no half-close: the other side ended, so end this one
                            writer.close()
                    return
                writer.write(chunk)
                await writer.drain()

        sender = asyncio.ensure_future(deliver())
        try:
            while True:
                chunk = await reader.read(1 << 16)
                await queue.put((time.monotonic() + self.delay_s, chunk))
                if not chunk:
                    break
            await sender
        except (ConnectionError, asyncio.CancelledError):
            sender.cancel()
            # this side is gone (a reset, a TLS peer that left without close_notify): end
            # the other one too, or a server that serves one connection at a time (the GCS
            # emulator) waits on it for ever
            with contextlib.suppress(Exception):
                writer.close()

    async def _handle(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            up_r, up_w = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        except OSError:
            client_w.close()
            return
        try:
            await asyncio.gather(self._pipe(client_r, up_w), self._pipe(up_r, client_w))
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            for writer in (client_w, up_w):
                with contextlib.suppress(Exception):
                    writer.close()


@contextlib.contextmanager
def delay_process(upstream_port: int, delay_s: float) -> Iterator[int]:
    """A :class:`DelayProxy` in a process of its own; yields its port.

    In the measuring process the proxy's thread competes for the interpreter's lock with
    the client it delays, so on a loaded machine its wake-ups come late by as much as the
    switch interval (5 ms), more for one client than another; in its own process it
    competes only for a core, as a network would not at all.
    """
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.delay_proxy", str(upstream_port), repr(delay_s)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        cwd=Path(__file__).resolve().parent.parent,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        if not line:
            raise RuntimeError(f"the delay proxy exited with code {process.wait(10)}")
        yield int(line)
    finally:
        if process.stdin is not None:
            process.stdin.close()  # the proxy's signal to stop
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


if __name__ == "__main__":  # python -m tests.delay_proxy UPSTREAM_PORT DELAY_S
    proxy = DelayProxy(int(sys.argv[1]), float(sys.argv[2])).start()
    print(proxy.port, flush=True)
    sys.stdin.read()  # until the parent closes stdin
    proxy.stop()
