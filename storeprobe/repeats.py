"""The repeat loop every probe shares, and the untimed steps around its windows.

A probe call runs ``warmup`` warm-up turns, then ``repeats`` measured ones (a
:class:`Turn` each). :func:`run_repeats` gives each turn its own names (recorded as
written before anything is sent), runs the probe's own step for it (a
:class:`~storeprobe.measurement.Measurement`'s upload or download, a
:class:`~storeprobe.metadata.MetadataMeasurement`'s HEAD, LIST or DELETE window), keeps a
failure as an error :class:`~storeprobe.notices.Notice` of that turn, and deletes the
turn's names as it ends, whatever happened. When every turn is done it deletes whatever
is still recorded, lists the run prefix and deletes what the listing shows (the prefix is
the run's own), and removes the run's folders: what cannot be removed comes back as typed
:class:`~storeprobe.execution.Leftover`\\ s.

:class:`Housekeeping` is the untimed work both probes do the same way: opening the run
(:meth:`Housekeeping.open`: the environment, a fresh run prefix and the writer, as one
:class:`Opened`), choosing the writer (a storage refusing conditional writes gets
HEAD-checked names instead), checking names absent, deleting with ``prep_streams`` in
flight, naming a failure's code, and making the call's Result from its repeats
(:meth:`Housekeeping.result`); :func:`stability_of` and :func:`retried_notice` are the
notices both draw from the samples.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable, Sequence

from attrs import frozen

from storeprobe.backends import AsyncBackend, SyncBackend
from storeprobe.environment import Environment
from storeprobe.execution import (
    Leftover,
    bounded,
    cleanup_notice,
    clear_prefix,
    delete_names,
    execute,
    open_run,
    remove_folders,
)
from storeprobe.jobs import ABSENT
from storeprobe.notices import Code, Notice
from storeprobe.planning import head_plan
from storeprobe.result import Operation, Result, Sample
from storeprobe.settings import Settings
from storeprobe.stats import stability_notices
from storeprobe.strategy import Strategy
from storeprobe.subject import Subject
from storeprobe.target import Target
from storeprobe.transfer import Clock
from storeprobe.verification import ShortTransferError, VerificationError
from storeprobe.workload import Workload

__all__ = [
    "Housekeeping",
    "Opened",
    "Repeated",
    "Turn",
    "retried_notice",
    "run_repeats",
    "stability_of",
    "turns",
]

Backend = AsyncBackend | SyncBackend

#: protocols of storage on this machine (no cache is suspected of a fast download there)
_LOCAL = frozenset({"file", "local", "memory"})


@frozen(kw_only=True)
class Turn:
    """One pass of a probe call: a warm-up (``repeat`` None) or measured repeat ``repeat``."""

    #: 0-based over the warm-ups, then the measured repeats
    number: int
    #: the measured repeat, 0-based (None: a warm-up)
    repeat: int | None
    #: measured repeats of the call (a warm-up's content seed comes after theirs)
    repeats: int

    @property
    def warming(self) -> bool:
        return self.repeat is None

    @property
    def label(self) -> str:
        """``w0``, ``w1``, ... for warm-ups, ``r0``, ``r1``, ... for measured repeats."""
        return f"w{self.number}" if self.repeat is None else f"r{self.repeat}"

    @property
    def seed_offset(self) -> int:
        """Added to the workload's seed for this turn's bytes: a measured repeat's are those
        it has without warm-ups (``repeat``); a warm-up's come after every measured one."""
        return self.repeats + self.number if self.repeat is None else self.repeat


def turns(settings: Settings) -> tuple[Turn, ...]:
    """The warm-ups, then the measured repeats, of ``settings``."""
    warmup, repeats = settings.warmup, settings.repeats
    return tuple(
        Turn(number=number, repeat=None if number < warmup else number - warmup, repeats=repeats)
        for number in range(warmup + repeats)
    )


@frozen(kw_only=True)
class Repeated:
    """What the loop of one probe call gave: samples, warm-up samples, errors, leftovers."""

    samples: tuple[Sample, ...]
    warmups: tuple[Sample, ...]
    errors: tuple[Notice, ...]
    leftovers: tuple[Leftover, ...]


@frozen(kw_only=True)
class Opened:
    """A probe call's run, opened before its first turn (:meth:`Housekeeping.open`)."""

    #: the call's fresh run prefix, under which every name lives
    prefix: str
    environment: Environment
    #: the backend that writes (see :meth:`Housekeeping.writer`)
    writer: Backend
    #: every name written under ``prefix`` so far (the writer check's, then each turn's,
    #: added by :func:`run_repeats`): what the cleanup at the end deletes
    written: list[str]


#: each backend's writer once its conditional-write check has answered (see
#: :meth:`Housekeeping.writer`); gone with the backend
_WRITERS: weakref.WeakKeyDictionary[Backend, Backend] = weakref.WeakKeyDictionary()


@frozen(kw_only=True)
class Housekeeping:
    """The untimed steps around a probe's windows, the same for every probe."""

    target: Target
    settings: Settings
    clock: Clock

    def open(self) -> Opened:
        """Open a probe call's run (untimed): the environment captured and a fresh run
        prefix made (:func:`~storeprobe.execution.open_run`), then the writer chosen."""
        settings = self.settings
        environment, prefix = open_run(self.target, settings.label, settings.timeout)
        written: list[str] = []
        writer = self.writer(prefix, written)
        return Opened(prefix=prefix, environment=environment, writer=writer, written=written)

    def writer(self, prefix: str, written: list[str]) -> Backend:
        """The backend that writes, decided once per backend: conditional writes checked
        (untimed) by the first probe call on it, the answer kept for the calls after it
        (whether a storage takes If-None-Match does not change within a run; the check
        costs two round trips per call otherwise)."""
        backend = self.target.backend
        if not backend.capabilities.checks_conditional_writes:
            return backend
        known = _WRITERS.get(backend)
        if known is not None:
            return known
        probe_key = f"{prefix}/conditional-write-check"
        written.append(probe_key)
        found: list[object] = []
        try:
            bounded(lambda: found.append(backend.writer(probe_key)), self.settings.timeout)
        except Exception:
            # the check is advisory: a storage failing it for another reason fails the
            # measured writes too, where the error is recorded per repeat and cleaned up
            return backend
        writer = found[0]
        assert isinstance(writer, AsyncBackend | SyncBackend)
        _WRITERS[backend] = writer
        return writer

    def check_absent(self, writer: Backend, names: Sequence[str]) -> None:
        """Untimed: HEAD every name and fail if one exists (writes are unconditional)."""
        execute(
            writer,
            head_plan(names),
            streams=self.settings.prep_streams,
            clock=self.clock,
            timeout=self.settings.timeout,
            wrap=ABSENT,
        )

    def delete(self, names: Sequence[str]) -> list[Leftover]:
        """Delete ``names`` (untimed); return those that remain (see :func:`delete_names`)."""
        return delete_names(
            self.target,
            names,
            streams=self.settings.prep_streams,
            clock=self.clock,
            timeout=self.settings.timeout,
        )

    def result(
        self,
        repeated: Repeated,
        opened: Opened,
        *,
        notices: Sequence[Notice],
        operation: Operation,
        measured: Workload | Subject,
        effective_streams: int,
        strategy: Strategy,
    ) -> Result:
        """The Result of a probe call from its repeats (samples, errors, warm-ups):
        warnings ``notices`` (the probe's own, its judgement of the samples among them),
        then the ``cleanup-incomplete`` one where something remained under the run
        prefix; the environment ``opened`` captured, the target's URL, protocol and
        client, the settings' streams. ``measured`` is the payload a seed probe moved
        (the Result's ``workload``, its subject :meth:`~storeprobe.subject.Subject.of`
        it) or the subject of a probe that moves no payload (its ``workload`` None)."""
        warnings = list(notices)
        if (cleanup := cleanup_notice(opened.prefix, list(repeated.leftovers))) is not None:
            warnings.append(cleanup)
        return Result(
            operation=operation,
            subject=measured if isinstance(measured, Subject) else Subject.of(measured),
            workload=measured if isinstance(measured, Workload) else None,
            url=self.target.url,
            protocol=self.target.protocol,
            backend=self.target.backend.client,
            streams=self.settings.streams,
            effective_streams=effective_streams,
            strategy=strategy,
            samples=repeated.samples,
            errors=repeated.errors,
            warnings=tuple(warnings),
            environment=opened.environment,
            warmup_samples=repeated.warmups,
        )

    def error(self, exc: BaseException, turn: Turn) -> Notice:
        """The error notice of a failed turn: its code from the exception's kind, its
        message scrubbed of secrets (a warm-up's says so; its ``repeat`` is None)."""
        text = self.target.describe_error(exc)
        if isinstance(exc, VerificationError):
            code = Code.VERIFICATION_FAILED
        elif isinstance(exc, ShortTransferError):
            code = Code.SHORT_TRANSFER
        elif isinstance(exc, TimeoutError | asyncio.TimeoutError):
            code = Code.TIMEOUT
        else:
            code = Code.REQUEST_FAILED
        if turn.repeat is None:
            return Notice(code=code, message=f"warm-up repeat {turn.number + 1}: {text}")
        return Notice(code=code, message=text, repeat=turn.repeat + 1)


def run_repeats(
    house: Housekeeping,
    opened: Opened,
    names_of: Callable[[Turn], list[str]],
    step: Callable[[Turn, list[str]], Sample],
    *,
    deleted: Callable[[], set[str]] | None = None,
    failed: Callable[[Turn], None] | None = None,
    folders: Callable[[], Sequence[str]] = tuple,
    listing: bool = False,
) -> Repeated:
    """Every turn of ``house.settings``, then the cleanup (see the module docstring).

    ``opened.written`` holds the names already written (a conditional-write check's) and
    gets each turn's; ``step`` runs one turn on its names and returns its sample;
    ``deleted`` names what the steps deleted themselves (a DELETE probe's window);
    ``failed`` is told of a turn that raised; ``folders`` are removed, in order, before
    the run prefix; ``listing`` lists the run prefix for what the deletes missed.
    """
    written = opened.written
    samples: list[Sample] = []
    warmups: list[Sample] = []
    errors: list[Notice] = []
    gone: set[str] = set()

    def not_gone(names: Sequence[str]) -> list[str]:
        done = gone | (deleted() if deleted is not None else set())
        return [name for name in names if name not in done]

    try:
        for turn in turns(house.settings):
            names = names_of(turn)
            written.extend(names)
            try:
                (warmups if turn.warming else samples).append(step(turn, names))
            except Exception as exc:
                errors.append(house.error(exc, turn))
                if failed is not None:
                    failed(turn)
            finally:
                remaining = {left.name for left in house.delete(not_gone(names))}
                gone.update(name for name in names if name not in remaining)
    finally:
        left = _clean_up(house, opened.prefix, not_gone(written), folders, listing=listing)
    return Repeated(
        samples=tuple(samples),
        warmups=tuple(warmups),
        errors=tuple(errors),
        leftovers=tuple(left),
    )


def _clean_up(
    house: Housekeeping,
    prefix: str,
    names: Sequence[str],
    folders: Callable[[], Sequence[str]],
    *,
    listing: bool,
) -> list[Leftover]:
    """The end of every run: delete ``names``, then (``listing``) what a listing of the
    run prefix still shows, then remove ``folders`` and the prefix; what remains."""
    left = house.delete(names)
    if listing:
        settings = house.settings
        left = clear_prefix(
            house.target,
            prefix,
            left,
            streams=settings.prep_streams,
            clock=house.clock,
            timeout=settings.timeout,
        )
    left += remove_folders(house.target, [*folders(), prefix])
    return left


def stability_of(
    samples: Sequence[Sample],
    rates: Sequence[float],
    *,
    operation: str,
    target: Target,
    warmup: int,
) -> list[Notice]:
    """:func:`~storeprobe.stats.stability_notices` of a probe's measured repeats:
    ``rates`` has one figure a sample (bytes/s for a transfer, operations/s for metadata),
    with each sample's window (ns) and CPU fraction (nan where unknown); the target is
    remote unless its protocol is a local one."""
    import numpy as np

    return stability_notices(
        np.array(rates, dtype=np.float64),
        np.array([sample.elapsed_ns for sample in samples], dtype=np.int64),
        np.array(
            [np.nan if s.cpu_fraction is None else s.cpu_fraction for s in samples],
            dtype=np.float64,
        ),
        operation=operation,
        remote=target.protocol not in _LOCAL,
        warmup=warmup,
    )


def retried_notice(samples: Sequence[Sample]) -> Notice | None:
    """The ``retried`` warning when the client retried inside the windows (None: it did
    not), with the share of answers the server pushed back where the client counts them."""
    retried = sum(sample.retries or 0 for sample in samples)
    if not retried:
        return None
    pushed = sum(sample.pushed_back or 0 for sample in samples)
    answers = sum(sample.responses or 0 for sample in samples)
    busy = (
        f"; the server pushed back {pushed} of {answers} answer(s) (503 or 429: "
        f"{pushed / answers:.1%} busy)"
        if pushed and answers
        else ""
    )
    return Notice(
        code=Code.RETRIED,
        message=f"the client retried {retried} failed request(s) inside the timed "
        f"windows{busy}: the figures include the failures and retry delays",
        fix="check the storage's health or rate limits and run again",
    )
