"""A gate in front of ``rclone serve s3`` that sends the first write into a new folder alone.

Why: rclone serve s3 (v1.75.2) creates an object's folders with a check and a create
that are not atomic (``mkdirRecursive``: ``VFS.Stat``, then ``VFS.Mkdir``; ``Dir.Mkdir``
adds a fresh directory node, replacing one another request added a moment before). When
several PUTs create the same new folder at once, the requests that wrote through the
replaced node are lost to rclone's view of the folder for its directory cache time (five
minutes), though their files are on disk: the PUT's rename of its temporary file fails
(500, "Dir.Rename error: file does not exist", its temporary file left on disk), a GET
of an object written finds nothing (404), and a DELETE of it answers 204 and leaves the
file. Measured here without storeprobe: 1 600 PUTs of 16 KiB into 400 new folders from 8
threads failed 19, 74 and 79 times in three runs, and 1, 12 and 5 files stayed on disk
after every key was deleted; with the first PUT into each folder sent alone, none
failed and none stayed (three runs). A probe's preparation uploads (32 at a time into a
fresh run folder) hit it.

What it does: it forwards HTTP/1.1 verbatim (the helpers of :mod:`tests.http_proxy`)
and keeps the set of folders a write through it has created. A write that creates
objects (a PUT that is not a multipart part, or a POST that starts a multipart upload)
into a folder not in that set waits for a lock held by such writes, so at most one of
them is at the server at a time; when it succeeds and its folder is on disk, the folder
joins the set and the writes after it into that folder go at once. Every delete (DELETE,
or POST ``?delete``) empties the set when it starts and when it ends, because rclone
removes a folder a delete leaves empty. Nothing else is held, so the requests a probe
keeps in flight are what the server sees once a folder exists.

Run as ``python -m tests.folder_gate UPSTREAM_PORT ROOT [CERT KEY]``; it prints the port
it listens on, then serves until it is terminated. With a certificate and its key (those
rclone serves HTTPS with) it serves HTTPS with them and speaks HTTPS to rclone, so a
client verifies the same certificate chain it would verify at rclone.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import ssl
import sys
from pathlib import Path
from urllib.parse import unquote

from tests.http_proxy import _forward_request_body, _headers, _pump_body, _read_head

__all__ = ["Gate", "folder_of_write", "is_delete"]


def folder_of_write(method: str, target: str) -> str | None:
    """The folder (``/bucket/a/b``, decoded) a request creates an object in, or None if it
    creates none there: PUT of an object (not one part of a multipart upload) or copy,
    POST that starts a multipart upload (rclone creates the folders then)."""
    path, _, query = target.partition("?")
    params = {item.partition("=")[0] for item in query.split("&") if item}
    if method == "PUT":
        if "uploadId" in params:
            return None
    elif not (method == "POST" and "uploads" in params):
        return None
    folder, _, name = unquote(path).rpartition("/")
    if not name or folder.count("/") < 1:
        return None  # a bucket itself, or a key that names a folder
    return folder


def is_delete(method: str, target: str) -> bool:
    """A request that can remove objects, and so the folders rclone then finds empty."""
    query = target.partition("?")[2]
    params = {item.partition("=")[0] for item in query.split("&") if item}
    return method == "DELETE" or (method == "POST" and "delete" in params)


class Gate:
    """Forward ``127.0.0.1:<port>`` to ``upstream_port``; first writes into new folders alone."""

    def __init__(
        self, upstream_port: int, root: Path, upstream_tls: ssl.SSLContext | None = None
    ) -> None:
        self.upstream_port = upstream_port
        self.root = root
        self.upstream_tls = upstream_tls
        self.known: set[str] = set()
        self._lock = asyncio.Lock()

    async def handle(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        try:
            up_r, up_w = await asyncio.open_connection(
                "127.0.0.1", self.upstream_port, ssl=self.upstream_tls
            )
        except OSError:
            client_w.close()
            return
        try:
            while (head := await _read_head(client_r)) is not None:
                await self._route(head, client_r, client_w, up_r, up_w)
        except (ConnectionError, asyncio.IncompleteReadError, ValueError):
            return
        finally:
            for writer in (client_w, up_w):
                with contextlib.suppress(Exception):
                    writer.close()

    async def _route(
        self,
        head: bytes,
        client_r: asyncio.StreamReader,
        client_w: asyncio.StreamWriter,
        up_r: asyncio.StreamReader,
        up_w: asyncio.StreamWriter,
    ) -> None:
        method, target = (part.decode("latin-1") for part in head.split(b" ", 2)[:2])
        folder = folder_of_write(method, target)
        if folder is not None and folder not in self.known:
            async with self._lock:
                status = await _exchange(head, client_r, client_w, up_r, up_w)
                if 200 <= status < 300 and (self.root / folder.lstrip("/")).is_dir():
                    self.known.add(folder)
        elif is_delete(method, target):
            self.known.clear()
            try:
                await _exchange(head, client_r, client_w, up_r, up_w)
            finally:
                self.known.clear()
        else:
            await _exchange(head, client_r, client_w, up_r, up_w)


async def _exchange(
    head: bytes,
    client_r: asyncio.StreamReader,
    client_w: asyncio.StreamWriter,
    up_r: asyncio.StreamReader,
    up_w: asyncio.StreamWriter,
) -> int:
    """Forward one request and its answer; return the answer's status."""
    method = head.split(b" ", 1)[0]
    up_w.write(head)
    await up_w.drain()
    request_body = asyncio.ensure_future(_forward_request_body(_headers(head), client_r, up_w))
    while True:
        response_head = await _read_head(up_r)
        if response_head is None:
            raise ConnectionError("upstream closed")
        status = int(response_head.split(b" ", 2)[1])
        client_w.write(response_head)
        await client_w.drain()
        if not 100 <= status < 200:
            break
    headers = _headers(response_head)
    if method != b"HEAD" and status not in (204, 304):
        if "content-length" in headers or "chunked" in headers.get("transfer-encoding", ""):
            await _pump_body(headers, up_r, client_w)
        else:  # body until close
            while chunk := await up_r.read(1 << 20):
                client_w.write(chunk)
                await client_w.drain()
            raise ConnectionError("response delimited by close")
    if not request_body.done():
        try:  # a final answer before the body was read (an error to Expect: 100-continue)
            await asyncio.wait_for(request_body, 5)
        except TimeoutError:
            raise ConnectionError("request body never completed") from None
    await request_body
    return status


async def _serve(upstream_port: int, root: Path, tls: tuple[str, str] | None) -> None:
    served: ssl.SSLContext | None = None
    upstream: ssl.SSLContext | None = None
    if tls is not None:  # clients see the server's own certificate; rclone is on loopback
        served = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        served.load_cert_chain(*tls)
        served.set_alpn_protocols(["http/1.1"])
        upstream = ssl.create_default_context()
        upstream.check_hostname = False
        upstream.verify_mode = ssl.CERT_NONE
    gate = Gate(upstream_port, root, upstream)
    server = await asyncio.start_server(gate.handle, "127.0.0.1", 0, ssl=served)
    print(server.sockets[0].getsockname()[1], flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sent in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sent, stop.set)
    async with server:
        await stop.wait()


if __name__ == "__main__":
    if len(sys.argv) not in (3, 5):
        sys.exit("usage: python -m tests.folder_gate UPSTREAM_PORT ROOT [CERT KEY]")
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    tls = (sys.argv[3], sys.argv[4]) if len(sys.argv) == 5 else None
    asyncio.run(_serve(int(sys.argv[1]), Path(sys.argv[2]), tls))
