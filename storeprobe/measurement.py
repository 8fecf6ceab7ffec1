"""One measurement: a workload's upload or download, repeated, timed, verified, cleaned up.

For each of ``warmup`` warm-up repetitions, then each of ``repeats`` measured ones, a
:class:`Measurement`

1. names fresh objects and derives their content from the workload's seed and the
   repeat (each repeat has its own bytes, so no deduplicating store flatters later ones);
2. for a download, uploads those objects first (untimed), evicts caches, and asks the
   storage for each object's size (untimed; it must match what was written);
3. runs the timed window: the plan's requests with at most ``streams`` in flight, from
   the first request's start to the last one's end;
4. verifies (untimed): every downloaded byte against the regenerated payload;
5. deletes exactly the names this repeat wrote.

A warm-up repeat is a measured one in every step (its own names and bytes, the same
window); its sample goes to the Result's ``warmup_samples``, which no figure, statistic or
warning counts, and a coordinator (:class:`Gate`) does not hold its window.

Only step 3 keeps ``streams`` requests in flight. The untimed work around it (absence
checks, the upload before a download, the size checks, the deletes) runs with
``prep_streams`` in flight (default 32), so a probe at one stream does not spend most
of its wall time preparing one request at a time. One exception: a staged upload before
a download keeps its layout's parts in flight, since memory was checked for those.

The layout (how the workload is cut into requests) is decided once, before any I/O
(:func:`storeprobe.planning.choose`); the clients that write and read are decided once
too, before the first repeat (untimed): a conditional-write check and, for a split
download, a ranged read of a small object written for it. The Result's ``strategy``
(:class:`~storeprobe.strategy.Strategy`) is the layout's, with the fallbacks these found.

All names live under a fresh run prefix; whatever happens, a ``finally`` deletes every
name the measurement recorded, lists the run prefix and deletes what the listing still
shows (a PUT the client gave up on when a window failed can land after its name's
delete), and removes the prefix (:func:`storeprobe.repeats.run_repeats`). Failures
become error notices of the Result; cleanup that cannot finish becomes a
``cleanup-incomplete`` warning naming what was left.

Why one module (~560 lines): it is the probe's method in one place (the untimed steps
around each window, the clients chosen before the first repeat, the names each repeat
records for cleanup), so it can be read against the docs in one sitting; the repeat loop
is :mod:`storeprobe.repeats`. Running a plan is
:mod:`storeprobe.execution`, the wrappers around jobs :mod:`storeprobe.jobs`, the
checks :mod:`storeprobe.verification`.
"""

from __future__ import annotations

import contextlib
import os
import posixpath
import sys
import warnings
from collections.abc import Iterator, Sequence
from typing import Literal, Protocol

import attrs
from attrs import frozen
from fsspec.callbacks import Callback

from storeprobe.arena import Arena
from storeprobe.backends import AsyncBackend, SyncBackend
from storeprobe.backends.attempts import between
from storeprobe.backends.base import Backend as BaseBackend
from storeprobe.backends.base import Landing, sliced_landings
from storeprobe.errors import StoreProbeWarning
from storeprobe.execution import bounded, execute
from storeprobe.jobs import Wrapper, land_ranges, release_parts, settling
from storeprobe.notices import Code, Notice
from storeprobe.planning import (
    Layout,
    Plan,
    choose,
    download_plan,
    head_plan,
    upload_plan,
)
from storeprobe.repeats import (
    Housekeeping,
    Opened,
    Turn,
    retried_notice,
    run_repeats,
    stability_of,
)
from storeprobe.request import Body, Kind, Part, Request
from storeprobe.result import Result, Sample
from storeprobe.sampling import sample_of
from storeprobe.settings import Settings
from storeprobe.staging import Staging
from storeprobe.strategy import Fallback, Strategy
from storeprobe.target import Target
from storeprobe.timeline import stall_notice
from storeprobe.transfer import Clock, Run
from storeprobe.verification import (
    ShortTransferError,
    check_memory,
    check_sizes,
    verify_outcomes,
    verify_staged,
)
from storeprobe.workload import Workload

__all__ = ["Gate", "Measurement"]

Backend = AsyncBackend | SyncBackend


class Gate(Protocol):
    """Where a coordinator holds each repeat's window (many clients starting together).

    Every call is untimed. ``wait`` returns when the repeat's window may open (the
    repeat's data is made and, for a download, uploaded; the next thing is the first
    request) or raises to skip the repeat; ``opened`` receives the window's first
    request start and last request end on the measurement's clock (ns); ``abandon`` is
    called when a repeat ends in an error, whether or not ``wait`` was reached.
    """

    def wait(self, repeat: int) -> None: ...

    def opened(self, repeat: int, start_ns: int, end_ns: int) -> None: ...

    def abandon(self, repeat: int) -> None: ...


@frozen(kw_only=True)
class _Chosen:
    """What a measurement decides once, before its first repeat (untimed)."""

    #: how the workload is cut into the timed requests
    layout: Layout
    #: a download's untimed upload before each window (None: an upload)
    setup: Layout | None
    #: the backend that writes (see :meth:`Housekeeping.writer`)
    writer: Backend
    #: the backend that reads a download's byte ranges (see :meth:`Measurement._reader`)
    reader: Backend
    #: the range check's error: each repeat of the download fails with it (None: none)
    refused: Exception | None
    #: the buffer each repeat's bodies and landings are taken from in turn (see
    #: :mod:`storeprobe.arena`): its pages touched once per call, not once per repeat
    arena: Arena


@frozen(kw_only=True)
class Measurement:
    """One probe call's settings, bound to its target (see the module docstring)."""

    target: Target
    operation: Literal["upload", "download"]
    workload: Workload
    settings: Settings
    clock: Clock
    callback: Callback | None
    #: holds each window until a coordinator releases it (None: windows open at once)
    gate: Gate | None = None

    # -- the plan's shape ------------------------------------------------------------------
    def _layout(self, operation: Literal["upload", "download"]) -> Layout:
        backend = self.target.backend
        return choose(
            backend.capabilities,
            backend.client,
            operation,
            self.workload,
            self.settings.streams,
            part_size=self.settings.part_size,
            stage_above=self.settings.stage_above,
        )

    def run(self) -> Result:
        """Measure, and return the Result (errors and warnings included)."""
        layout = self._layout(self.operation)
        setup = self._layout("upload") if self.operation == "download" else None
        self._check_room(layout, setup)
        house = Housekeeping(target=self.target, settings=self.settings, clock=self.clock)
        opened = house.open()
        reader, refused = self._reader(layout, opened, house)
        chosen = _Chosen(
            layout=layout,
            setup=setup,
            writer=opened.writer,
            reader=reader,
            refused=refused,
            arena=Arena(),
        )
        notices = self._notices(chosen)
        _warn_cannot_split(layout)
        prefix, count = opened.prefix, self.workload.count

        def names_of(turn: Turn) -> list[str]:
            return [f"{prefix}/{turn.label}-{index:07d}" for index in range(count)]

        def step(turn: Turn, names: list[str]) -> Sample:
            return self._repeat(house, chosen, turn, names)

        # the run prefix is listed at the end: a PUT the client gave up on when a window
        # failed (or was interrupted) can still land after its name's delete
        repeated = run_repeats(house, opened, names_of, step, failed=self._abandon, listing=True)
        return house.result(
            repeated,
            opened,
            notices=[*notices, *self._judge(repeated.samples)],
            operation=self.operation,
            measured=self.workload,
            effective_streams=layout.effective_streams,
            strategy=self._strategy(chosen),
        )

    def _check_room(self, layout: Layout, setup: Layout | None) -> None:
        """Memory for what the layouts hold, and local disk for a staged object, checked
        before anything is written."""
        workload = self.workload
        needed = max(_held(setup or layout, workload), _held(layout, workload))
        if needed:
            holds = (
                "the parts in flight" if needed < workload.total_bytes else "one repeat's payload"
            )
            check_memory(workload, needed, holds)
        if layout.staged or (setup is not None and setup.staged):
            Staging.check_room(workload.largest)

    def _notices(self, chosen: _Chosen) -> list[Notice]:
        """The Result's own warnings: the layout's, the client's and endpoint's, the
        fallbacks ``chosen`` took, and a download's cache that could not be evicted."""
        target, backend = self.target, self.target.backend
        found: list[Notice] = list(chosen.layout.notices)
        if target.client_notice is not None:
            found.append(target.client_notice)
        if target.s3_endpoint is not None:
            found.extend(target.s3_endpoint.notices(target.client))
        if chosen.writer is not backend:
            found.append(_NO_CONDITIONAL_WRITE)
        if chosen.reader is not backend:
            found.append(_RANGES_VIA_S3FS)
        if self.operation == "download" and (suspect := backend.cache_suspect()):
            found.append(
                Notice(
                    code=Code.NO_CACHE_EVICTION, message=suspect, fix="treat it as an upper bound"
                )
            )
        return found

    def _strategy(self, chosen: _Chosen) -> Strategy:
        """The layout's strategy, with the fallbacks ``chosen`` took."""
        backend = self.target.backend
        strategy = chosen.layout.strategy
        # a download's timed requests are plain GETs: no absence check in its windows
        if chosen.writer is not backend and self.operation == "upload":
            strategy = attrs.evolve(strategy, fallbacks=(Fallback.ABSENCE_BY_HEAD,))
        if chosen.reader is not backend:
            strategy = attrs.evolve(strategy, reader=chosen.reader.client)
        return strategy

    def _judge(self, samples: Sequence[Sample]) -> list[Notice]:
        found = stability_of(
            samples,
            [s.bytes_per_s for s in samples],
            operation=self.operation,
            target=self.target,
            warmup=self.settings.warmup,
        )
        for number, sample in enumerate(samples, 1):
            if sample.has_timeline:
                stall = stall_notice(sample.timeline(), repeat=number if len(samples) > 1 else None)
                if stall is not None:
                    found.append(stall)
        if (retried := retried_notice(samples)) is not None:
            found.append(retried)
        return found

    # -- one repeat ------------------------------------------------------------------------
    def _repeat(self, house: Housekeeping, chosen: _Chosen, turn: Turn, names: list[str]) -> Sample:
        """One turn on its names: the turn's own bytes (a measured repeat's are those it
        has without warm-ups: seed + repeat), the names checked absent where writes are
        unconditional, then the timed upload, or the untimed upload and the timed
        download."""
        workload, writer = self.workload, chosen.writer
        content = workload.with_payload_seed(((workload.seed or 0) + turn.seed_offset) % 2**63)
        if writer is not self.target.backend:
            house.check_absent(writer, names)
        try:
            if self.operation == "upload":
                return self._upload(writer, chosen, content, names, turn.repeat)
            assert chosen.setup is not None
            if chosen.refused is not None:  # the range check's error, as each repeat's
                raise chosen.refused
            self._setup(writer, chosen, content, names)
            return self._download(chosen, content, names, turn.repeat)
        except BaseException:
            # a request the failed window gave up on may still read or write its buffer
            # (a client thread that cannot be stopped): the next repeat takes a new one
            chosen.arena.release()
            raise

    @staticmethod
    def _bodies(
        backend: Backend, plan: Plan, workload: Workload, staging: Staging | None, arena: Arena
    ) -> list[Body | None]:
        """Each request's body, made before the window (from the repeat's workload): the
        client's own :meth:`~storeprobe.backends.Backend.bodies` (views of ``arena`` where
        it sends from a view), or parts of the staging file."""
        if staging is None:
            parts = [r.body for r in plan.requests if r.body is not None]
            made = iter(backend.bodies(workload, parts, arena))
            return [None if request.body is None else next(made) for request in plan.requests]
        bodies: list[Body | None] = []
        for request in plan.requests:
            part = request.body
            if part is None:
                bodies.append(None)
            elif request.kind is Kind.PUT:  # the whole object, read by the client itself
                bodies.append(backend.whole_staged_file(staging))
            else:
                bodies.append(backend.staged_body(staging, part))
        return bodies

    @contextlib.contextmanager
    def _prepared(
        self, backend: Backend, layout: Layout, workload: Workload, names: list[str], arena: Arena
    ) -> Iterator[tuple[Plan, list[Body | None], Wrapper | None]]:
        """An upload made ready before its window: the plan, each request's body (from a
        staging file where the layout stages) and the wrapper that unmaps a staged part
        once sent; the staging file is closed when the block ends. The bodies are
        yielded, not kept here, so the caller's ``del`` frees them."""
        plan = upload_plan(layout, workload, names)
        staging = Staging.of_payload(workload, 0) if layout.staged else None
        try:
            wrap = settling(release_parts(plan, staging)) if staging is not None else None
            yield plan, self._bodies(backend, plan, workload, staging, arena), wrap
        finally:
            if staging is not None:
                staging.close()

    def _upload(
        self,
        backend: Backend,
        chosen: _Chosen,
        workload: Workload,
        names: list[str],
        repeat: int | None,
    ) -> Sample:
        prepared = self._prepared(backend, chosen.layout, workload, names, chosen.arena)
        with prepared as (plan, bodies, wrap):
            backend.fs.invalidate_cache()
            before = backend.attempts_seen()
            self._wait(repeat)
            run = self._execute(backend, plan, bodies=bodies, wrap=wrap, timed=True)
            del bodies
            self._opened(repeat, run)
        self._check_moved(run, workload)
        return sample_of(run, between(before, backend.attempts_seen()))

    def _setup(
        self, backend: Backend, chosen: _Chosen, workload: Workload, names: list[str]
    ) -> None:
        """The untimed upload before a download, then caches evicted and sizes confirmed."""
        layout = chosen.setup
        assert layout is not None
        prepared = self._prepared(backend, layout, workload, names, chosen.arena)
        with prepared as (plan, bodies, wrap):
            # a staged layout's parts in flight are what memory was checked for: keep them
            streams = self.settings.streams if layout.staged else None
            self._execute(backend, plan, bodies=bodies, wrap=wrap, streams=streams)
            del bodies
        backend.after_upload(names)
        if backend.capabilities.confirms_size:
            self._confirm_sizes(backend, names, workload.object_sizes.tolist())
        backend.fs.invalidate_cache()

    def _confirm_sizes(self, backend: Backend, names: list[str], sizes: list[int]) -> None:
        """Each object's size after the setup upload: one listing of their folder (a
        request a thousand names) and a HEAD of each name it does not show at its size (a
        listing may lag a write on some storages, or be forbidden: a HEAD decides)."""
        found: list[dict[str, int]] = []
        folder = posixpath.commonpath([posixpath.dirname(name) for name in names])
        with contextlib.suppress(Exception):
            bounded(lambda: found.append(backend.listed(folder)), self.settings.timeout)
        listed = found[0] if found else {}
        unseen = [i for i, name in enumerate(names) if listed.get(name) != sizes[i]]
        if unseen:
            heads = head_plan([names[i] for i in unseen])
            run = self._execute(backend, heads)
            check_sizes(heads.requests, run.outcomes, [sizes[i] for i in unseen])

    def _reader(
        self, layout: Layout, opened: Opened, house: Housekeeping
    ) -> tuple[Backend, Exception | None]:
        """The backend that reads this download's byte ranges, decided once before the
        run (untimed): a small object is written, the client's check reads a range of it
        (see ``range_reader``), and the object is deleted. A check that fails is
        returned with the backend, to fail each repeat as the ranged reads would."""
        backend = self.target.backend
        if self.operation != "download" or not layout.split or not _checks_ranges(backend):
            return backend, None
        writer, written = opened.writer, opened.written
        probe_key = f"{opened.prefix}/range-read-check"
        written.append(probe_key)
        check = Workload(count=1, size=_RANGE_CHECK_BYTES, seed=self.workload.seed)
        part = Part(0, 0, _RANGE_CHECK_BYTES)
        put = Plan(phases=((Request(kind=Kind.PUT, key=probe_key, body=part),),))
        found: list[object] = []
        try:
            self._execute(writer, put, bodies=[writer.body(check, part)])
            bounded(lambda: found.append(backend.range_reader(probe_key)), self.settings.timeout)
        except Exception as exc:
            return backend, exc
        finally:
            if not house.delete([probe_key]):
                written.remove(probe_key)
        reader = found[0]
        assert isinstance(reader, AsyncBackend | SyncBackend)
        return reader, None

    def _download(
        self, chosen: _Chosen, workload: Workload, names: list[str], repeat: int | None
    ) -> Sample:
        layout, reader = chosen.layout, chosen.reader
        plan = download_plan(layout, workload, names)
        requests = plan.requests
        staging = Staging.blank(workload.size_of(0)) if layout.staged else None
        try:
            landings: list[Landing]
            if staging is None and reader.capabilities.reads_into:
                # unsplit, request i reads object i whole: slices of the arena, zeroed
                sizes = [
                    workload.size_of(i) if r.expected is None else r.expected
                    for i, r in enumerate(requests)
                ]
                landings = sliced_landings(sizes, chosen.arena)
            else:
                # reads land elsewhere: the setup's bodies are not kept beside them (the
                # memory checked is the larger of the two, not their sum)
                chosen.arena.release()
                if staging is not None and not layout.split:
                    landings = [staging]  # written as the bytes arrive
                elif staging is not None:
                    landings = [
                        staging.part(r.start or 0, r.stop or workload.size_of(0)) for r in requests
                    ]
                else:
                    landings = [None] * len(requests)  # the client allocates what it reads
            wrap = settling(land_ranges(plan, staging)) if staging and layout.split else None
            before = reader.attempts_seen()  # the backend that reads: maybe a fallback
            self._wait(repeat)
            run = self._execute(reader, plan, landings=landings, wrap=wrap, timed=True)
            del landings
            self._opened(repeat, run)
            self._check_moved(run, workload)
            if self.settings.verify:
                if staging is not None:
                    verify_staged(workload, staging)
                else:
                    index_of = {name: index for index, name in enumerate(names)}
                    verify_outcomes(workload, requests, run.outcomes, index_of)
        finally:
            if staging is not None:
                staging.close()
        return sample_of(run, between(before, reader.attempts_seen()))

    def _abandon(self, turn: Turn) -> None:
        """Tell the coordinator a measured repeat failed (a warm-up is not held)."""
        if self.gate is not None and turn.repeat is not None:
            self.gate.abandon(turn.repeat)

    def _wait(self, repeat: int | None) -> None:
        """Hold a measured repeat's window for the coordinator (None: a warm-up, not held)."""
        if self.gate is not None and repeat is not None:
            self.gate.wait(repeat)

    def _opened(self, repeat: int | None, run: Run) -> None:
        if self.gate is not None and repeat is not None:
            timings = run.timings
            self.gate.opened(repeat, int(timings.start_ns.min()), int(timings.end_ns.max()))

    def _check_moved(self, run: Run, workload: Workload) -> None:
        moved = int(run.timings.nbytes.sum())
        if moved != workload.total_bytes:
            raise ShortTransferError(
                f"moved {moved} bytes where the workload has {workload.total_bytes}"
            )

    # -- the engine --------------------------------------------------------------------------
    def _execute(
        self,
        backend: Backend,
        plan: Plan,
        *,
        bodies: Sequence[Body | None] | None = None,
        landings: Sequence[Landing] | None = None,
        wrap: Wrapper | None = None,
        timed: bool = False,
        timeout: float | Literal["probe"] | None = "probe",
        streams: int | None = None,
    ) -> Run:
        """Run ``plan``: a timed window with ``streams`` in flight, untimed work with
        ``prep_streams`` (or ``streams`` when given)."""
        if streams is None:
            streams = self.settings.streams if timed else self.settings.prep_streams
        return execute(
            backend,
            plan,
            streams=streams,
            clock=self.clock,
            timeout=self.settings.timeout if timeout == "probe" else timeout,
            bodies=bodies,
            landings=landings,
            wrap=wrap,
            callback=self.callback if timed else None,
            total=self.workload.total_bytes,
        )


_NO_CONDITIONAL_WRITE = Notice(
    code=Code.NO_CONDITIONAL_WRITE,
    message="this storage refuses conditional writes (If-None-Match): each name was checked "
    "absent with HEAD before the window, then written without the header, under the probe's "
    "own fresh prefix",
    fix="nothing to do; the figures are of plain PUTs",
)


_RANGES_VIA_S3FS = Notice(
    code=Code.RANGES_VIA_S3FS,
    message="this server answers ranged GETs with 200 instead of 206 Partial Content, which "
    "obstore refuses: the byte ranges were read with s3fs",
    fix="compare split downloads from this server as s3fs figures",
)


#: bytes of the object a split download's range check reads one byte of
_RANGE_CHECK_BYTES = 1024

_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep


def _caller_level() -> int:
    """The ``stacklevel`` that points a warning at the first frame outside storeprobe."""
    frame = sys._getframe(1)
    level = 1
    while frame.f_back is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        frame = frame.f_back
        level += 1
    return level


def _warn_cannot_split(layout: Layout) -> None:
    """A ``cannot-split`` notice of the layout also as a warning, pointed at the caller."""
    for notice in layout.notices:
        if notice.code is Code.CANNOT_SPLIT:
            warnings.warn(str(notice), StoreProbeWarning, stacklevel=_caller_level())


def _checks_ranges(backend: Backend) -> bool:
    """True when the client checks its ranged reads before a download (it overrides
    ``range_reader``, as obstore does); the base's answer needs no object to look at.
    (A ``Capabilities`` flag, as ``checks_conditional_writes`` is for writes, would say
    this in the backend's own terms.)"""
    return type(backend).range_reader is not BaseBackend.range_reader


def _held(layout: Layout, workload: Workload) -> int:
    """Bytes a layout holds in memory: 0 for one staged request (a chunk at a time), its
    parts in flight (and as many being read) for a staged split, else the payload."""
    if layout.staged:
        return 2 * layout.effective_streams * layout.part_size if layout.split else 0
    return workload.total_bytes
