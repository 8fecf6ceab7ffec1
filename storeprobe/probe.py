"""How and where: push a workload through a filesystem, time it, verify it, clean up.

One probe call (``upload`` or ``download``) does, for each of ``repeats`` repetitions:

1. generate the payloads for fresh object names (untimed; each repeat has its own
   content, so no deduplicating store can flatter later repeats);
2. for a download, upload those objects first (untimed), evict caches, and ask the
   storage for each object's size (untimed; it must match what was written);
3. run the timed window: at most ``streams`` requests in flight, the window running
   from the first request's start to the last request's end;
4. verify (untimed): every downloaded byte is compared with the regenerated payload;
5. delete exactly the names this repeat wrote.

All names live under a fresh run prefix ``<root>/storeprobe-<utc>-<random>``; whatever
happens, a ``finally`` deletes every name the probe recorded and removes the prefix.
Only step 3 keeps ``streams`` requests in flight; the untimed uploads, size checks and
deletes run with ``prep_streams`` (default 32).
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Sequence
from typing import Any

import attrs
import fsspec
from attrs import define, field
from fsspec.callbacks import Callback

from storeprobe.backup import Method, backup_restore
from storeprobe.backup.session import StepProgress
from storeprobe.dataset import Image, Tree
from storeprobe.distributed import Distributed
from storeprobe.environment import check_label
from storeprobe.errors import ConfigurationError
from storeprobe.measurement import Measurement
from storeprobe.metadata import (
    MetadataMeasurement,
    MetadataOperation,
    check_count,
    check_operation,
    object_size,
)
from storeprobe.result import OPERATIONS, Result, Transfer
from storeprobe.resultset import ResultSet
from storeprobe.seeds import SeedProbes
from storeprobe.settings import (
    DEFAULT_PREP_STREAMS,
    MAX_REPEATS,
    MAX_STREAMS,
    PREP_STREAMS,
    WARMUP,
    Settings,
    check_part_size,
    check_seed,
    check_stage_above,
    check_timeout,
    in_range,
)
from storeprobe.settings import part_size as part_size_of
from storeprobe.target import Target
from storeprobe.transfer import Clock
from storeprobe.units import GiB, format_size, parse_size
from storeprobe.workload import Workload

__all__ = ["MAX_REPEATS", "MAX_STREAMS", "Probe"]


def _default_target(probe: Probe) -> Target:
    return Target(probe.fs, probe.path)


@define
class Probe(SeedProbes):
    """Measures uploads and downloads of a :class:`Workload` on one filesystem path.

    ``streams`` is the number of requests in flight: ``streams=1`` keeps exactly one at
    any moment; ``streams=N`` moves N objects at once, or N parts / byte ranges of a
    single object where the backend can split it (the Result's ``strategy`` and
    ``effective_streams`` say what was done). ``timeout`` bounds, in seconds, each
    request of an asynchronous client (S3, GCS, Azure, SFTP) and every untimed
    preparation and cleanup step; a local disk or memory call is not interrupted.
    ``part_size`` (bytes or ``"16MiB"``) sets the part size when one object is split;
    by default about four parts per stream, at least the backend's minimum.
    One object of at least ``stage_above`` bytes (default 1 GiB), probed alone, is staged
    through a local file at any stream count, so that memory holds only what is in
    flight (see :mod:`storeprobe.staging`). ``seed`` fixes the bytes of workloads that
    have no seed of their own; by default every measurement draws a fresh random seed,
    recorded in its Result (``result.workload.seed``), so no storage sees the same bytes
    twice. ``prep_streams`` (default 32) is the number of requests in flight for the
    untimed work around the windows: the objects a download reads, uploaded first; their
    size checks; absence checks; deletes and cleanup. It never changes a window, which
    keeps ``streams``. ``warmup`` (default 0) repeats run first, exactly as the measured
    ones (same windows, same untimed work), and are kept in the Result apart
    (``result.warmup_samples``): they count in no figure, statistic or warning. One
    warm-up repeat pays the connections' first handshakes (TCP, and TLS on HTTPS) outside
    the measured repeats.
    ``clock`` returns nanoseconds and is replaceable for tests. ``callback`` (an
    ``fsspec.callbacks.Callback``, e.g. ``TqdmCallback``) is told the bytes of each timed
    repeat (``set_size``) and their progress (``absolute_update``) from a separate
    thread, at most 10 times a second: nothing is drawn inside the timed window.

    ``target`` is built from ``fs`` and ``path``; :meth:`from_url` passes one it built.
    """

    fs: fsspec.AbstractFileSystem
    path: str
    streams: int = field(
        default=1, kw_only=True, validator=in_range(1, MAX_STREAMS, "use e.g. 1, 4 or 16")
    )
    repeats: int = field(
        default=3, kw_only=True, validator=in_range(1, MAX_REPEATS, "3 is the usual choice")
    )
    warmup: int = field(default=0, kw_only=True, validator=WARMUP)
    verify: bool = field(default=True, kw_only=True)
    timeout: float | None = field(default=300.0, kw_only=True, validator=check_timeout)
    part_size: int | None = field(
        default=None, kw_only=True, converter=part_size_of, validator=check_part_size
    )
    stage_above: int = field(
        default=GiB, kw_only=True, converter=parse_size, validator=check_stage_above
    )
    label: str | None = field(default=None, kw_only=True)
    seed: int | None = field(default=None, kw_only=True, validator=check_seed)
    prep_streams: int = field(default=DEFAULT_PREP_STREAMS, kw_only=True, validator=PREP_STREAMS)
    clock: Clock = field(default=time.perf_counter_ns, kw_only=True, repr=False)
    callback: Callback | None = field(default=None, kw_only=True, repr=False)
    target: Target = field(
        default=attrs.Factory(_default_target, takes_self=True), kw_only=True, repr=False
    )

    @property
    def settings(self) -> Settings:
        """The probe's settings as one value (what every measurement takes)."""
        return Settings(
            streams=self.streams,
            repeats=self.repeats,
            warmup=self.warmup,
            verify=self.verify,
            timeout=self.timeout,
            part_size=self.part_size,
            stage_above=self.stage_above,
            label=self.label,
            seed=self.seed,
            prep_streams=self.prep_streams,
        )

    def __attrs_post_init__(self) -> None:
        check_label(self.label)
        if self.target.fs is not self.fs:
            raise ConfigurationError(
                "target must be a Target of the probe's own filesystem: pass fs=target.fs, "
                "path=target.root, or use Probe.from_url"
            )
        minimum = self.target.backend.capabilities.min_part_size
        if self.part_size is not None and self.part_size < minimum:
            raise ConfigurationError(
                f"part_size {format_size(self.part_size)} is below the minimum of "
                f"{format_size(minimum)} for {self.target.client}: use at least that"
            )

    @classmethod
    def from_url(
        cls,
        url: str,
        storage_options: dict[str, Any] | None = None,
        *,
        client: str = "auto",
        **options: Any,
    ) -> Probe:
        """A probe of ``url`` opened with fsspec; ``options`` are the probe's own
        (``streams``, ``repeats``, ...). ``client`` picks the S3 client for ``s3://``
        (``"auto"``, ``"obstore"`` or ``"s3fs"``: see :meth:`Target.from_url`)."""
        target = Target.from_url(url, storage_options, client=client)
        return cls(target.fs, target.root, target=target, **options)

    def run(self, workloads: Sequence[Workload] | None = None) -> ResultSet:
        """Upload and download each workload (default: small, then large)."""
        chosen = list(workloads) if workloads is not None else [Workload.small(), Workload.large()]
        return ResultSet([self.measure(op, workload) for workload in chosen for op in OPERATIONS])

    def with_streams(self, streams: int) -> Probe:
        """The same probe (same target and options) with another stream count."""
        return attrs.evolve(self, streams=streams)  # every option, the target too

    def sweep(
        self,
        operation: Transfer,
        workload: Workload,
        streams: Sequence[int] = (1, 2, 4, 8, 16, 32),
    ) -> ResultSet:
        """Run one probe at each stream count; ``.saturation()`` on the returned set
        names the smallest count reaching 95 % of the best throughput."""
        if not streams:
            raise ConfigurationError("sweep needs at least one stream count")
        probes = [self.with_streams(count) for count in streams]  # validates every count first
        return ResultSet([probe.measure(operation, workload) for probe in probes])

    def upload(self, workload: Workload) -> Result:
        """Time writing ``workload`` to fresh names."""
        return self.measure("upload", workload)

    def download(self, workload: Workload) -> Result:
        """Time reading ``workload`` back after an untimed upload."""
        return self.measure("download", workload)

    def backup_restore(
        self,
        dataset: Tree | Image,
        *,
        versions: int | Sequence[Tree | Image] = 6,
        method: Method = "files",
        chunk_size: int | str | None = None,
        restore: Sequence[int] | None = None,
        progress: StepProgress | None = None,
    ) -> ResultSet:
        """Back up ``versions`` versions of ``dataset``, then restore each; one Result per
        step (see :mod:`storeprobe.backup`). ``progress`` (e.g.
        :class:`storeprobe.progress.StepBar`) is told of each step between its windows.

        ``versions`` is a count (the dataset and its successive ``evolve()`` results with
        their defaults) or the versions themselves. ``method`` names the tool whose
        requests are replayed (:data:`storeprobe.backup.METHODS`: ``"files"`` is
        whole-file sync, as rclone; ``"restic"`` restic 0.14's repository of packs, index
        and snapshots; ``"chunks"`` a generic chunk store, one existence check per
        chunk; ``"rsnapshot"`` hard-linked snapshot trees and ``"rdiff-backup"`` a
        mirror with reverse deltas, both on file systems only) or is a
        :class:`~storeprobe.backup.BackupMethod` with its
        options; ``chunk_size`` (bytes or ``"4MiB"``) sets a chunking method's average
        chunk size (its default otherwise). Requests run
        ``streams`` at a time; the scenario runs once (``repeats`` does not apply: each
        step depends on the one before). ``restore`` lists the versions to restore, in
        order (default: all, oldest first); the first is restored into an empty
        directory, each next one incrementally over the one before, e.g. ``[5, 2]``:
        the latest, then back to an older one.
        """
        if isinstance(versions, int):
            if isinstance(versions, bool) or not 1 <= versions <= 100:
                raise ConfigurationError(f"versions must be from 1 to 100, not {versions!r}")
            chain: list[Tree | Image] = [dataset]
            for _ in range(versions - 1):
                chain.append(chain[-1].evolve())
        else:
            chain = list(versions)
        return ResultSet(
            backup_restore(
                self.target,
                chain,
                method=method,
                settings=self.settings,
                clock=self.clock,
                chunk_size=chunk_size,
                restore=restore,
                progress=progress,
            )
        )

    def distributed(
        self,
        workers: int | None = None,
        *,
        client: Any = None,
        scheduler: str | None = None,
    ) -> Distributed:
        """This probe on many Dask workers at once: ``probe.distributed(workers=4)``
        starts a LocalCluster of 4 process workers for each call; ``client=`` (a
        ``distributed.Client``) or ``scheduler="tcp://host:8786"`` use an existing
        cluster. Each worker runs this probe's settings with ``streams`` streams of its
        own; the Result is the aggregate on one time base (see
        :mod:`storeprobe.distributed`). Needs a probe made with :meth:`from_url`.
        """
        return Distributed(
            target=self.target,
            workers=workers,
            client=client,
            scheduler=scheduler,
            settings=self.settings,
            clock=self.clock,
        )

    def measure(self, operation: Transfer, workload: Workload) -> Result:
        """Run ``operation`` on ``workload`` ``repeats`` times and return the Result.

        A workload without a seed gets the probe's ``seed``, or a fresh random one.
        """
        if operation not in OPERATIONS:
            raise ConfigurationError(f"operation must be 'upload' or 'download', not {operation!r}")
        if not isinstance(workload, Workload):
            raise ConfigurationError(
                "workload must be a Workload (e.g. Workload.small()), "
                f"not {type(workload).__name__}"
            )
        if workload.seed is None:
            workload = workload.with_seed(
                self.seed if self.seed is not None else secrets.randbits(63)
            )
        measurement = Measurement(
            target=self.target,
            operation=operation,
            workload=workload,
            settings=self.settings,
            clock=self.clock,
            callback=self.callback,
        )
        return measurement.run()

    def metadata(
        self, operation: MetadataOperation, count: int = 1000, size: int | str = 0
    ) -> Result:
        """Time ``operation`` ("head", "list" or "delete") on ``count`` fresh objects of
        ``size`` bytes (0 by default), written untimed; ``repeats`` times.

        ``head`` and ``delete`` make one request per object, ≤ ``streams`` in flight;
        ``list`` lists them all, page after page. The figure is operations per second
        (:func:`storeprobe.metadata.ops_per_s`; keys per second for ``list``), with
        per-request latency percentiles; no bandwidth. ``callback`` is not used (no
        bytes move). See :mod:`storeprobe.metadata`.
        """
        measurement = MetadataMeasurement(
            target=self.target,
            operation=check_operation(operation),
            count=check_count(count),
            size=object_size(size),
            settings=self.settings.evolve(
                seed=self.seed if self.seed is not None else secrets.randbits(63)
            ),
            clock=self.clock,
        )
        return measurement.run()
