"""Charts of Results (the ``plot`` extra; matplotlib is imported only when called).

Functions return a :class:`matplotlib.figure.Figure` built without pyplot: nothing is
shown, no global state is touched. Save one with ``figure.savefig("chart.png")`` (or
``.svg``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from storeprobe.errors import ConfigurationError, MissingDependencyError
from storeprobe.render import check_unit, resolve_unit, scale, target_label
from storeprobe.result import Result

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["plot_probes", "plot_streams"]


def _figure_class() -> Any:
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise MissingDependencyError(
            "plots need matplotlib: pip install 'storeprobe[plot]'"
        ) from None
    return Figure


def _panel_unit(members: list[Result], unit: str) -> str:
    return resolve_unit(
        unit, [r.bytes_per_s for r in members], object_size=members[0].workload.size
    )


def plot_probes(results: Iterable[Result], *, unit: str = "workload") -> Figure:
    """A grouped bar chart per probe: targets on the x axis, one bar per environment.

    Each probe (operation, workload, streams) gets its own panel, in its own unit
    (``unit="workload"``: KiB/s for small objects, MiB/s for large ones; or ``"auto"``,
    ``"KiB/s"``, ``"MiB/s"``, ``"Mibit/s"``, as in :mod:`storeprobe.render`); the best
    repeat is plotted.
    """
    check_unit(unit)
    measured = [result for result in results if result.samples]
    if not measured:
        raise ConfigurationError("nothing to plot: no result has a successful sample")
    probes = list(dict.fromkeys((r.probe, r.streams) for r in measured))
    figure: Figure = _figure_class()(figsize=(6.4, 2.6 * len(probes)), layout="constrained")
    axes = figure.subplots(len(probes), 1, squeeze=False)[:, 0]
    for ax, (probe, streams) in zip(axes, probes, strict=True):
        members = [r for r in measured if (r.probe, r.streams) == (probe, streams)]
        concrete = _panel_unit(members, unit)
        targets = list(dict.fromkeys(target_label(r) for r in members))
        environments = list(dict.fromkeys(r.environment.name for r in members))
        width = 0.8 / len(environments)
        for offset, environment in enumerate(environments):
            heights = []
            for target in targets:
                values = [
                    scale(r.bytes_per_s, concrete)
                    for r in members
                    if target_label(r) == target and r.environment.name == environment
                ]
                heights.append(max(values) if values else 0.0)
            positions = [
                i + (offset - (len(environments) - 1) / 2) * width for i in range(len(targets))
            ]
            bars = ax.bar(positions, heights, width, label=environment)
            ax.bar_label(bars, fmt="%.0f", fontsize=7)
        ax.set_xticks(range(len(targets)), targets, fontsize=8)
        ax.set_ylabel(concrete)
        ax.margins(y=0.15)
        ax.set_title(f"{probe}, {streams} stream{'s' if streams != 1 else ''}", fontsize=10)
        if len(environments) > 1:
            ax.legend(fontsize=7)
    return figure


def plot_streams(results: Iterable[Result], *, unit: str = "workload") -> Figure:
    """Throughput against streams: one line per (target, probe), best repeat per point.

    ``unit`` as in :func:`plot_probes`; with ``"workload"`` the results must share one
    unit (all small or all large workloads).
    """
    check_unit(unit)
    measured = [result for result in results if result.samples]
    if not measured:
        raise ConfigurationError("nothing to plot: no result has a successful sample")
    units = {
        resolve_unit(unit, [r.bytes_per_s for r in measured], object_size=r.workload.size)
        for r in measured
    }
    if len(units) != 1:
        raise ConfigurationError(
            "plot_streams needs results in one unit: filter to small or to large workloads, "
            "or pass unit='MiB/s' (or 'auto')"
        )
    concrete = units.pop()
    figure: Figure = _figure_class()(figsize=(6.4, 4.0), layout="constrained")
    ax = figure.subplots()
    series = list(dict.fromkeys((target_label(r), r.probe) for r in measured))
    for target, probe in series:
        points = sorted(
            (r.streams, scale(r.bytes_per_s, concrete))
            for r in measured
            if (target_label(r), r.probe) == (target, probe)
        )
        best: dict[int, float] = {}
        for streams, value in points:
            best[streams] = max(value, best.get(streams, 0.0))
        ax.plot(list(best), list(best.values()), marker="o", label=f"{probe} — {target}")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("streams (requests in flight)")
    ax.set_ylabel(concrete)
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    return figure
