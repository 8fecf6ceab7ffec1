"""The tests' counting proxy is transparent where it matters: a client that gives up a
request in the middle of its body closes the server's side too (else the server waits for
the rest, the proxy for the server, and the connection hangs until the proxy stops)."""

from __future__ import annotations

import socket
import threading

from tests.http_proxy import CountingProxy


def test_a_client_that_leaves_mid_body_closes_the_servers_side() -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(10)
    seen: dict[str, bytes | bool] = {}

    def server() -> None:
        connection, _ = listener.accept()
        connection.settimeout(10)
        received = b""
        try:
            while chunk := connection.recv(65536):
                received += chunk
            seen["eof"] = True  # the proxy closed its side: no more body will come
        except TimeoutError:
            seen["eof"] = False
        seen["received"] = received
        connection.close()

    thread = threading.Thread(target=server, daemon=True)
    thread.start()
    proxy = CountingProxy(listener.getsockname()[1]).start()
    try:
        with socket.create_connection(("127.0.0.1", proxy.port), timeout=10) as client:
            client.sendall(b"PUT /bucket/key HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n")
            client.sendall(b"x" * 10)  # 10 of the 1000 bytes, then the client goes away
        thread.join(15)
    finally:
        proxy.stop()
        listener.close()
    assert seen["eof"] is True
    assert isinstance(seen["received"], bytes)
    assert seen["received"].endswith(b"\r\n\r\n" + b"x" * 10)
    assert proxy.methods == ["PUT"]
