"""Every table and every rate as people read them: one module for text, markdown, CSV, HTML.

Renderers return strings; only the CLI prints. This module owns

- **rate units**: :func:`resolve_unit` picks the unit of a figure or a column
  (``"workload"``: the unit people publish a workload in, KiB/s for objects under 1 MiB,
  MiB/s otherwise; ``"auto"``: by magnitude, MiB/s from 1 MiB/s up, KiB/s below;
  or one of ``"KiB/s"``, ``"MiB/s"``, ``"Mibit/s"``), :func:`scale` and :func:`rate`
  convert B/s with :mod:`storeprobe.units`' 1024-based converters;
- **operations per second**: the figure of metadata probes (``head``, ``list``,
  ``delete``: :data:`PER_OPERATION`) is :func:`ops_per_s`, objects (keys) per second,
  shown in ``ops/s`` wherever another result shows a byte rate;
- **one Result as text**: :func:`result_line` (``str(result)``), :func:`result_repr`,
  :func:`result_summary` (the line and its notices), :func:`result_html`;
- **tables** (:class:`Table` of :class:`Cell`) rendered by :func:`render_tables` as
  ``"markdown"``, ``"csv"``, ``"html"`` or ``"text"``; :func:`results_table` (one row
  per Result: what ``storeprobe run`` prints) and :func:`comparison_tables` (targets ×
  environments or targets × probes, winners marked by :func:`storeprobe.stats.compare`).
- **regressions**: :func:`regression_tables` and :func:`render_regressions` show a new
  run against a base run (:mod:`storeprobe.comparison`: medians, ratio, interval,
  verdict, regressions marked :data:`REGRESSED`) as markdown, text, HTML, CSV or JSON.

It reads Results through the :class:`ResultLike` protocol and never imports
:mod:`storeprobe.result`, so ``result`` can use it without an import cycle.

Why one module of ~700 lines: every table and every unit choice of storeprobe lives
here on purpose (they were written four times before), in four sections read in order:
units, one result, tables, tables of results.
"""

from __future__ import annotations

import csv
import html
import io
from collections.abc import Callable, Iterable, Sequence
from typing import Literal, Protocol, get_args

from attrs import field, frozen

from storeprobe.environment import Environment
from storeprobe.errors import ConfigurationError
from storeprobe.notices import Notice
from storeprobe.stats import compare
from storeprobe.step import Step
from storeprobe.units import MiB, auto_rate_unit, format_bytes, format_size, rate_in
from storeprobe.workload import Workload

__all__ = [
    "CROWN",
    "FORMATS",
    "OPS_UNIT",
    "PER_OPERATION",
    "RATE_UNITS",
    "REGRESSED",
    "REGRESSION_FORMATS",
    "TIE",
    "Cell",
    "ComparedLike",
    "Format",
    "IdentityLike",
    "RateUnit",
    "RegressionReportLike",
    "ResultLike",
    "StepResultLike",
    "Table",
    "backup_tables",
    "check_format",
    "check_unit",
    "comparison_tables",
    "crown_legend",
    "inconclusive_text",
    "median_ops_per_s",
    "notice_lines",
    "ops_per_s",
    "percent",
    "probe_key",
    "rate",
    "regression_legend",
    "regression_tables",
    "render_regressions",
    "render_tables",
    "repeat_figures",
    "resolve_unit",
    "result_html",
    "result_line",
    "result_repr",
    "result_summary",
    "results_table",
    "scale",
    "target_label",
]

RateUnit = Literal["workload", "auto", "KiB/s", "MiB/s", "Mibit/s"]
#: the rate units accepted by every renderer and by ``--unit``
RATE_UNITS: tuple[str, ...] = get_args(RateUnit)
Format = Literal["markdown", "csv", "html", "text"]
#: the table formats of :func:`render_tables`
FORMATS: tuple[str, ...] = get_args(Format)
#: the mark of a winner significantly faster than the runner-up
CROWN = "👑"
#: the mark of the fastest figures when the runner-up is not significantly slower
TIE = "≈"
#: operations whose figure is operations per second, not a byte rate (metadata probes)
PER_OPERATION: tuple[str, ...] = ("head", "list", "delete")
#: the unit of :func:`ops_per_s`
OPS_UNIT = "ops/s"

_USUAL_BACKEND = {
    "s3": "obstore",
    "s3a": "obstore",
    "gs": "gcsfs",
    "gcs": "gcsfs",
    "abfs": "adlfs",
    "az": "adlfs",
    "abfss": "adlfs",
    "sftp": "sshfs",
    "ssh": "sshfs",
    "file": "local",
    "local": "local",
}


class _Rated(Protocol):
    @property
    def bytes_per_s(self) -> float: ...
    @property
    def seconds(self) -> float: ...


class ResultLike(Protocol):
    """What the renderers read of a :class:`~storeprobe.result.Result`."""

    @property
    def operation(self) -> str: ...
    @property
    def workload(self) -> Workload: ...
    @property
    def url(self) -> str: ...
    @property
    def protocol(self) -> str: ...
    @property
    def backend(self) -> str: ...
    @property
    def streams(self) -> int: ...
    @property
    def effective_streams(self) -> int: ...
    @property
    def strategy(self) -> str: ...
    @property
    def samples(self) -> Sequence[_Rated]: ...
    @property
    def errors(self) -> Sequence[Notice]: ...
    @property
    def warnings(self) -> Sequence[Notice]: ...
    @property
    def environment(self) -> Environment: ...
    @property
    def bytes_per_s(self) -> float: ...
    @property
    def median_bytes_per_s(self) -> float: ...
    @property
    def best_seconds(self) -> float: ...
    @property
    def median_seconds(self) -> float: ...


# -- units ---------------------------------------------------------------------------
def check_unit(unit: str) -> None:
    """Raise :class:`ConfigurationError` unless ``unit`` is one of :data:`RATE_UNITS`."""
    if unit not in RATE_UNITS:
        raise ConfigurationError(
            f"unknown rate unit {unit!r}: use one of {', '.join(RATE_UNITS)} "
            "(workload: KiB/s below 1 MiB per object, else MiB/s; auto: by magnitude)"
        )


def check_format(format: str) -> None:
    """Raise :class:`ConfigurationError` unless ``format`` is one of :data:`FORMATS`."""
    if format not in FORMATS:
        raise ConfigurationError(f"format must be one of {', '.join(FORMATS)}, not {format!r}")


def resolve_unit(unit: str, rates_bps: Iterable[float] = (), *, object_size: int = 0) -> str:
    """The concrete unit (``"KiB/s"``, ``"MiB/s"`` or ``"Mibit/s"``) to show rates in.

    ``"workload"``: KiB/s when ``object_size`` (bytes per object) is under 1 MiB, else
    MiB/s. ``"auto"``: MiB/s when the largest of ``rates_bps`` (B/s) reaches 1 MiB/s,
    else KiB/s, so one column or line uses one unit.
    """
    check_unit(unit)
    if unit == "workload":
        return "KiB/s" if object_size < MiB else "MiB/s"
    if unit == "auto":
        finite = [value for value in rates_bps if value == value and value != float("inf")]
        return auto_rate_unit(max(finite)) if finite else "KiB/s"
    return unit


def scale(bytes_per_s: float, unit: str) -> float:
    """``bytes_per_s`` (B/s) in a concrete 1024-based ``unit`` (KiB/s, MiB/s, Mibit/s)."""
    return rate_in(bytes_per_s, unit)


def rate(bytes_per_s: float, unit: str = "auto", *, object_size: int = 0) -> str:
    """``"803.05 KiB/s"``: a rate in B/s, two decimals, in ``unit`` (see :func:`resolve_unit`)."""
    concrete = resolve_unit(unit, [bytes_per_s], object_size=object_size)
    return f"{scale(bytes_per_s, concrete):.2f} {concrete}"


def _unit_of(result: ResultLike, unit: str) -> str:
    if result.operation in PER_OPERATION:
        return OPS_UNIT
    figures = [result.bytes_per_s] if result.samples else []
    return resolve_unit(unit, figures, object_size=result.workload.size)


# -- operations per second ----------------------------------------------------------------
def ops_per_s(result: ResultLike) -> float:
    """Operations per second of the best repeat: the probe's objects ÷ its window.

    For ``head`` and ``delete`` one request per object (requests ÷ window); for ``list``
    keys listed ÷ window (the pages it took are in ``requests_by_kind``).
    """
    return result.workload.count / result.best_seconds


def median_ops_per_s(result: ResultLike) -> float:
    """Operations per second over the median window (see :func:`ops_per_s`)."""
    return result.workload.count / result.median_seconds


def _headline(result: ResultLike, concrete: str) -> tuple[float, float]:
    """The best and median figures of ``result`` in ``concrete`` (ops/s or a byte rate)."""
    if concrete == OPS_UNIT:
        return ops_per_s(result), median_ops_per_s(result)
    return scale(result.bytes_per_s, concrete), scale(result.median_bytes_per_s, concrete)


def _shape(result: ResultLike) -> str:
    """``"256 × 16 KiB"``; a metadata probe's own label, which keeps empty objects' 0 B (a
    Workload holds at least 1 byte per object)."""
    if result.operation in PER_OPERATION:
        return result.workload.label
    return f"{result.workload.count} × {format_size(result.workload.size)}"


def _described(result: ResultLike) -> str:
    """``"small (256 × 16 KiB)"``; for a metadata probe its label (see :func:`_shape`)."""
    return _shape(result) if result.operation in PER_OPERATION else result.workload.describe()


def _rank(result: ResultLike) -> float:
    """What makes one result faster than another of the same probe: ops/s, or B/s."""
    return ops_per_s(result) if result.operation in PER_OPERATION else result.bytes_per_s


def _per_repeat(result: ResultLike) -> list[float]:
    """Each repeat's figure: ops/s for metadata probes, else B/s (for comparisons)."""
    if result.operation in PER_OPERATION:
        return [result.workload.count / sample.seconds for sample in result.samples]
    return [sample.bytes_per_s for sample in result.samples]


# -- one result --------------------------------------------------------------------------
def target_label(result: ResultLike) -> str:
    """The URL, plus the client when it is not the usual one for the protocol."""
    usual = _USUAL_BACKEND.get(result.protocol)
    if usual is None or usual == result.backend:
        return result.url
    return f"{result.url} ({result.backend})"


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'s' if count != 1 else ''}"


def _where(result: ResultLike) -> str:
    return f"{result.operation} {result.workload.label} on {result.url}, " + _plural(
        result.streams, "stream"
    )


def result_line(result: ResultLike, unit: str = "workload") -> str:
    """One line, as in a lab notebook: probe, target, streams, best and median rate.

    Failed repeats and the codes of warnings are named at the end. A scenario step says
    its seconds, the bytes it moved against those that changed, and the space used.
    """
    step: Step | None = getattr(result, "step", None)
    if step is not None and result.samples:
        return _step_line(result, step)
    head = (
        f"{result.operation} {_described(result)} {result.url}, {_plural(result.streams, 'stream')}"
    )
    if result.effective_streams != result.streams:
        head += f" ({result.effective_streams} effective)"
    if not result.samples:
        first = str(result.errors[0]) if result.errors else "no repeat ran"
        return f"{head}: failed ({_plural(len(result.errors), 'error')}; first: {first})"
    concrete = _unit_of(result, unit)
    best, median = _headline(result, concrete)
    text = (
        f"{head}: {best:.2f} {concrete} best of {len(result.samples)} (median "
        f"{median:.2f} {concrete}, {result.best_seconds:.3f} s)"
    )
    if result.errors:
        text += f", {_plural(len(result.errors), 'failed repeat')}"
    if result.warnings:
        codes = ", ".join(dict.fromkeys(notice.code.value for notice in result.warnings))
        text += f"; {_plural(len(result.warnings), 'warning')}: {codes}"
    return text


def _step_line(result: ResultLike, step: Step) -> str:
    space = "" if step.space_used is None else f", space used {format_bytes(step.space_used)}"
    dedup = "" if step.dedup_ratio is None else f", dedup {step.dedup_ratio:.1f}×"
    return (
        f"{step.label} ({step.method}) of {result.workload.label} on {result.url}, "
        f"{_plural(result.streams, 'stream')}: {result.best_seconds:.3f} s, moved "
        f"{format_bytes(step.moved_bytes)} (changed {format_bytes(step.changed_bytes)} of "
        f"{format_bytes(step.dataset_bytes)}){space}{dedup}"
    )


def result_repr(result: ResultLike, unit: str = "workload") -> str:
    """``<Result upload small s3://b streams=1 8192.00 KiB/s n=3 errors=0>``."""
    concrete = _unit_of(result, unit)
    figure = f"{_headline(result, concrete)[0]:.2f} {concrete}" if result.samples else "no samples"
    return (
        f"<Result {result.operation} {result.workload.label} {result.url} "
        f"streams={result.streams} {figure} n={len(result.samples)} "
        f"errors={len(result.errors)} warnings={len(result.warnings)}>"
    )


def notice_lines(result: ResultLike) -> list[str]:
    """``"warning: upload small on s3://b, 4 streams: high-variation: ..."``, errors first."""
    where = _where(result)
    return [f"error: {where}: {notice}" for notice in result.errors] + [
        f"warning: {where}: {notice}" for notice in result.warnings
    ]


def result_summary(result: ResultLike, unit: str = "workload") -> str:
    """:func:`result_line`, then one indented line per error and warning."""
    lines = [result_line(result, unit)]
    lines += [f"  error: {notice}" for notice in result.errors]
    lines += [f"  warning: {notice}" for notice in result.warnings]
    return "\n".join(lines)


def result_html(result: ResultLike, unit: str = "workload") -> str:
    """A compact two-column HTML table for notebooks (every text escaped)."""
    if result.samples:
        concrete = _unit_of(result, unit)
        best, median = (f"{value:.2f} {concrete}" for value in _headline(result, concrete))
    else:
        best = median = "failed"
    rows = [
        ("probe", f"{result.operation} {result.workload.label}"),
        ("target", f"{result.url} ({result.backend})"),
        ("streams", f"{result.streams} (effective {result.effective_streams})"),
        ("best", best),
        ("median", median),
        ("repeats ok", f"{len(result.samples)} of {len(result.samples) + len(result.errors)}"),
        ("strategy", result.strategy),
        *(("error", str(notice)) for notice in result.errors),
        *(("warning", str(notice)) for notice in result.warnings),
    ]
    body = "".join(
        f"<tr><th style='text-align:left'>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>"
        for k, v in rows
    )
    return f"<table>{body}</table>"


# -- tables ----------------------------------------------------------------------------------
@frozen(kw_only=True)
class Cell:
    """One cell: its text, the number behind it (None for labels and blanks), a mark."""

    text: str
    value: float | None = None
    mark: str = ""

    @property
    def shown(self) -> str:
        """The text with its mark (``"4096.00 👑"``)."""
        return f"{self.text} {self.mark}" if self.mark else self.text


def _strings(value: Iterable[str]) -> tuple[str, ...]:
    return tuple(value)


def _rows(value: Iterable[Iterable[Cell]]) -> tuple[tuple[Cell, ...], ...]:
    return tuple(tuple(row) for row in value)


@frozen(kw_only=True)
class Table:
    """A titled grid: ``header`` names the columns, the first ``labels`` columns are text.

    ``units`` gives each column's unit ("" for text columns); ``legend`` is printed under
    the table.
    """

    title: str
    header: tuple[str, ...] = field(converter=_strings)
    units: tuple[str, ...] = field(converter=_strings)
    rows: tuple[tuple[Cell, ...], ...] = field(converter=_rows)
    labels: int = 1
    legend: str = ""


def _markdown(table: Table) -> str:
    texts = [[cell.shown for cell in row] for row in table.rows]
    header = [h + (f" ({u})" if u else "") for h, u in zip(table.header, table.units, strict=True)]
    widths = [max([len(h), *(len(r[i]) for r in texts)]) for i, h in enumerate(header)]
    left = range(table.labels)
    lines = [f"**{table.title}**", ""] if table.title else []
    lines.append("| " + " | ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)) + " |")
    lines.append(
        "|"
        + "|".join(
            "-" * (w + 2) if i in left else "-" * (w + 1) + ":" for i, w in enumerate(widths)
        )
        + "|"
    )
    for row in texts:
        cells = [
            cell.ljust(width) if i in left else cell.rjust(width)
            for i, (cell, width) in enumerate(zip(row, widths, strict=True))
        ]
        lines.append("| " + " | ".join(cells) + " |")
    if table.legend:
        lines += ["", table.legend]
    return "\n".join(lines)


def _text(table: Table) -> str:
    texts = [[cell.shown for cell in row] for row in table.rows]
    header = [h + (f" ({u})" if u else "") for h, u in zip(table.header, table.units, strict=True)]
    widths = [max([len(h), *(len(r[i]) for r in texts)]) for i, h in enumerate(header)]
    left = range(table.labels)

    def line(cells: Sequence[str]) -> str:
        return "  ".join(
            c.ljust(w) if i in left else c.rjust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ).rstrip()

    lines = [table.title] if table.title else []
    lines += [line(header), line(["-" * w for w in widths])]
    lines += [line(row) for row in texts]
    if table.legend:
        lines += ["", table.legend]
    return "\n".join(lines)


def _html(table: Table) -> str:
    header = [h + (f" ({u})" if u else "") for h, u in zip(table.header, table.units, strict=True)]
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join(
        "<tr>"
        + "".join(
            f"<td>{html.escape(cell.shown)}</td>"
            if i < table.labels
            else f"<td style='text-align:right'>{html.escape(cell.shown)}</td>"
            for i, cell in enumerate(row)
        )
        + "</tr>"
        for row in table.rows
    )
    caption = f"<caption>{html.escape(table.title)}</caption>" if table.title else ""
    legend = f"<p>{html.escape(table.legend)}</p>" if table.legend else ""
    return f"<table>{caption}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{legend}"


def _csv(tables: Sequence[Table]) -> str:
    """Long form: one line per number (table, row labels, column, value, unit, mark)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    label_names = list(tables[0].header[: tables[0].labels]) if tables else ["target"]
    writer.writerow(["table", *label_names, "column", "value", "unit", "mark", "winner"])
    for table in tables:
        for row in table.rows:
            labels = [cell.text for cell in row[: table.labels]]
            for index in range(table.labels, len(row)):
                cell = row[index]
                if cell.value is None:
                    continue
                writer.writerow(
                    [
                        table.title,
                        *labels,
                        table.header[index],
                        cell.text,
                        table.units[index],
                        cell.mark,
                        int(cell.mark == CROWN),
                    ]
                )
    return buffer.getvalue()


def render_tables(tables: Sequence[Table], format: str = "markdown") -> str:
    """Tables as one string: ``"markdown"``, ``"csv"`` (long form), ``"html"`` or ``"text"``."""
    check_format(format)
    if not tables:
        return ""
    if format == "csv":
        return _csv(tables)
    renderer = {"markdown": _markdown, "html": _html, "text": _text}[format]
    return "\n\n".join(renderer(table) for table in tables)


# -- tables of results -------------------------------------------------------------------------
def results_table(results: Sequence[ResultLike], unit: str = "workload") -> Table:
    """One row per Result: (target,) (environment,) probe, workload, unit, streams, best,
    median, ok/repeats.

    The target column appears when the results come from more than one target, the
    environment column when they come from more than one environment.
    """
    check_unit(unit)
    env_name = _environment_names(results)
    extra: list[tuple[str, Callable[[ResultLike], str]]] = [
        (name, label)
        for name, label in (("target", target_label), ("environment", env_name))
        if len({label(r) for r in results}) > 1
    ]
    rows: list[list[Cell]] = []
    for result in results:
        concrete = _unit_of(result, unit)
        if result.samples:
            best, median = _headline(result, concrete)
            figures = [
                Cell(text=f"{best:.2f}", value=best),
                Cell(text=f"{median:.2f}", value=median),
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
                Cell(text=f"{result.operation} {result.workload.label}"),
                Cell(text=_shape(result)),
                Cell(text=concrete),
                Cell(text=streams, value=float(result.streams)),
                *figures,
                Cell(text=f"{len(result.samples)}/{repeats}", value=float(len(result.samples))),
            ]
        )
    header = ["probe", "workload", "unit", "streams", "best", "median", "ok/repeats"]
    return Table(
        title="",
        header=[name for name, _ in extra] + header,
        units=[""] * (len(header) + len(extra)),
        rows=rows,
        labels=3 + len(extra),
    )


def crown_legend(crown: str = CROWN, tie: str = TIE, confidence: float = 0.95) -> str:
    """The rule behind the marks, printed under comparison tables."""
    return (
        f"{crown} fastest in its column and significantly faster than the runner-up: the "
        f"{confidence:.0%} bootstrap interval of the ratio of median throughputs lies above "
        f"1 (storeprobe.stats.compare). {tie} the fastest figures, not significantly "
        "different from the best (or fewer than 2 repeats to tell). Figures are the best "
        "repeat."
    )


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
    winners = [ranked[0]]
    mark = crown if _separable(best, runner_up, confidence) else tie
    if mark == tie:
        for index in ranked[1:]:
            other = cells[index][column]
            if other is not None and not _separable(best, other, confidence):
                winners.append(index)
    for index in winners:
        old = rows[index][column]
        rows[index][column] = Cell(text=old.text, value=old.value, mark=mark)


def _environment_names(results: Sequence[ResultLike]) -> Callable[[ResultLike], str]:
    """Environment name, with the host added where two hosts share one name."""
    hosts: dict[str, set[str]] = {}
    for r in results:
        hosts.setdefault(r.environment.name, set()).add(r.environment.hostname)

    def name(result: ResultLike) -> str:
        env = result.environment
        return env.name if len(hosts[env.name]) == 1 else f"{env.name} @ {env.hostname}"

    return name


def _best(results: Iterable[ResultLike]) -> ResultLike | None:
    measured = [r for r in results if r.samples]
    return max(measured, key=_rank) if measured else None


def probe_key(result: ResultLike) -> tuple[str, int, int, str, int]:
    """What makes two results the same probe: workload label, count and size, operation,
    streams. The payload seed is not part of it: fresh bytes, same probe."""
    workload = result.workload
    return (workload.label, workload.count, workload.size, result.operation, result.streams)


def _probe_title(result: ResultLike) -> str:
    return f"{result.operation} {result.workload.label}, {_plural(result.streams, 'stream')}"


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
    env_name = _environment_names(results)
    legend = crown_legend(crown, tie, confidence)
    tables: list[Table] = []
    if by == "environment":
        probes = list(dict.fromkeys(probe_key(r) for r in results))
        for probe in probes:
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
            concrete = (
                OPS_UNIT
                if members[0].operation in PER_OPERATION
                else resolve_unit(
                    unit,
                    [r.bytes_per_s for r in members if r.samples],
                    object_size=members[0].workload.size,
                )
            )
            tables.append(
                _table(
                    _probe_title(members[0]),
                    ["target"],
                    environments,
                    [[t] for t in targets],
                    grid,
                    [concrete] * len(environments),
                    crown,
                    tie,
                    confidence,
                    legend,
                )
            )
        return tables
    columns = list(
        dict.fromkeys(
            probe_key(r)
            for r in sorted(
                results,
                key=lambda r: (
                    r.workload.size >= MiB,
                    r.workload.label,
                    r.operation != "upload",
                    r.streams,
                ),
            )
        )
    )
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
    units = [
        OPS_UNIT
        if column[3] in PER_OPERATION
        else resolve_unit(
            unit,
            [r.bytes_per_s for r in results if r.samples and probe_key(r) == column],
            object_size=column[2],
        )
        for column in columns
    ]
    names = [
        f"{operation} {label}, {_plural(streams, 'stream')}"
        for label, _, _, operation, streams in columns
    ]
    seen = ", ".join(dict.fromkeys(env_name(r) for r in results))
    labels = [[t, e] if several_envs else [t] for t, e in keys]
    tables.append(
        _table(
            f"all probes ({seen})",
            ["target", "environment"] if several_envs else ["target"],
            names,
            labels,
            grid,
            units,
            crown,
            tie,
            confidence,
            legend,
        )
    )
    return tables


def _table(
    title: str,
    label_header: list[str],
    names: list[str],
    labels: Sequence[list[str]],
    grid: list[list[ResultLike | None]],
    units: list[str],
    crown: str,
    tie: str,
    confidence: float,
    legend: str,
) -> Table:
    rows: list[list[Cell]] = []
    for label, line in zip(labels, grid, strict=True):
        row = [Cell(text=t) for t in label]
        for result, concrete in zip(line, units, strict=True):
            if result is None:
                row.append(Cell(text=""))
            else:
                value = _headline(result, concrete)[0]
                row.append(Cell(text=f"{value:.2f}", value=value))
        rows.append(row)
    # align result cells with row cells (label columns hold no result)
    width = len(label_header)
    blank: list[ResultLike | None] = [None] * width
    cells = [blank + line for line in grid]
    for column in range(width, width + len(names)):
        _mark_column(rows, cells, column, crown, tie, confidence)
    return Table(
        title=title,
        header=[*label_header, *names],
        units=[""] * width + units,
        rows=rows,
        labels=width,
        legend=legend,
    )


# -- scenario tables -------------------------------------------------------------------------
class StepResultLike(ResultLike, Protocol):
    """A Result that may be a scenario step (``step`` is a :class:`~storeprobe.step.Step`)."""

    @property
    def step(self) -> Step | None: ...


def backup_tables(results: Sequence[StepResultLike]) -> list[Table]:
    """The backup-and-restore tables in the shape people publish them.

    One table per method and dataset; one row per target, stream count (and environment,
    when there are several); one column per step (``backup 1`` …, ``restore 1 (full)``
    …) in seconds (the step's timed requests), then the space the target held after the
    last backup, in MiB. A failed step shows ``failed``, a step not run ``-``.
    """
    steps = [r for r in results if r.step is not None]
    groups: dict[tuple[str, str], list[StepResultLike]] = {}
    for result in steps:
        assert result.step is not None
        kind = result.workload.label.split(" ", 1)[0]
        groups.setdefault((result.step.method, kind), []).append(result)
    env_name = _environment_names(steps)
    several_envs = len({env_name(r) for r in steps}) > 1
    tables: list[Table] = []
    for (method, kind), members in groups.items():
        columns: list[str] = []
        for result in members:
            assert result.step is not None
            if result.step.label not in columns:
                columns.append(result.step.label)
        columns.sort(key=lambda label: (not label.startswith("backup"), _step_number(label)))
        rows: dict[tuple[str, ...], dict[str, StepResultLike]] = {}
        for result in members:
            assert result.step is not None
            key: tuple[str, ...] = (target_label(result), str(result.streams))
            if several_envs:
                key = (*key, env_name(result))
            rows.setdefault(key, {})[result.step.label] = result
        first = min(members, key=lambda r: r.step.version if r.step else 0).step
        assert first is not None
        header = ["target", "streams", *(["environment"] if several_envs else []), *columns]
        units = ["", "", *([""] if several_envs else []), *(["s"] * len(columns))]
        grid: list[list[Cell]] = []
        for key, cells in rows.items():
            row = [Cell(text=text) for text in key]
            space: int | None = None
            for label in columns:
                found = cells.get(label)
                if found is None:
                    row.append(Cell(text=""))
                    continue
                if found.samples:
                    seconds = found.best_seconds
                    row.append(Cell(text=f"{seconds:.3f}", value=seconds))
                elif any(e.code.value == "not-run" for e in found.errors):
                    row.append(Cell(text="-"))
                else:
                    row.append(Cell(text="failed"))
                step = found.step
                if step is not None and step.kind == "backup" and step.space_used is not None:
                    space = step.space_used
            row.append(
                Cell(
                    text="" if space is None else f"{space / MiB:.2f}",
                    value=None if space is None else space / MiB,
                )
            )
            grid.append(row)
        tables.append(
            Table(
                title=f"backup and restore, {method} method, {first.dataset} ({kind})",
                header=(*header, "space used"),
                units=(*units, "MiB"),
                rows=grid,
                labels=len(header) - len(columns),
                legend="seconds of timed requests per step (the sum of its windows); space "
                "used: what the target held under the run's prefix after the last backup",
            )
        )
    return tables


def _step_number(label: str) -> int:
    return int(label.split()[1])


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
    def repeats_needed(self) -> int: ...
    @property
    def resolution(self) -> float: ...
    @property
    def min_repeats(self) -> int: ...


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
    @property
    def min_repeats(self) -> int: ...
    def to_json(self) -> str: ...


def inconclusive_text(row: ComparedLike) -> str:
    """``"inconclusive: 2 and 5 repeats; a verdict needs at least 3 on each side, about 40
    to tell 5% apart at this spread"`` (the last part when the spread asks for more)."""
    text = (
        f"inconclusive: {row.base_repeats} and {row.new_repeats} repeats; a verdict needs "
        f"at least {row.min_repeats} on each side"
    )
    if row.repeats_needed > row.min_repeats:
        text += (
            f", about {row.repeats_needed} to tell {percent(row.resolution)} apart at this spread"
        )
    return text


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
    text = (
        "ratio: new median ÷ base median of per-repeat figures (B/s; ops/s for head, list, "
        f"delete); above 1 is faster. {confidence} bootstrap interval of the ratio "
        "(storeprobe.stats.compare): faster or slower when the whole interval lies above "
        f"or below 1, else no significant difference; inconclusive with fewer than "
        f"{report.min_repeats} successful repeats on a side."
    )
    if report.fail_slower is not None:
        limit = 1 - report.fail_slower
        text += (
            f" {REGRESSED} regressed: slower by more than {percent(report.fail_slower)}, the "
            f"ratio and the interval's upper bound both below {limit:.3f}."
        )
    if report.excluded_steps:
        text += (
            f" {_plural(report.excluded_steps, 'backup-scenario step')} not compared: a "
            "scenario runs once, so a step has one sample and no interval (see storeprobe "
            "report)."
        )
    return text


def regression_tables(report: RegressionReportLike, unit: str = "workload") -> list[Table]:
    """The comparison table, then one table of unmatched probes per side (if any).

    Columns: target, (environment, when any probe has a label), probe, streams, unit,
    base and new medians, ratio (new ÷ base), interval, verdict; a regression is marked
    :data:`REGRESSED`.
    """
    check_unit(unit)
    identities = [
        *(row.identity for row in report.rows),
        *report.unmatched_base,
        *report.unmatched_new,
    ]
    labelled = any(identity.environment is not None for identity in identities)

    def labels(identity: IdentityLike) -> list[Cell]:
        return [
            Cell(text=identity.target),
            *([Cell(text=_environment_shown(identity))] if labelled else []),
            Cell(text=identity.probe),
            Cell(text=str(identity.streams), value=float(identity.streams)),
        ]

    label_header = ["target", *(["environment"] if labelled else []), "probe", "streams"]
    rows: list[list[Cell]] = []
    for row in report.rows:
        concrete = _figure_unit(row.identity, (row.base_median, row.new_median), unit)
        figures = []
        for value in (row.base_median, row.new_median):
            shown = _in_unit(value, concrete)
            figures.append(
                Cell(text="failed") if shown is None else Cell(text=f"{shown:.2f}", value=shown)
            )
        ratio = (
            Cell(text="-") if row.ratio is None else Cell(text=f"{row.ratio:.3f}", value=row.ratio)
        )
        interval = "-" if row.low is None or row.high is None else f"{row.low:.3f}–{row.high:.3f}"
        verdict = inconclusive_text(row) if row.verdict == "inconclusive" else row.verdict
        rows.append(
            [
                *labels(row.identity),
                Cell(text=concrete),
                *figures,
                ratio,
                Cell(text=interval),
                Cell(text=verdict, mark=REGRESSED if row.regressed else ""),
            ]
        )
    regressed = sum(row.regressed for row in report.rows)
    interval_name = f"{report.confidence:.0%} interval"
    header = [*label_header, "unit", "base", "new", "ratio", interval_name, "verdict"]
    tables = [
        Table(
            title=f"new against base: {_plural(len(report.rows), 'probe')} compared, "
            f"{regressed} regressed",
            header=header,
            units=[""] * len(header),
            rows=rows,
            labels=len(label_header) + 1,
            legend=regression_legend(report),
        )
    ]
    for side, unmatched in (("base", report.unmatched_base), ("new", report.unmatched_new)):
        if unmatched:
            other = "new" if side == "base" else "base"
            tables.append(
                Table(
                    title=f"only in {side} (no match in {other}): "
                    f"{_plural(len(unmatched), 'probe')}",
                    header=label_header,
                    units=[""] * len(label_header),
                    rows=[labels(identity) for identity in unmatched],
                    labels=len(label_header),
                )
            )
    return tables


def _regressions_csv(report: RegressionReportLike, unit: str) -> str:
    """One line per probe: ``status`` is compared, only-in-base or only-in-new."""
    check_unit(unit)
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(
        [
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
            "base_repeats",
            "new_repeats",
            "repeats_needed",
            "resolution",
        ]
    )

    def identity_cells(identity: IdentityLike) -> list[str | int]:
        return [
            identity.target,
            identity.environment or "",
            identity.operation,
            identity.workload,
            identity.count,
            identity.size,
            identity.streams,
        ]

    def number(value: float | None, digits: int) -> str:
        return "" if value is None else f"{value:.{digits}f}"

    for row in report.rows:
        concrete = _figure_unit(row.identity, (row.base_median, row.new_median), unit)
        writer.writerow(
            [
                "compared",
                *identity_cells(row.identity),
                concrete,
                number(_in_unit(row.base_median, concrete), 2),
                number(_in_unit(row.new_median, concrete), 2),
                number(row.ratio, 4),
                number(row.low, 4),
                number(row.high, 4),
                row.confidence,
                row.verdict,
                int(row.regressed),
                row.base_repeats,
                row.new_repeats,
                row.repeats_needed,
                row.resolution,
            ]
        )
    for status, unmatched in (
        ("only-in-base", report.unmatched_base),
        ("only-in-new", report.unmatched_new),
    ):
        for identity in unmatched:
            writer.writerow([status, *identity_cells(identity), *[""] * 13])
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
