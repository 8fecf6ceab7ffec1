"""Charts of Results (the ``plot`` extra; matplotlib is imported only when called).

Functions return a :class:`matplotlib.figure.Figure` built without pyplot: nothing is
shown, no global state is touched. Save one with ``figure.savefig("chart.png")`` (or
``.svg``).

- :func:`plot_probes`: small multiples, one panel per probe (operation × workload),
  bars grouped by target, one bar per stream count or per environment.
- :func:`plot_streams`: throughput against streams, saturation marked.
- :func:`plot_backup`: seconds per backup and restore step, per storage.
- :func:`plot_timeline`: throughput per time slice of each repeat of one Result.

Every bar shows the best repeat (the headline figure of the tables), its value printed
on it, a whisker from the slowest to the fastest repeat and a mark at the median. Each
panel has its own unit, chosen as tables choose it (:func:`storeprobe.render.resolve_unit`),
so axes never need an offset or powers of ten. Colours are the Okabe–Ito palette, which
readers with colour-blindness can tell apart.

Why one module (~570 lines): one concept (charts of Results): the four charts share the
bar, whisker, unit and palette helpers, which would otherwise be imported back and forth.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Literal

from storeprobe.errors import ConfigurationError, MissingDependencyError
from storeprobe.render import (
    OPS_UNIT,
    check_unit,
    environment_names,
    resolve_unit,
    scale,
    target_label,
    unit_of,
)
from storeprobe.result import Result, Sample
from storeprobe.resultset import ResultSet

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = [
    "OKABE_ITO",
    "image_formats",
    "plot_backup",
    "plot_probes",
    "plot_streams",
    "plot_timeline",
]

#: the Okabe–Ito colour-blind-safe palette, in the order series get their colours
OKABE_ITO = (
    "#0072B2",  # blue
    "#E69F00",  # orange
    "#009E73",  # bluish green
    "#CC79A7",  # reddish purple
    "#56B4E9",  # sky blue
    "#D55E00",  # vermillion
    "#F0E442",  # yellow
    "#000000",  # black
)
#: target labels longer than this turn the bars horizontal
LONG_LABEL = 24


def _figure_class() -> Any:
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise MissingDependencyError(
            "plots need matplotlib: pip install 'storeprobe[plot]'"
        ) from None
    return Figure


def image_formats() -> frozenset[str]:
    """The file name suffixes (without the dot: ``png``, ``svg``, ``pdf``...) a chart can be
    saved as with ``figure.savefig(path)``; :class:`MissingDependencyError` without
    matplotlib."""
    _figure_class()
    from matplotlib.backend_bases import FigureCanvasBase

    return frozenset(FigureCanvasBase.get_supported_filetypes())


def _measured(results: Iterable[Result]) -> list[Result]:
    measured = [result for result in results if result.samples]
    if not measured:
        raise ConfigurationError("nothing to plot: no result has a successful sample")
    return measured


def _colour(index: int) -> str:
    return OKABE_ITO[index % len(OKABE_ITO)]


def _value_text(value: float) -> str:
    """A figure as people write it on a bar: 3 significant digits, no exponent."""
    if not math.isfinite(value):
        return ""
    if abs(value) >= 100:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def _tick_text(value: float, _position: object = None) -> str:
    """A tick label with thousands separators and no exponent: ``2,500,000``, ``0.5``."""
    if value == int(value):
        return f"{value:,.0f}"
    return f"{value:,.6g}" if abs(value) < 1000 else f"{value:,.0f}"


def _plain(ax: Axes, axis: Literal["x", "y"]) -> None:
    from matplotlib.ticker import FuncFormatter

    (ax.xaxis if axis == "x" else ax.yaxis).set_major_formatter(FuncFormatter(_tick_text))


def _suptitle(figure: Figure, what: str, results: Sequence[Result]) -> None:
    """``what — env1, env2 — 2026-11-30``: environments and the dates of the runs."""
    name = environment_names(results)
    environments = list(dict.fromkeys(name(r) for r in results))
    dates = sorted({r.environment.utc[:10] for r in results if r.environment.utc})
    when = dates[0] if len(dates) == 1 else f"{dates[0]} to {dates[-1]}" if dates else ""
    parts = [what, ", ".join(environments), when]
    figure.suptitle(" — ".join(part for part in parts if part), fontsize=11)


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'s' if count != 1 else ''}"


# -- one panel of grouped bars ----------------------------------------------------------------
class _Bar:
    """One bar: its height, the repeats' spread and median (in the panel's unit)."""

    def __init__(self, height: float, values: Sequence[float]) -> None:
        self.height = height
        self.low = min(values)
        self.high = max(values)
        self.median = statistics.median(values)
        self.repeats = len(values)


def _grouped_bars(
    ax: Axes,
    groups: Sequence[str],
    series: Sequence[str],
    bars: dict[tuple[str, str], _Bar],
    colours: dict[str, str],
    *,
    unit: str,
    horizontal: bool,
) -> None:
    """Bars grouped by ``groups`` (one group per tick), one bar per ``series``.

    Each bar gets its value as a label, a whisker from ``low`` to ``high`` (gid
    ``"whisker"``) when there are several repeats, and a median mark (gid ``"median"``).
    """
    width = 0.8 / max(1, len(series))
    for offset, name in enumerate(series):
        positions: list[float] = []
        heights: list[float] = []
        present: list[_Bar] = []
        for index, group in enumerate(groups):
            bar = bars.get((group, name))
            if bar is None:
                continue
            positions.append(index + (offset - (len(series) - 1) / 2) * width)
            heights.append(bar.height)
            present.append(bar)
        if not positions:
            continue
        draw = ax.barh if horizontal else ax.bar
        drawn = draw(positions, heights, width * 0.9, color=colours[name], label=name)
        ax.bar_label(
            drawn,
            labels=[_value_text(h) for h in heights],
            fontsize=7,
            padding=2,
        )
        for position, bar in zip(positions, present, strict=True):
            half = width * 0.25
            if bar.repeats > 1:
                span, at = [bar.low, bar.high], [position, position]
                xs, ys = (span, at) if horizontal else (at, span)
                ax.plot(xs, ys, color="#333333", linewidth=1, gid="whisker")
            across, level = [position - half, position + half], [bar.median, bar.median]
            xs, ys = (level, across) if horizontal else (across, level)
            ax.plot(xs, ys, color="#ffffff", linewidth=1.5, gid="median")
    ticks = list(range(len(groups)))
    if horizontal:
        ax.set_yticks(ticks, list(groups), fontsize=8)
        ax.invert_yaxis()  # the first group on top
        ax.set_xlabel(unit)
        _plain(ax, "x")
        ax.margins(x=0.18)
    else:
        ax.set_xticks(ticks, list(groups), fontsize=8)
        ax.set_ylabel(unit)
        _plain(ax, "y")
        ax.margins(y=0.18)


def _small_multiples(figure: Figure, panels: int, *, horizontal: bool) -> list[Axes]:
    columns = 1 if panels == 1 or horizontal else 2
    rows = -(-panels // columns)
    grid = figure.subplots(rows, columns, squeeze=False)
    axes: list[Axes] = [ax for row in grid for ax in row]
    for spare in axes[panels:]:
        spare.remove()
    return axes[:panels]


#: the key's entries for the marks on every bar
WHISKER_KEY = "whisker: slowest to fastest repeat"
MEDIAN_KEY = "white mark: median repeat"


def _marks_key() -> dict[str, Any]:
    """Legend handles for the whisker and the median mark (see :func:`_grouped_bars`)."""
    from matplotlib import patheffects
    from matplotlib.lines import Line2D

    outline = [patheffects.withStroke(linewidth=3.5, foreground="#333333")]
    return {
        WHISKER_KEY: Line2D([], [], color="#333333", linewidth=1),
        MEDIAN_KEY: Line2D([], [], color="#ffffff", linewidth=1.5, path_effects=outline),
    }


def _legend(figure: Figure, axes: Sequence[Axes], title: str) -> None:
    seen: dict[str, Any] = {}
    for ax in axes:
        handles, labels = ax.get_legend_handles_labels()
        for handle, label in zip(handles, labels, strict=True):
            seen.setdefault(label, handle)
    if seen:
        seen.update(_marks_key())
        figure.legend(
            list(seen.values()),
            list(seen),
            title=title,
            loc="outside lower center",
            ncols=min(len(seen), 4),
            fontsize=8,
            title_fontsize=8,
        )


# -- probes -----------------------------------------------------------------------------------
def _repeat_rates(result: Result) -> list[float]:
    """Per-repeat rates in the subject's rate unit (B/s, or operations per second); an
    operation rate needs a window that lasted."""
    subject = result.subject
    return [
        subject.rate(s) for s in result.samples if s.elapsed_ns > 0 or not subject.per_operation
    ]


def _panel_unit(members: Sequence[Result], unit: str) -> str:
    return unit_of(members[0].subject, unit, [r.bytes_per_s for r in members])


def _in_unit(value: float, concrete: str) -> float:
    return value if concrete == OPS_UNIT else scale(value, concrete)


def _headline(result: Result, concrete: str) -> float:
    """The best repeat's figure, as the tables show it."""
    if concrete == OPS_UNIT:
        return max(_repeat_rates(result))
    return scale(result.bytes_per_s, concrete)


def plot_probes(
    results: Iterable[Result],
    *,
    unit: str = "workload",
    by: Literal["streams", "environment"] = "streams",
) -> Figure:
    """Small multiples: one panel per probe (operation × workload), bars grouped by target.

    ``by="streams"``: one bar per stream count in each target's group;
    ``by="environment"``: one bar per environment. When the other one also varies, each
    pair gets its own bar (machines are never merged). A bar is the best repeat, its
    value printed on it; the whisker runs from the slowest to the fastest repeat and the
    white mark is the median. Each panel has its own unit (``unit="workload"``: KiB/s
    for small objects, MiB/s for large ones; or ``"auto"``, ``"KiB/s"``, ``"MiB/s"``,
    ``"Mibit/s"``, as in :mod:`storeprobe.render`; metadata probes in ops/s). Bars turn
    horizontal when a target's name is longer than 24 characters. The title names the
    environments and the date of the runs.
    """
    check_unit(unit)
    if by not in ("streams", "environment"):
        raise ConfigurationError(f"by must be 'streams' or 'environment', not {by!r}")
    measured = _measured(results)
    series_of, series = _probe_series(measured, by)
    colours = {name: _colour(index) for index, name in enumerate(series)}
    probes = list(dict.fromkeys(r.probe for r in measured))
    horizontal = max(len(target_label(r)) for r in measured) > LONG_LABEL
    figure: Figure = _figure_class()(
        figsize=(7.0, 1.2 + 2.8 * (len(probes) if horizontal else -(-len(probes) // 2)))
        if len(probes) > 1
        else (6.4, 3.8),
        layout="constrained",
    )
    axes = _small_multiples(figure, len(probes), horizontal=horizontal)
    for ax, probe in zip(axes, probes, strict=True):
        members = [r for r in measured if r.probe == probe]
        concrete = _panel_unit(members, unit)
        targets = list(dict.fromkeys(target_label(r) for r in members))
        bars = _probe_bars(members, targets, series, series_of, concrete)
        _grouped_bars(ax, targets, series, bars, colours, unit=concrete, horizontal=horizontal)
        ax.set_title(probe, fontsize=10)
    _legend(figure, axes, "streams" if by == "streams" else "environment")
    _suptitle(figure, "throughput, best repeat", measured)
    return figure


def _probe_series(
    measured: Sequence[Result], by: Literal["streams", "environment"]
) -> tuple[Callable[[Result], str], list[str]]:
    """What a result's bar is called in :func:`plot_probes` (its stream count or its
    environment first, the other added where it varies), and every such name in the
    order of the bars: by streams then environment, or by environment."""
    environment = environment_names(measured)
    several_envs = len({environment(r) for r in measured}) > 1
    several_streams = len({r.streams for r in measured}) > 1

    def series_of(result: Result) -> str:
        streams = _plural(result.streams, "stream")
        if by == "streams":
            return f"{streams}, {environment(result)}" if several_envs else streams
        return f"{environment(result)}, {streams}" if several_streams else environment(result)

    order = sorted(
        measured,
        key=lambda r: (r.streams, environment(r)) if by == "streams" else (environment(r),),
    )
    return series_of, list(dict.fromkeys(series_of(r) for r in order))


def _probe_bars(
    members: Sequence[Result],
    targets: Sequence[str],
    series: Sequence[str],
    series_of: Callable[[Result], str],
    concrete: str,
) -> dict[tuple[str, str], _Bar]:
    """One probe's bars, by (target, series): the best of its results' headline figures,
    and the repeats of them all, in the panel's unit ``concrete``."""
    bars: dict[tuple[str, str], _Bar] = {}
    for target in targets:
        for name in series:
            alike = [r for r in members if target_label(r) == target and series_of(r) == name]
            repeats = [_in_unit(rate, concrete) for r in alike for rate in _repeat_rates(r)]
            best = [_headline(r, concrete) for r in alike]
            if repeats:
                bars[(target, name)] = _Bar(max(best), repeats)
    return bars


# -- stream sweeps ----------------------------------------------------------------------------
def plot_streams(results: Iterable[Result], *, unit: str = "workload") -> Figure:
    """Throughput against streams: one line per (target, probe), best repeat per point.

    Whiskers run from the slowest to the fastest repeat at each count. Where a line
    saturates (the fewest streams reaching 95 % of its best: see
    :meth:`storeprobe.ResultSet.sweep_saturation`) a ring and a note mark the point; a
    line still rising at its last count has no mark. ``unit`` as in :func:`plot_probes`;
    with ``"workload"`` the results must share one unit (all small or all large
    workloads).
    """
    check_unit(unit)
    measured = _measured(results)
    concrete = _sweep_unit(measured, unit)
    environment = environment_names(measured)
    several_envs = len({environment(r) for r in measured}) > 1

    def line_of(result: Result) -> tuple[str, str, str]:
        return (target_label(result), result.probe, environment(result) if several_envs else "")

    figure: Figure = _figure_class()(figsize=(6.4, 4.4), layout="constrained")
    ax = figure.subplots()
    for index, key in enumerate(dict.fromkeys(line_of(r) for r in measured)):
        target, probe, env = key
        members = [r for r in measured if line_of(r) == key]
        label = " — ".join(part for part in (probe, target, env) if part)
        _sweep_line(ax, members, concrete, colour=_colour(index), label=label)
    ax.set_xscale("log", base=2)
    counts_tried = sorted({r.streams for r in measured})
    ax.set_xticks(counts_tried, [str(n) for n in counts_tried])
    ax.minorticks_off()
    ax.set_xlabel("streams (requests in flight)")
    ax.set_ylabel(concrete)
    _plain(ax, "y")
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    _suptitle(figure, "throughput against streams, best repeat", measured)
    return figure


def _sweep_unit(measured: Sequence[Result], unit: str) -> str:
    """The one concrete unit of a stream sweep's chart; :class:`ConfigurationError` when
    ``unit`` gives its results different ones."""
    units = {
        resolve_unit(unit, [r.bytes_per_s for r in measured], object_size=r.subject.object_size)
        for r in measured
    }
    if len(units) != 1:
        raise ConfigurationError(
            "plot_streams needs results in one unit: filter to small or to large workloads, "
            "or pass unit='MiB/s' (or 'auto')"
        )
    return units.pop()


def _sweep_line(
    ax: Axes, members: Sequence[Result], concrete: str, *, colour: str, label: str
) -> None:
    """One line of :func:`plot_streams`: the best repeat at each stream count, whiskers
    from the slowest to the fastest repeat, and the saturation point ringed."""
    counts = sorted({r.streams for r in members})
    best = [max(scale(r.bytes_per_s, concrete) for r in members if r.streams == n) for n in counts]
    spread = [
        [scale(s.bytes_per_s, concrete) for r in members if r.streams == n for s in r.samples]
        for n in counts
    ]
    ax.plot(counts, best, marker="o", color=colour, label=label)
    for n, values in zip(counts, spread, strict=True):
        if len(values) > 1:
            ax.plot([n, n], [min(values), max(values)], color=colour, lw=1, gid="whisker")
    found = ResultSet(members).sweep_saturation() if len(counts) > 1 else None
    if found is not None and found.streams is not None:
        _saturation_mark(ax, found.streams, best[counts.index(found.streams)], colour)


def _saturation_mark(ax: Axes, streams: int, at: float, colour: str) -> None:
    """A ring (gid ``"saturation"``) and a note where a sweep saturates."""
    ax.plot(
        [streams],
        [at],
        marker="o",
        markersize=14,
        markerfacecolor="none",
        markeredgecolor=colour,
        linestyle="none",
        gid="saturation",
    )
    ax.annotate(
        f"saturates at {streams}",
        (streams, at),
        textcoords="offset points",
        xytext=(8, -14),
        fontsize=7,
        color=colour,
    )


# -- backup scenarios -------------------------------------------------------------------------
def _step_order(label: str) -> tuple[bool, int, str]:
    kind, number, *_ = label.split()
    return (kind != "backup", int(number), label)


def plot_backup(results: Iterable[Result]) -> Figure:
    """Seconds per step per storage: the chart backup comparisons publish.

    One panel per scenario (every dataset version of it together), one group of bars
    per step (``backup 1`` …, then ``restore 1 (full)`` …), one bar per method, target
    and stream count (and environment, when there are several), so two methods are
    never merged into one bar. A bar is the
    step's best seconds, as in the table; whiskers and the median mark show the spread
    when a step was repeated. Shorter is faster. Steps that failed have no bar.
    """
    steps = [r for r in results if r.step is not None and r.samples]
    if not steps:
        raise ConfigurationError(
            "nothing to plot: no backup or restore step has a successful sample"
        )
    environment = environment_names(steps)
    several_envs = len({environment(r) for r in steps}) > 1

    several_targets = len({target_label(r) for r in steps}) > 1

    def series_of(result: Result) -> str:
        assert result.step is not None
        name = f"{result.step.method}, {_plural(result.streams, 'stream')}"
        if several_targets:
            name = (
                f"{result.step.method}, {target_label(result)}, {_plural(result.streams, 'stream')}"
            )
        return f"{name}, {environment(result)}" if several_envs else name

    panels: dict[str, list[Result]] = {}
    for result in steps:
        assert result.step is not None
        panels.setdefault(result.step.scenario, []).append(result)
    series = list(dict.fromkeys(series_of(r) for r in steps))
    colours = {name: _colour(index) for index, name in enumerate(series)}
    figure: Figure = _figure_class()(figsize=(7.0, 1.4 + 3.0 * len(panels)), layout="constrained")
    axes = _small_multiples(figure, len(panels), horizontal=True)
    for ax, (scenario, members) in zip(axes, panels.items(), strict=True):
        labels = sorted({r.step.label for r in members if r.step is not None}, key=_step_order)
        bars: dict[tuple[str, str], _Bar] = {}
        for result in members:
            assert result.step is not None
            seconds = [s.seconds for s in result.samples]
            bars[(result.step.label, series_of(result))] = _Bar(result.best_seconds, seconds)
        _grouped_bars(ax, labels, series, bars, colours, unit="s", horizontal=False)
        datasets = list(dict.fromkeys(r.step.dataset for r in members if r.step is not None))
        first = f"{datasets[0]} and {_plural(len(datasets) - 1, 'later version')}"
        ax.set_title(f"{scenario}: {first if len(datasets) > 1 else datasets[0]}", fontsize=10)
    _legend(figure, axes, "method, target, streams" if several_targets else "method, streams")
    _suptitle(figure, "seconds per backup and restore step (shorter is faster)", steps)
    return figure


# -- throughput over time ---------------------------------------------------------------------
def plot_timeline(result: Result, *, unit: str = "workload", slice_ns: int | None = None) -> Figure:
    """Throughput per time slice of each repeat: one line per repeat.

    From :meth:`storeprobe.Sample.timeline` (``slice_ns``: 1 s, or finer for short
    windows); each point is a slice's rate at the slice's middle, in seconds from the
    window's opening. ``unit`` as in :func:`plot_probes`, one for the whole chart.
    """
    check_unit(unit)
    usable: list[tuple[int, Sample]] = [
        (number, sample) for number, sample in enumerate(result.samples, 1) if sample.has_timeline
    ]
    if not usable:
        raise ConfigurationError(
            "nothing to plot: no repeat of this result has per-request records"
        )
    lines = [(number, sample.timeline(slice_ns)) for number, sample in usable]
    peak = [float(line.rates.max()) for _, line in lines]
    concrete = resolve_unit(unit, peak, object_size=result.subject.object_size)
    figure: Figure = _figure_class()(figsize=(6.4, 3.8), layout="constrained")
    ax = figure.subplots()
    for index, (number, line) in enumerate(lines):
        middles = (line.starts_ns + line.lengths_ns / 2) / 1e9
        rates = [scale(float(rate), concrete) for rate in line.rates]
        ax.plot(
            middles.tolist(),
            rates,
            marker="." if line.slices <= 60 else None,
            color=_colour(index),
            label=f"repeat {number}",
        )
    slice_ms = lines[0][1].slice_ns / 1e6
    ax.set_xlabel(f"seconds into the window (slices of {slice_ms:g} ms)")
    ax.set_ylabel(concrete)
    _plain(ax, "y")
    ax.set_ylim(bottom=0)
    ax.set_xlim(left=0)
    ax.grid(alpha=0.3)
    if len(lines) > 1:
        ax.legend(fontsize=7)
    ax.set_title(
        f"{result.probe} on {target_label(result)}, {_plural(result.streams, 'stream')}",
        fontsize=10,
    )
    _suptitle(figure, "throughput over time", [result])
    return figure
