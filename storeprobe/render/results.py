"""Tables of Results: one row per result, and comparison tables with winners marked.

Why one module (~460 lines): the results table, the comparison tables and the latency
and busy tables share the winner marks, the unit chosen per probe and the grouping keys;
the other renderers are :mod:`.scenarios`, :mod:`.regressions` and :mod:`.lines`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Protocol, TypeVar

from attrs import frozen

from storeprobe.errors import ConfigurationError
from storeprobe.notices import Code
from storeprobe.render.core import (
    CROWN,
    TIE,
    ResultLike,
    _headline,
    _per_repeat,
    _rank,
    _shape,
    _unit_of,
    check_unit,
    ops_per_s,
    unit_of,
)
from storeprobe.render.lines import _plural, busy_fraction, target_label
from storeprobe.render.tables import Cell, Table
from storeprobe.stats import Percentiles, compare
from storeprobe.units import MiB, significant


# -- tables of results -------------------------------------------------------------------------
def results_table(results: Sequence[ResultLike], unit: str = "workload") -> Table:
    """One row per Result: (target,) (environment,) probe, workload, unit, streams, best,
    median, ok/repeats (``3/3 +1 warm-up``: after one warm-up repeat, counted in no
    figure) (, busy).

    The target column appears when the results come from more than one target, the
    environment column when they come from more than one environment, the busy column
    (the share of answers the server pushed back with 503 or 429, in %) when any result
    was pushed back.
    """
    check_unit(unit)
    env_name = environment_names(results)
    extra: list[tuple[str, Callable[[ResultLike], str]]] = [
        (name, label)
        for name, label in (("target", target_label), ("environment", env_name))
        if len({label(r) for r in results}) > 1
    ]
    busy = [busy_fraction(result) for result in results]
    show_busy = any(busy)
    rows: list[list[Cell]] = []
    for result, share in zip(results, busy, strict=True):
        concrete = _unit_of(result, unit)
        if result.samples:
            best, median = _headline(result, concrete)
            figures = [
                Cell(text=f"{significant(best)}", value=best),
                Cell(text=f"{significant(median)}", value=median),
            ]
        else:
            figures = [Cell(text="failed"), Cell(text="failed")]
        streams = str(result.streams)
        if result.effective_streams != result.streams:
            streams += f" ({result.effective_streams} effective)"
        repeats = len(result.samples) + len(result.errors)
        rows.append(
            [
                *(Cell(text=label(result)) for _, label in extra),
                Cell(text=f"{result.operation} {result.subject.label}"),
                Cell(text=_shape(result)),
                Cell(text=concrete),
                Cell(text=streams, value=float(result.streams)),
                *figures,
                Cell(
                    text=f"{len(result.samples)}/{repeats}"
                    + (f" +{len(result.warmup_samples)} warm-up" if result.warmup_samples else ""),
                    value=float(len(result.samples)),
                ),
                *([_busy_cell(share)] if show_busy else []),
            ]
        )
    header = ["probe", "workload", "unit", "streams", "best", "median", "ok/repeats"]
    if show_busy:
        header.append("busy")
    return Table(
        title="",
        header=[name for name, _ in extra] + header,
        units=[""] * (len(header) + len(extra)),
        rows=rows,
        labels=3 + len(extra),
    )


def _busy_cell(share: float | None) -> Cell:
    if share is None:
        return Cell(text="-")
    return Cell(text=f"{significant(share * 100)} %", value=share * 100)


def crown_legend(crown: str = CROWN, tie: str = TIE, confidence: float = 0.95) -> str:
    """The rule behind the marks, printed under comparison tables."""
    return (
        f"{crown}: fastest in its column and significantly faster than the runner-up: the "
        f"{confidence:.0%} bootstrap interval of the ratio of median throughputs lies above "
        f"1 (storeprobe.stats.compare). {tie}: the fastest figures, not significantly "
        "different from the best (or fewer than 2 repeats to tell). A figure flagged "
        f"{Code.WINDOW_TOO_SHORT.value} is never marked (its window was too short to time). "
        "Figures are the best repeat."
    )


def _too_short(result: ResultLike) -> bool:
    """Was a window of ``result`` too short to time? Such a figure gets no mark."""
    return any(notice.code == Code.WINDOW_TOO_SHORT for notice in result.warnings)


def _separable(best: ResultLike, other: ResultLike, confidence: float) -> bool:
    """Is ``best`` significantly faster than ``other``? Needs 2 repeats on each side."""
    if len(best.samples) < 2 or len(other.samples) < 2:
        return False
    return compare(_per_repeat(best), _per_repeat(other), confidence=confidence).verdict == "faster"


def _mark_column(
    rows: list[list[Cell]],
    cells: list[list[ResultLike | None]],
    column: int,
    crown: str,
    tie: str,
    confidence: float,
) -> None:
    ranked = sorted(
        (index for index, row in enumerate(cells) if row[column] is not None),
        key=lambda index: -(rows[index][column].value or 0.0),
    )
    if len(ranked) < 2:
        return
    best = cells[ranked[0]][column]
    runner_up = cells[ranked[1]][column]
    if best is None or runner_up is None:  # pragma: no cover - ranked holds results only
        return
    if _too_short(best):  # the fastest figure cannot be trusted: no one is marked
        return
    winners = [ranked[0]]
    mark = crown if _separable(best, runner_up, confidence) else tie
    if mark == tie:
        for index in ranked[1:]:
            other = cells[index][column]
            if (
                other is not None
                and not _too_short(other)
                and not _separable(best, other, confidence)
            ):
                winners.append(index)
    for index in winners:
        old = rows[index][column]
        rows[index][column] = Cell(text=old.text, value=old.value, mark=mark)


_R = TypeVar("_R", bound=ResultLike)


def environment_names(results: Sequence[_R]) -> Callable[[_R], str]:
    """Environment name, with the host added where two hosts share one name (the name
    of a column in the tables and of a series in the plots)."""
    hosts: dict[str, set[str]] = {}
    for r in results:
        hosts.setdefault(r.environment.name, set()).add(r.environment.hostname)

    def name(result: _R) -> str:
        env = result.environment
        return env.name if len(hosts[env.name]) == 1 else f"{env.name} @ {env.hostname}"

    return name


def _best(results: Iterable[ResultLike]) -> ResultLike | None:
    measured = [r for r in results if r.samples]
    return max(measured, key=_rank) if measured else None


def probe_key(result: ResultLike) -> tuple[str, int, int, str, int]:
    """What makes two results the same probe: its subject's label, operations and object
    size, operation, streams. The payload seed is not part of it: fresh bytes, same probe."""
    subject = result.subject
    return (
        subject.label,
        subject.operations,
        subject.object_size,
        result.operation,
        result.streams,
    )


def _probe_title(result: ResultLike) -> str:
    return f"{result.operation} {result.subject.label}, {_plural(result.streams, 'stream')}"


@frozen
class _Marks:
    """How the winners of a comparison table's columns are marked, and the rule said under
    it (:func:`crown_legend`)."""

    crown: str
    tie: str
    confidence: float
    legend: str


def comparison_tables(
    results: Sequence[ResultLike],
    *,
    by: str = "environment",
    unit: str = "workload",
    crown: str = CROWN,
    tie: str = TIE,
    confidence: float = 0.95,
) -> list[Table]:
    """Comparison tables; every (target, environment) keeps its own figures.

    ``by="environment"``: one table per probe (operation, workload, streams), targets as
    rows, environments as columns. ``by="probe"``: one table, one row per (target,
    environment), one column per probe with stream counts side by side. A cell holding
    several runs of the same target on the same environment shows the best. In each
    column the fastest is marked ``crown`` or ``tie`` (see :func:`crown_legend`).
    """
    check_unit(unit)
    if by not in ("environment", "probe"):
        raise ConfigurationError(f"by must be 'environment' or 'probe', not {by!r}")
    if not results:
        return []
    marks = _Marks(crown, tie, confidence, crown_legend(crown, tie, confidence))
    if by == "environment":
        return _tables_by_environment(results, unit, marks)
    return [_table_by_probe(results, unit, marks)]


def _tables_by_environment(results: Sequence[ResultLike], unit: str, marks: _Marks) -> list[Table]:
    """One table per probe: targets as rows, environments as columns."""
    env_name = environment_names(results)
    tables: list[Table] = []
    for probe in dict.fromkeys(probe_key(r) for r in results):
        members = [r for r in results if probe_key(r) == probe]
        environments = list(dict.fromkeys(env_name(r) for r in members))
        targets = list(dict.fromkeys(target_label(r) for r in members))
        grid: list[list[ResultLike | None]] = [
            [
                _best(r for r in members if target_label(r) == t and env_name(r) == e)
                for e in environments
            ]
            for t in targets
        ]
        concrete = unit_of(members[0].subject, unit, [r.bytes_per_s for r in members if r.samples])
        tables.append(
            _table(
                _probe_title(members[0]),
                ["target"],
                environments,
                [[t] for t in targets],
                grid,
                [concrete] * len(environments),
                marks,
            )
        )
    return tables


def _probe_columns(results: Sequence[ResultLike]) -> list[tuple[str, int, int, str, int]]:
    """The probes of a table by probe, in reading order: small objects before large,
    then by workload, uploads first, then by streams."""
    ordered = sorted(
        results,
        key=lambda r: (
            r.subject.object_size >= MiB,
            r.subject.label,
            r.operation != "upload",
            r.streams,
        ),
    )
    return list(dict.fromkeys(probe_key(r) for r in ordered))


def _table_by_probe(results: Sequence[ResultLike], unit: str, marks: _Marks) -> Table:
    """One table: one row per (target, environment), one column per probe."""
    env_name = environment_names(results)
    columns = _probe_columns(results)
    keys = list(dict.fromkeys((target_label(r), env_name(r)) for r in results))
    several_envs = len({e for _, e in keys}) > 1
    grid = [
        [
            _best(
                r
                for r in results
                if (target_label(r), env_name(r)) == key and probe_key(r) == column
            )
            for column in columns
        ]
        for key in keys
    ]
    subjects = {probe_key(r): r.subject for r in results}  # alike within a column
    units = [
        unit_of(
            subjects[column],
            unit,
            [r.bytes_per_s for r in results if r.samples and probe_key(r) == column],
        )
        for column in columns
    ]
    names = [
        f"{operation} {label}, {_plural(streams, 'stream')}"
        for label, _, _, operation, streams in columns
    ]
    seen = ", ".join(dict.fromkeys(env_name(r) for r in results))
    return _table(
        f"all probes ({seen})",
        ["target", "environment"] if several_envs else ["target"],
        names,
        [[t, e] if several_envs else [t] for t, e in keys],
        grid,
        units,
        marks,
    )


def _table(
    title: str,
    label_header: list[str],
    names: list[str],
    labels: Sequence[list[str]],
    grid: list[list[ResultLike | None]],
    units: list[str],
    marks: _Marks,
) -> Table:
    rows: list[list[Cell]] = []
    for label, line in zip(labels, grid, strict=True):
        row = [Cell(text=t) for t in label]
        for result, concrete in zip(line, units, strict=True):
            if result is None:
                row.append(Cell(text=""))
            else:
                value = _headline(result, concrete)[0]
                row.append(Cell(text=f"{significant(value)}", value=value))
        rows.append(row)
    # align result cells with row cells (label columns hold no result)
    width = len(label_header)
    blank: list[ResultLike | None] = [None] * width
    cells = [blank + line for line in grid]
    for column in range(width, width + len(names)):
        _mark_column(rows, cells, column, marks.crown, marks.tie, marks.confidence)
    return Table(
        title=title,
        header=[*label_header, *names],
        units=[""] * width + units,
        rows=rows,
        labels=width,
        legend=marks.legend,
    )


class LatencyLike(ResultLike, Protocol):
    """What :func:`latency_table` reads beyond :class:`ResultLike`: the percentiles."""

    @property
    def latency(self) -> Percentiles: ...
    @property
    def ttfb(self) -> Percentiles: ...


def _ms(value: float | None) -> Cell:
    if value is None:
        return Cell(text="-")
    return Cell(text=significant(value / 1e6), value=value / 1e6)


def latency_table(results: Sequence[LatencyLike]) -> Table:
    """One row per Result: objects per second and per-request latency and time to first
    byte (p50, p90, p99 in ms, over every request of every repeat), with the request
    count ``n``.

    Objects/s is shown for workloads of more than one object (the figure warp and
    elbencho print); a percentile is ``-`` where there are too few requests to support
    it (p99 needs 100), TTFB ``-`` where it was not measured (uploads).
    """
    extra = len({target_label(r) for r in results}) > 1
    rows: list[list[Cell]] = []
    for result in results:
        labels = [Cell(text=target_label(result))] if extra else []
        labels.append(Cell(text=f"{result.operation} {result.subject.label}"))
        if not result.samples:
            rows.append([*labels, *(Cell(text="failed") for _ in range(8))])
            continue
        objects = (
            Cell(text=significant(ops_per_s(result)), value=ops_per_s(result))
            if result.subject.operations > 1
            else Cell(text="-")
        )
        latency, ttfb = result.latency, result.ttfb
        rows.append(
            [
                *labels,
                objects,
                _ms(latency.p50),
                _ms(latency.p90),
                _ms(latency.p99),
                _ms(ttfb.p50),
                _ms(ttfb.p90),
                _ms(ttfb.p99),
                Cell(text=str(latency.n), value=float(latency.n)),
            ]
        )
    header = ["probe", "objects/s", "p50", "p90", "p99", "TTFB p50", "TTFB p90", "TTFB p99", "n"]
    units = ["", "", "ms", "ms", "ms", "ms", "ms", "ms", ""]
    return Table(
        title="latency per request",
        header=(["target"] if extra else []) + header,
        units=([""] if extra else []) + units,
        rows=rows,
        labels=2 if extra else 1,
    )


def busy_table(results: Sequence[ResultLike]) -> Table | None:
    """One row per Result the server pushed back on: the share of its answers with status
    503 or 429 (%), and the counts it comes from (pushed back / answers, every repeat).

    None when no result was pushed back (the share is 0 or not observable everywhere).
    """
    rows: list[list[Cell]] = []
    for result in results:
        share = busy_fraction(result)
        if not share:
            continue
        samples = getattr(result, "samples", ())
        pushed = sum(getattr(s, "pushed_back", 0) or 0 for s in samples)
        answers = sum(getattr(s, "responses", 0) or 0 for s in samples)
        rows.append(
            [
                Cell(text=target_label(result)),
                Cell(text=f"{result.operation} {result.subject.label}"),
                Cell(text=str(result.streams), value=float(result.streams)),
                _busy_cell(share),
                Cell(text=f"{pushed}/{answers}", value=float(pushed)),
            ]
        )
    if not rows:
        return None
    return Table(
        title="server busy: answers pushed back (503, 429)",
        header=["target", "probe", "streams", "busy", "pushed back/answers"],
        units=[""] * 5,
        rows=rows,
        labels=2,
    )
