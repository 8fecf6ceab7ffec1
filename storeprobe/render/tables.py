"""Tables of cells, rendered as markdown, text, HTML or CSV."""

from __future__ import annotations

import csv
import html
import io
from collections.abc import Iterable, Sequence

from attrs import evolve, field, frozen
from wcwidth import wcswidth

from storeprobe.render.core import CROWN, check_format


def width(text: str) -> int:
    """Columns ``text`` takes in a terminal (wide characters count 2, combining ones 0)."""
    columns = wcswidth(text)
    return columns if columns >= 0 else len(text)  # a control character: count characters


def _left(text: str, columns: int) -> str:
    return text + " " * (columns - width(text))


def _right(text: str, columns: int) -> str:
    return " " * (columns - width(text)) + text


# -- tables ----------------------------------------------------------------------------------
@frozen(kw_only=True)
class Cell:
    """One cell: its text, the number behind it (None for labels and blanks), a mark."""

    text: str
    value: float | None = None
    mark: str = ""

    @property
    def shown(self) -> str:
        """The text with its mark (``"4096.00 fastest"``)."""
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
    widths = [max([width(h), *(width(r[i]) for r in texts)]) for i, h in enumerate(header)]
    left = range(table.labels)
    lines = [f"**{table.title}**", ""] if table.title else []
    lines.append("| " + " | ".join(_left(h, w) for h, w in zip(header, widths, strict=True)) + " |")
    lines.append(
        "|"
        + "|".join(
            "-" * (w + 2) if i in left else "-" * (w + 1) + ":" for i, w in enumerate(widths)
        )
        + "|"
    )
    for row in texts:
        cells = [
            _left(cell, columns) if i in left else _right(cell, columns)
            for i, (cell, columns) in enumerate(zip(row, widths, strict=True))
        ]
        lines.append("| " + " | ".join(cells) + " |")
    if table.legend:
        lines += ["", table.legend]
    return "\n".join(lines)


def _text(table: Table) -> str:
    texts = [[cell.shown for cell in row] for row in table.rows]
    header = [h + (f" ({u})" if u else "") for h, u in zip(table.header, table.units, strict=True)]
    widths = [max([width(h), *(width(r[i]) for r in texts)]) for i, h in enumerate(header)]
    left = range(table.labels)

    def line(cells: Sequence[str]) -> str:
        return "  ".join(
            _left(c, w) if i in left else _right(c, w)
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
    """Tables as one string: ``"markdown"``, ``"csv"`` (long form), ``"html"`` or ``"text"``.

    A legend that several tables share is printed once, under the last of them.
    """
    check_format(format)
    if not tables:
        return ""
    if format == "csv":
        return _csv(tables)
    renderer = {"markdown": _markdown, "html": _html, "text": _text}[format]
    # a legend shared by several tables is printed once, under the last of them
    last = {table.legend: index for index, table in enumerate(tables) if table.legend}
    shown = [
        table if last.get(table.legend) == index else evolve(table, legend="")
        for index, table in enumerate(tables)
    ]
    return "\n\n".join(renderer(table) for table in shown)
