"""A new run against a base run: medians, ratio, interval, verdict, regressions marked."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Sequence
from typing import Protocol

from storeprobe.errors import ConfigurationError
from storeprobe.render.core import (
    FORMATS,
    OPS_UNIT,
    ResultLike,
    _per_repeat,
    check_unit,
    resolve_unit,
    scale,
)
from storeprobe.render.lines import _plural
from storeprobe.render.tables import Cell, Table, render_tables

# -- regressions: a new run against a base run ------------------------------------------------
#: the mark of a probe that regressed beyond the threshold
REGRESSED = "✗"
#: the formats of :func:`render_regressions`: the table formats and ``"json"``
REGRESSION_FORMATS: tuple[str, ...] = (*FORMATS, "json")


def percent(fraction: float) -> str:
    """``0.05`` → ``"5%"``, ``0.025`` → ``"2.5%"``: a threshold as people write it."""
    return f"{fraction * 100:g}%"


def repeat_figures(result: ResultLike) -> list[float]:
    """Each successful repeat's figure: ops/s for metadata probes, else B/s."""
    return _per_repeat(result)


class IdentityLike(Protocol):
    """What the regression renderers read of a probe's identity
    (:class:`~storeprobe.comparison.ProbeIdentity`)."""

    @property
    def target(self) -> str: ...
    @property
    def environment(self) -> str | None: ...
    @property
    def operation(self) -> str: ...
    @property
    def workload(self) -> str: ...
    @property
    def count(self) -> int: ...
    @property
    def size(self) -> int: ...
    @property
    def streams(self) -> int: ...
    @property
    def probe(self) -> str: ...
    @property
    def per_operation(self) -> bool: ...


class ComparedLike(Protocol):
    """One compared probe (:class:`~storeprobe.comparison.ComparedProbe`)."""

    @property
    def identity(self) -> IdentityLike: ...
    @property
    def base_median(self) -> float | None: ...
    @property
    def new_median(self) -> float | None: ...
    @property
    def base_runs(self) -> int: ...
    @property
    def new_runs(self) -> int: ...
    @property
    def base_repeats(self) -> int: ...
    @property
    def new_repeats(self) -> int: ...
    @property
    def ratio(self) -> float | None: ...
    @property
    def low(self) -> float | None: ...
    @property
    def high(self) -> float | None: ...
    @property
    def confidence(self) -> float: ...
    @property
    def verdict(self) -> str: ...
    @property
    def regressed(self) -> bool: ...
    @property
    def threshold(self) -> float: ...
    @property
    def run_spread(self) -> float | None: ...
    @property
    def base_runs_needed(self) -> int | None: ...
    @property
    def new_runs_needed(self) -> int | None: ...
    @property
    def each_runs_needed(self) -> int | None: ...
    @property
    def reason(self) -> str: ...


class RegressionReportLike(Protocol):
    """A comparison of two runs (:class:`~storeprobe.comparison.Report`)."""

    @property
    def rows(self) -> Sequence[ComparedLike]: ...
    @property
    def unmatched_base(self) -> Sequence[IdentityLike]: ...
    @property
    def unmatched_new(self) -> Sequence[IdentityLike]: ...
    @property
    def excluded_steps(self) -> int: ...
    @property
    def fail_slower(self) -> float | None: ...
    @property
    def confidence(self) -> float: ...
    def to_json(self) -> str: ...


def inconclusive_text(row: ComparedLike) -> str:
    """``"inconclusive: 1 base run and 1 new run: how much separate runs differ is
    unknown; at least 3 base runs in all ... would decide it"``: the verdict and why."""
    return f"inconclusive: {row.reason}" if row.reason else "inconclusive"


def _figure_unit(identity: IdentityLike, figures: Iterable[float | None], unit: str) -> str:
    if identity.per_operation:
        return OPS_UNIT
    known = [value for value in figures if value is not None]
    return resolve_unit(unit, known, object_size=identity.size)


def _in_unit(value: float | None, concrete: str) -> float | None:
    if value is None:
        return None
    return value if concrete == OPS_UNIT else scale(value, concrete)


def _environment_shown(identity: IdentityLike) -> str:
    return identity.environment if identity.environment is not None else "(no label)"


def regression_legend(report: RegressionReportLike) -> str:
    """The rules behind the verdicts, printed under the comparison table."""
    confidence = f"{report.confidence:.0%}"
    limit = 1 - (report.fail_slower or 0)
    text = (
        "ratio: new ÷ base of the runs' medians of per-repeat figures (B/s; ops/s for head, "
        "list, delete; geometric mean over several runs); above 1 is faster. Each result is "
        f"one run; the {confidence} interval is as wide as the runs differ from one another "
        "(storeprobe.stats.compare_runs): slower when the whole interval lies below "
        f"{limit:.3f}, not slower when at or above, else inconclusive, and always "
        "inconclusive with one run on each side."
    )
    if report.fail_slower is not None:
        limit = 1 - report.fail_slower
        text += (
            f" {REGRESSED} regressed: slower by more than {percent(report.fail_slower)}, the "
            f"whole interval below {limit:.3f}."
        )
    if report.excluded_steps:
        text += (
            f" {_plural(report.excluded_steps, 'backup-scenario step')} not compared: a "
            "scenario runs once, so a step has one sample and no interval (see storeprobe "
            "report)."
        )
    return text


def _medians_shown(row: ComparedLike, unit: str) -> tuple[str, float | None, float | None]:
    """The concrete unit of a compared probe's medians (ops/s for operations), and its
    base and new medians in that unit (None where a side has no figure)."""
    concrete = _figure_unit(row.identity, (row.base_median, row.new_median), unit)
    return concrete, _in_unit(row.base_median, concrete), _in_unit(row.new_median, concrete)


def _labelled(report: RegressionReportLike) -> bool:
    """Does any probe of either side carry an environment label (so the tables show an
    environment column)?"""
    identities = [
        *(row.identity for row in report.rows),
        *report.unmatched_base,
        *report.unmatched_new,
    ]
    return any(identity.environment is not None for identity in identities)


def _label_header(labelled: bool) -> list[str]:
    """The names of the label columns: target, (environment,) probe, streams."""
    return ["target", *(["environment"] if labelled else []), "probe", "streams"]


def _label_cells(identity: IdentityLike, labelled: bool) -> list[Cell]:
    """A probe's label cells, under :func:`_label_header`."""
    return [
        Cell(text=identity.target),
        *([Cell(text=_environment_shown(identity))] if labelled else []),
        Cell(text=identity.probe),
        Cell(text=str(identity.streams), value=float(identity.streams)),
    ]


def _compared_cells(row: ComparedLike, unit: str, labelled: bool) -> list[Cell]:
    """One compared probe's row: labels, unit, base and new medians (``failed`` where a
    side has none), runs, ratio, interval and verdict (a regression marked)."""
    concrete, base, new = _medians_shown(row, unit)
    figures = [
        Cell(text="failed") if shown is None else Cell(text=f"{shown:.2f}", value=shown)
        for shown in (base, new)
    ]
    ratio = Cell(text="-") if row.ratio is None else Cell(text=f"{row.ratio:.3f}", value=row.ratio)
    interval = "-" if row.low is None or row.high is None else f"{row.low:.3f}–{row.high:.3f}"
    verdict = inconclusive_text(row) if row.verdict == "inconclusive" else row.verdict
    return [
        *_label_cells(row.identity, labelled),
        Cell(text=concrete),
        *figures,
        Cell(text=f"{row.base_runs} + {row.new_runs}"),
        ratio,
        Cell(text=interval),
        Cell(text=verdict, mark=REGRESSED if row.regressed else ""),
    ]


def _unmatched_tables(report: RegressionReportLike, labelled: bool) -> list[Table]:
    """One table per side with probes the other side lacks (none for a side without)."""
    label_header = _label_header(labelled)
    tables: list[Table] = []
    for side, unmatched in (("base", report.unmatched_base), ("new", report.unmatched_new)):
        if unmatched:
            other = "new" if side == "base" else "base"
            tables.append(
                Table(
                    title=f"only in {side} (no match in {other}): "
                    f"{_plural(len(unmatched), 'probe')}",
                    header=label_header,
                    units=[""] * len(label_header),
                    rows=[_label_cells(identity, labelled) for identity in unmatched],
                    labels=len(label_header),
                )
            )
    return tables


def regression_tables(report: RegressionReportLike, unit: str = "workload") -> list[Table]:
    """The comparison table, then one table of unmatched probes per side (if any).

    Columns: target, (environment, when any probe has a label), probe, streams, unit,
    base and new levels, runs (base + new), ratio (new ÷ base), interval, verdict; a
    regression is marked
    :data:`REGRESSED`.
    """
    check_unit(unit)
    labelled = _labelled(report)
    label_header = _label_header(labelled)
    rows = [_compared_cells(row, unit, labelled) for row in report.rows]
    regressed = sum(row.regressed for row in report.rows)
    interval_name = f"{report.confidence:.0%} interval"
    header = [*label_header, "unit", "base", "new", "runs", "ratio", interval_name, "verdict"]
    compared = Table(
        title=f"new against base: {_plural(len(report.rows), 'probe')} compared, "
        f"{regressed} regressed",
        header=header,
        units=[""] * len(header),
        rows=rows,
        labels=len(label_header) + 1,
        legend=regression_legend(report),
    )
    return [compared, *_unmatched_tables(report, labelled)]


#: the columns of the CSV of a comparison (:func:`_regressions_csv`)
_CSV_COLUMNS = (
    "status",
    "target",
    "environment",
    "operation",
    "workload",
    "count",
    "size",
    "streams",
    "unit",
    "base",
    "new",
    "ratio",
    "low",
    "high",
    "confidence",
    "verdict",
    "regressed",
    "base_runs",
    "new_runs",
    "base_repeats",
    "new_repeats",
    "threshold",
    "run_spread",
    "base_runs_needed",
    "new_runs_needed",
    "each_runs_needed",
)
#: the CSV columns that describe a probe (after ``status``): an unmatched probe has only these
_CSV_IDENTITY = 7


def _identity_fields(identity: IdentityLike) -> list[str | int]:
    """A probe's identity as CSV fields: target to streams (no label: empty)."""
    return [
        identity.target,
        identity.environment or "",
        identity.operation,
        identity.workload,
        identity.count,
        identity.size,
        identity.streams,
    ]


def _fixed(value: float | None, digits: int) -> str:
    """``value`` with ``digits`` decimals, empty for None."""
    return "" if value is None else f"{value:.{digits}f}"


def _blank_if_none(value: int | None) -> int | str:
    """A count as a CSV field: empty for None."""
    return "" if value is None else value


def _compared_fields(row: ComparedLike, unit: str) -> list[str | int | float]:
    """One compared probe's CSV line: every column of :data:`_CSV_COLUMNS`."""
    concrete, base, new = _medians_shown(row, unit)
    return [
        "compared",
        *_identity_fields(row.identity),
        concrete,
        _fixed(base, 2),
        _fixed(new, 2),
        _fixed(row.ratio, 4),
        _fixed(row.low, 4),
        _fixed(row.high, 4),
        row.confidence,
        row.verdict,
        int(row.regressed),
        row.base_runs,
        row.new_runs,
        row.base_repeats,
        row.new_repeats,
        row.threshold,
        _fixed(row.run_spread, 4),
        _blank_if_none(row.base_runs_needed),
        _blank_if_none(row.new_runs_needed),
        _blank_if_none(row.each_runs_needed),
    ]


def _regressions_csv(report: RegressionReportLike, unit: str) -> str:
    """One line per probe: ``status`` is compared, only-in-base or only-in-new."""
    check_unit(unit)
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(_CSV_COLUMNS)
    for row in report.rows:
        writer.writerow(_compared_fields(row, unit))
    blank = [""] * (len(_CSV_COLUMNS) - 1 - _CSV_IDENTITY)
    for status, unmatched in (
        ("only-in-base", report.unmatched_base),
        ("only-in-new", report.unmatched_new),
    ):
        for identity in unmatched:
            writer.writerow([status, *_identity_fields(identity), *blank])
    return buffer.getvalue()


def render_regressions(
    report: RegressionReportLike, format: str = "markdown", unit: str = "workload"
) -> str:
    """A comparison of two runs as ``"markdown"``, ``"text"``, ``"html"`` (the tables of
    :func:`regression_tables`), ``"csv"`` (one line per probe, with a ``status``) or
    ``"json"`` (the report's ``to_json()``)."""
    if format not in REGRESSION_FORMATS:
        raise ConfigurationError(
            f"format must be one of {', '.join(REGRESSION_FORMATS)}, not {format!r}"
        )
    check_unit(unit)
    if format == "json":
        return report.to_json()
    if format == "csv":
        return _regressions_csv(report, unit)
    return render_tables(regression_tables(report, unit), format)
