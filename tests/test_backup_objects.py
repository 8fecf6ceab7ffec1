"""A stored object's segments (pieces of dataset files, bytes held, bytes spooled to a
file) serve the same bytes, whatever range a body asks for."""

from __future__ import annotations

import gzip
import os
import tempfile
from collections.abc import Callable
from contextlib import ExitStack

import pytest

from storeprobe.backup import rdiff_backup
from storeprobe.backup.objects import Blob, BlobPayloads, Spooled
from storeprobe.dataset import Image
from storeprobe.manifest import Piece

IMAGE = Image.create("256KiB", block_size="64KiB", seed=4)
FILE = IMAGE.files[0]
HELD = bytes(range(256)) * 300  # 76 800 bytes
SPOOLED = os.urandom(100_000)


def test_spooled_bytes_read_as_held_bytes_at_every_boundary() -> None:
    expected = IMAGE.payload(FILE, 1000, 41_000) + HELD + SPOOLED
    with tempfile.TemporaryFile() as spool:
        spool.write(SPOOLED)
        spool.flush()
        segments = (
            Piece(IMAGE, FILE, 1000, 40_000),
            HELD,
            Spooled(fd=spool.fileno(), length=len(SPOOLED)),
        )
        blob = Blob(key="k", segments=segments)
        assert blob.size == len(expected)
        payloads = BlobPayloads([blob])
        for start, stop in [(0, None), (39_990, 40_010), (116_790, 116_810), (116_800, None)]:
            end = len(expected) if stop is None else stop
            assert payloads.payload_bytes(0, start, stop) == expected[start:end]
            assert payloads.payload(0, start, stop) == expected[start:end]
            out = bytearray(end - start)
            payloads.fill(0, start, out)
            assert out == expected[start:end]


def test_a_spooled_file_shorter_than_said_is_an_error() -> None:
    with tempfile.TemporaryFile() as spool:
        spool.write(b"abc")
        spool.flush()
        short = Spooled(fd=spool.fileno(), length=10)
        with pytest.raises(OSError, match="ended at 3 of 10 bytes"):
            short.read(0, 10)


def test_rdiff_backup_spools_a_large_files_gzip_and_stores_the_same_bytes() -> None:
    """A delta or snapshot of a file above the held size is written to a temporary file,
    read back part by part, and is the same gzip stream (level 9, no name, mtime 0) as
    one held in memory."""

    def write(out: Callable[[bytes | memoryview], object]) -> None:
        for piece in (HELD, SPOOLED, HELD):
            out(piece)

    with ExitStack() as spools:
        held = rdiff_backup._gzipped("a.diff.gz", write, 1, spools)
        spooled = rdiff_backup._gzipped("a.diff.gz", write, rdiff_backup._HELD + 1, spools)
        assert held.segments != spooled.segments
        (segment,) = spooled.segments
        assert isinstance(segment, Spooled)
        data = BlobPayloads([spooled]).payload_bytes(0)
        assert data == BlobPayloads([held]).payload_bytes(0)
        assert gzip.decompress(data) == HELD + SPOOLED + HELD
