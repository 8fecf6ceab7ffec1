"""Many Results side by side: an immutable collection with filters, files and tables.

A :class:`ResultSet` holds Results from many targets, environments and runs. It is
frozen: :meth:`~ResultSet.add`, :meth:`~ResultSet.merge` and :meth:`~ResultSet.filter`
return new sets. Its tables come from :mod:`storeprobe.render`:

- ``table(by="environment")``: one table per probe, targets as rows, environments as
  columns;
- ``table(by="probe")``: one row per (target, environment), the probes
  (upload/download × workload) as columns, stream counts side by side;

as markdown, CSV, HTML or text. Machines are never merged: each (target, environment)
keeps its own figure; several runs of one target on one environment show the best.
The fastest figure of a column is crowned only when it is significantly faster than
the runner-up (:func:`storeprobe.stats.compare`), else marked as a tie; the rule is
printed under the table. ``str(result_set)`` is the per-result table.
"""

from __future__ import annotations

import html
import os
import secrets
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, overload

from attrs import field, frozen

from storeprobe.errors import ConfigurationError, MissingDependencyError
from storeprobe.render import (
    CROWN,
    TIE,
    backup_tables,
    comparison_tables,
    notice_lines,
    probe_key,
    render_tables,
    results_table,
    target_label,
)
from storeprobe.result import Result, dump_results, load_results

if TYPE_CHECKING:
    import pandas

__all__ = ["ResultSet", "Saturation"]


def _results(value: Result | Iterable[Result]) -> tuple[Result, ...]:
    if isinstance(value, Result):
        return (value,)
    items = tuple(value)
    for item in items:
        if not isinstance(item, Result):
            raise ConfigurationError(f"a ResultSet holds Results, not {type(item).__name__}")
    return items


@frozen(kw_only=True)
class Saturation:
    """Where throughput stops growing with streams, in a sweep.

    ``streams`` is the fewest streams reaching ``threshold`` × the best throughput, or
    None when only the largest count tried (``tried[-1]``) reaches it: then there is no
    evidence of saturation within the counts tried.
    """

    streams: int | None
    threshold: float
    tried: tuple[int, ...]

    def __str__(self) -> str:
        span = f"{self.tried[0]}–{self.tried[-1]}" if len(self.tried) > 1 else f"{self.tried[0]}"
        if self.streams is None:
            return (
                f"no saturation within {span} streams: only the largest count reaches "
                f"{self.threshold:.0%} of the best throughput; try more streams"
            )
        return (
            f"saturation: {self.streams} stream{'s reach' if self.streams != 1 else ' reaches'} "
            f"{self.threshold:.0%} of the best throughput (tried {span})"
        )


@frozen
class ResultSet:
    """An immutable, ordered collection of Results: filters, merging, JSON files, tables.

    ``ResultSet(results)`` takes any iterable of Results.
    """

    results: tuple[Result, ...] = field(default=(), converter=_results)

    # -- collection -------------------------------------------------------------------
    def __iter__(self) -> Iterator[Result]:
        return iter(self.results)

    def __len__(self) -> int:
        return len(self.results)

    @overload
    def __getitem__(self, index: int) -> Result: ...
    @overload
    def __getitem__(self, index: slice) -> ResultSet: ...
    def __getitem__(self, index: int | slice) -> Result | ResultSet:
        if isinstance(index, slice):
            return ResultSet(self.results[index])
        return self.results[index]

    def add(self, *results: Result | Iterable[Result]) -> ResultSet:
        """A new set: these results, then the ones given (Results or iterables of them)."""
        added: list[Result] = []
        for item in results:
            added.extend(_results(item))
        return ResultSet((*self.results, *added))

    def merge(self, other: Iterable[Result]) -> ResultSet:
        """A new set with this set's results, then ``other``'s (exact duplicates once)."""
        merged = list(self.results)
        for result in _results(other):
            if result not in merged:
                merged.append(result)
        return ResultSet(merged)

    def filter(
        self,
        predicate: Callable[[Result], bool] | None = None,
        *,
        operation: str | None = None,
        workload: str | None = None,
        streams: int | None = None,
        environment: str | None = None,
        url: str | None = None,
        backend: str | None = None,
    ) -> ResultSet:
        """Results matching every criterion given (``workload`` is the label: "small")."""

        def keep(result: Result) -> bool:
            return (
                (operation is None or result.operation == operation)
                and (workload is None or result.subject.label == workload)
                and (streams is None or result.streams == streams)
                and (environment is None or result.environment.name == environment)
                and (url is None or result.url == url)
                and (backend is None or result.backend == backend)
                and (predicate is None or predicate(result))
            )

        return ResultSet(result for result in self.results if keep(result))

    @property
    def environments(self) -> list[str]:
        """Environment names (label or host) in first-seen order."""
        return list(dict.fromkeys(result.environment.name for result in self.results))

    @property
    def targets(self) -> list[str]:
        """Target labels in first-seen order."""
        return list(dict.fromkeys(target_label(result) for result in self.results))

    @property
    def requests_by_kind(self) -> dict[str, int]:
        """Requests made in the timed windows of every result, by kind."""
        total: dict[str, int] = {}
        for result in self.results:
            for kind, count in result.requests_by_kind.items():
                total[kind] = total.get(kind, 0) + count
        return total

    # -- files ------------------------------------------------------------------------
    def to_json(self) -> str:
        """The versioned JSON document (see :mod:`storeprobe.result`)."""
        return dump_results(self.results)

    @classmethod
    def from_json(cls, source: str | Path) -> ResultSet:
        """Load a document (JSON text or a file's path); unknown schema versions are refused."""
        return cls(load_results(source))

    @classmethod
    def load(cls, *paths: str | Path) -> ResultSet:
        """Load and concatenate one or more result files."""
        results: list[Result] = []
        for path in paths:
            results.extend(load_results(Path(path)))
        return cls(results)

    def save(self, path: str | Path, *, append: bool = True) -> None:
        """Write to ``path``; with ``append`` (default) earlier results in it are kept.

        The file is written to a temporary name of its own in the same directory and
        renamed over ``path`` (``os.replace``), so a crash never leaves a half-written
        file, and an unreadable existing file is refused, never overwritten. An empty
        existing file holds no results.
        """
        target = Path(path)
        combined = self
        if append and target.exists() and target.stat().st_size:
            combined = ResultSet(load_results(target)).merge(self.results)
        temporary = target.with_name(f".{target.name}.{secrets.token_hex(4)}.tmp")
        try:
            with temporary.open("x", encoding="utf-8") as handle:  # x: never another's file
                handle.write(combined.to_json() + "\n")
            os.replace(temporary, target)
        except BaseException:
            temporary.unlink(missing_ok=True)
            raise

    # -- statistics across results ----------------------------------------------------
    def sweep_saturation(self, threshold: float = 0.95) -> Saturation | None:
        """Where a sweep saturates (see :class:`Saturation`); None without any sample.

        Meant for the results of one probe on one target at several stream counts.
        """
        if not 0 < threshold <= 1:
            raise ConfigurationError(f"threshold must be in (0, 1], not {threshold}")
        measured = [result for result in self.results if result.samples]
        if not measured:
            return None
        if len({(target_label(r), probe_key(r)[:4]) for r in measured}) != 1:
            raise ConfigurationError(
                "saturation needs results of one probe on one target (use a sweep or filter)"
            )
        tried = tuple(sorted({r.streams for r in measured}))
        best = max(result.bytes_per_s for result in measured)
        fewest = min(r.streams for r in measured if r.bytes_per_s >= threshold * best)
        streams = None if fewest == tried[-1] else fewest
        return Saturation(streams=streams, threshold=threshold, tried=tried)

    def saturation(self, threshold: float = 0.95) -> int | None:
        """Fewest streams whose best throughput reaches ``threshold`` × the best.

        None when no result has a sample, or when only the largest stream count tried
        reaches it (no evidence of saturation: see :meth:`sweep_saturation`).
        """
        found = self.sweep_saturation(threshold)
        return None if found is None else found.streams

    # -- tables -----------------------------------------------------------------------
    def table(
        self,
        *,
        by: str = "environment",
        format: str = "markdown",
        unit: str = "workload",
        crown: str = CROWN,
        tie: str = TIE,
    ) -> str:
        """The comparison table as a string (see the module docstring).

        ``by``: ``"environment"`` or ``"probe"``; ``format``: ``"markdown"``, ``"csv"``,
        ``"html"`` or ``"text"``; ``unit``: ``"workload"`` (KiB/s below 1 MiB per object,
        else MiB/s), ``"auto"`` (by magnitude), ``"KiB/s"``, ``"MiB/s"`` or ``"Mibit/s"``.
        """
        tables = comparison_tables(self.results, by=by, unit=unit, crown=crown, tie=tie)
        return render_tables(tables, format)

    def summary(self, *, format: str = "markdown", unit: str = "workload") -> str:
        """One row per result: (target,) probe, workload, unit, streams, best, median, ok."""
        return render_tables([results_table(self.results, unit)], format)

    # -- other views ------------------------------------------------------------------
    def to_pandas(self) -> pandas.DataFrame:
        """One tidy row per Result (needs the ``pandas`` extra)."""
        try:
            import pandas as pd
        except ImportError:
            raise MissingDependencyError(
                "to_pandas() needs pandas: pip install 'storeprobe[pandas]'"
            ) from None
        return pd.DataFrame([_tidy(result) for result in self.results])

    def _repr_html_(self) -> str:
        """The summary a notebook shows, also the heart of the HTML report: the
        comparison tables (crowned, with their legend; backup steps as the published
        backup table), one row per result (:meth:`summary`), then every error and
        warning with its code."""
        if not self.results:
            return "<p>(no results)</p>"
        steps = [result for result in self.results if result.step is not None]
        probes = [result for result in self.results if result.step is None]
        parts: list[str] = []
        if steps:
            parts.append(render_tables(backup_tables(steps), "html"))
        if probes:
            parts.append(render_tables(comparison_tables(probes), "html"))
        parts.append(self.summary(format="html"))
        notices = [line for result in self.results for line in notice_lines(result)]
        if notices:
            items = "".join(f"<li>{html.escape(line)}</li>" for line in notices)
            parts.append(f'<ul class="notices">{items}</ul>')
        else:
            parts.append('<p class="notices">No errors or warnings.</p>')
        return '<div class="storeprobe-summary">\n' + "\n".join(parts) + "\n</div>"

    def __str__(self) -> str:
        return self.summary(format="markdown") if self.results else "(no results)"

    def __repr__(self) -> str:
        return f"<ResultSet {len(self.results)} results, {len(self.targets)} targets>"


def _tidy(result: Result) -> dict[str, Any]:
    measured = bool(result.samples)
    nan = float("nan")
    return {
        "probe": result.probe,
        "operation": result.operation,
        "workload": result.subject.label,
        "count": result.subject.operations,
        "size_bytes": result.subject.object_size,
        "url": result.url,
        "backend": result.backend,
        "protocol": result.protocol,
        "streams": result.streams,
        "effective_streams": result.effective_streams,
        "environment": result.environment.name,
        "hostname": result.environment.hostname,
        "utc": result.environment.utc,
        "repeats_ok": len(result.samples),
        "repeats_failed": len(result.errors),
        "warnings": ",".join(notice.code.value for notice in result.warnings),
        "best_seconds": result.best_seconds if measured else nan,
        "median_seconds": result.median_seconds if measured else nan,
        "bytes_per_s": result.bytes_per_s if measured else nan,
        "median_bytes_per_s": result.median_bytes_per_s if measured else nan,
        "kib_per_s": result.kib_per_s if measured else nan,
        "mib_per_s": result.mib_per_s if measured else nan,
        "mibit_per_s": result.mibit_per_s if measured else nan,
    }
