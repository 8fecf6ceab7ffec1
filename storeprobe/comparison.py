"""Did it get slower? Two runs of the same probes, matched and compared with a verdict.

:func:`compare_results` takes the Results of a base run and of a new run and returns a
:class:`Report`: one :class:`ComparedProbe` per probe found on both sides, and the probes
found on one side only (listed, never dropped).

Matching rules (a probe's :class:`ProbeIdentity`):

- the **target**: its name across runs (:attr:`Result.target_id`: the URL, or
  ``file://$TMPDIR`` for the default local target of ``storeprobe run``, whose temporary
  directory is new every run) and client (``backend``);
- the **operation** and the **subject**'s label, operations and object size (a seed
  probe's workload label, count and size); never a payload seed, which is drawn afresh
  for every run;
- the **streams** asked for;
- the **environment label** (``result.environment.label``); results saved without a
  label match other results without a label (label ``None``), whatever their host.

Each Result is **one run** of its probe: its successful repeats are that run's samples.
Several Results of one probe on one side (several base files, a file a run was appended
to twice, a directory of saved runs) are several runs. Backup-scenario steps
(``result.step`` set) are not compared: a scenario runs once, each step depending on the
one before, so a step has one sample and no interval can be drawn; they are counted in
:attr:`Report.excluded_steps` and the rendered report says so.

The verdict, per matched probe, is :func:`storeprobe.stats.compare_runs` (the one rule;
figures are per-repeat throughputs in B/s, or operations per second for the metadata
operations ``head``, ``list`` and ``delete``): each run is reduced to its median, and the
ratio of the new runs' level to the base runs' gets an interval whose width comes from
how much the **runs** differ, not the repeats inside one run:

- ``"slower"`` when the whole interval lies below ``1 − fail_slower`` (below 1 without a
  threshold); such a probe is ``regressed`` when ``fail_slower`` is given;
- ``"not slower"`` when it lies at or above;
- ``"inconclusive"`` otherwise, and always with one run on each side (one base file of
  one run against one new run: how much runs differ is unknown, whatever the repeats);
  the row says how many base runs, new runs or runs on each side would decide it
  (:attr:`ComparedProbe.reason`).

Why one module (~460 lines): one concept (matching two runs and judging each probe): the matching
rules, the verdict and the repeats-needed estimate are one story; rendering is in
:mod:`storeprobe.render.regressions`.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable
from typing import Any

import numpy as np
from attrs import field, frozen

from storeprobe import render
from storeprobe.errors import ConfigurationError
from storeprobe.result import Result
from storeprobe.stats import RunComparison, RunVerdict, compare_runs

__all__ = [
    "REPORT_VERSION",
    "ComparedProbe",
    "ProbeIdentity",
    "Report",
    "Verdict",
    "compare_results",
    "parse_threshold",
]

# Report document history (bump on any change to the shape of Report.to_dict()):
#   1 — first version: rows, unmatched_base, unmatched_new, excluded_steps.
#   2 — the verdict of stats.compare_runs over runs: rows gain base_runs, new_runs,
#       threshold, run_spread, base_runs_needed, new_runs_needed, each_runs_needed and
#       reason, lose repeats_needed and resolution; verdicts are slower, not slower,
#       inconclusive; the report gains inconclusive and loses min_repeats.
REPORT_VERSION = 2
_REPORT_SCHEMA = "storeprobe.comparison"

Verdict = RunVerdict

_PERCENT = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*%\s*$")
_FRACTION = re.compile(r"^\s*(0?\.\d+)\s*$")


def parse_threshold(text: str, *, option: str = "--fail-slower") -> float:
    """``"5%"`` or ``"0.05"`` → 0.05: a slowdown threshold as a fraction in (0, 1).

    A bare number above 1 (``"5"``) is refused as ambiguous, as are negative, zero and
    100 % or more; the error names the accepted forms.
    """
    if isinstance(text, str):
        percent = _PERCENT.match(text)
        fraction = _FRACTION.match(text)
        value = float(percent[1]) / 100 if percent else float(fraction[1]) if fraction else math.nan
        if 0 < value < 1:
            return value
    raise ConfigurationError(
        f"{option} {text!r} is not a threshold: write a percentage such as '5%' or a "
        "fraction such as '0.05' (both mean: slower by more than 5 %), above 0 and below 100 %"
    )


def _check_fail_slower(_: object, __: object, value: float | None) -> None:
    if value is not None and (
        isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < 1
    ):
        raise ConfigurationError(
            f"fail_slower is a fraction in (0, 1) such as 0.05 for 5 %, not {value!r}"
        )


def _check_confidence(_: object, __: object, value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < 1:
        raise ConfigurationError(f"confidence must be in (0, 1), such as 0.95, not {value!r}")


@frozen(kw_only=True)
class ProbeIdentity:
    """What makes two Results the same probe (see the module's matching rules).

    ``target`` is for display (the URL, plus the client when it is not the usual one);
    it takes no part in equality.
    """

    #: the target's name across runs, :attr:`Result.target_id` (its URL, or the default
    #: local target's ``file://$TMPDIR``)
    url: str
    backend: str
    operation: str
    workload: str
    count: int
    size: int
    streams: int
    environment: str | None
    target: str = field(eq=False)
    #: the figure counts operations (metadata probes: ops/s), not bytes (B/s); set by
    #: :meth:`of` from the result's subject, alike for every result of one probe
    per_operation: bool = field(default=False, eq=False)

    @classmethod
    def of(cls, result: Result) -> ProbeIdentity:
        """The identity of ``result``."""
        return cls(
            url=result.target_id,
            backend=result.backend,
            operation=result.operation,
            workload=result.subject.label,
            count=result.subject.operations,
            size=result.subject.object_size,
            streams=result.streams,
            environment=result.environment.label,
            target=render.target_label(result),
            per_operation=result.subject.per_operation,
        )

    @property
    def probe(self) -> str:
        """``"upload small"``: operation and workload label."""
        return f"{self.operation} {self.workload}"

    def __str__(self) -> str:
        streams = f"{self.streams} stream{'s' if self.streams != 1 else ''}"
        where = f" [{self.environment}]" if self.environment is not None else ""
        return f"{self.probe} on {self.target}, {streams}{where}"

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of the identity and its display ``target``."""
        return {
            "target": self.target,
            "url": self.url,
            "backend": self.backend,
            "environment": self.environment,
            "operation": self.operation,
            "workload": self.workload,
            "count": self.count,
            "size": self.size,
            "streams": self.streams,
        }


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


@frozen(kw_only=True)
class ComparedProbe:
    """One probe found in both runs: its levels, the ratio and the verdict.

    ``base_median`` and ``new_median`` are each side's level: the geometric mean of its
    runs' medians of per-repeat figures (the median itself for one run) in B/s (ops/s
    when ``identity.per_operation``), None without a successful repeat. ``ratio`` is
    new ÷ base (None when a side has no repeat); ``low`` and ``high`` bound its
    ``confidence`` interval (None with one run on each side). The rest is
    :class:`storeprobe.stats.RunComparison`'s.
    """

    identity: ProbeIdentity
    base_median: float | None
    new_median: float | None
    base_runs: int
    new_runs: int
    base_repeats: int
    new_repeats: int
    ratio: float | None
    low: float | None
    high: float | None
    confidence: float
    #: the slowdown (a fraction) beyond which the verdict is slower: fail_slower, else 0
    threshold: float
    verdict: Verdict
    regressed: bool
    #: the standard deviation of log run medians used (≈ relative run-to-run spread)
    run_spread: float | None = None
    base_runs_needed: int | None = None
    new_runs_needed: int | None = None
    each_runs_needed: int | None = None
    #: why the verdict, and for an inconclusive one what would decide it
    reason: str = ""

    @property
    def unit(self) -> str:
        """``"ops/s"`` for metadata probes, else ``"B/s"``: the unit of the medians."""
        return render.OPS_UNIT if self.identity.per_operation else "B/s"

    def __str__(self) -> str:
        ratio = "-" if self.ratio is None else f"{self.ratio:.3f}×"
        interval = (
            ""
            if self.low is None or self.high is None
            else f" ({self.confidence:.0%} interval {self.low:.3f}–{self.high:.3f})"
        )
        regressed = ", regressed" if self.regressed else ""
        return f"{self.identity}: {ratio}{interval}: {self.verdict}{regressed} ({self.reason})"

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict: the identity's fields, then the figures (medians in
        ``unit``: B/s or ops/s; non-finite figures as null)."""
        return {
            **self.identity.to_dict(),
            "unit": self.unit,
            "base_median": _finite(self.base_median),
            "new_median": _finite(self.new_median),
            "base_runs": self.base_runs,
            "new_runs": self.new_runs,
            "base_repeats": self.base_repeats,
            "new_repeats": self.new_repeats,
            "ratio": _finite(self.ratio),
            "low": _finite(self.low),
            "high": _finite(self.high),
            "confidence": self.confidence,
            "threshold": self.threshold,
            "verdict": self.verdict,
            "regressed": self.regressed,
            "run_spread": _finite(self.run_spread),
            "base_runs_needed": self.base_runs_needed,
            "new_runs_needed": self.new_runs_needed,
            "each_runs_needed": self.each_runs_needed,
            "reason": self.reason,
        }


def _rows(value: Iterable[ComparedProbe]) -> tuple[ComparedProbe, ...]:
    return tuple(value)


def _identities(value: Iterable[ProbeIdentity]) -> tuple[ProbeIdentity, ...]:
    return tuple(value)


@frozen(kw_only=True)
class Report:
    """The comparison of a base run with a new run (see :func:`compare_results`)."""

    rows: tuple[ComparedProbe, ...] = field(converter=_rows)
    unmatched_base: tuple[ProbeIdentity, ...] = field(converter=_identities)
    unmatched_new: tuple[ProbeIdentity, ...] = field(converter=_identities)
    excluded_steps: int = 0
    fail_slower: float | None = field(default=None, validator=_check_fail_slower)
    confidence: float = field(default=0.95, validator=_check_confidence)

    @property
    def failed(self) -> bool:
        """True when any probe regressed beyond ``fail_slower``."""
        return any(row.regressed for row in self.rows)

    @property
    def inconclusive(self) -> tuple[ComparedProbe, ...]:
        """The probes whose verdict is inconclusive, in table order."""
        return tuple(row for row in self.rows if row.verdict == "inconclusive")

    @property
    def regressions(self) -> tuple[ComparedProbe, ...]:
        """The probes that regressed, in table order."""
        return tuple(row for row in self.rows if row.regressed)

    def render(self, format: str = "markdown", unit: str = "workload") -> str:
        """The report as ``"markdown"``, ``"text"``, ``"html"``, ``"csv"`` (one line per
        probe, unmatched ones included) or ``"json"`` (:meth:`to_dict`)."""
        return render.render_regressions(self, format, unit)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict, documented in docs/regressions.md.

        ``{"schema": "storeprobe.comparison", "version": 2, "confidence",
        "fail_slower" (a fraction or null), "failed", "inconclusive", "rows": [...],
        "unmatched_base": [...], "unmatched_new": [...], "excluded_steps"}``.
        """
        return {
            "schema": _REPORT_SCHEMA,
            "version": REPORT_VERSION,
            "confidence": self.confidence,
            "fail_slower": self.fail_slower,
            "failed": self.failed,
            "inconclusive": len(self.inconclusive),
            "rows": [row.to_dict() for row in self.rows],
            "unmatched_base": [identity.to_dict() for identity in self.unmatched_base],
            "unmatched_new": [identity.to_dict() for identity in self.unmatched_new],
            "excluded_steps": self.excluded_steps,
        }

    def to_json(self) -> str:
        """:meth:`to_dict` as JSON text."""
        return json.dumps(self.to_dict(), indent=1, allow_nan=False)

    def __str__(self) -> str:
        return self.render("text")

    def _repr_html_(self) -> str:
        return self.render("html")

    def __repr__(self) -> str:
        return (
            f"<Report {len(self.rows)} compared, {len(self.regressions)} regressed, "
            f"{len(self.inconclusive)} inconclusive, "
            f"{len(self.unmatched_base)} only in base, {len(self.unmatched_new)} only in new>"
        )


def _group(results: Iterable[Result]) -> tuple[dict[ProbeIdentity, list[list[float]]], int]:
    """Runs (one per Result: its per-repeat figures) by probe, in first-seen order; and
    how many steps were left out."""
    groups: dict[ProbeIdentity, list[list[float]]] = {}
    steps = 0
    for result in results:
        if not isinstance(result, Result):
            raise ConfigurationError(f"compare_results takes Results, not {type(result).__name__}")
        if result.step is not None:
            steps += 1
            continue
        groups.setdefault(ProbeIdentity.of(result), []).append(render.repeat_figures(result))
    return groups, steps


def _level(runs: list[list[float]]) -> float | None:
    medians = [float(np.median(run)) for run in runs if run]
    if len(set(medians)) == 1:  # one run, or runs alike: exactly their median
        return medians[0]
    if not medians or min(medians) <= 0:
        return float(np.median(medians)) if medians else None
    return math.exp(float(np.mean(np.log(medians))))


def _compared(
    identity: ProbeIdentity,
    base: list[list[float]],
    new: list[list[float]],
    *,
    fail_slower: float | None,
    confidence: float,
) -> ComparedProbe:
    threshold = fail_slower or 0.0
    base_median, new_median = _level(base), _level(new)
    kept_base = [run for run in base if run]
    kept_new = [run for run in new if run]
    usable = all(
        value > 0 and math.isfinite(value) for run in (*kept_base, *kept_new) for value in run
    )
    found: RunComparison | None = (
        compare_runs(kept_base, kept_new, threshold=threshold, confidence=confidence)
        if kept_base and kept_new and usable
        else None
    )
    side = "base" if not kept_base else "new" if not kept_new else "either"
    return ComparedProbe(
        identity=identity,
        base_median=base_median,
        new_median=new_median,
        base_runs=len(kept_base),
        new_runs=len(kept_new),
        base_repeats=sum(map(len, base)),
        new_repeats=sum(map(len, new)),
        confidence=confidence,
        threshold=threshold,
        ratio=(
            found.ratio
            if found is not None
            else new_median / base_median
            if base_median is not None and new_median is not None and base_median > 0
            else None
        ),
        low=None if found is None else found.low,
        high=None if found is None else found.high,
        verdict="inconclusive" if found is None else found.verdict,
        regressed=found is not None and fail_slower is not None and found.verdict == "slower",
        run_spread=None if found is None else found.run_spread,
        base_runs_needed=None if found is None else found.base_runs_needed,
        new_runs_needed=None if found is None else found.new_runs_needed,
        each_runs_needed=None if found is None else found.each_runs_needed,
        reason=(
            f"no successful repeat with a positive rate on the {side} side: run it again"
            if found is None
            else found.reason
        ),
    )


def compare_results(
    base: Iterable[Result],
    new: Iterable[Result],
    *,
    fail_slower: float | None = None,
    confidence: float = 0.95,
) -> Report:
    """Match the probes of ``new`` with those of ``base`` and compare each pair.

    Each Result is one run. ``fail_slower`` is a fraction (0.05 for 5 %): a probe whose
    whole ``confidence`` interval lies below ``1 − fail_slower`` is ``slower`` and
    ``regressed``, and makes the report ``failed``; an inconclusive probe never does.
    Rows follow ``base``'s order; unmatched probes of each side are kept in
    :attr:`Report.unmatched_base` and :attr:`Report.unmatched_new`. See the module
    docstring for the matching and verdict rules.
    """
    _check_fail_slower(None, None, fail_slower)
    _check_confidence(None, None, confidence)
    base_groups, base_steps = _group(base)
    new_groups, new_steps = _group(new)
    rows = [
        _compared(
            identity,
            figures,
            new_groups[identity],
            fail_slower=fail_slower,
            confidence=confidence,
        )
        for identity, figures in base_groups.items()
        if identity in new_groups
    ]
    return Report(
        rows=rows,
        unmatched_base=[identity for identity in base_groups if identity not in new_groups],
        unmatched_new=[identity for identity in new_groups if identity not in base_groups],
        excluded_steps=base_steps + new_steps,
        fail_slower=fail_slower,
        confidence=confidence,
    )
