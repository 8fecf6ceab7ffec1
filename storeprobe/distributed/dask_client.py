"""Reaching Dask: a client of a scheduler at an address, or of a LocalCluster started for
one run, and Dask imported only when a run starts (``storeprobe[distributed]``).

A scheduler that refuses or does not answer is a :class:`TargetUnreachableError` within
``SCHEDULER_CONNECT_TIMEOUT_S`` seconds, naming the address; an address Dask cannot
parse is a :class:`ConfigurationError`.
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from storeprobe.errors import ConfigurationError, MissingDependencyError, TargetUnreachableError

if TYPE_CHECKING:
    Client = Any  # distributed.Client: Dask's API is untyped

__all__ = ["SCHEDULER_CONNECT_TIMEOUT_S", "cluster", "import_dask"]

#: seconds to reach a ``--scheduler``: a TCP connect and Dask's handshake take a few round
#: trips, under a second even between continents (round trips up to ~0.3 s); Dask's own
#: default (``distributed.comm.timeouts.connect``, 30 s) is sized for a cluster under
#: load and would keep a mistyped or dead address waiting half a minute
SCHEDULER_CONNECT_TIMEOUT_S = 5.0


@contextlib.contextmanager
def cluster(
    workers: int | None = None,
    scheduler: str | None = None,
    *,
    connect_timeout: float = SCHEDULER_CONNECT_TIMEOUT_S,
) -> Iterator[Client]:
    """A Dask client for distributed probes, closed on exit: connected to ``scheduler``
    (an address such as ``tcp://10.0.0.1:8786``), or to a new LocalCluster of
    ``workers`` process workers with one thread each on 127.0.0.1 (closed with it).

    A scheduler that refuses the connection fails at once, one that does not answer
    within ``connect_timeout`` seconds (``SCHEDULER_CONNECT_TIMEOUT_S``) then:
    :class:`TargetUnreachableError` naming the address; an address Dask cannot parse
    is a :class:`ConfigurationError`."""
    dask = import_dask()
    if scheduler is not None:
        with _connect(dask, scheduler, connect_timeout) as client:
            yield client
        return
    if workers is None:
        raise ConfigurationError("say how many workers the LocalCluster starts, or a scheduler")
    with (
        dask.LocalCluster(
            n_workers=workers,
            threads_per_worker=1,
            processes=True,
            dashboard_address=":0",  # a free port: never clash with another cluster
            host="127.0.0.1",
        ) as local,
        dask.Client(local) as client,
    ):
        yield client


def _connect(dask: Any, address: str, timeout: float) -> Client:
    """A client of the scheduler at ``address``, or a clear error within ``timeout`` s.

    For ``tcp://`` and ``tls://`` a plain TCP connect comes first: Dask retries a refused
    connection until its timeout, where the socket says "refused" at once. On ``tcp://``
    it then waits for the scheduler's first bytes (a scheduler sends its handshake as
    it accepts): Dask waits for that handshake without a timeout, so a port held by
    something that is not a scheduler would hang it. The scheduler logs the probe
    connection at INFO level ("closed before handshake completed")."""
    fix = (
        "check the address (e.g. tcp://10.0.0.1:8786), that 'dask scheduler' runs there "
        "and that the network lets you reach it"
    )
    try:
        scheme, location = dask.comm.parse_address(address)
        host, port = dask.comm.addressing.parse_host_port(location, default_port=8786)
    except ValueError as exc:
        raise ConfigurationError(
            f"--scheduler {address!r} is not a Dask address ({exc}): write "
            "tcp://HOST:PORT, e.g. tcp://10.0.0.1:8786"
        ) from None
    if scheme in ("tcp", "tls"):
        step = "connect"
        try:
            with socket.create_connection((host, port), timeout=timeout) as probe:
                step = "handshake"
                if scheme == "tcp" and not probe.recv(1, socket.MSG_PEEK):
                    raise ConnectionResetError("closed the connection")
        except OSError as exc:
            silent = isinstance(exc, TimeoutError)
            reason = f"no answer within {timeout:g} s" if silent else str(exc) or type(exc).__name__
            what = "reach" if step == "connect" else "get a Dask handshake from"
            raise TargetUnreachableError(
                f"cannot {what} the Dask scheduler at {address} ({reason}): {fix}"
            ) from None
    try:
        client: Client = dask.Client(address, timeout=timeout)
    except (OSError, TimeoutError) as exc:  # Dask: "Timed out trying to connect to ..."
        raise TargetUnreachableError(
            f"cannot connect to the Dask scheduler at {address} ({exc}): {fix}"
        ) from None
    return client


def import_dask() -> Any:
    """The ``distributed`` package, or a :class:`MissingDependencyError` naming the extra."""
    try:
        import distributed
    except ImportError:
        raise MissingDependencyError(
            "a distributed probe needs Dask: pip install 'storeprobe[distributed]'"
        ) from None
    return distributed
