"""One self-contained HTML report of Results (charts need the ``plot`` extra).

:func:`html_report` returns a single HTML document that works offline: the charts are
inline SVG (text drawn as paths, so no font is needed), the only style is an inline
``<style>``, and nothing is loaded from anywhere: no script, stylesheet, font or image.
It leads with the comparison tables (their marks explained once, under them) and the
charts (:func:`storeprobe.plot.plot_probes`, and :func:`storeprobe.plot.plot_backup`
when there are backup steps); then one row per result with its errors and warnings
folded (``<details>``) under a line naming the result; one block per machine (its
label, else its host name), what was timed and how, and a command that reproduces
the run. Results are redacted when they are made, so no secret can
appear; :func:`run_command` writes storage options as ``-o KEY=...`` placeholders.
"""

from __future__ import annotations

import html
import io
import re
import shlex
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Literal

import attrs

from storeprobe.errors import ConfigurationError
from storeprobe.notices import Notice
from storeprobe.plot import plot_backup, plot_probes
from storeprobe.render import (
    CROWN,
    TIE,
    Table,
    backup_tables,
    check_unit,
    comparison_tables,
    latency_table,
    render_tables,
    result_line,
    results_table,
    target_label,
)
from storeprobe.result import Result
from storeprobe.units import format_bytes, format_size
from storeprobe.workload import Workload

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["METHOD", "html_report", "run_command"]

#: protocols whose targets need no storage options
_NO_OPTIONS = frozenset({"file", "local", "memory"})

#: what was timed and how: the fixed paragraph of every report
METHOD = (
    "Each figure is the throughput of one timed window: from the start of the first "
    "request to the end of the last one, with every stream busy in between. A probe is "
    "repeated N times and the table shows the best repeat (the median is in the charts' "
    "white marks); the whiskers run from the slowest to the fastest repeat. Units are "
    "1024-based: 1 KiB/s = 1024 bytes per second, 1 MiB/s = 1024 KiB/s. Outside the "
    "window, and so not timed: generating the payload bytes, creating the client and "
    "connecting, listing and cleaning up the probe's objects, and checking the bytes "
    "read back against those written."
)

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 72em;
       padding: 0 1em; color: #222; background: #fff; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 2em; }
table { border-collapse: collapse; margin: 1em 0; }
caption { font-weight: bold; text-align: left; padding: 0.3em 0; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; }
th { background: #f3f3f3; }
.chart svg { max-width: 100%; height: auto; }
pre { background: #f6f6f6; padding: 0.8em; overflow-x: auto; white-space: pre-wrap; }
dl.environment { display: grid; grid-template-columns: max-content auto; gap: 0.2em 1em; }
dl.environment dt { font-weight: bold; }
dl.environment dd { margin: 0; }
details.notices { margin: 0.3em 0; } details.notices summary { cursor: pointer; }
p.legend { font-size: 0.9em; color: #444; }
"""


#: the unit of the one-line headings of folded notices
_SUMMARY_UNIT = "auto"


def _several_machines(results: Sequence[Result]) -> bool:
    return len({r.environment.label or r.environment.hostname for r in results}) > 1


def _notice_text(notice: Notice, cli: bool) -> str:
    """A notice as the HTML report shows it (its code, message and fix, for ``cli``)."""
    return notice.cli_text if cli else str(notice)


def _svg(figure: Figure) -> str:
    """The figure as an inline ``<svg>`` element, text as paths (no font needed)."""
    from matplotlib import rc_context

    buffer = io.StringIO()
    with rc_context({"svg.fonttype": "path", "svg.hashsalt": "storeprobe"}):
        figure.savefig(buffer, format="svg", metadata={"Date": None})
    text = buffer.getvalue()
    text = re.sub(r"<metadata>.*?</metadata>\s*", "", text, flags=re.DOTALL)
    start = text.find("<svg")
    return text[start:] if start >= 0 else text


def _workload_spec(workload: Workload) -> str:
    if workload.name in ("small", "large"):
        return workload.name
    if workload.sizes is not None:
        return f"{workload.count}x{workload.sizes.spec}"
    return f"{workload.count}x{format_size(workload.size).replace(' ', '')}"


def run_command(results: Iterable[Result]) -> str:
    """A ``storeprobe run`` command that reproduces the results' probes.

    URLs, stream counts, workloads, repeats, warm-up repeats, the S3 client, the label and the seed
    (when all results share one) come from the results. Storage options are never
    recorded, so a target that needs them gets ``-o KEY=...`` placeholders to fill in.
    Only seed probes (those with a ``workload``) are rebuilt: scenario steps are run by
    ``storeprobe backup``, metadata probes by ``Probe.metadata``; a distributed probe's
    aggregate is left out too (its members' workloads are each worker's own).
    """
    probes = [result for result in results if result.workload is not None]
    workloads = [result.workload for result in probes if result.workload is not None]
    if not probes:
        raise ConfigurationError("no probe results to rebuild a run command from")
    words = ["storeprobe", "run"]
    words += list(dict.fromkeys(result.target_id for result in probes))
    streams = sorted({result.streams for result in probes})
    words += ["--streams", *(str(n) for n in streams)]
    for spec in dict.fromkeys(_workload_spec(workload) for workload in workloads):
        words += ["--workload", spec]
    repeats = max(len(result.samples) + len(result.errors) for result in probes)
    words += ["--repeats", str(repeats)]
    warmup = max(len(result.warmup_samples) for result in probes)
    if warmup:
        words += ["--warmup", str(warmup)]
    clients = {r.backend for r in probes if r.protocol == "s3" and r.backend in ("obstore", "s3fs")}
    if len(clients) == 1:
        words += ["--client", clients.pop()]
    labels = {result.environment.label for result in probes}
    label = labels.pop() if len(labels) == 1 else None
    if label:
        words += ["--label", label]
    seeds = {workload.seed for workload in workloads}
    seed = seeds.pop() if len(seeds) == 1 else None
    if seed is not None:
        words += ["--seed", str(seed)]
    command = shlex.join(words)
    if any(result.protocol not in _NO_OPTIONS for result in probes):
        command += " -o KEY=..."
    return command


def _machines(results: Sequence[Result]) -> list[tuple[str, list[Result]]]:
    """Results grouped by machine: its label, else its host name, in order of first use."""
    groups: dict[str, list[Result]] = {}
    for result in results:
        env = result.environment
        groups.setdefault(env.label or env.hostname, []).append(result)
    return list(groups.items())


def _environments(results: Sequence[Result]) -> str:
    """One block per machine (label, else host): what it was, and when it measured."""
    blocks: list[str] = []
    for title, members in _machines(results):
        env = members[-1].environment
        times = sorted({m.environment.utc for m in members if m.environment.utc})
        when = (
            "unknown"
            if not times
            else times[0]
            if len(times) == 1
            else f"{times[0]} to {times[-1]}"
        )
        hosts = ", ".join(dict.fromkeys(m.environment.hostname for m in members))
        rows: list[tuple[str, str]] = [
            ("host", hosts),
            ("measured (UTC)", when),
            ("results", str(len(members))),
            ("CPU", f"{env.cpu_model or 'unknown model'}, {env.cpu_count} logical CPUs"),
            ("memory", format_bytes(env.memory_bytes) if env.memory_bytes else "unknown"),
            ("operating system", env.operating_system or env.platform),
            ("Python", env.python),
            ("packages", ", ".join(f"{k} {v}" for k, v in sorted(env.packages.items()))),
        ]
        endpoints = dict.fromkeys(
            (m.environment.endpoint, m.environment.rtt_s, m.environment.rtt_note)
            for m in members
            if m.environment.endpoint
        )
        for endpoint, rtt_s, note in endpoints:
            rtt = f"{rtt_s * 1000:.2f} ms" if rtt_s is not None else note or "-"
            rows.append(("endpoint", f"{endpoint}, connect RTT {rtt}"))
        if not endpoints:
            rows.append(("endpoint", "none recorded (a local target, or an older result file)"))
        items = "".join(
            f"<dt>{html.escape(key)}</dt><dd>{html.escape(value)}</dd>" for key, value in rows
        )
        blocks.append(
            f'<section class="environment"><h3>{html.escape(title)}</h3>\n'
            f'<dl class="environment">{items}</dl></section>'
        )
    return "\n".join(blocks)


def _folded_notices(results: Sequence[Result], cli: bool) -> str:
    """Each result's errors and warnings, folded under a line naming the result."""
    parts: list[str] = []
    for result in results:
        notices = [
            *(("error", n) for n in result.errors),
            *(("warning", n) for n in result.warnings),
        ]
        if not notices:
            continue
        codes = ", ".join(dict.fromkeys(notice.code.value for _, notice in notices))
        counts = []
        if result.errors:
            counts.append(f"{len(result.errors)} error{'s' if len(result.errors) != 1 else ''}")
        if result.warnings:
            counts.append(
                f"{len(result.warnings)} warning{'s' if len(result.warnings) != 1 else ''}"
            )
        head = f"{result_line(result, _SUMMARY_UNIT)}: {' and '.join(counts)} ({codes})"
        items = "".join(
            f'<li class="{kind}">{html.escape(f"{kind}: {_notice_text(notice, cli)}")}</li>'
            for kind, notice in notices
        )
        parts.append(
            f'<details class="notices"><summary>{html.escape(head)}</summary>'
            f"<ul>{items}</ul></details>"
        )
    if not parts:
        return '<p class="notices">No errors or warnings.</p>'
    return "\n".join(parts)


def html_report(
    results: Iterable[Result],
    *,
    title: str | None = None,
    command: str | None = None,
    unit: str = "workload",
    by: str = "environment",
    crown: str = CROWN,
    tie: str = TIE,
    cli: bool = False,
) -> str:
    """One self-contained HTML document (see the module docstring).

    ``title`` defaults to ``"storeprobe report"``; ``command`` is shown as the command
    that reproduces the run (the CLI passes a ``storeprobe run`` command rebuilt by
    :func:`run_command`). ``unit`` (see :func:`storeprobe.render.resolve_unit`), ``by``
    (``"environment"`` or ``"probe"``: how the comparison tables are laid out), ``crown``
    and ``tie`` (the marks of winners and ties) are those of ``storeprobe report``;
    ``cli=True`` spells the warnings' fixes as command-line flags (``--repeats 10``).
    Charts are drawn when matplotlib is installed; without it the report says so and
    keeps everything else.

    Order: the comparison tables with one legend, the charts, one row per result with
    its errors and warnings folded under it, one block per machine, the method, the
    command.
    """
    rows = list(results)
    if not rows:
        raise ConfigurationError("nothing to report: no results")
    check_unit(unit)
    heading = html.escape(title or "storeprobe report")
    targets = ", ".join(dict.fromkeys(target_label(r) for r in rows))
    sections = [
        f"<h1>{heading}</h1>",
        f"<p>{len(rows)} results from {html.escape(targets)}.</p>",
        _comparison_section(rows, by=by, unit=unit, crown=crown, tie=tie),
        _charts_section(rows, by=by, unit=unit),
        _results_section(rows, unit=unit, cli=cli),
        '<section id="environments">',
        "<h2>Environments</h2>",
        _environments(rows),
        "</section>",
        "<h2>What was timed and how</h2>",
        f'<p class="method">{html.escape(METHOD)}</p>',
    ]
    if command:
        sections += [
            "<h2>Reproduce</h2>",
            f'<pre class="command"><code>{html.escape(command)}</code></pre>',
        ]
    return _document(heading, "\n".join(sections))


def _comparison_section(rows: Sequence[Result], *, by: str, unit: str, crown: str, tie: str) -> str:
    """The comparison tables (backup steps', then probes'), their legends said once under
    them all."""
    steps = [r for r in rows if r.step is not None]
    probes = [r for r in rows if r.step is None]
    tables: list[Table] = []
    if steps:
        tables += backup_tables(steps)
    if probes:
        tables += comparison_tables(probes, by=by, unit=unit, crown=crown, tie=tie)
    legends = list(dict.fromkeys(table.legend for table in tables if table.legend))
    bare = [attrs.evolve(table, legend="") for table in tables]
    legend_html = "".join(f'<p class="legend">{html.escape(text)}</p>' for text in legends)
    return "\n".join(
        [
            '<section id="comparison">',
            "<h2>Comparison</h2>",
            render_tables(bare, "html"),
            legend_html,
            "</section>",
        ]
    )


def _charts_section(rows: Sequence[Result], *, by: str, unit: str) -> str:
    """The probes' chart (bars by environment when the report is laid out by environment
    over several machines, else by streams) and the backup steps' chart, as inline SVG; a
    note instead without matplotlib, or without a successful repeat."""
    steps = [r for r in rows if r.step is not None]
    probes = [r for r in rows if r.step is None]
    charts: list[str] = []
    try:
        if any(r.samples for r in probes):
            chart_by: Literal["streams", "environment"] = (
                "environment" if by == "environment" and _several_machines(probes) else "streams"
            )
            charts.append(_svg(plot_probes(probes, unit=unit, by=chart_by)))
        if any(r.samples for r in steps):
            charts.append(_svg(plot_backup(rows)))
    except ImportError:
        charts = ["<p>Charts need matplotlib: pip install 'storeprobe[plot]'.</p>"]
    chart_html = "\n".join(f'<div class="chart">{chart}</div>' for chart in charts)
    return "\n".join(
        [
            '<section id="charts">',
            "<h2>Charts</h2>",
            chart_html or "<p>No successful repeat to chart.</p>",
            "</section>",
        ]
    )


def _results_section(rows: Sequence[Result], *, unit: str, cli: bool) -> str:
    """One row per result, the probes' latencies, and each result's errors and warnings."""
    probes = [r for r in rows if r.step is None]
    return "\n".join(
        [
            '<section id="results">',
            "<h2>Every result, its errors and warnings</h2>",
            render_tables([results_table(rows, unit)], "html"),
            render_tables([latency_table(probes)], "html") if probes else "",
            _folded_notices(rows, cli),
            "</section>",
        ]
    )


def _document(heading: str, body: str) -> str:
    """The HTML page around ``body``, titled ``heading`` (HTML already), with the style."""
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{heading}</title>\n<style>{_STYLE}</style>\n</head>\n"
        f"<body>\n{body}\n</body>\n</html>\n"
    )
