"""Every table and every rate as people read them: one module for text, markdown, CSV, HTML.

Renderers return strings; only the CLI prints. This module owns

- **rate units**: :func:`resolve_unit` picks the unit of a figure or a column
  (``"workload"``: the unit people publish a workload in, KiB/s for objects under 1 MiB,
  MiB/s otherwise; ``"auto"``: by magnitude, MiB/s from 1 MiB/s up, KiB/s below;
  or one of ``"KiB/s"``, ``"MiB/s"``, ``"Mibit/s"``), :func:`scale` and :func:`rate`
  convert B/s with :mod:`storeprobe.units`' 1024-based converters;
- **operations per second**: the figure of a result whose subject counts operations
  (metadata probes: :attr:`~storeprobe.subject.Subject.per_operation`)
  is :func:`ops_per_s`, objects (keys) per second, shown in ``ops/s`` wherever another
  result shows a byte rate;
- **one Result as text**: :func:`result_line` (``str(result)``), :func:`result_repr`,
  :func:`result_summary` (the line and its notices), :func:`result_html`;
- **tables** (:class:`Table` of :class:`Cell`) rendered by :func:`render_tables` as
  ``"markdown"``, ``"csv"``, ``"html"`` or ``"text"``; :func:`results_table` (one row
  per Result: what ``storeprobe run`` prints) and :func:`comparison_tables` (targets ×
  environments or targets × probes, winners marked by :func:`storeprobe.stats.compare`),
  :func:`latency_table` (objects/s, latency and TTFB p50/p90/p99 per result),
  :func:`busy_table` (the share of answers the server pushed back, where it did).
- **regressions**: :func:`regression_tables` and :func:`render_regressions` show a new
  run against a base run (:mod:`storeprobe.comparison`: medians, ratio, interval,
  verdict, regressions marked :data:`REGRESSED`) as markdown, text, HTML, CSV or JSON.

It reads Results through the :class:`ResultLike` protocol and never imports
:mod:`storeprobe.result`, so ``result`` can use it without an import cycle.

Every table and every unit choice of storeprobe lives in this package on purpose (they
were written four times before), in modules read in order: :mod:`.core` (units,
operations per second, the protocols), :mod:`.lines` (one result), :mod:`.tables`
(cells and formats), :mod:`.results` (tables of results), :mod:`.scenarios` (backup
steps), :mod:`.regressions` (a run against a base run).
"""

from __future__ import annotations

from storeprobe.cost import money
from storeprobe.render.core import (
    CROWN,
    FORMATS,
    OPS_UNIT,
    RATE_UNITS,
    TIE,
    Format,
    RateUnit,
    ResultLike,
    check_format,
    check_unit,
    median_ops_per_s,
    ops_per_s,
    rate,
    resolve_unit,
    scale,
    unit_of,
)
from storeprobe.render.lines import (
    notice_lines,
    result_html,
    result_line,
    result_repr,
    result_summary,
    target_label,
)
from storeprobe.render.regressions import (
    REGRESSED,
    REGRESSION_FORMATS,
    ComparedLike,
    IdentityLike,
    RegressionReportLike,
    inconclusive_text,
    percent,
    regression_legend,
    regression_tables,
    render_regressions,
    repeat_figures,
)
from storeprobe.render.results import (
    LatencyLike,
    busy_table,
    comparison_tables,
    crown_legend,
    environment_names,
    latency_table,
    probe_key,
    results_table,
)
from storeprobe.render.scenarios import (
    StepResultLike,
    backup_tables,
)
from storeprobe.render.tables import (
    Cell,
    Table,
    render_tables,
)

__all__ = [
    "CROWN",
    "FORMATS",
    "OPS_UNIT",
    "RATE_UNITS",
    "REGRESSED",
    "REGRESSION_FORMATS",
    "TIE",
    "Cell",
    "ComparedLike",
    "Format",
    "IdentityLike",
    "LatencyLike",
    "RateUnit",
    "RegressionReportLike",
    "ResultLike",
    "StepResultLike",
    "Table",
    "backup_tables",
    "busy_table",
    "check_format",
    "check_unit",
    "comparison_tables",
    "crown_legend",
    "environment_names",
    "inconclusive_text",
    "latency_table",
    "median_ops_per_s",
    "money",
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
    "unit_of",
]
