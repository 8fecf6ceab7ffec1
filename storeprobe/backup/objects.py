"""What a backup method stores: objects made of pieces of dataset files and literal bytes.

A real backup tool rarely stores a file as one object: restic packs many chunks of many
files into one pack file behind a header, Duplicacy cuts one stream of all files into
chunks that cross file boundaries, duplicity writes tar volumes with headers between
the files and binary deltas. A :class:`Blob` is one such object: a key and a sequence of
segments, each either a :class:`~storeprobe.manifest.Piece` (bytes of one file of one
dataset version, regenerated on demand), literal ``bytes`` (headers, indexes, deltas,
manifests the method made) or :class:`Spooled` bytes (what the method made, too large to
hold: a temporary file on the local disk, read part by part). :class:`BlobPayloads`
serves their bytes to a backend, so a body is made only when its window is about to run.
Sizes are in bytes.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from itertools import accumulate

from attrs import field, frozen

from storeprobe.manifest import Piece

__all__ = ["Blob", "BlobPayloads", "Read", "Segment", "Spooled"]


@frozen(eq=False)
class Spooled:
    """Bytes ``[offset, offset + length)`` of an open temporary file (``fd``) that the
    method wrote (a delta of a large file), read with ``pread`` when a body is made, so
    memory holds the parts in flight, not the object. The method closes the file once
    the object is written."""

    fd: int
    length: int
    offset: int = 0

    def part(self, start: int, length: int) -> Spooled:
        """Bytes ``[start, start + length)`` of these."""
        return Spooled(fd=self.fd, length=length, offset=self.offset + start)

    def __len__(self) -> int:
        return self.length

    def read_into(self, offset: int, out: memoryview) -> None:
        """Bytes ``[offset, offset + len(out))`` into ``out``."""
        done = 0
        while done < len(out):
            got = os.preadv(self.fd, [out[done:]], self.offset + offset + done)
            if got == 0:
                raise OSError(f"a spooled file ended at {offset + done} of {self.length} bytes")
            done += got

    def read(self, start: int, stop: int) -> bytes:
        """Bytes ``[start, stop)``."""
        out = bytearray(stop - start)
        self.read_into(start, memoryview(out))
        return bytes(out)


#: one segment of a stored object: bytes of a dataset file, or bytes the method made
#: (held, or spooled to a file)
Segment = Piece | bytes | Spooled


def _segments(value: Sequence[Segment]) -> tuple[Segment, ...]:
    return tuple(value)


def _length(segment: Segment) -> int:
    return segment.length if isinstance(segment, Piece) else len(segment)


@frozen(kw_only=True)
class Blob:
    """One object a backup writes: ``key`` and its bytes, segment after segment."""

    key: str
    segments: tuple[Segment, ...] = field(converter=_segments)

    @property
    def size(self) -> int:
        """The object's size in bytes."""
        return sum(_length(segment) for segment in self.segments)

    @classmethod
    def of_bytes(cls, key: str, data: bytes) -> Blob:
        """An object whose bytes the method made (a manifest, an index, a lock)."""
        return cls(key=key, segments=(data,))


@frozen(kw_only=True)
class Read:
    """One read a restore makes: bytes ``[start, stop)`` of ``key`` (whole when None)."""

    key: str
    start: int | None = None
    stop: int | None = None


class BlobPayloads:
    """A :class:`~storeprobe.request.Payloads` over blobs: object ``i`` is ``blobs[i]``."""

    def __init__(self, blobs: Sequence[Blob]) -> None:
        self.blobs = list(blobs)
        self._ends = [list(accumulate(_length(s) for s in blob.segments)) for blob in self.blobs]

    def fill(self, index: int, start: int, out: memoryview | bytearray) -> None:
        """Bytes ``[start, start + len(out))`` of object ``index`` written into ``out`` in
        place, segment by segment (a dataset's pieces generated straight into it)."""
        blob, ends = self.blobs[index], self._ends[index]
        view = memoryview(out).cast("B")
        stop = min(start + len(view), ends[-1] if ends else 0)
        begin = 0
        for segment, end in zip(blob.segments, ends, strict=True):
            low, high = max(start, begin), min(stop, end)
            if low < high:
                target = view[low - start : high - start]
                if isinstance(segment, Piece):
                    offset = segment.offset + low - begin
                    segment.dataset.fill(segment.file, offset, target)
                elif isinstance(segment, Spooled):
                    segment.read_into(low - begin, target)
                else:
                    target[:] = segment[low - begin : high - begin]
            begin = end
            if begin >= stop:
                break

    def payload(self, index: int, start: int = 0, stop: int | None = None) -> bytearray:
        """Bytes ``[start, stop)`` of object ``index``: one buffer, filled in place."""
        ends = self._ends[index]
        stop = (ends[-1] if ends else 0) if stop is None else stop
        out = bytearray(max(stop - start, 0))
        self.fill(index, start, out)
        return out

    def payload_bytes(self, index: int, start: int = 0, stop: int | None = None) -> bytes:
        blob, ends = self.blobs[index], self._ends[index]
        stop = (ends[-1] if ends else 0) if stop is None else stop
        parts: list[bytes] = []
        begin = 0
        for segment, end in zip(blob.segments, ends, strict=True):
            low, high = max(start, begin), min(stop, end)
            if low < high:
                if isinstance(segment, Piece):
                    offset = segment.offset + low - begin
                    parts.append(segment.dataset.payload(segment.file, offset, offset + high - low))
                elif isinstance(segment, Spooled):
                    parts.append(segment.read(low - begin, high - begin))
                else:
                    parts.append(segment[low - begin : high - begin])
            begin = end
            if begin >= stop:
                break
        return b"".join(parts)
