"""Did it get slower? Two runs of the same probes, matched and compared with a verdict.

:func:`compare_results` takes the Results of a base run and of a new run and returns a
:class:`Report`: one :class:`ComparedProbe` per probe found on both sides, and the probes
found on one side only (listed, never dropped).

Matching rules (a probe's :class:`ProbeIdentity`):

- the **target**: its name across runs (:attr:`Result.target_id`: the URL, or
  ``file://$TMPDIR`` for the default local target of ``storeprobe run``, whose temporary
  directory is new every run) and client (``backend``);
- the **operation** and the **workload**'s label, count and size; never its payload
  seed, which is drawn afresh for every run;
- the **streams** asked for;
- the **environment label** (``result.environment.label``); results saved without a
  label match other results without a label (label ``None``), whatever their host.

Several Results of one probe on one side (a file a run was appended to twice) are
pooled: all their successful repeats are samples of that probe. Backup-scenario steps
(``result.step`` set) are not compared: a scenario runs once, each step depending on the
one before, so a step has one sample and no interval can be drawn; they are counted in
:attr:`Report.excluded_steps` and the rendered report says so.

Verdict rules, per matched probe (figures are per-repeat throughputs in B/s, or
operations per second for the metadata operations ``head``, ``list`` and ``delete``):

- fewer than :data:`MIN_REPEATS` (3) successful repeats on either side:
  ``"inconclusive"``, with no interval: a bootstrap of the median of one or two values
  can only return those values, and would claim a certainty the data does not hold;
- otherwise :func:`storeprobe.stats.compare` of new against base: the ratio of medians
  (new ÷ base, above 1 is faster) with its bootstrap interval; ``"faster"`` when the
  whole interval lies above 1, ``"slower"`` when below, else ``"no significant
  difference"``;
- ``regressed`` when ``fail_slower`` is given, the verdict is ``"slower"``, and both
  the ratio and the interval's upper bound are below ``1 − fail_slower`` (strictly:
  slower by *more than* the threshold, with the whole interval beyond it).

:attr:`ComparedProbe.repeats_needed` says how many repeats on each side would bring the
interval's half-width below the threshold (``fail_slower``, else 5 %), from the spread
observed: ``n = ⌈(z / t)² · π/2 · (cv_base² + cv_new²)⌉``, at least 3 (the sample median's
variance is about π/2 · σ²/n; ``z`` is 1.96 at 95 %). A side with fewer than 2 repeats
shows no spread: the other side's is used for both; with neither, it is 3, the least a
verdict needs.

About 460 lines, one concept (matching two runs and judging each probe): the matching
rules, the verdict and the repeats-needed estimate are one story; rendering is in
:mod:`storeprobe.render.regressions`.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable
from statistics import NormalDist
from typing import Any, Literal

import numpy as np
from attrs import field, frozen

from storeprobe import render
from storeprobe.errors import ConfigurationError
from storeprobe.result import Result
from storeprobe.stats import compare

__all__ = [
    "DEFAULT_RESOLUTION",
    "MIN_REPEATS",
    "REPORT_VERSION",
    "ComparedProbe",
    "ProbeIdentity",
    "Report",
    "Verdict",
    "compare_results",
    "parse_threshold",
    "repeats_needed",
]

# Report document history (bump on any change to the shape of Report.to_dict()):
#   1 — first version: rows, unmatched_base, unmatched_new, excluded_steps.
REPORT_VERSION = 1
_REPORT_SCHEMA = "storeprobe.comparison"
#: fewest successful repeats on each side for a verdict
MIN_REPEATS = 3
#: the difference ``repeats_needed`` aims to resolve when no ``fail_slower`` is given
DEFAULT_RESOLUTION = 0.05

Verdict = Literal["faster", "slower", "no significant difference", "inconclusive"]

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

    @classmethod
    def of(cls, result: Result) -> ProbeIdentity:
        """The identity of ``result``."""
        return cls(
            url=result.target_id,
            backend=result.backend,
            operation=result.operation,
            workload=result.workload.label,
            count=result.workload.count,
            size=result.workload.size,
            streams=result.streams,
            environment=result.environment.label,
            target=render.target_label(result),
        )

    @property
    def probe(self) -> str:
        """``"upload small"``: operation and workload label."""
        return f"{self.operation} {self.workload}"

    @property
    def per_operation(self) -> bool:
        """True for metadata probes, whose figure is operations per second."""
        return self.operation in render.PER_OPERATION

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
    """One probe found in both runs: its medians, the ratio and the verdict.

    ``base_median`` and ``new_median`` are medians of per-repeat figures in B/s (ops/s
    when ``identity.per_operation``), None without a successful repeat. ``ratio`` is
    new ÷ base (None when a side has no repeat); ``low`` and ``high`` bound its
    ``confidence`` interval (None when ``inconclusive``).
    """

    identity: ProbeIdentity
    base_median: float | None
    new_median: float | None
    base_repeats: int
    new_repeats: int
    ratio: float | None
    low: float | None
    high: float | None
    confidence: float
    verdict: Verdict
    regressed: bool
    repeats_needed: int
    #: the difference (a fraction) ``repeats_needed`` aims to resolve
    resolution: float = DEFAULT_RESOLUTION

    @property
    def min_repeats(self) -> int:
        """The fewest successful repeats on each side for a verdict (:data:`MIN_REPEATS`)."""
        return MIN_REPEATS

    @property
    def unit(self) -> str:
        """``"ops/s"`` for metadata probes, else ``"B/s"``: the unit of the medians."""
        return render.OPS_UNIT if self.identity.per_operation else "B/s"

    def __str__(self) -> str:
        if self.verdict == "inconclusive":
            return f"{self.identity}: {render.inconclusive_text(self)}"
        assert self.ratio is not None
        regressed = ", regressed" if self.regressed else ""
        return (
            f"{self.identity}: {self.ratio:.3f}× ({self.confidence:.0%} interval "
            f"{self.low:.3f}–{self.high:.3f}): {self.verdict}{regressed}"
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict: the identity's fields, then the figures (medians in
        ``unit``: B/s or ops/s; non-finite figures as null)."""
        return {
            **self.identity.to_dict(),
            "unit": self.unit,
            "base_median": _finite(self.base_median),
            "new_median": _finite(self.new_median),
            "base_repeats": self.base_repeats,
            "new_repeats": self.new_repeats,
            "ratio": _finite(self.ratio),
            "low": _finite(self.low),
            "high": _finite(self.high),
            "confidence": self.confidence,
            "verdict": self.verdict,
            "regressed": self.regressed,
            "repeats_needed": self.repeats_needed,
            "resolution": self.resolution,
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
    def min_repeats(self) -> int:
        """The fewest successful repeats on each side for a verdict (:data:`MIN_REPEATS`)."""
        return MIN_REPEATS

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

        ``{"schema": "storeprobe.comparison", "version": 1, "confidence",
        "fail_slower" (a fraction or null), "min_repeats", "failed", "rows": [...],
        "unmatched_base": [...], "unmatched_new": [...], "excluded_steps"}``.
        """
        return {
            "schema": _REPORT_SCHEMA,
            "version": REPORT_VERSION,
            "confidence": self.confidence,
            "fail_slower": self.fail_slower,
            "min_repeats": self.min_repeats,
            "failed": self.failed,
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
            f"{len(self.unmatched_base)} only in base, {len(self.unmatched_new)} only in new>"
        )


def _group(results: Iterable[Result]) -> tuple[dict[ProbeIdentity, list[float]], int]:
    """Per-repeat figures by probe, in first-seen order; and how many steps were left out."""
    groups: dict[ProbeIdentity, list[float]] = {}
    steps = 0
    for result in results:
        if not isinstance(result, Result):
            raise ConfigurationError(f"compare_results takes Results, not {type(result).__name__}")
        if result.step is not None:
            steps += 1
            continue
        groups.setdefault(ProbeIdentity.of(result), []).extend(render.repeat_figures(result))
    return groups, steps


def _cv(values: np.ndarray) -> float | None:
    if values.size < 2:
        return None
    mean = float(values.mean())
    return float(values.std(ddof=1)) / mean if mean > 0 and math.isfinite(mean) else None


def repeats_needed(
    base: Iterable[float], new: Iterable[float], *, resolution: float, confidence: float
) -> int:
    """Repeats per side for the interval's half-width to fall below ``resolution`` (a
    fraction), from the spread of ``base`` and ``new`` (see the module docstring); at
    least :data:`MIN_REPEATS`, which is also the answer when no side shows a spread."""
    spreads = [
        cv
        for cv in (_cv(np.asarray(list(side), dtype=np.float64)) for side in (base, new))
        if cv is not None
    ]
    if not spreads:
        return MIN_REPEATS
    variance = sum(cv**2 for cv in spreads) * (2 / len(spreads))
    z = NormalDist().inv_cdf(1 - (1 - confidence) / 2)
    return max(MIN_REPEATS, math.ceil((z / resolution) ** 2 * math.pi / 2 * variance))


def _compared(
    identity: ProbeIdentity,
    base: list[float],
    new: list[float],
    *,
    fail_slower: float | None,
    confidence: float,
) -> ComparedProbe:
    base_median = float(np.median(base)) if base else None
    new_median = float(np.median(new)) if new else None
    ratio = (
        new_median / base_median
        if base_median is not None and new_median is not None and base_median > 0
        else None
    )
    resolution = fail_slower or DEFAULT_RESOLUTION
    needed = repeats_needed(base, new, resolution=resolution, confidence=confidence)
    if len(base) < MIN_REPEATS or len(new) < MIN_REPEATS:
        return ComparedProbe(
            identity=identity,
            base_median=base_median,
            new_median=new_median,
            base_repeats=len(base),
            new_repeats=len(new),
            ratio=ratio,
            low=None,
            high=None,
            confidence=confidence,
            verdict="inconclusive",
            regressed=False,
            repeats_needed=needed,
            resolution=resolution,
        )
    found = compare(new, base, confidence=confidence)
    limit = None if fail_slower is None else 1 - fail_slower
    regressed = (
        limit is not None
        and found.verdict == "slower"
        and found.ratio < limit
        and found.high < limit
    )
    return ComparedProbe(
        identity=identity,
        base_median=base_median,
        new_median=new_median,
        base_repeats=len(base),
        new_repeats=len(new),
        ratio=found.ratio,
        low=found.low,
        high=found.high,
        confidence=confidence,
        verdict=found.verdict,
        regressed=regressed,
        repeats_needed=needed,
        resolution=resolution,
    )


def compare_results(
    base: Iterable[Result],
    new: Iterable[Result],
    *,
    fail_slower: float | None = None,
    confidence: float = 0.95,
) -> Report:
    """Match the probes of ``new`` with those of ``base`` and compare each pair.

    ``fail_slower`` is a fraction (0.05 for 5 %): a probe slower by more than it, with
    its whole ``confidence`` interval beyond it, is ``regressed`` and makes the report
    ``failed``. Rows follow ``base``'s order; unmatched probes of each side are kept in
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
