"""A backup scenario's access to its target: every call one timed window, every write kept.

A backup method (:mod:`storeprobe.backup.method`) never times, cleans up or verifies
anything: it asks a :class:`Session` to list, check, write, read or delete, and the
session runs each call as one timed window on the target's client (``streams`` requests
in flight), keeps the window's record for the step's Result, and remembers every name
written (and every folder made) under the scenario's fresh run prefix so the scenario's
end deletes exactly those (:meth:`Session.close` returns what could not be deleted as
typed :class:`Leftover` values).

Untimed, outside the windows: making bodies (the bytes of the objects a window writes
are generated just before it), folders a write needs on a file system, evicting what
the backups wrote from the page cache before a restore (:meth:`Session.evict`), and the
space the target holds (:meth:`Session.usage`, hard links counted once, as ``du``).
"""

from __future__ import annotations

import posixpath
from collections.abc import Sequence

import attrs
from attrs import define, field, frozen

from storeprobe.backends import AsyncBackend, SyncBackend
from storeprobe.backup.objects import Blob, BlobPayloads, Read
from storeprobe.execution import bounded, delete_names, execute
from storeprobe.jobs import EXISTENCE
from storeprobe.planning import Plan
from storeprobe.request import Kind, Part, Request
from storeprobe.target import Target
from storeprobe.transfer import Clock, Run

__all__ = ["Leftover", "Session"]

Backend = AsyncBackend | SyncBackend


@frozen(kw_only=True)
class Leftover:
    """A name the scenario wrote and could not delete, and why."""

    name: str
    reason: str

    def __str__(self) -> str:
        return f"{self.name} ({self.reason})"


def _leftover(entry: str) -> Leftover:
    name, _, reason = entry.partition(" (")
    return Leftover(name=name, reason=reason.removesuffix(")") or "unknown")


@define
class Session:
    """The windows of one scenario on ``target`` under ``prefix`` (a fresh run prefix)."""

    target: Target
    prefix: str
    streams: int
    timeout: float | None
    clock: Clock
    #: the client that reads byte ranges (decided once, before the first step)
    reader: Backend
    #: folders under the prefix made when the run opened (the method's own)
    premade: frozenset[str] = frozenset()
    #: the windows of the step under way
    runs: list[Run] = field(factory=list)
    #: every name written and not deleted since, in order
    written: dict[str, int] = field(factory=dict)
    #: folders made for writes on a file system, in the order made
    folders: list[str] = field(factory=list)

    # -- the step ----------------------------------------------------------------------
    def take_runs(self) -> list[Run]:
        """The windows run since the last call (the step's), and start a new step."""
        runs, self.runs = self.runs, []
        return runs

    def _window(
        self, plan: Plan, payloads: BlobPayloads | None = None, *, existence: bool = False
    ) -> Run:
        backend: Backend = self.target.backend
        if any(r.kind is Kind.GET and r.start is not None for r in plan.requests):
            backend = self.reader
        bodies = [
            None if r.body is None or payloads is None else backend.body(payloads, r.body)
            for r in plan.requests
        ]
        run = execute(
            backend,
            plan,
            streams=self.streams,
            clock=self.clock,
            timeout=self.timeout,
            bodies=bodies,
            wrap=EXISTENCE if existence else None,
        )
        self.runs.append(run)
        return run

    # -- what a method asks -------------------------------------------------------------
    def key(self, *parts: str) -> str:
        """The full key of ``parts`` under the scenario's prefix."""
        return posixpath.join(self.prefix, *parts)

    def listing(self, folders: Sequence[str]) -> list[int]:
        """One LIST request per folder (a key under the prefix); the entries each shows
        (-1 where the folder does not exist)."""
        if not folders:
            return []
        plan = Plan(phases=(tuple(Request(kind=Kind.LIST, key=f) for f in folders),))
        return [outcome.size for outcome in self._window(plan, existence=True).outcomes]

    def head(self, keys: Sequence[str]) -> list[int]:
        """One HEAD per key; each object's size in bytes, or -1 where it does not exist."""
        if not keys:
            return []
        plan = Plan(phases=(tuple(Request(kind=Kind.HEAD, key=k) for k in keys),))
        return [outcome.size for outcome in self._window(plan, existence=True).outcomes]

    def put(self, blobs: Sequence[Blob]) -> None:
        """One PUT per blob, ≤ ``streams`` at once (the folders a file system needs are
        made first, untimed)."""
        if not blobs:
            return
        self._make_folders(blob.key for blob in blobs)
        plan = Plan(
            phases=(
                tuple(
                    Request(kind=Kind.PUT, key=blob.key, body=Part(index, 0, blob.size))
                    for index, blob in enumerate(blobs)
                ),
            )
        )
        for blob in blobs:
            self.written[blob.key] = blob.size
        self._window(plan, BlobPayloads(blobs))

    def get(self, reads: Sequence[Read]) -> list[bytes]:
        """One GET per read (ranged where it says), ≤ ``streams`` at once; the bytes."""
        if not reads:
            return []
        plan = Plan(
            phases=(
                tuple(
                    Request(kind=Kind.GET, key=read.key, start=read.start, stop=read.stop)
                    for read in reads
                ),
            )
        )
        run = self._window(plan)
        bodies = [bytes(outcome.data or b"") for outcome in run.outcomes]
        # the step keeps the window's record, not the bytes it read (a restore's reads
        # would otherwise all stay in memory until the step ends)
        self.runs[-1] = attrs.evolve(
            run, outcomes=tuple(outcome._replace(data=None) for outcome in run.outcomes)
        )
        return bodies

    def delete(self, keys: Sequence[str]) -> None:
        """One DELETE per key, ≤ ``streams`` at once."""
        if not keys:
            return
        plan = Plan(phases=(tuple(Request(kind=Kind.DELETE, key=k) for k in keys),))
        self._window(plan)
        for key in keys:
            self.written.pop(key, None)

    # -- untimed housekeeping -----------------------------------------------------------
    def _make_folders(self, keys: object) -> None:
        backend = self.target.backend
        made = {*self.folders, *(self.key(f) for f in self.premade)}
        for key in keys:  # type: ignore[attr-defined]
            parents: list[str] = []
            folder = posixpath.dirname(key)
            while folder != self.prefix and folder.startswith(self.prefix + "/"):
                if folder in made:
                    break
                parents.append(folder)
                folder = posixpath.dirname(folder)
            for parent in reversed(parents):
                bounded(lambda p=parent: backend.make_prefix(p), self.timeout)  # type: ignore[misc]
                made.add(parent)
                self.folders.append(parent)

    def evict(self) -> None:
        """Drop what the scenario wrote from the caches the client can reach (the page
        cache for ``file://``), so a restore reads the storage (untimed)."""
        self.target.backend.after_upload(list(self.written))

    def cache_suspect(self) -> str | None:
        """Why a restore may still be served from a cache here, or None."""
        return self.target.backend.cache_suspect()

    def usage(self) -> tuple[int, int]:
        """(objects, bytes) the target holds under the prefix (untimed): objects by name,
        bytes as ``du -b`` counts them (a hard-linked file once)."""
        fs = self.target.fs
        fs.invalidate_cache()
        found: list[tuple[int, int]] = []

        def walk() -> None:
            entries = fs.find(self.prefix, detail=True)
            seen: set[object] = set()
            total = 0
            for entry in entries.values():
                inode = entry.get("ino")
                if inode is not None and int(entry.get("nlink") or 1) > 1:
                    if inode in seen:
                        continue
                    seen.add(inode)
                total += int(entry.get("size") or 0)
            found.append((len(entries), total))

        bounded(walk, self.timeout)
        return found[0]

    def close(self, folders: Sequence[str]) -> list[Leftover]:
        """Delete every name still written, then the folders made (deepest first) and
        ``folders`` and the prefix itself; return what could not be deleted (untimed)."""
        left = [
            _leftover(entry)
            for entry in delete_names(
                self.target,
                list(self.written),
                streams=self.streams,
                clock=self.clock,
                timeout=self.timeout,
            )
        ]
        backend = self.target.backend
        made = {*self.folders, *(self.key(f) for f in folders)}  # deepest first
        for folder in [*sorted(made, key=lambda f: (-f.count("/"), f)), self.prefix]:
            try:
                backend.remove_prefix(folder)
            except FileNotFoundError:
                pass
            except Exception as exc:
                left.append(Leftover(name=folder, reason=self.target.describe_error(exc)))
        return left
