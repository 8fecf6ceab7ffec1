"""Tables of scenario steps: backup and restore, in the shape people publish."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from storeprobe.cost import PriceSheet, money, scenario_cost
from storeprobe.render.core import ResultLike
from storeprobe.render.lines import target_label
from storeprobe.render.results import environment_names
from storeprobe.render.tables import Cell, Table
from storeprobe.step import Step
from storeprobe.units import MiB


# -- scenario tables -------------------------------------------------------------------------
class StepResultLike(ResultLike, Protocol):
    """A Result that may be a scenario step (``step`` is a :class:`~storeprobe.step.Step`)."""

    @property
    def step(self) -> Step | None: ...
    @property
    def requests_by_kind(self) -> Mapping[str, int]: ...
    @property
    def bytes_received(self) -> int: ...


def backup_tables(
    results: Sequence[StepResultLike], prices: PriceSheet | None = None
) -> list[Table]:
    """The backup-and-restore tables in the shape people publish them.

    One table per method and dataset; one row per target, stream count (and environment,
    when there are several); one column per step (``backup 1`` …, ``restore 1 (full)``
    …) in seconds (the step's timed requests), then the space the target held after each
    backup step (``space after backup 1`` …), in MiB, counted as ``du`` counts the
    tool's layout (a hard-linked file once). A failed step shows ``failed``, a step not
    run ``-``.

    With ``prices`` (a :class:`~storeprobe.cost.PriceSheet`), two more columns: ``cost``,
    what the requests and the downloaded bytes of all the row's steps cost, and
    ``storage``, what a month of the space after the last step costs
    (:func:`~storeprobe.cost.scenario_cost`), in the sheet's currency; ``+?`` marks a
    figure that leaves out a part the sheet has no price for.
    """
    steps = [r for r in results if r.step is not None]
    groups: dict[tuple[str, str], list[StepResultLike]] = {}
    for result in steps:
        assert result.step is not None
        kind = result.subject.label.split(" ", 1)[0]
        groups.setdefault((result.step.method, kind), []).append(result)
    env_name = environment_names(steps)
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
        backups = [label for label in columns if label.startswith("backup")]
        grid: list[list[Cell]] = []
        for key, cells in rows.items():
            row = [Cell(text=text) for text in key]
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
            for label in backups:
                step = cells[label].step if label in cells else None
                space = None if step is None else step.space_used
                row.append(
                    Cell(
                        text="" if space is None else f"{space / MiB:.2f}",
                        value=None if space is None else space / MiB,
                    )
                )
            if prices is not None:
                ordered = [cells[label] for label in columns if label in cells]
                bill = scenario_cost(ordered, prices)
                row.append(
                    Cell(
                        text=money(bill.transfer, not _unpriced(bill.unpriced, "storage")),
                        value=float(bill.transfer),
                    )
                )
                storage = bill.storage_per_month
                row.append(
                    Cell(
                        text=money(storage, "storage" not in bill.unpriced),
                        value=None if storage is None else float(storage),
                    )
                )
            grid.append(row)
        legend = (
            "seconds of timed requests per step (the sum of its windows); space after "
            "backup k: what the target held under the run's prefix after that step (a "
            "hard-linked file counted once, as du counts it)"
        )
        extra: tuple[str, ...] = ()
        extra_units: tuple[str, ...] = ()
        if prices is not None:
            extra = ("cost", "storage")
            extra_units = (prices.currency, f"{prices.currency}/month")
            legend += (
                f"; cost: the requests and downloaded bytes of every step, storage: a month "
                f"of the space after the last step, at {prices} ({prices.name}); +? marks "
                "a figure without the parts the sheet has no price for"
            )
        tables.append(
            Table(
                title=f"backup and restore, {method} method, {first.dataset} ({kind})",
                header=(*header, *(f"space after {label}" for label in backups), *extra),
                units=(*units, *(["MiB"] * len(backups)), *extra_units),
                rows=grid,
                labels=len(header) - len(columns),
                legend=legend,
            )
        )
    return tables


def _unpriced(parts: Sequence[str], leave: str) -> bool:
    """True when a part other than ``leave`` has no price."""
    return any(part != leave for part in parts)


def _step_number(label: str) -> int:
    return int(label.split()[1])
