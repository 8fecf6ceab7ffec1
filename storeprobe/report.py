"""Many Results side by side: the tables people publish, as strings.

A :class:`ResultSet` holds Results from many targets, environments and runs. It renders

- ``table(by="environment")``: one table per probe, targets as rows, environments as
  columns, the fastest target of each environment crowned;
- ``table(by="probe")``: targets as rows, the probes (upload/download × workload) as
  columns, one column per stream count side by side;

as markdown or CSV. Figures are the best repeat, in the unit people publish the workload
in (KiB/s below 1 MiB per object, MiB/s otherwise), named in the header. When a cell has
several results (several runs), the best of them is shown.
"""

from __future__ import annotations

import csv
import html
import io
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from attrs import define, field

from storeprobe.errors import ConfigurationError
from storeprobe.result import Result, dump_results, load_results

if TYPE_CHECKING:
    import pandas

__all__ = ["CROWN", "ResultSet", "target_label"]

#: The winner marker in markdown tables; ``crown="*"`` gives a plain-text one.
CROWN = "👑"
_DEFAULT_BACKEND = {
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
Format = Literal["markdown", "csv"]
By = Literal["environment", "probe"]


def target_label(result: Result) -> str:
    """The URL, plus the client when it is not the usual one for the protocol."""
    usual = _DEFAULT_BACKEND.get(result.protocol)
    if usual is None or usual == result.backend:
        return result.url
    return f"{result.url} ({result.backend})"


def _figure(result: Result) -> float:
    scale = 1024.0 if result.rate_unit == "KiB/s" else 1024.0**2
    return result.bytes_per_s / scale


def _probe_key(result: Result) -> tuple[str, str, int]:
    return (result.workload.label, result.operation, result.streams)


def _probe_title(result: Result) -> str:
    return f"{result.probe}, {result.streams} stream{'s' if result.streams != 1 else ''}"


@define
class ResultSet:
    """An ordered collection of Results with filters, merging, JSON files and tables."""

    results: list[Result] = field(factory=list)

    def __attrs_post_init__(self) -> None:
        self.results = list(self.results)
        for result in self.results:
            if not isinstance(result, Result):
                raise ConfigurationError(f"a ResultSet holds Results, not {type(result).__name__}")

    # -- collection -------------------------------------------------------------
    def __iter__(self) -> Iterator[Result]:
        return iter(self.results)

    def __len__(self) -> int:
        return len(self.results)

    def __getitem__(self, index: int) -> Result:
        return self.results[index]

    def add(self, *results: Result | Iterable[Result]) -> ResultSet:
        """Append results (or iterables of them); returns self for chaining."""
        for item in results:
            items = [item] if isinstance(item, Result) else list(item)
            for result in items:
                if not isinstance(result, Result):
                    raise ConfigurationError(
                        f"a ResultSet holds Results, not {type(result).__name__}"
                    )
                self.results.append(result)
        return self

    def merge(self, other: Iterable[Result]) -> ResultSet:
        """A new set with this set's results, then ``other``'s (exact duplicates once)."""
        merged = list(self.results)
        for result in other:
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
                and (workload is None or result.workload.label == workload)
                and (streams is None or result.streams == streams)
                and (environment is None or result.environment.name == environment)
                and (url is None or result.url == url)
                and (backend is None or result.backend == backend)
                and (predicate is None or predicate(result))
            )

        return ResultSet([result for result in self.results if keep(result)])

    @property
    def environments(self) -> list[str]:
        """Environment names (label or host) in first-seen order."""
        return list(dict.fromkeys(result.environment.name for result in self.results))

    @property
    def targets(self) -> list[str]:
        """Target labels in first-seen order."""
        return list(dict.fromkeys(target_label(result) for result in self.results))

    # -- files --------------------------------------------------------------------
    def to_json(self) -> str:
        """The versioned JSON document (see :mod:`storeprobe.result`)."""
        return dump_results(self.results)

    @classmethod
    def from_json(cls, text: str) -> ResultSet:
        """Load a document; unknown schema versions are refused."""
        return cls(load_results(text))

    @classmethod
    def load(cls, *paths: str | Path) -> ResultSet:
        """Load and concatenate one or more result files."""
        merged = cls()
        for path in paths:
            merged.add(load_results(Path(path).read_text()))
        return merged

    def save(self, path: str | Path, *, append: bool = True) -> None:
        """Write to ``path``; with ``append`` (default) earlier results in it are kept.

        The file is written to a temporary name and renamed, so a crash never leaves a
        half-written file, and an unreadable existing file is refused, never overwritten.
        """
        target = Path(path)
        combined = self
        if append and target.exists():
            combined = ResultSet(load_results(target.read_text())).merge(self.results)
        temporary = target.with_name(f".{target.name}.tmp")
        temporary.write_text(combined.to_json() + "\n")
        temporary.replace(target)

    # -- statistics across results --------------------------------------------------
    def saturation(self, threshold: float = 0.95) -> int | None:
        """Smallest stream count whose best throughput reaches ``threshold`` × the best.

        Meant for a sweep: the results of one probe at several stream counts. None when
        no result has a sample.
        """
        if not 0 < threshold <= 1:
            raise ConfigurationError(f"threshold must be in (0, 1], not {threshold}")
        measured = [result for result in self.results if result.samples]
        if not measured:
            return None
        if len({(r.url, r.operation, r.workload) for r in measured}) != 1:
            raise ConfigurationError(
                "saturation needs results of one probe on one target (use a sweep or filter)"
            )
        best = max(result.bytes_per_s for result in measured)
        reaching = [r.streams for r in measured if r.bytes_per_s >= threshold * best]
        return min(reaching)

    # -- tables ---------------------------------------------------------------------
    def table(
        self, *, by: By = "environment", format: Format = "markdown", crown: str = CROWN
    ) -> str:
        """The comparison table as a string (see the module docstring)."""
        if by not in ("environment", "probe"):
            raise ConfigurationError(f"by must be 'environment' or 'probe', not {by!r}")
        if format not in ("markdown", "csv"):
            raise ConfigurationError(f"format must be 'markdown' or 'csv', not {format!r}")
        if not self.results:
            return ""
        grids = self._by_environment() if by == "environment" else [self._by_probe()]
        if format == "csv":
            return _csv(grids)
        return "\n\n".join(_markdown(title, header, rows, crown) for title, header, rows in grids)

    def _cells(self, key: Callable[[Result], tuple[Any, ...]]) -> dict[tuple[Any, ...], Result]:
        best: dict[tuple[Any, ...], Result] = {}
        for result in self.results:
            if not result.samples:
                continue
            k = key(result)
            if k not in best or result.bytes_per_s > best[k].bytes_per_s:
                best[k] = result
        return best

    def _by_environment(self) -> list[_Grid]:
        probes = list(dict.fromkeys(_probe_key(result) for result in self.results))
        grids: list[_Grid] = []
        for probe in probes:
            members = [result for result in self.results if _probe_key(result) == probe]
            sample = members[0]
            environments = list(dict.fromkeys(r.environment.name for r in members))
            targets = list(dict.fromkeys(target_label(r) for r in members))
            cells = self._cells(lambda r: (_probe_key(r), target_label(r), r.environment.name))
            header = ["target", *(f"{env} ({sample.rate_unit})" for env in environments)]
            rows: list[list[_Cell]] = []
            for target in targets:
                row: list[_Cell] = [_Cell(target)]
                for env in environments:
                    found = cells.get((probe, target, env))
                    row.append(_Cell.number(found))
                rows.append(row)
            _crown_columns(rows)
            grids.append((_probe_title(sample), header, rows))
        return grids

    def _by_probe(self) -> _Grid:
        columns = list(
            dict.fromkeys(
                (r.workload.label, r.operation, r.streams, r.rate_unit)
                for r in sorted(self.results, key=_column_order)
            )
        )
        targets = list(dict.fromkeys(target_label(r) for r in self.results))
        cells = self._cells(lambda r: (target_label(r), r.workload.label, r.operation, r.streams))
        header = ["target"] + [
            f"{operation} {label}, {streams} stream{'s' if streams != 1 else ''} ({unit})"
            for label, operation, streams, unit in columns
        ]
        rows = []
        for target in targets:
            row: list[_Cell] = [_Cell(target)]
            for label, operation, streams, _ in columns:
                row.append(_Cell.number(cells.get((target, label, operation, streams))))
            rows.append(row)
        _crown_columns(rows)
        environments = ", ".join(self.environments)
        return (f"all probes ({environments})", header, rows)

    # -- other views ----------------------------------------------------------------
    def to_pandas(self) -> pandas.DataFrame:
        """One tidy row per Result (needs the ``pandas`` extra)."""
        try:
            import pandas as pd
        except ImportError:
            from storeprobe.errors import MissingDependencyError

            raise MissingDependencyError(
                "to_pandas() needs pandas: pip install 'storeprobe[pandas]'"
            ) from None
        return pd.DataFrame([_tidy(result) for result in self.results])

    def _repr_html_(self) -> str:
        rows = "".join(
            "<tr>"
            + "".join(
                f"<td>{html.escape(str(value))}</td>"
                for value in (
                    result.probe,
                    result.streams,
                    target_label(result),
                    result.environment.name,
                    f"{_figure(result):.2f} {result.rate_unit}" if result.samples else "failed",
                    f"{len(result.samples)}/{len(result.samples) + len(result.errors)}",
                )
            )
            + "</tr>"
            for result in self.results
        )
        head = "".join(
            f"<th>{name}</th>"
            for name in ("probe", "streams", "target", "environment", "best", "ok/repeats")
        )
        return f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>"

    def __repr__(self) -> str:
        return f"<ResultSet {len(self.results)} results, {len(self.targets)} targets>"


def _column_order(result: Result) -> tuple[int, str, int, int]:
    return (
        0 if result.workload.size < 1024 * 1024 else 1,
        result.workload.label,
        0 if result.operation == "upload" else 1,
        result.streams,
    )


def _tidy(result: Result) -> dict[str, Any]:
    measured = bool(result.samples)
    return {
        "probe": result.probe,
        "operation": result.operation,
        "workload": result.workload.label,
        "count": result.workload.count,
        "size_bytes": result.workload.size,
        "url": result.url,
        "backend": result.backend,
        "protocol": result.protocol,
        "streams": result.streams,
        "effective_streams": result.effective_streams,
        "environment": result.environment.name,
        "utc": result.environment.utc,
        "repeats_ok": len(result.samples),
        "repeats_failed": len(result.errors),
        "best_seconds": result.best_seconds if measured else float("nan"),
        "median_seconds": result.median_seconds if measured else float("nan"),
        "bytes_per_s": result.bytes_per_s if measured else float("nan"),
        "median_bytes_per_s": result.median_bytes_per_s if measured else float("nan"),
        "kib_per_s": result.kib_per_s if measured else float("nan"),
        "mib_per_s": result.mib_per_s if measured else float("nan"),
        "mibit_per_s": result.mibit_per_s if measured else float("nan"),
    }


@define
class _Cell:
    text: str
    value: float | None = None
    winner: bool = False

    @classmethod
    def number(cls, result: Result | None) -> _Cell:
        if result is None:
            return cls("")
        value = _figure(result)
        return cls(f"{value:.2f}", value)


_Grid = tuple[str, list[str], list[list[_Cell]]]


def _crown_columns(rows: list[list[_Cell]]) -> None:
    if len(rows) < 2:
        return
    for column in range(1, len(rows[0])):
        values = [row[column].value for row in rows if row[column].value is not None]
        if len(values) < 2:
            continue
        best = max(v for v in values if v is not None)
        for row in rows:
            if row[column].value == best:
                row[column].winner = True


def _markdown(title: str, header: list[str], rows: list[list[_Cell]], crown: str) -> str:
    texts = [[cell.text + (f" {crown}" if cell.winner else "") for cell in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in texts)) for i, h in enumerate(header)]
    lines = [f"**{title}**", ""]
    lines.append("| " + " | ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)) + " |")
    lines.append(
        "|"
        + "|".join("-" * (w + 2) if i == 0 else "-" * (w + 1) + ":" for i, w in enumerate(widths))
        + "|"
    )
    for row in texts:
        cells = [
            cell.ljust(width) if i == 0 else cell.rjust(width)
            for i, (cell, width) in enumerate(zip(row, widths, strict=True))
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _csv(grids: Sequence[_Grid]) -> str:
    """Long form: one line per cell (table, target, column, value, unit, winner 0/1)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["table", "target", "column", "value", "unit", "winner"])
    for title, header, rows in grids:
        for row in rows:
            for index, cell in enumerate(row[1:], start=1):
                if cell.value is None:
                    continue
                column, _, unit = header[index].rpartition(" (")
                writer.writerow(
                    [title, row[0].text, column, cell.text, unit.rstrip(")"), int(cell.winner)]
                )
    return buffer.getvalue()
