"""The backup-and-restore scenario: every version backed up, then versions restored.

Under a fresh run prefix of its own, ``backup 1 … backup N`` then ``restore 1 … restore
M``: the first restore puts its version into an empty local directory, each next one
works over the one before (fetching what the method's tool would fetch). The method
(:mod:`storeprobe.backup.method`) decides the requests; this module owns the rest, the
same for every method:

- each step's windows (:class:`~storeprobe.backup.session.Session`) become one Result
  whose :class:`~storeprobe.step.Step` holds the space the target uses after it;
- before each restore, everything written is evicted from the caches the client can
  reach (the page cache for ``file://``), as before a download; where it cannot be
  (sftp, object stores' own caches), the restore's Result says so (``no-cache-eviction``);
- every restored directory is verified byte for byte against its version (a difference
  is a ``verification-failed`` error, not a request failure);
- the first failing step stops the scenario (later steps depend on it; they are
  ``not-run``), and everything written is deleted at the end, whatever happened, with
  what could not be deleted named on the last Result (``cleanup-incomplete``).

What is timed: the requests. A step is a few windows run one after the other; its time
is the sum of their spans. Outside them: generating the dataset's bytes, chunking,
hashing and deltas (CPU work the tool also does, but not the storage's), writing the
restored files and verifying them.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

import attrs
from attrs import frozen

from storeprobe.backends import AsyncBackend, SyncBackend
from storeprobe.backup.method import BackupMethod, Replay, StepKind
from storeprobe.backup.registry import method_for
from storeprobe.backup.session import Session, StepProgress
from storeprobe.dataset import Dataset, Image, Tree
from storeprobe.environment import Environment
from storeprobe.errors import ConfigurationError
from storeprobe.execution import bounded, cleanup_notice, open_run, remove_run
from storeprobe.notices import Code, Notice
from storeprobe.repeats import retried_notice
from storeprobe.restore import Verified, verify_restore
from storeprobe.result import Result
from storeprobe.sampling import combine, seconds_by_kind
from storeprobe.settings import Settings
from storeprobe.step import Step
from storeprobe.strategy import Shape, Strategy
from storeprobe.subject import Subject, Unit
from storeprobe.target import Target
from storeprobe.transfer import Clock
from storeprobe.units import format_size
from storeprobe.verification import VerificationError

__all__ = ["backup_restore", "step_subject"]

_SCENARIO = "backup-restore"


@frozen(kw_only=True)
class _Plan:
    """One step decided before the scenario runs: its kind, number, and versions."""

    kind: StepKind
    number: int
    version: int
    #: for a restore, the version the directory holds before it (None: empty)
    held: int | None = None


def _plan(versions: Sequence[Dataset], restore: Sequence[int] | None) -> list[_Plan]:
    if not versions:
        raise ConfigurationError("a backup scenario needs at least one dataset version")
    for expected, dataset in enumerate(versions):
        if dataset.version != expected:
            raise ConfigurationError(
                "versions must be a dataset and its successive evolve() results "
                f"(version {expected} at position {expected}, found {dataset.version})"
            )
    order = list(range(len(versions))) if restore is None else list(restore)
    for index in order:
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < len(versions):
            raise ConfigurationError(
                f"restore names version {index!r}: use versions 0 to {len(versions) - 1}"
            )
    backups = [_Plan(kind="backup", number=n, version=n - 1) for n in range(1, len(versions) + 1)]
    restores = [
        _Plan(kind="restore", number=n, version=v, held=order[n - 2] if n > 1 else None)
        for n, v in enumerate(order, start=1)
    ]
    return backups + restores


@attrs.define
class _Scenario:
    method: BackupMethod
    replay: Replay
    session: Session
    versions: tuple[Dataset, ...]
    verify: bool
    environment: Environment
    verified: Verified = attrs.field(factory=Verified)

    def run(self, step: _Plan, directory: Path) -> Result:
        version = self.versions[step.version]
        session = self.session
        session.take_step()
        if session.progress is not None:
            session.progress.start(f"{step.kind} {step.number} ({self.method.name})")
        notices: tuple[Notice, ...] = ()
        if step.kind == "backup":
            previous = self.versions[step.version - 1] if step.version else None
            self.replay.backup(session, version, previous)
        else:
            session.evict()
            suspect = session.cache_suspect()
            if suspect is not None:
                notices = (
                    Notice(
                        code=Code.NO_CACHE_EVICTION,
                        message=suspect,
                        fix="for cold reads, restore from a target whose cache you can drop, "
                        "or back up more than the server's memory holds",
                    ),
                )
            held = None if step.held is None else self.versions[step.held]
            self.replay.restore(session, version, held, directory)
            if self.verify:
                verify_restore(version, directory, self.verified)
        return self._result(step, notices)

    def _result(self, step: _Plan, notices: tuple[Notice, ...]) -> Result:
        record = self.session.take_step()
        runs = [run for run in record.runs if run.timings.start_ns.size]
        sample = combine(runs, record.attempts)
        objects, space = self.session.usage()
        version = self.versions[step.version]
        before = (
            (self.versions[step.version - 1] if step.version else None)
            if step.kind == "backup"
            else (None if step.held is None else self.versions[step.held])
        )
        retried = retried_notice([sample])
        if retried is not None:
            notices = (*notices, retried)
        sent = sample.bytes_sent if sample.bytes_sent else sample.nbytes
        dedup = None
        if step.kind == "backup":
            dedup = None if sent == 0 else version.total_bytes / sent
        return attrs.evolve(
            self._shell(step),
            samples=(sample,),
            warnings=notices,
            step=attrs.evolve(
                self._step(step),
                changed_bytes=_changed_bytes(version, before),
                moved_bytes=sample.nbytes,
                incremental=before is not None,
                space_used=space,
                objects_stored=objects,
                dedup_ratio=dedup,
                seconds_by_kind=seconds_by_kind(runs),
            ),
        )

    def _step(self, step: _Plan) -> Step:
        version = self.versions[step.version]
        return Step(
            scenario=_SCENARIO,
            method=self.method.name,
            kind=step.kind,
            number=step.number,
            version=version.version,
            dataset=version.describe(),
            dataset_bytes=version.total_bytes,
            changed_bytes=0,
            moved_bytes=0,
            incremental=step.number > 1,
        )

    def _shell(self, step: _Plan) -> Result:
        target = self.session.target
        return Result(
            operation=step.kind,
            subject=step_subject(self.versions[step.version]),
            url=target.url,
            protocol=target.protocol,
            backend=target.client,
            streams=self.session.streams,
            effective_streams=self.session.streams,
            strategy=Strategy(shape=Shape.DESCRIBED, description=self.method.strategy(step.kind)),
            samples=(),
            environment=self.environment,
            step=self._step(step),
        )

    def failed(self, step: _Plan, error: Notice) -> Result:
        return attrs.evolve(self._shell(step), errors=(error,))

    def run_all(self, steps: Sequence[_Plan], directory: Path) -> list[Result]:
        """Every step's Result, in order: the first failing step's holds its error, each
        later one a ``not-run`` error (it depends on the steps before it)."""
        results: list[Result] = []
        failed: Notice | None = None
        for step in steps:
            if failed is not None:
                results.append(self.failed(step, _not_run(failed)))
                continue
            try:
                results.append(self.run(step, directory))
            except Exception as exc:
                failed = _error(self.session.target, exc)
                results.append(self.failed(step, failed))
        return results


def _changed_bytes(dataset: Dataset, previous: Dataset | None) -> int:
    if previous is None:
        return dataset.total_bytes
    if isinstance(dataset, Tree) and isinstance(previous, Tree):
        return dataset.diff(previous).changed_bytes
    if isinstance(dataset, Image) and isinstance(previous, Image):
        return dataset.diff(previous).changed_bytes
    return dataset.total_bytes


def step_subject(dataset: Dataset) -> Subject:
    """What a step of ``dataset`` counts: seconds per step, of its files (their mean
    size, rounded up), named ``"tree v1"`` or ``"image v0"`` with its ``"12 × 3 KiB"``."""
    files = len(dataset.files)
    mean = -(-dataset.total_bytes // files) if files else 0
    kind = "image" if isinstance(dataset, Image) else "tree"
    return Subject.counted(
        Unit.SECONDS_PER_STEP,
        files,
        each=format_size(mean),
        object_size=mean,
        name=f"{kind} v{dataset.version}",
    )


def _error(target: Target, exc: Exception) -> Notice:
    if isinstance(exc, VerificationError):
        code = Code.VERIFICATION_FAILED
    elif isinstance(exc, TimeoutError):
        code = Code.TIMEOUT
    else:
        code = Code.REQUEST_FAILED
    return Notice(code=code, message=target.describe_error(exc), repeat=1)


def backup_restore(
    target: Target,
    versions: Sequence[Dataset],
    *,
    method: str | BackupMethod,
    settings: Settings,
    clock: Clock,
    restore: Sequence[int] | None = None,
    chunk_size: int | str | None = None,
    progress: StepProgress | None = None,
) -> list[Result]:
    """Back up every version, then restore versions; one Result per step.

    ``settings`` are the probe's (``streams``, ``timeout``, ``verify`` and ``label``
    apply; the scenario runs once, whatever ``repeats`` says). ``method`` is a method
    name (:data:`~storeprobe.backup.METHODS`) or a
    :class:`~storeprobe.backup.BackupMethod` with its options; ``chunk_size`` sets a
    named chunking method's average chunk size. ``restore`` lists the
    versions to restore, in order (default: every version, oldest first): the first
    into an empty directory, each next one over the one before it. The method, the
    versions and the restore order are checked before any I/O. ``progress``
    (:class:`~storeprobe.progress.StepBar` for a terminal) is told of each step, of the
    bytes each window moved once it closed, and of untimed work (chunking) as it goes:
    never while a window is open.

    The first failure stops the scenario: its Result holds the error, later steps are
    Results with a ``not-run`` error. Everything written is deleted at the end.
    """
    chosen = method_for(method, target.protocol, chunk_size=chunk_size)
    steps = _plan(versions, restore)
    check_restore_room(versions, chosen.restore_scratch(versions))
    environment, prefix = open_run(target, settings.label, settings.timeout, chosen.folders)
    try:
        session = _session(target, prefix, chosen, settings, clock, progress)
    except Exception as exc:  # the range check: nothing but the prefix is left to remove
        if progress is not None:
            progress.close()
        remove_run(target, prefix, chosen.folders)
        raise target.translate(exc, "checking how byte ranges are read") from None
    scenario = _Scenario(
        method=chosen,
        replay=chosen.replay(),
        session=session,
        versions=tuple(versions),
        verify=settings.verify,
        environment=environment,
    )
    directory = Path(tempfile.mkdtemp(prefix="storeprobe-restore-"))
    try:
        results = scenario.run_all(steps, directory)
    finally:
        if progress is not None:
            progress.close()
        shutil.rmtree(directory, ignore_errors=True)
        leftovers = session.close(chosen.folders)
    return _with_cleanup_notice(results, cleanup_notice(prefix, leftovers))


def _session(
    target: Target,
    prefix: str,
    method: BackupMethod,
    settings: Settings,
    clock: Clock,
    progress: StepProgress | None,
) -> Session:
    """The scenario's session under ``prefix``, its reader decided once (untimed): the
    client that reads byte ranges here, for a method that reads them."""
    backend = target.backend
    reader = (
        _range_reader(target, f"{prefix}/range-check", settings.timeout)
        if method.ranged_reads
        else backend
    )
    if not isinstance(reader, AsyncBackend | SyncBackend):
        raise TypeError(f"{type(reader).__name__} is neither an async nor a sync backend")
    return Session(
        target=target,
        prefix=prefix,
        streams=settings.streams,
        prep_streams=settings.prep_streams,
        timeout=settings.timeout,
        clock=clock,
        reader=reader,
        premade=frozenset(method.folders),
        progress=progress,
    )


def _with_cleanup_notice(results: list[Result], notice: Notice | None) -> list[Result]:
    """``results``, the last one with the ``cleanup-incomplete`` ``notice`` (None: none)."""
    if notice is None or not results:
        return results
    last = results[-1]
    return [*results[:-1], attrs.evolve(last, warnings=(*last.warnings, notice))]


#: free space kept beyond what a restore needs (the disk's own margin, a spooled volume)
_RESTORE_MARGIN = 64 * 1024 * 1024


def check_restore_room(
    versions: Sequence[Dataset], scratch: int, directory: str | None = None
) -> int:
    """Bytes a scenario's restores need on the local disk, once ``directory`` (the
    temporary directory, ``TMPDIR``, by default) has them free; else
    :class:`ConfigurationError`, before anything is written.

    A restore writes the whole version into a directory there, and beside it the
    method's scratch files (``scratch`` bytes at the most at once:
    :meth:`~storeprobe.backup.BackupMethod.restore_scratch`, by default room to stage
    the largest file twice): the largest version's bytes plus ``scratch``, plus a margin
    of 64 MiB."""
    directory = directory or tempfile.gettempdir()
    largest = max((version.total_bytes for version in versions), default=0)
    need = largest + scratch + _RESTORE_MARGIN
    free = shutil.disk_usage(directory).free
    if free < need:
        raise ConfigurationError(
            f"restoring this dataset needs {format_size(need)} of free space in {directory} "
            f"(its largest version, {format_size(largest)}, and {format_size(scratch)} of "
            f"the method's scratch files beside it; {format_size(free)} free): point TMPDIR "
            "at a larger disk, or use a smaller dataset or fewer versions"
        )
    return need


def _range_reader(target: Target, probe: str, timeout: float | None) -> object:
    """The client that reads byte ranges here, decided once before step 1 (untimed): a
    1-byte object is written at ``probe``, read with a ranged GET, and deleted."""
    fs = target.fs
    bounded(lambda: fs.pipe_file(probe, b"\0"), timeout)
    try:
        found: list[object] = []
        bounded(lambda: found.append(target.backend.range_reader(probe)), timeout)
        return found[0]
    finally:
        bounded(lambda: fs.rm_file(probe), timeout)


def _not_run(cause: Notice) -> Notice:
    return Notice(
        code=Code.NOT_RUN,
        message=f"not run: an earlier step failed ({cause.code.value})",
        fix="fix the first failing step and run again",
    )
