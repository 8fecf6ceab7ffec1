"""The aggregate Result of a distributed probe, from every worker's report.

Per repeat, the aggregate sample is the workers' total bytes over (latest end − earliest
start) of their windows, each moved onto the coordinator's clock with the worker's
offset (:func:`storeprobe.sampling.aggregate`); a repeat that some worker has no sample
of makes no aggregate sample and one ``worker-failed`` error. The warnings, in order:
``start-spread`` per repeat whose windows started more than 5 % of the window apart,
``clock-uncertain`` when the offsets' uncertainty exceeds 1 % of the shortest window,
the workers' own warnings that hold for the aggregate too, the stability rules of
:func:`storeprobe.stats.stability_notices`, and ``cleanup-incomplete``.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs
import numpy as np

from storeprobe.distributed.worker import Report, Spec
from storeprobe.environment import Environment
from storeprobe.execution import Leftover, cleanup_notice
from storeprobe.notices import Code, Notice
from storeprobe.result import Fleet, Member, Result, Sample
from storeprobe.sampling import Window, aggregate
from storeprobe.stats import stability_notices
from storeprobe.strategy import Shape, Strategy
from storeprobe.subject import Subject, Unit
from storeprobe.target import Target
from storeprobe.transfer import Clock

__all__ = ["SPREAD_WARNING", "UNCERTAINTY_WARNING", "aggregate_result", "fleet_subject"]

#: a start spread above this fraction of the window gets a ``start-spread`` warning
SPREAD_WARNING = 0.05
#: an offset uncertainty above this fraction of the window gets ``clock-uncertain``
UNCERTAINTY_WARNING = 0.01
#: the workers' warnings that say what the aggregate did too
_PASSED_ON = (Code.CANNOT_SPLIT, Code.FEW_REQUESTS, Code.NO_CONDITIONAL_WRITE)


def aggregate_result(
    spec: Spec,
    target: Target,
    members: tuple[Member, ...],
    reports: Sequence[Report | None],
    offsets: Sequence[tuple[int, int]],
    errors: list[Notice],
    leftovers: list[Leftover],
    prefix: str,
    environment: Environment,
    *,
    clock: Clock,
    began: int,
) -> Result:
    """The aggregate Result: one sample per repeat every worker has a sample of, the
    :class:`~storeprobe.result.Fleet` (``coordinator_ns``: ``clock()`` now − ``began`` −
    the longest worker's run), ``errors`` (the workers lost, then the repeats without an
    aggregate, appended here) and the warnings of the module docstring."""
    samples, spreads, warnings = _repeats(spec, members, reports, offsets, errors)
    fleet = Fleet(
        members=members,
        streams_per_worker=spec.settings.streams,
        start_spread_ns=tuple(spreads),
        coordinator_ns=clock()
        - began
        - max((r.busy_ns for r in reports if r is not None), default=0),
    )
    _add_warnings(warnings, fleet, samples, reports, spec, target)
    if (cleanup := cleanup_notice(prefix, leftovers)) is not None:
        warnings.append(cleanup)
    count = len(members)
    first = next((r for r in reports if r is not None), None)
    return Result(
        operation=spec.operation,
        subject=fleet_subject(spec, count),
        url=target.url,
        protocol=target.protocol,
        backend=first.result.backend if first is not None else target.client,
        streams=spec.settings.streams * count,
        effective_streams=sum(r.result.effective_streams for r in reports if r is not None),
        strategy=attrs.evolve(
            first.result.strategy
            if first is not None
            else Strategy(shape=Shape.STREAMS, in_flight=spec.settings.streams),
            workers=count,
        ),
        samples=tuple(samples),
        errors=tuple(errors),
        warnings=tuple(warnings),
        environment=environment,
        fleet=fleet,
    )


def fleet_subject(spec: Spec, workers: int) -> Subject:
    """What the aggregate counts: the payload bytes per second of the workers' workloads
    together (``workers`` × the spec's objects, of its size or distribution), named
    ``"2 workers × small"``; the Result's ``workload`` is None: each member's Result
    holds its own, with its own seed (and sizes drawn from it)."""
    each = spec.workload
    return Subject.counted(
        Unit.BYTES_PER_S,
        each.count * workers,
        each=each.size_label,
        object_size=each.size,
        name=f"{workers} workers × {each.label}",
    )


def _repeats(
    spec: Spec,
    members: tuple[Member, ...],
    reports: Sequence[Report | None],
    offsets: Sequence[tuple[int, int]],
    errors: list[Notice],
) -> tuple[list[Sample], list[int], list[Notice]]:
    """Per repeat, the aggregate sample and its start spread (with a ``start-spread``
    warning when it is wide); a repeat some worker lacks adds a ``worker-failed`` error
    to ``errors`` (unless one for the whole run is there) and no sample."""
    samples: list[Sample] = []
    spreads: list[int] = []
    warnings: list[Notice] = []
    for repeat in range(spec.settings.repeats):
        parts, windows, failed = _parts(members, reports, offsets, repeat)
        if failed:
            if not any(e.code is Code.WORKER_FAILED and e.repeat is None for e in errors):
                errors.append(
                    Notice(
                        code=Code.WORKER_FAILED,
                        message="; ".join(failed) + ": no aggregate figure for this repeat",
                        fix="see that worker's Result in result.fleet.members",
                        repeat=repeat + 1,
                    )
                )
            continue
        sample, spread = aggregate(parts, windows)
        samples.append(sample)
        spreads.append(spread)
        if spread > SPREAD_WARNING * sample.elapsed_ns:
            warnings.append(
                Notice(
                    code=Code.START_SPREAD,
                    message=f"the workers' windows started {spread / 1e6:.1f} ms apart, "
                    f"{100 * spread / max(1, sample.elapsed_ns):.0f} % of the "
                    f"{sample.elapsed_ns / 1e6:.1f} ms window: the aggregate is "
                    "partly a sum of solo runs",
                    fix="use a larger workload, so each window lasts seconds",
                    repeat=repeat + 1,
                )
            )
    return samples, spreads, warnings


def _parts(
    members: tuple[Member, ...],
    reports: Sequence[Report | None],
    offsets: Sequence[tuple[int, int]],
    repeat: int,
) -> tuple[list[Sample], list[Window], list[str]]:
    """Each worker's sample of ``repeat`` and its window on the coordinator's clock, and
    why the workers without one have none."""
    parts: list[Sample] = []
    windows: list[Window] = []
    failed: list[str] = []
    for index, report in enumerate(reports):
        sample = None if report is None else _sample_of(report, repeat)
        if sample is None or report is None:
            failed.append(_why(members[index], report, repeat))
            continue
        start, end = report.windows[repeat]
        shift = offsets[index][0]
        parts.append(sample)
        windows.append(Window(start - shift, end - shift))
    return parts, windows, failed


def _add_warnings(
    warnings: list[Notice],
    fleet: Fleet,
    samples: Sequence[Sample],
    reports: Sequence[Report | None],
    spec: Spec,
    target: Target,
) -> None:
    """Append ``clock-uncertain``, the workers' warnings passed on (each once) and the
    stability notices of the aggregate samples."""
    if samples:
        shortest = min(s.elapsed_ns for s in samples)
        if fleet.max_uncertainty_ns > UNCERTAINTY_WARNING * shortest:
            warnings.append(
                Notice(
                    code=Code.CLOCK_UNCERTAIN,
                    message=f"the workers' clock offsets are known to ±"
                    f"{fleet.max_uncertainty_ns / 1e6:.2f} ms, more than 1 % of the "
                    f"{shortest / 1e6:.1f} ms window",
                    fix="use a larger workload, or a network closer to the scheduler",
                )
            )
    for report in reports:
        if report is not None:
            for notice in report.result.warnings:
                if notice.code in _PASSED_ON and notice not in warnings:
                    warnings.append(notice)
    warnings.extend(
        stability_notices(
            np.array([s.bytes_per_s for s in samples], dtype=np.float64),
            np.array([s.elapsed_ns for s in samples], dtype=np.int64),
            np.full(len(samples), np.nan),
            operation=spec.operation,
            remote=target.protocol not in ("file", "local", "memory"),
        )
    )


def _sample_of(report: Report, repeat: int) -> Sample | None:
    """The worker's sample of ``repeat``, or None when that repeat failed there."""
    good = [r for r in sorted(report.windows) if r not in report.abandoned]
    if repeat not in good or len(good) != len(report.result.samples):
        return None
    return report.result.samples[good.index(repeat)]


def _why(member: Member, report: Report | None, repeat: int) -> str:
    """Why ``member`` has no sample of ``repeat``."""
    if report is None:
        return f"{member.name} did not finish"
    for notice in report.result.errors:
        if notice.repeat == repeat + 1:
            return f"{member.name} failed ({notice.code.value}: {notice.message})"
    return f"{member.name} has no sample"
