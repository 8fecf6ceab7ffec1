"""Planning: how a workload is cut into requests, decided once, then frozen.

:func:`choose` decides a :class:`Layout` from the backend's capabilities, the
operation, the workload and the stream count, before any I/O: one request per object,
or one object split into parts or byte ranges, staged through a local file or not (an
object of at least ``stage_above`` bytes probed alone is staged at any stream count: see
:mod:`storeprobe.staging`), and the notices that say where the layout gives less than
was asked (fewer requests in flight, an upload that cannot be split). Nothing changes it
afterwards.

The ``*_plan`` functions turn a layout and the names of one repeat into a
:class:`Plan`: an immutable sequence of phases, each a tuple of typed requests
(:mod:`storeprobe.request`) that may run concurrently.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

from attrs import frozen

from storeprobe.backends.base import Capabilities
from storeprobe.errors import ConfigurationError
from storeprobe.notices import Code, Notice
from storeprobe.request import Kind, Part, Request
from storeprobe.strategy import Shape, Staged, Strategy
from storeprobe.units import MiB, format_size
from storeprobe.workload import Workload

__all__ = [
    "MAX_PARTS",
    "SEQUENTIAL_PART",
    "Layout",
    "Plan",
    "bulk_delete_plan",
    "choose",
    "delete_plan",
    "download_plan",
    "head_plan",
    "upload_plan",
]

Operation = Literal["upload", "download"]
#: most parts one object is split into (S3's limit)
MAX_PARTS = 10_000
#: largest default part of an object split at one stream (too big for one request, or
#: staged for a client that holds one request's body in memory): one part is in flight
SEQUENTIAL_PART = 64 * MiB


@frozen(kw_only=True)
class Plan:
    """Phases of requests for one timed window, run one phase after the other."""

    phases: tuple[tuple[Request, ...], ...]

    @property
    def requests(self) -> tuple[Request, ...]:
        """Every request, phase after phase."""
        return tuple(request for phase in self.phases for request in phase)

    @property
    def expected_bytes(self) -> int:
        """Payload bytes the plan moves, from its requests' bodies and ranges."""
        return sum(r.expected or 0 for r in self.requests if r.kind in _MOVES)


_MOVES = frozenset({Kind.PUT, Kind.PUT_PART, Kind.GET})


@frozen(kw_only=True)
class Layout:
    """How one probe cuts its workload into requests (see the module docstring)."""

    operation: Operation
    #: one object split into parts (upload) or byte ranges (download)
    split: bool
    #: bytes per part or range (the object's size when not split)
    part_size: int
    #: most requests the layout can keep in flight
    effective_streams: int
    #: the object goes through a local staging file (see storeprobe.staging): split
    #: into parts or ranges that are views of it, or sent from it / landed in it whole
    staged: bool
    #: the client's capabilities the layout was decided from
    capabilities: Capabilities
    #: how the requests are cut, as the Result reports it
    strategy: Strategy
    notices: tuple[Notice, ...] = ()

    @property
    def parts(self) -> int:
        """Parts (or ranges) of one split object; 1 when not split."""
        return 1 if not self.split else -(-self._size // self.part_size)

    _size: int = 0


def choose(
    capabilities: Capabilities,
    client: str,
    operation: Operation,
    workload: Workload,
    streams: int,
    *,
    part_size: int | None = None,
    stage_above: int | None = None,
) -> Layout:
    """The layout for ``operation`` of ``workload`` at ``streams`` on this client: whole
    objects (several, or one at one stream), one object the client cannot split (one
    request, a ``cannot-split`` notice), or one object in parts or ranges."""
    caps = capabilities
    size = workload.largest
    too_big = caps.max_single_put is not None and size > caps.max_single_put
    if too_big and workload.count > 1:
        raise ConfigurationError(
            f"objects over {format_size(caps.max_single_put or 0)} need a multipart "
            f"upload on {client}: probe them one at a time (count=1)"
        )
    stage = workload.count == 1 and stage_above is not None and size >= stage_above
    # one request that streams its body from, or lands its bytes in, a staging file
    whole = stage and (caps.sends_from_file if operation == "upload" else caps.lands_in_file)
    # a client that holds one request's body in memory moves a staged object in parts
    # (or ranges), one at a time
    can_split = caps.splits_uploads if operation == "upload" else caps.reads_ranges
    sequential = stage and streams == 1 and not whole and can_split
    if workload.count > 1 or (streams == 1 and not too_big and not sequential):
        return _objects_layout(caps, client, operation, workload, streams, whole=whole)
    if not can_split and not too_big:
        return _unsplit_layout(caps, client, operation, size, whole=whole)
    return _parts_layout(
        caps,
        client,
        operation,
        size,
        streams,
        part_size=part_size,
        stage_above=stage_above,
        sequential=sequential,
    )


def _objects_layout(
    caps: Capabilities,
    client: str,
    operation: Operation,
    workload: Workload,
    streams: int,
    *,
    whole: bool,
) -> Layout:
    """Whole objects, at most ``streams`` at once (a ``few-requests`` notice when there are
    fewer objects); one staged object ``whole`` is one request through its file."""
    effective = min(streams, workload.count)
    notices: tuple[Notice, ...] = ()
    if effective < streams:
        notices = (
            Notice(
                code=Code.FEW_REQUESTS,
                message=f"only {workload.count} objects: at most {effective} requests in flight",
                fix="use at least as many objects as streams",
            ),
        )
    strategy = Strategy(shape=Shape.OBJECTS, in_flight=effective, client=client)
    if whole:
        strategy = Strategy(shape=Shape.ONE_REQUEST, staged=Staged.WHOLE, client=client)
    return Layout(
        split=False,
        part_size=workload.largest,
        effective_streams=effective,
        staged=whole,
        strategy=strategy,
        notices=notices,
        operation=operation,
        capabilities=caps,
    )


def _unsplit_layout(
    caps: Capabilities, client: str, operation: Operation, size: int, *, whole: bool
) -> Layout:
    """One object the client cannot split, sent as one request: single-streamed whatever
    ``streams`` says, with a ``cannot-split`` notice."""
    note = Notice(
        code=Code.CANNOT_SPLIT,
        message=f"the {client} backend cannot split one object's {operation}: it was "
        f"sent as one request, so this {operation} is single-streamed whatever "
        "'streams' says",
        fix="compare it with single-stream figures only",
    )
    return Layout(
        split=False,
        part_size=size,
        effective_streams=1,
        staged=whole,
        strategy=Strategy(
            shape=Shape.ONE_REQUEST,
            unsplit=True,
            operation=operation,
            staged=Staged.WHOLE if whole else None,
            client=client,
        ),
        notices=(note,),
        operation=operation,
        capabilities=caps,
    )


def _parts_layout(
    caps: Capabilities,
    client: str,
    operation: Operation,
    size: int,
    streams: int,
    *,
    part_size: int | None,
    stage_above: int | None,
    sequential: bool,
) -> Layout:
    """One object in parts (or ranges) of ``part_size`` (default: about a quarter of the
    object per stream, whole MiB, at most ``SEQUENTIAL_PART`` at one stream, within the
    client's minimum and ``MAX_PARTS``), at most ``streams`` at once; staged through a
    file when it is at least ``stage_above``, one part in memory when ``sequential``."""
    if part_size is None:
        part_size = math.ceil(size / (4 * streams) / MiB) * MiB
        if streams == 1:  # one part in flight: keep it small
            part_size = min(part_size, SEQUENTIAL_PART)
        part_size = max(caps.min_part_size, part_size, math.ceil(size / MAX_PARTS))
    elif part_size < caps.min_part_size:
        raise ConfigurationError(
            f"part_size {format_size(part_size)} is below the minimum of "
            f"{format_size(caps.min_part_size)} for {client}: use at least that"
        )
    parts = math.ceil(size / part_size)
    effective = min(streams, parts)
    notices: tuple[Notice, ...] = ()  # none unless the object has fewer parts than streams
    if effective < streams:
        notices = (
            Notice(
                code=Code.FEW_REQUESTS,
                message=f"one object of {format_size(size)} splits into only {parts} part(s) "
                f"of {format_size(part_size)}: at most {effective} requests in flight",
                fix="use a smaller part_size or a larger object",
            ),
        )
    staged = parts > 1 and stage_above is not None and size >= stage_above
    strategy = Strategy(
        shape=Shape.PARTS,
        parts=parts,
        part_size=part_size,
        in_flight=effective,
        staged=Staged.ONE_IN_MEMORY if sequential else Staged.PARTS if staged else None,
        operation=operation,
        client=client,
    )
    return Layout(
        split=parts > 1,
        part_size=part_size,
        effective_streams=effective,
        staged=staged,
        strategy=strategy,
        notices=notices,
        size=size,
        operation=operation,
        capabilities=caps,
    )


def _bounds(layout: Layout, size: int) -> list[tuple[int, int]]:
    return [
        (start, min(start + layout.part_size, size)) for start in range(0, size, layout.part_size)
    ]


def upload_plan(layout: Layout, workload: Workload, names: Sequence[str]) -> Plan:
    """Write each name (object ``i`` of ``workload`` to ``names[i]``), as the layout says."""
    if not layout.split:
        return Plan(
            phases=(
                tuple(
                    Request(kind=Kind.PUT, key=name, body=Part(index, 0, workload.size_of(index)))
                    for index, name in enumerate(names)
                ),
            )
        )
    size = workload.size_of(0)
    key = names[0]
    if layout.capabilities.client_multipart:
        whole = Request(
            kind=Kind.PUT,
            key=key,
            body=Part(0, 0, size),
            part_size=layout.part_size,
            concurrency=layout.effective_streams,
        )
        return Plan(phases=((whole,),))
    parts = tuple(
        Request(
            kind=Kind.PUT_PART,
            key=key,
            start=start,
            stop=stop,
            body=Part(0, start, stop),
            part_number=number,
        )
        for number, (start, stop) in enumerate(_bounds(layout, size), start=1)
    )
    phases: list[tuple[Request, ...]] = []
    if layout.capabilities.multipart_create:
        phases.append((Request(kind=Kind.CREATE_MULTIPART, key=key, start=0, stop=size),))
    phases.append(parts)
    if layout.capabilities.multipart_complete:
        phases.append((Request(kind=Kind.COMPLETE_MULTIPART, key=key),))
    return Plan(phases=tuple(phases))


def download_plan(layout: Layout, workload: Workload, names: Sequence[str]) -> Plan:
    """Read each name whole, or the one object's byte ranges, as the layout says."""
    if not layout.split:
        return Plan(phases=(tuple(Request(kind=Kind.GET, key=name) for name in names),))
    return Plan(
        phases=(
            tuple(
                Request(kind=Kind.GET, key=names[0], start=start, stop=stop)
                for start, stop in _bounds(layout, workload.size_of(0))
            ),
        )
    )


def head_plan(names: Sequence[str]) -> Plan:
    """Ask the storage for each name's metadata (one phase)."""
    return Plan(phases=(tuple(Request(kind=Kind.HEAD, key=name) for name in names),))


def delete_plan(names: Sequence[str]) -> Plan:
    """Delete each name on its own (never a recursive or listing delete)."""
    return Plan(phases=(tuple(Request(kind=Kind.DELETE, key=name) for name in names),))


def bulk_delete_plan(names: Sequence[str], per_request: int) -> Plan:
    """Delete ``names`` in the fewest requests of at most ``per_request`` names each (S3's
    DeleteObjects): ceil(n / ``per_request``) of them, in order, their sizes differing by
    at most one (1001 names: 501 and 500, not 1000 and 1), all in one phase, so the
    engine sends as many at once as its in-flight limit allows and the phase ends with
    the largest. Never a recursive or listing delete."""
    if per_request < 1:
        raise ValueError(f"a bulk delete carries at least 1 name, not {per_request}")
    requests = -(-len(names) // per_request)
    size, longer = divmod(len(names), max(requests, 1))
    bounds = [at * size + min(at, longer) for at in range(requests + 1)]
    batches = [tuple(names[bounds[at] : bounds[at + 1]]) for at in range(requests)]
    return Plan(
        phases=(tuple(Request(kind=Kind.DELETE, key=batch[0], keys=batch) for batch in batches),)
    )
