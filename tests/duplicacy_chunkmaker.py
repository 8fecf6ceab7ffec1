"""A line-by-line port of Duplicacy 3.2.4's ``ChunkMaker.AddData`` (the variable-size
branch of ``src/duplicacy_chunkmaker.go``, gilbertchen/duplicacy at 065ae50), kept as
close to the Go as Python allows, byte by byte: the reference the numpy cutter of
:mod:`storeprobe.backup._buzhash` is proven against (tests/test_backup_duplicacy.py).
Slow (pure Python per byte): for streams of a few hundred KiB."""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Callable

_MASK = (1 << 64) - 1


def _rotate_left(value: int, bits: int) -> int:
    bits &= 63
    return ((value << bits) | (value >> (64 - bits))) & _MASK if bits else value


class GoChunkMaker:
    """``CreateFileChunkMaker`` with explicit sizes; ``add_data`` is ``AddData``."""

    def __init__(self, average: int, minimum: int, maximum: int, seed: bytes) -> None:
        self.hash_mask = average - 1
        self.maximum_chunk_size = maximum
        self.minimum_chunk_size = minimum
        self.buffer_capacity = 2 * minimum
        random_data = hashlib.sha256(seed).digest()
        self.random_table = [0] * 256
        for i in range(64):
            for j in range(4):
                self.random_table[4 * i + j] = struct.unpack("<Q", random_data[8 * j : 8 * j + 8])[
                    0
                ]
            random_data = hashlib.sha256(random_data).digest()
        self.buffer = bytearray(2 * minimum)
        self.buffer_start = 0
        self.buffer_size = 0
        self.hash_sum = 0
        self.minimum_reached = False
        self.chunk = bytearray()

    def start_new_chunk(self) -> None:
        self.hash_sum = 0
        self.minimum_reached = False
        self.chunk = bytearray()

    def buzhash_sum(self, value: int, data: bytes | bytearray) -> int:
        for byte in data:
            value = _rotate_left(value, 1) ^ self.random_table[byte]
        return value

    def buzhash_update(self, value: int, out: int, into: int, length: int) -> int:
        return (
            _rotate_left(value, 1)
            ^ _rotate_left(self.random_table[out], length)
            ^ self.random_table[into]
        )

    def _fill(self, count: int) -> None:
        if self.buffer_start + count < self.buffer_capacity:
            self.chunk += self.buffer[self.buffer_start : self.buffer_start + count]
            self.buffer_start += count
            self.buffer_size -= count
        else:
            self.chunk += self.buffer[self.buffer_start :]
            self.chunk += self.buffer[: count - (self.buffer_capacity - self.buffer_start)]
            self.buffer_start = count - (self.buffer_capacity - self.buffer_start)
            self.buffer_size -= count

    def add_data(self, reader: bytes | None, send_chunk: Callable[[bytes], None]) -> None:
        """One file's bytes (``reader``), or None to flush the last chunk."""
        position = 0
        is_eof = False
        while True:
            while self.buffer_size < self.buffer_capacity and not is_eof and reader is not None:
                start = self.buffer_start + self.buffer_size
                count = self.buffer_capacity - start
                if start >= self.buffer_capacity:
                    start -= self.buffer_capacity
                    count = self.buffer_start - start
                data = reader[position : position + count]
                position += len(data)
                self.buffer[start : start + len(data)] = data
                self.buffer_size += len(data)
                if position >= len(reader):  # io.EOF
                    is_eof = True
                    break
            if self.buffer_size < self.minimum_chunk_size:
                if reader is None:
                    self._fill(self.buffer_size)
                    if len(self.chunk) > 0:
                        send_chunk(bytes(self.chunk))
                    return
                if is_eof:
                    return
                continue
            if not self.minimum_reached:
                count = self.minimum_chunk_size
                if self.buffer_start + count < self.buffer_capacity:
                    self.hash_sum = self.buzhash_sum(
                        0, self.buffer[self.buffer_start : self.buffer_start + count]
                    )
                else:
                    self.hash_sum = self.buzhash_sum(0, self.buffer[self.buffer_start :])
                    self.hash_sum = self.buzhash_sum(
                        self.hash_sum,
                        self.buffer[: count - (self.buffer_capacity - self.buffer_start)],
                    )
                if (self.hash_sum & self.hash_mask) == 0:
                    self._fill(count)
                    send_chunk(bytes(self.chunk))
                    self.start_new_chunk()
                    continue
                self.minimum_reached = True
            count = self.buffer_size - self.minimum_chunk_size
            is_eoc = False
            max_size = self.maximum_chunk_size - len(self.chunk)
            for i in range(count):
                out = self.buffer_start + i
                if out >= self.buffer_capacity:
                    out -= self.buffer_capacity
                into = self.buffer_start + i + self.minimum_chunk_size
                if into >= self.buffer_capacity:
                    into -= self.buffer_capacity
                self.hash_sum = self.buzhash_update(
                    self.hash_sum, self.buffer[out], self.buffer[into], self.minimum_chunk_size
                )
                if (
                    self.hash_sum & self.hash_mask
                ) == 0 or i == max_size - self.minimum_chunk_size - 1:
                    count = i + 1 + self.minimum_chunk_size
                    is_eoc = True
                    break
            self._fill(count)
            if is_eoc:
                send_chunk(bytes(self.chunk))
                self.start_new_chunk()
            elif reader is None:
                self._fill(self.minimum_chunk_size)
                send_chunk(bytes(self.chunk))
                self.start_new_chunk()
                return
            if is_eof:
                return
