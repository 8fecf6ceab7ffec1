"""Duplicacy's chunk maker: buzhash content-defined chunks of one stream, cut as it flows.

A replay of ``ChunkMaker`` in Duplicacy 3.2.4 (``src/duplicacy_chunkmaker.go``,
gilbertchen/duplicacy at 065ae50), rule by rule:

- the rolling hash is a buzhash over a window of exactly ``minimum`` bytes: for the
  window ``[e - minimum, e)`` it is the XOR of ``rotl(T[b_j], e - 1 - j)`` over its
  bytes (``buzhashSum`` for the first window of a chunk, ``buzhashUpdate`` as it
  slides); ``T`` is 256 64-bit words drawn from SHA-256 of the storage's chunk seed
  (``CreateFileChunkMaker``: ``"duplicacy"``, ``DEFAULT_KEY``, on an unencrypted
  storage);
- a chunk that starts at ``s`` ends at the first ``e ≥ s + minimum`` whose window hash
  has its low ``log2(average)`` bits zero (``hashSum & hashMask == 0``, so ``average``
  must be a power of two), or at ``s + maximum`` if none comes first; the end of the
  stream ends the last chunk, whatever its length;
- the stream is every file's bytes one after the other (``AddData`` is called file after
  file on one maker), so chunks cross file boundaries.

The window never reaches back before its chunk's start (``e ≥ s + minimum``), so the
hash at ``e`` depends on the stream alone and is computed for every position at once with
numpy, one block at a time: with ``U_j = rotr(T[b_j], j mod 64)`` and ``Q`` the prefix
XOR of ``U``, the window hash at ``e`` is ``rotl(Q[e] ^ Q[e - minimum], (e - 1) mod 64)``.
Memory: about 8 bytes per byte of ``minimum`` plus the block (8 MiB for Duplicacy's
1 MiB minimum), whatever the stream's length. Sizes are in bytes.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Iterable, Iterator

import numpy as np
import numpy.typing as npt

__all__ = ["BLOCK", "Cutter"]

#: bytes the cutter hashes per numpy pass (input blocks are gathered up to this)
BLOCK = 1 << 20

_U64 = npt.NDArray[np.uint64]
_SIXTY_THREE = np.uint64(63)
_SIXTY_FOUR = np.uint64(64)


def _table(seed: bytes) -> _U64:
    """``randomTable`` of ``CreateFileChunkMaker``: 64 rounds of SHA-256, 4 words each."""
    words: list[int] = []
    digest = hashlib.sha256(seed).digest()
    for _ in range(64):
        words.extend(struct.unpack("<4Q", digest))
        digest = hashlib.sha256(digest).digest()
    return np.array(words, dtype=np.uint64)


def _rotate_left(values: _U64, amounts: _U64) -> _U64:
    amounts = amounts & _SIXTY_THREE
    back = (_SIXTY_FOUR - amounts) & _SIXTY_THREE
    return (values << amounts) | (values >> back)


class Cutter:
    """The chunk ends (stream offsets, exclusive) of a stream fed block by block."""

    def __init__(
        self, average: int, minimum: int, maximum: int, seed: bytes = b"duplicacy"
    ) -> None:
        if average <= 0 or average & (average - 1):
            raise ValueError(f"average {average} is not a power of two")
        if not 0 < minimum <= maximum:
            raise ValueError(f"minimum {minimum} and maximum {maximum} do not make a range")
        self.mask = np.uint64(average - 1)
        self.minimum = minimum
        self.maximum = maximum
        table = _table(seed)
        self._table = table
        turns = np.arange(64, dtype=np.uint64)
        #: rotl(T[b], r) at [r * 256 + b]: U_j is one lookup at ((-j) mod 64) * 256 + b_j
        self._turned = _rotate_left(table[np.newaxis, :], turns[:, np.newaxis]).ravel()
        #: rotl(x, s) & mask == 0 exactly when x & rotr(mask, s) == 0: the masks by s
        self._masks = _rotate_left(np.full(64, self.mask, dtype=np.uint64), -turns & _SIXTY_THREE)
        #: Q[position - minimum … position] (Q[k] = 0 for k ≤ 0)
        self._history: _U64 = np.zeros(minimum + 1, dtype=np.uint64)
        self._position = 0
        self._start = 0
        self._candidates: list[int] = []

    def _hash_block(self, data: bytes) -> None:
        count = len(data)
        begin = self._position
        symbols = np.frombuffer(data, dtype=np.uint8)
        phase = np.arange(begin, begin + count, dtype=np.int64) & 63  # j mod 64 (e - 1)
        spread = self._turned[(((-phase) & 63) << 8) | symbols]
        prefix = np.bitwise_xor.accumulate(spread)
        prefix ^= self._history[-1]
        joined = np.concatenate((self._history, prefix))
        window = self.minimum
        # positions e = begin + 1 … begin + count: Q[e] = joined[window + 1:], Q[e - window]
        # = joined[1 : count + 1]; the hash is rotl(Q[e] ^ Q[e - window], e - 1), tested
        # against the mask without rotating it
        mixed = joined[window + 1 :] ^ joined[1 : count + 1]
        hits = np.flatnonzero((mixed & self._masks[phase]) == 0) + (begin + 1)
        self._candidates.extend(int(e) for e in hits if e >= window)
        self._history = joined[-(window + 1) :].copy()
        self._position = begin + count

    def _ends(self, final: bool) -> Iterator[int]:
        known = self._position
        candidates = self._candidates
        taken = 0
        while True:
            start = self._start
            while taken < len(candidates) and candidates[taken] < start + self.minimum:
                taken += 1
            limit = start + self.maximum
            if taken < len(candidates) and candidates[taken] <= limit:
                end = candidates[taken]
            elif limit <= known:
                end = limit
            else:
                break
            self._start = end
            yield end
        del candidates[:taken]
        if final and self._start < known:
            end, self._start = known, known
            yield end

    def feed(self, data: bytes) -> list[int]:
        """Hash ``data`` (the next bytes of the stream); the chunk ends now decided."""
        if data:
            self._hash_block(data)
        return list(self._ends(final=False))

    def finish(self) -> list[int]:
        """The stream ended: the ends still open (the last chunk's end)."""
        return list(self._ends(final=True))

    def cut(self, blocks: Iterable[bytes]) -> Iterator[int]:
        """Every chunk end of the stream made of ``blocks``, in order."""
        for block in blocks:
            yield from self.feed(block)
        yield from self.finish()
