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
Memory: buffers made once per cutter and reused for every pass, about 24 bytes per byte
of ``minimum`` plus 42 per byte of a pass (26 MiB and 10.5 MiB for Duplicacy's 1 MiB
minimum), whatever the stream's length (arrays made per block fragmented the heap: a
process's resident set grew with the stream). Sizes are in bytes.
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
#: bytes hashed per pass over the reused buffers (a block is hashed in passes of these)
_PASS = 1 << 18

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
        # Q on a tape: Q[position - k] at tape[at - 1 - k] for k = 0 … minimum (Q[k] = 0
        # for k ≤ 0); a pass appends its Q after them, and once the tape is full its last
        # minimum + 1 values move to its front (no overlap: the tape is long enough). All
        # buffers are made once and reused: no array is allocated per pass
        span = minimum + 1
        self._tape: _U64 = np.zeros(3 * span + _PASS, dtype=np.uint64)
        self._at = span
        self._steps = np.arange(_PASS, dtype=np.int64)
        self._phase = np.empty(_PASS, dtype=np.int64)
        self._index = np.empty(_PASS, dtype=np.int64)
        self._spread: _U64 = np.empty(_PASS, dtype=np.uint64)
        self._mixed: _U64 = np.empty(_PASS, dtype=np.uint64)
        self._masked: _U64 = np.empty(_PASS, dtype=np.uint64)
        self._zero = np.empty(_PASS, dtype=np.bool_)
        self._position = 0
        self._start = 0
        self._candidates: list[int] = []

    def _hash_block(self, data: bytes) -> None:
        symbols = np.frombuffer(data, dtype=np.uint8)
        for at in range(0, symbols.size, _PASS):
            self._hash_pass(symbols[at : at + _PASS])

    def _hash_pass(self, symbols: npt.NDArray[np.uint8]) -> None:
        """Hash ``symbols`` (at most ``_PASS`` bytes): their window hashes tested against
        the mask, the positions that pass kept as candidate ends."""
        count = symbols.size
        begin = self._position
        window = self.minimum
        tape, at = self._tape, self._at
        if at + count > tape.size:
            tape[: window + 1] = tape[at - window - 1 : at]
            at = window + 1
        phase = self._phase[:count]
        np.add(self._steps[:count], begin, out=phase)
        phase &= 63  # j mod 64 (e - 1)
        index = self._index[:count]
        np.negative(phase, out=index)
        index &= 63
        index <<= 8
        index |= symbols
        spread = self._spread[:count]
        np.take(self._turned, index, out=spread)
        prefix = tape[at : at + count]  # Q[e] for e = begin + 1 … begin + count
        np.bitwise_xor.accumulate(spread, out=prefix)
        prefix ^= tape[at - 1]
        # the hash is rotl(Q[e] ^ Q[e - window], e - 1), tested against the mask without
        # rotating it; Q[e - window] for e = begin + 1 … is at tape[at - window …]
        mixed = self._mixed[:count]
        np.bitwise_xor(prefix, tape[at - window : at - window + count], out=mixed)
        masked = self._masked[:count]
        np.take(self._masks, phase, out=masked)
        mixed &= masked
        zero = self._zero[:count]
        np.equal(mixed, 0, out=zero)
        hits = np.flatnonzero(zero) + (begin + 1)
        self._candidates.extend(int(e) for e in hits if e >= window)
        self._at = at + count
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
