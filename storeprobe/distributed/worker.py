"""A worker's side of a distributed probe: what it runs (:class:`Spec`), the barrier it
waits at before each timed window, and what it sends back (:class:`Report`).

:func:`work` runs on a Dask worker: it opens the target again from its
:class:`~storeprobe.target.Recipe`, runs the probe's :class:`~storeprobe.measurement.Measurement`
with a :class:`Barrier` as its gate (ready, then the start instant on this worker's
clock: the coordinator's instant plus this worker's offset), and reports its Result,
each repeat's window on its own clock and the repeats it abandoned.
"""

from __future__ import annotations

import time
from typing import Literal

from attrs import frozen

from storeprobe.distributed.dask_client import import_dask
from storeprobe.measurement import Measurement
from storeprobe.result import Result
from storeprobe.settings import Settings
from storeprobe.target import Recipe
from storeprobe.workload import Workload

__all__ = ["Barrier", "Report", "Spec", "clock_reading", "work"]


@frozen(kw_only=True)
class Spec:
    """What every worker runs: one probe call, the same on each (per-worker content)."""

    operation: Literal["upload", "download"]
    workload: Workload
    #: the probe's settings; ``streams`` is per worker
    settings: Settings


@frozen
class Report:
    """What a worker sends back: its Result, and its windows on its own clock."""

    result: Result
    windows: dict[int, tuple[int, int]]
    abandoned: frozenset[int]
    #: the worker's whole run, from opening the target to its cleanup (ns)
    busy_ns: int


class Barrier:
    """The worker's side of the start: report ready, wait for the instant, open."""

    def __init__(self, run: str, index: int, offset_ns: int, timeout: float | None) -> None:
        self.run, self.index, self.offset_ns = run, index, offset_ns
        self.timeout = timeout
        self.ready = import_dask().Queue(f"{run}-ready")
        self.waited: set[int] = set()
        self.windows: dict[int, tuple[int, int]] = {}
        self.abandoned: set[int] = set()

    def wait(self, repeat: int) -> None:
        self.waited.add(repeat)
        self.ready.put((self.index, repeat, True))
        start = import_dask().Variable(f"{self.run}-start-{repeat}")
        value = start.get(timeout=self.timeout)
        if not isinstance(value, int):
            raise _CalledOffError(str(value))
        target = value + self.offset_ns  # the instant on this worker's clock
        while (left := target - time.perf_counter_ns()) > 2_000_000:
            time.sleep((left - 1_000_000) / 1e9)
        while time.perf_counter_ns() < target:
            pass

    def opened(self, repeat: int, start_ns: int, end_ns: int) -> None:
        self.windows[repeat] = (start_ns, end_ns)

    def abandon(self, repeat: int) -> None:
        self.abandoned.add(repeat)
        if repeat not in self.waited:
            self.ready.put((self.index, repeat, False))


class _CalledOffError(Exception):
    """The coordinator called a repeat off (another worker failed or was lost); its name is
    in the failed repeat's notice (``_CalledOffError: called off: ...``)."""


def clock_reading() -> int:
    """This worker's clock (ns), read for the coordinator's offset estimate."""
    return time.perf_counter_ns()


def work(spec: Spec, recipe: Recipe, index: int, offset_ns: int, run: str) -> Report:
    """One worker's probe (runs on the worker)."""
    began = time.perf_counter_ns()
    target = recipe.open()
    gate = Barrier(run, index, offset_ns, spec.settings.timeout)
    seed = ((spec.workload.seed or 0) + 1_000_003 * (index + 1)) % 2**63
    result = Measurement(
        target=target,
        operation=spec.operation,
        workload=spec.workload.with_seed(seed),
        settings=spec.settings,
        clock=time.perf_counter_ns,
        callback=None,
        gate=gate,
    ).run()
    busy = time.perf_counter_ns() - began
    return Report(result, dict(gate.windows), frozenset(gate.abandoned), busy)
