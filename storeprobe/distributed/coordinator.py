"""The coordinator's side of a distributed probe: one call, from the run prefix to the
aggregate Result.

It opens one run prefix with a folder per worker (holding it with one small object, so
that a worker's cleanup never empties it: :func:`storeprobe.execution.hold_prefix`),
measures each worker's clock against its own (round trips through Dask, NTP-style:
:func:`storeprobe.sampling.estimate_offset`), submits
:func:`~storeprobe.distributed.worker.work` to each worker, and per repeat waits until
every worker is ready, then names one start instant a little ahead on its own clock. A
worker whose process died, whose task failed or that was not ready in time is lost:
the repeats left are called off, the others are waited for, never the lost one. Then it
deletes what is left under the run prefix, measures each clock's drift, and builds the
aggregate (:func:`~storeprobe.distributed.aggregate_result.aggregate_result`).
"""

from __future__ import annotations

import contextlib
import secrets
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from storeprobe.distributed.aggregate_result import aggregate_result
from storeprobe.distributed.dask_client import import_dask
from storeprobe.distributed.worker import Report, Spec, clock_reading, work
from storeprobe.environment import Environment
from storeprobe.execution import (
    Leftover,
    clear_prefix,
    delete_names,
    hold_prefix,
    open_run,
    remove_folders,
)
from storeprobe.notices import Code, Notice
from storeprobe.result import Member, Result
from storeprobe.sampling import estimate_offset
from storeprobe.target import Target
from storeprobe.transfer import Clock

if TYPE_CHECKING:
    Client = Any  # distributed.Client: Dask's API is untyped

__all__ = ["LEAD_NS", "OFFSET_ROUNDS", "Coordinator"]

#: how far ahead of the release the start instant is named, at least (ns)
LEAD_NS = 100_000_000
#: round trips per worker when measuring its clock offset
OFFSET_ROUNDS = 9
_POLL_S = 0.05


def _addresses(dask_scheduler: Any) -> list[str]:
    return sorted(dask_scheduler.workers)


class Coordinator:
    """One distributed probe call, from the run prefix to the aggregate Result."""

    def __init__(
        self, target: Target, workers: int | None, clock: Clock, client: Client, spec: Spec
    ) -> None:
        self.target, self.workers, self.clock = target, workers, clock
        self.client, self.spec = client, spec
        self.run_id = f"storeprobe-{secrets.token_hex(8)}"
        self.slowest_ns = 0  # half the longest of the workers' best round trips

    def _workers(self) -> list[str]:
        wanted = self.workers
        if wanted is not None:
            self.client.wait_for_workers(wanted, timeout=self.spec.settings.timeout)
        present: list[str] = self.client.run_on_scheduler(_addresses)
        return present[:wanted] if wanted is not None else present

    def _offset(self, address: str) -> tuple[int, int]:
        readings = []
        for _ in range(OFFSET_ROUNDS):
            sent = self.clock()
            value = self.client.run(clock_reading, workers=[address])[address]
            readings.append((sent, int(value), self.clock()))
        return estimate_offset(readings)

    def run(self) -> Result:
        began = self.clock()
        addresses = self._workers()
        count = len(addresses)
        folders = [f"w{index}" for index in range(count)]
        environment, prefix, held = self._open(folders)
        recipe = self.target.recipe
        assert recipe is not None
        offsets = [self._offset(address) for address in addresses]
        self.slowest_ns = max(uncertainty for _, uncertainty in offsets)
        futures = [
            self.client.submit(
                work,
                self.spec,
                recipe.at(f"{prefix}/{folder}"),
                index,
                offsets[index][0],
                self.run_id,
                key=f"{self.run_id}-{folder}",
                workers=[address],
                allow_other_workers=False,
                pure=False,
            )
            for index, (folder, address) in enumerate(zip(folders, addresses, strict=True))
        ]
        errors: list[Notice] = []
        reports: list[Report | None] = [None] * count
        lost: dict[int, str] = {}
        try:
            self._release(addresses, futures, lost)
            self._collect(addresses, futures, reports, lost, errors)
        finally:
            for index in lost:
                with contextlib.suppress(Exception):
                    futures[index].cancel()
            leftovers = self._clean(prefix, folders, held)
        drifts = [
            None if index in lost else self._drift(address, offsets[index][0])
            for index, address in enumerate(addresses)
        ]
        members = _members(folders, addresses, offsets, drifts, reports)
        return aggregate_result(
            self.spec,
            self.target,
            members,
            reports,
            offsets,
            errors,
            leftovers,
            prefix,
            environment,
            clock=self.clock,
            began=began,
        )

    def _open(self, folders: Sequence[str]) -> tuple[Environment, str, str]:
        """The run prefix with a folder per worker, held by one small object (see the
        module docstring): the environment, the prefix, the holding object's name. A
        prefix that cannot be held is removed again."""
        environment, prefix = open_run(
            self.target, self.spec.settings.label, self.spec.settings.timeout, folders
        )
        try:
            held = hold_prefix(self.target, prefix, self.spec.settings.timeout)
        except Exception:
            remove_folders(self.target, [*(f"{prefix}/{folder}" for folder in folders), prefix])
            raise
        return environment, prefix, held

    # -- the barrier -------------------------------------------------------------------------
    def _lost(self, addresses: Sequence[str], futures: Sequence[Any], lost: dict[int, str]) -> None:
        """Record workers whose process is gone or whose task failed outside a repeat."""
        present = set(self.client.run_on_scheduler(_addresses))
        for index, (address, future) in enumerate(zip(addresses, futures, strict=True)):
            if index in lost:
                continue
            if address not in present:
                lost[index] = f"worker w{index} ({address}) was lost: its process died or left"
            elif future.status == "error":
                lost[index] = f"worker w{index} failed: {self._describe(future)}"
            elif future.status == "cancelled":
                lost[index] = f"worker w{index}'s task was cancelled"

    def _describe(self, future: Any) -> str:
        try:
            exc = future.exception(timeout=5)
        except Exception as error:  # the reason is only reported
            exc = error
        return self.target.describe_error(exc) if exc is not None else "unknown error"

    def _release(
        self,
        addresses: Sequence[str],
        futures: Sequence[Any],
        lost: dict[int, str],
    ) -> None:
        """Per repeat: wait until every worker is ready, then name the start instant; once
        a worker is lost, call this repeat and every later one off."""
        dask = import_dask()
        ready = dask.Queue(f"{self.run_id}-ready", client=self.client)
        early: list[tuple[int, int, bool]] = []
        repeats = self.spec.settings.repeats
        for repeat in range(repeats):
            early = self._wait_ready(ready, repeat, early, addresses, futures, lost)
            if lost:
                reason = "; ".join(lost.values())
                for later in range(repeat, repeats):
                    dask.Variable(f"{self.run_id}-start-{later}", client=self.client).set(
                        f"called off: {reason}"
                    )
                return
            # far enough ahead for the slowest worker to hear of it: 8 of its round trips
            lead = max(LEAD_NS, 16 * self.slowest_ns)
            dask.Variable(f"{self.run_id}-start-{repeat}", client=self.client).set(
                self.clock() + lead
            )

    def _wait_ready(
        self,
        ready: Any,
        repeat: int,
        early: list[tuple[int, int, bool]],
        addresses: Sequence[str],
        futures: Sequence[Any],
        lost: dict[int, str],
    ) -> list[tuple[int, int, bool]]:
        """Until every worker said whether it is ready for ``repeat``, one is lost, or the
        deadline (4 × the timeout) passes (each in ``lost``); returns what was heard
        meanwhile for later repeats, with ``early``'s own later entries."""
        count = len(addresses)
        timeout = self.spec.settings.timeout
        deadline = None if timeout is None else 4 * timeout
        seen = {index: ok for index, at, ok in early if at == repeat}
        early = [e for e in early if e[1] != repeat]
        waited_since = time.monotonic()
        last_check = 0.0
        while len(seen) < count:
            for index, at, ok in ready.get(batch=True):
                if at == repeat:
                    seen[index] = ok
                else:
                    early.append((index, at, ok))
            if len(seen) < count:
                time.sleep(_POLL_S / 5)
            if time.monotonic() - last_check > 0.25:
                last_check = time.monotonic()
                self._lost(addresses, futures, lost)
                if lost:
                    break
            if deadline is not None and time.monotonic() - waited_since > deadline:
                missing = sorted(set(range(count)) - set(seen))
                for index in missing:
                    lost[index] = f"worker w{index} was not ready within {deadline:g} s"
                break
        return early

    def _collect(
        self,
        addresses: Sequence[str],
        futures: Sequence[Any],
        reports: list[Report | None],
        lost: dict[int, str],
        errors: list[Notice],
    ) -> None:
        """Wait for every worker still alive; a lost one is recorded, never waited for."""
        pending = {i for i in range(len(futures)) if i not in lost}
        last_check = 0.0
        while pending:
            for index in list(pending):
                future = futures[index]
                if future.status == "finished":
                    reports[index] = future.result()
                    pending.discard(index)
            if time.monotonic() - last_check > 0.25:
                last_check = time.monotonic()
                self._lost(addresses, futures, lost)
                pending -= set(lost)
            if pending:
                time.sleep(_POLL_S)
        for _, reason in sorted(lost.items()):
            errors.append(
                Notice(
                    code=Code.WORKER_FAILED,
                    message=reason + ": no aggregate figure is made without every worker",
                    fix="check the worker's logs and memory, then run again",
                )
            )

    def _drift(self, address: str, before: int) -> int | None:
        try:
            after, _ = self._offset(address)
        except Exception:  # a worker gone after the run: drift unknown
            return None
        return after - before

    # -- cleanup ---------------------------------------------------------------------------
    def _clean(self, prefix: str, folders: Sequence[str], held: str) -> list[Leftover]:
        """Delete the held object (:func:`~storeprobe.execution.hold_prefix`), then whatever
        remains under the run prefix (a lost worker's objects: the prefix is fresh and the
        run's own), then the folders and the prefix; return what could not be removed."""
        settings = self.spec.settings
        left = delete_names(
            self.target, [held], streams=1, clock=self.clock, timeout=settings.timeout
        )
        leftovers = clear_prefix(
            self.target,
            prefix,
            left,
            streams=settings.prep_streams,
            clock=self.clock,
            timeout=settings.timeout,
        )
        return leftovers + remove_folders(
            self.target, [*(f"{prefix}/{folder}" for folder in folders), prefix]
        )


def _members(
    folders: Sequence[str],
    addresses: Sequence[str],
    offsets: Sequence[tuple[int, int]],
    drifts: Sequence[int | None],
    reports: Sequence[Report | None],
) -> tuple[Member, ...]:
    """Each worker as a :class:`~storeprobe.result.Member`: its name (its folder), address,
    clock offset and drift, and its own Result (None: lost)."""
    return tuple(
        Member(
            name=folders[index],
            address=addresses[index],
            offset_ns=offsets[index][0],
            uncertainty_ns=offsets[index][1],
            drift_ns=drifts[index],
            result=None if report is None else report.result,
        )
        for index, report in enumerate(reports)
    )
