"""Many clients at once: one probe on many Dask workers, aggregated on one time base.

A :class:`Distributed` run of a probe (``probe.distributed(workers=4).upload_large()``)

1. opens one run prefix ``<root>/storeprobe-<utc>-<random>`` with a folder per worker
   (``w0``, ``w1``...) and measures each worker's clock against the coordinator's:
   several round trips through Dask, NTP-style, keeping the shortest (offset = the
   worker's reading minus the midpoint of the round trip; uncertainty = half of it);
2. sends each worker the probe's spec and the target's :class:`~storeprobe.target.Recipe`
   (credentials travel inside it; its ``repr`` hides them, and task keys are plain
   names, so neither Dask's logs nor its dashboard show a secret);
3. each worker rebuilds its filesystem, prepares a repeat untimed (generation; the
   upload before a download) and reports ready; when every worker is ready the
   coordinator names one start instant a little ahead on its own clock, and each worker
   opens its window at that instant on its clock (the instant plus its offset);
4. per repeat, the aggregate sample is the workers' total bytes over (latest end −
   earliest start) of their windows, every time moved onto the coordinator's clock.
   The start spread (latest actual start − earliest) is reported per sample, with a
   ``start-spread`` warning when it exceeds 5 % of the window, and a ``clock-uncertain``
   warning when the offsets' uncertainty exceeds 1 % of it;
5. a worker that fails a repeat or is lost (its process died) is a ``worker-failed``
   error of the aggregate: no aggregate figure is made without every worker. The
   coordinator waits for the others, then lists its own run prefix and deletes whatever
   is left (a lost worker cannot clean up after itself), and removes the folders.

Dask (``pip install 'storeprobe[distributed]'``) is imported only when a run starts.

The two halves of the protocol are a module each, with the Dask plumbing and the
aggregate apart: :mod:`storeprobe.distributed.worker` (what a worker runs, the barrier
it waits at, what it reports), :mod:`storeprobe.distributed.coordinator` (offsets,
releases, loss detection, cleanup), :mod:`storeprobe.distributed.aggregate_result` (the
aggregate Result and its warnings) and :mod:`storeprobe.distributed.dask_client` (a Dask
client, Dask imported only when a run starts). The window arithmetic they share is
:func:`storeprobe.sampling.aggregate`.
"""

from __future__ import annotations

import contextlib
import secrets
import time
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, Literal

import attrs
from attrs import field, frozen

# the thresholds and constants of the protocol, importable from here as before the split
from storeprobe.distributed.aggregate_result import SPREAD_WARNING as SPREAD_WARNING
from storeprobe.distributed.aggregate_result import UNCERTAINTY_WARNING as UNCERTAINTY_WARNING
from storeprobe.distributed.coordinator import LEAD_NS as LEAD_NS
from storeprobe.distributed.coordinator import OFFSET_ROUNDS as OFFSET_ROUNDS
from storeprobe.distributed.coordinator import Coordinator
from storeprobe.distributed.dask_client import (
    SCHEDULER_CONNECT_TIMEOUT_S as SCHEDULER_CONNECT_TIMEOUT_S,
)
from storeprobe.distributed.dask_client import cluster, import_dask
from storeprobe.distributed.worker import Spec
from storeprobe.errors import ConfigurationError
from storeprobe.result import OPERATIONS, Result
from storeprobe.resultset import ResultSet
from storeprobe.sampling import Window, aggregate, estimate_offset
from storeprobe.seeds import SeedProbes
from storeprobe.settings import Settings
from storeprobe.target import Target
from storeprobe.transfer import Clock
from storeprobe.workload import Workload

if TYPE_CHECKING:
    Client = Any  # distributed.Client: Dask's API is untyped

__all__ = [
    "Distributed",
    "Spec",
    "Window",
    "aggregate",
    "cluster",
    "estimate_offset",
]


@frozen(kw_only=True)
class Distributed(SeedProbes):
    """A probe run on many Dask workers at once (see the module docstring).

    ``workers`` is how many take part. With ``client`` (a ``distributed.Client``) or
    ``scheduler`` (an address such as ``tcp://10.0.0.1:8786``) the run uses that
    cluster's first ``workers`` workers (all of them when ``workers`` is None);
    otherwise a ``LocalCluster`` of ``workers`` process workers (one thread each) is
    started for each call and closed after it. ``streams`` is per worker; the aggregate
    Result's ``streams`` is their sum. ``clock`` (ns) is the coordinator's.
    """

    target: Target
    workers: int | None = None
    client: Client | None = None
    scheduler: str | None = None
    settings: Settings = field(factory=Settings)
    clock: Clock = field(default=time.perf_counter_ns, repr=False)

    def __attrs_post_init__(self) -> None:
        if self.workers is not None and (
            isinstance(self.workers, bool) or not isinstance(self.workers, int) or self.workers < 1
        ):
            raise ConfigurationError(f"workers must be a positive int, not {self.workers!r}")
        if self.client is not None and self.scheduler is not None:
            raise ConfigurationError("give client or scheduler, not both")
        if self.workers is None and self.client is None and self.scheduler is None:
            raise ConfigurationError(
                "say how many workers (workers=4 starts a LocalCluster), or give client= "
                "or scheduler= to use an existing Dask cluster"
            )
        if self.target.recipe is None:
            raise ConfigurationError(
                "a distributed probe needs a target made from a URL (Probe.from_url): "
                "each worker opens the storage again from its URL and options"
            )
        if self.target.protocol == "memory":
            raise ConfigurationError(
                "memory:// lives inside one process: workers cannot share it; use a "
                "storage every worker reaches (s3://, gs://, a shared file:// path...)"
            )
        import_dask()

    # -- the probes users name ------------------------------------------------------------
    def upload(self, workload: Workload) -> Result:
        """Every worker writes ``workload`` (its own content) at the same instant."""
        return self.measure("upload", workload)

    def download(self, workload: Workload) -> Result:
        """Every worker reads its own copy of ``workload`` back at the same instant."""
        return self.measure("download", workload)

    def run(self, workloads: Sequence[Workload] | None = None) -> ResultSet:
        """Upload and download each workload (default: small, then large) on every
        worker; one cluster session for all of them."""
        chosen = list(workloads) if workloads is not None else [Workload.small(), Workload.large()]
        with self._session() as client:
            fixed = attrs.evolve(self, client=client)
            return ResultSet(
                [fixed.measure(op, workload) for workload in chosen for op in OPERATIONS]
            )

    def measure(self, operation: Literal["upload", "download"], workload: Workload) -> Result:
        """Run ``operation`` of ``workload`` on every worker at once; the aggregate Result,
        each worker's own Result in ``result.fleet.members``."""
        if operation not in ("upload", "download"):
            raise ConfigurationError(f"operation must be 'upload' or 'download', not {operation!r}")
        if workload.seed is None:
            seed = self.settings.seed
            workload = workload.with_seed(seed if seed is not None else secrets.randbits(63))
        spec = Spec(operation=operation, workload=workload, settings=self.settings)
        with self._session() as client:
            return Coordinator(self.target, self.workers, self.clock, client, spec).run()

    @contextlib.contextmanager
    def _session(self) -> Iterator[Client]:
        if self.client is not None:
            yield self.client
            return
        with cluster(self.workers, self.scheduler) as client:
            yield client
