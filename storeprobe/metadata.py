"""Metadata probes: HEAD, LIST and DELETE rates, in operations per second.

For each of ``warmup`` warm-up repetitions (samples kept apart, counted in no figure),
then each of ``repeats`` measured ones, a :class:`MetadataMeasurement`

1. makes a fresh repeat prefix ``<run prefix>/r<N>`` and writes ``count`` objects of
   ``size`` bytes under it (untimed, ``prep_streams`` at once; 0 bytes by default:
   every backend takes an empty body);
2. runs the timed window:

   - ``head``: one HEAD per object, at most ``streams`` in flight; the sizes reported
     are checked against what was written (untimed, after the window);
   - ``list``: one listing of the repeat prefix, every page of it (with S3,
     ``ceil(count / 1000)`` LIST requests, one after the other: they follow
     continuation tokens, so ``streams`` does not apply); the listing must see exactly
     ``count`` keys, else the repeat fails with ``verification-failed``;
   - ``delete``: one DELETE per object, at most ``streams`` in flight; these deletes
     are also the cleanup of those names;

3. deletes whatever the repeat wrote and is still there (untimed, ``prep_streams`` at
   once), and the repeat prefix.

All of it lives under a fresh run prefix. The repeats, their cleanup, the writer check,
absence check and error classification are those every probe shares
(:func:`~storeprobe.repeats.run_repeats`, :class:`~storeprobe.repeats.Housekeeping`): at
the end every name recorded is deleted, the run prefix is listed and whatever is still
listed under it deleted (:func:`~storeprobe.execution.clear_prefix`: the prefix is the
probe's own), and the folders are removed; anything that remains is a
``cleanup-incomplete`` notice. Each repeat's first object is written alone
before the others (see :meth:`MetadataMeasurement._write`).

The figure is **operations per second** (:func:`ops_per_s`): objects ÷ window, that is
requests ÷ window for ``head`` and ``delete``, and *keys* listed ÷ window for ``list``
(the headline, because it is what a sync tool listing a tree waits for; the pages per
second are :func:`pages_per_s`). Latency percentiles are per request (per whole listing
for ``list``). No bandwidth figure: these requests move no payload.

The Result's ``subject`` counts operations per second of ``count`` objects of their
true ``size`` (0 B included), named ``"1000 × 0 B"``; its ``workload`` is None (no
payload is timed). The objects' bytes come from a :class:`Workload` of the probe's seed.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Literal, get_args

from attrs import frozen

from storeprobe.backends import AsyncBackend, SyncBackend
from storeprobe.backends.attempts import between
from storeprobe.errors import ConfigurationError
from storeprobe.execution import bounded, execute
from storeprobe.notices import Code, Notice
from storeprobe.planning import Plan, delete_plan, head_plan
from storeprobe.render import OPS_UNIT, median_ops_per_s, ops_per_s
from storeprobe.repeats import Housekeeping, Turn, retried_notice, run_repeats, stability_of
from storeprobe.request import Kind, Part, Request
from storeprobe.result import Result, Sample
from storeprobe.sampling import sample_of
from storeprobe.settings import Settings
from storeprobe.strategy import Shape, Strategy
from storeprobe.subject import Subject, Unit
from storeprobe.target import Target
from storeprobe.transfer import Clock, Run
from storeprobe.units import GiB, format_size, parse_size
from storeprobe.verification import VerificationError, check_memory, check_sizes
from storeprobe.workload import Workload

__all__ = [
    "MAX_KEYS",
    "METADATA_OPERATIONS",
    "OPS_UNIT",
    "MetadataMeasurement",
    "MetadataOperation",
    "check_count",
    "median_ops_per_s",
    "ops_per_s",
    "pages_per_s",
]

MetadataOperation = Literal["head", "list", "delete"]
#: the metadata probes, in the order people publish them
METADATA_OPERATIONS: tuple[MetadataOperation, ...] = get_args(MetadataOperation)
#: most objects one metadata probe writes and times
MAX_KEYS = 1_000_000


def check_count(count: object) -> int:
    """``count`` if it is an int from 1 to :data:`MAX_KEYS`, else a ConfigurationError."""
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_KEYS:
        raise ConfigurationError(
            f"count must be an int from 1 to {MAX_KEYS:,}, not {count!r}: use e.g. 1000 "
            "(the keys of one S3 listing page)"
        )
    return count


def check_operation(operation: object) -> MetadataOperation:
    """``operation`` if it names a metadata probe, else a ConfigurationError."""
    for known in METADATA_OPERATIONS:
        if operation == known:
            return known
    raise ConfigurationError(
        f"operation must be one of {', '.join(METADATA_OPERATIONS)}, not {operation!r}"
    )


def object_size(size: object) -> int:
    """The objects' size in bytes (``0``, ``16``, ``"1KiB"``), at most 5 GiB (one PUT)."""
    if isinstance(size, bool) or not isinstance(size, int | str):
        raise ConfigurationError(
            f"size must be bytes (an int) or a size such as '1KiB', not {size!r}"
        )
    value = parse_size(size)
    if not 0 <= value <= 5 * GiB:
        raise ConfigurationError(
            f"size must be from 0 bytes to 5 GiB (one PUT per object), not {value:,} bytes: "
            "metadata probes use small objects, 0 bytes by default"
        )
    return value


def pages_per_s(result: Result) -> float:
    """LIST requests (pages) per second of the best repeat; ``nan`` without LIST requests."""
    if not result.samples:
        raise ValueError(f"{result.probe} on {result.url} has no successful sample")
    best = min(result.samples, key=lambda sample: sample.elapsed_ns)
    pages = best.requests_by_kind.get(Kind.LIST.value, 0)
    return pages / best.seconds if pages else math.nan


@frozen(kw_only=True)
class MetadataMeasurement:
    """One metadata probe call's settings, bound to its target (see the module docstring)."""

    target: Target
    operation: MetadataOperation
    count: int
    size: int
    #: the probe's settings, with the seed of the objects' bytes set
    settings: Settings
    clock: Clock

    @property
    def subject(self) -> Subject:
        """What the Result counts: operations per second of ``count`` objects of ``size``
        bytes, named ``"1000 × 0 B"``."""
        return Subject.counted(
            Unit.OPERATIONS_PER_S, self.count, each=format_size(self.size), object_size=self.size
        )

    @property
    def _content(self) -> Workload:
        """Where the objects' bytes come from: ``count`` objects from the probe's seed
        (a Workload holds at least 1 byte per object: an empty object's body is 0 of
        them)."""
        seed = self.settings.seed if self.settings.seed is not None else 0
        name = f"{self.count} × {format_size(self.size)}"
        return Workload(count=self.count, size=max(self.size, 1), seed=seed, name=name)

    @property
    def effective_streams(self) -> int:
        """Requests in flight at most: a listing's pages follow one another."""
        return 1 if self.operation == "list" else min(self.settings.streams, self.count)

    def run(self) -> Result:
        """Measure, and return the Result (errors and warnings included)."""
        backend = self.target.backend
        if self.size:
            check_memory(self._content, self.count * self.size, "one repeat's objects")
        house = Housekeeping(target=self.target, settings=self.settings, clock=self.clock)
        opened = house.open()
        writer, prefix = opened.writer, opened.prefix
        notices = self._notices(writer is not backend)
        in_window: set[str] = set()  # the names a DELETE window deleted
        made: list[str] = []

        def names_of(turn: Turn) -> list[str]:
            return [f"{prefix}/{turn.label}/{index:07d}" for index in range(self.count)]

        def step(turn: Turn, names: list[str]) -> Sample:
            where = f"{prefix}/{turn.label}"
            bounded(functools.partial(backend.make_prefix, where), self.settings.timeout)
            made.append(where)
            if writer is not backend:
                house.check_absent(writer, names)
            self._write(writer, names, turn.seed_offset)
            return self._timed(where, names, in_window)

        repeated = run_repeats(
            house,
            opened,
            names_of,
            step,
            deleted=lambda: in_window,
            folders=lambda: made,
            listing=True,
        )
        return house.result(
            repeated,
            opened,
            notices=[*notices, *self._judge(repeated.samples)],
            operation=self.operation,
            measured=self.subject,
            effective_streams=self.effective_streams,
            strategy=self._strategy(),
        )

    # -- one repeat --------------------------------------------------------------------
    def _write(self, writer: AsyncBackend | SyncBackend, names: Sequence[str], repeat: int) -> None:
        """Untimed: one PUT of ``size`` bytes per name, the first alone, then ≤
        ``prep_streams`` at once."""
        content = self._content.with_seed(((self.settings.seed or 0) + repeat) % 2**63)
        parts = [Part(index, 0, self.size) for index in range(len(names))]
        puts = [
            Request(kind=Kind.PUT, key=name, body=part)
            for name, part in zip(names, parts, strict=True)
        ]
        # the first PUT alone, then the others: a server keeping objects as files makes
        # the repeat prefix's folders on the first PUT under it, and concurrent first PUTs
        # race there (rclone serve s3 then made a folder twice, failed PUTs that obstore
        # retried, and its view of the folder no longer matched its disk)
        plan = Plan(phases=tuple(phase for phase in (tuple(puts[:1]), tuple(puts[1:])) if phase))
        bodies = [writer.body(content, part) for part in parts]
        execute(
            writer,
            plan,
            streams=self.settings.prep_streams,
            clock=self.clock,
            timeout=self.settings.timeout,
            bodies=bodies,
        )
        writer.fs.invalidate_cache()

    def _timed(self, where: str, names: list[str], gone: set[str]) -> Sample:
        """The timed window of one repeat, then its checks (untimed)."""
        backend = self.target.backend
        if self.operation == "head":
            plan = head_plan(names)
        elif self.operation == "delete":
            plan = delete_plan(names)
        else:
            plan = Plan(phases=((Request(kind=Kind.LIST, key=where),),))
        before = backend.attempts_seen()
        run = execute(
            backend,
            plan,
            streams=self.settings.streams,
            clock=self.clock,
            timeout=self.settings.timeout,
        )
        backend.fs.invalidate_cache()
        if self.operation == "delete":
            gone.update(names)
        elif self.operation == "head":
            check_sizes(plan.requests, run.outcomes, self.size)
        else:
            self._check_listing(where, run)
        return sample_of(run, between(before, backend.attempts_seen()))

    def _check_listing(self, where: str, run: Run) -> None:
        found = run.outcomes[0].size
        if found != self.count:
            raise VerificationError(
                f"the listing of {where} found {found} keys where {self.count} were written: "
                "the storage lists fewer (or more) keys than it holds"
            )

    # -- the Result's text -----------------------------------------------------------------
    def _strategy(self) -> Strategy:
        if self.operation == "list":
            return Strategy(shape=Shape.LISTING, written=self.count, object_size=self.size)
        return Strategy(
            shape=Shape.OBJECTS,
            request=self.operation.upper(),
            in_flight=self.effective_streams,
            written=self.count,
            object_size=self.size,
        )

    def _notices(self, unconditional: bool) -> list[Notice]:
        found: list[Notice] = []
        if self.operation == "list" and self.settings.streams > 1:
            found.append(
                Notice(
                    code=Code.FEW_REQUESTS,
                    message="a listing's pages follow one another (each continues the "
                    f"last): one request in flight, whatever streams={self.settings.streams} says",
                    fix="compare listings at streams=1",
                    option="streams",
                    value="1",
                )
            )
        elif self.effective_streams < self.settings.streams:
            found.append(
                Notice(
                    code=Code.FEW_REQUESTS,
                    message=f"only {self.count} objects: at most {self.effective_streams} "
                    "requests in flight",
                    fix="use at least as many objects as streams",
                )
            )
        if unconditional:
            found.append(
                Notice(
                    code=Code.NO_CONDITIONAL_WRITE,
                    message="this storage refuses conditional writes (If-None-Match): each "
                    "name was checked absent with HEAD before being written (untimed)",
                    fix="nothing to do; the timed requests are not affected",
                )
            )
        return found

    def _judge(self, samples: Sequence[Sample]) -> list[Notice]:
        """Stability notices from each repeat's operations per second (these samples
        move no bytes, so a measurement's byte rates would hide their variation); the
        retry notice is the measurement's own."""
        found = stability_of(
            samples,
            [self.count / sample.seconds for sample in samples],
            operation=self.operation,
            target=self.target,
            warmup=self.settings.warmup,
        )
        retried = retried_notice(samples)
        return found if retried is None else [*found, retried]
