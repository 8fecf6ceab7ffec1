"""Tables of scenario steps: backup and restore, in the shape people publish."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
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
    return [
        _backup_table(method, kind, members, env_name if several_envs else None, prices)
        for (method, kind), members in groups.items()
    ]


def _backup_table(
    method: str,
    kind: str,
    members: Sequence[StepResultLike],
    env_name: Callable[[StepResultLike], str] | None,
    prices: PriceSheet | None,
) -> Table:
    """The table of one method and dataset kind (see :func:`backup_tables`); ``env_name``
    names each row's environment, None when there is one environment (no such column)."""
    columns = _step_columns(members)
    rows: dict[tuple[str, ...], dict[str, StepResultLike]] = {}
    for result in members:
        assert result.step is not None
        key: tuple[str, ...] = (target_label(result), str(result.streams))
        if env_name is not None:
            key = (*key, env_name(result))
        rows.setdefault(key, {})[result.step.label] = result
    first = min(members, key=lambda r: r.step.version if r.step else 0).step
    assert first is not None
    several_envs = env_name is not None
    header = ["target", "streams", *(["environment"] if several_envs else []), *columns]
    units = ["", "", *([""] if several_envs else []), *(["s"] * len(columns))]
    backups = [label for label in columns if label.startswith("backup")]
    grid = [
        [
            *(Cell(text=text) for text in key),
            *(_seconds_cell(cells.get(label)) for label in columns),
            *(_space_cell(cells.get(label)) for label in backups),
            *_cost_cells([cells[label] for label in columns if label in cells], prices),
        ]
        for key, cells in rows.items()
    ]
    extra, extra_units = (
        (("cost", "storage"), (prices.currency, f"{prices.currency}/month"))
        if prices is not None
        else ((), ())
    )
    return Table(
        title=f"backup and restore, {method} method, {first.dataset} ({kind})",
        header=(*header, *(f"space after {label}" for label in backups), *extra),
        units=(*units, *(["MiB"] * len(backups)), *extra_units),
        rows=grid,
        labels=len(header) - len(columns),
        legend=_backup_legend(prices),
    )


def _step_columns(members: Sequence[StepResultLike]) -> list[str]:
    """The steps' labels in the order people read them: every backup, then every restore,
    each by number."""
    columns: list[str] = []
    for result in members:
        assert result.step is not None
        if result.step.label not in columns:
            columns.append(result.step.label)
    columns.sort(key=lambda label: (not label.startswith("backup"), _step_number(label)))
    return columns


def _seconds_cell(found: StepResultLike | None) -> Cell:
    """A step's seconds (its best repeat): ``failed``, ``-`` when not run, blank when the
    row has no such step."""
    if found is None:
        return Cell(text="")
    if found.samples:
        seconds = found.best_seconds
        return Cell(text=f"{seconds:.3f}", value=seconds)
    if any(e.code.value == "not-run" for e in found.errors):
        return Cell(text="-")
    return Cell(text="failed")


def _space_cell(found: StepResultLike | None) -> Cell:
    """The space (MiB) the target held after a backup step; blank when not counted."""
    step = None if found is None else found.step
    space = None if step is None else step.space_used
    return Cell(
        text="" if space is None else f"{space / MiB:.2f}",
        value=None if space is None else space / MiB,
    )


def _cost_cells(ordered: Sequence[StepResultLike], prices: PriceSheet | None) -> list[Cell]:
    """A row's cost and a month's storage at ``prices`` (none without a sheet)."""
    if prices is None:
        return []
    bill = scenario_cost(ordered, prices)
    storage = bill.storage_per_month
    return [
        Cell(
            text=money(bill.transfer, not _unpriced(bill.unpriced, "storage")),
            value=float(bill.transfer),
        ),
        Cell(
            text=money(storage, "storage" not in bill.unpriced),
            value=None if storage is None else float(storage),
        ),
    ]


def _backup_legend(prices: PriceSheet | None) -> str:
    """What the columns of a backup table hold, the sheet's prices too."""
    legend = (
        "seconds of timed requests per step (the sum of its windows); space after "
        "backup k: what the target held under the run's prefix after that step (a "
        "hard-linked file counted once, as du counts it)"
    )
    if prices is not None:
        legend += (
            f"; cost: the requests and downloaded bytes of every step, storage: a month "
            f"of the space after the last step, at {prices} ({prices.name}); +? marks "
            "a figure without the parts the sheet has no price for"
        )
    return legend


def _unpriced(parts: Sequence[str], leave: str) -> bool:
    """True when a part other than ``leave`` has no price."""
    return any(part != leave for part in parts)


def _step_number(label: str) -> int:
    return int(label.split()[1])
