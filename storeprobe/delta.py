"""Binary deltas as librsync computes them: signatures, deltas and patches, in its formats.

rdiff-backup and duplicity store a changed file as a *delta* against the previous
version: librsync's rsync-style encoding of the new bytes as copies of blocks of the
old file plus literal bytes. What such a tool writes to its storage is decided by those
delta sizes, so this module computes them with the real library (``librsync.so.2``,
Debian's ``librsync2``, the library both tools link) through :mod:`ctypes`, with
librsync's streaming job API (``rs_sig_begin`` / ``rs_loadsig_begin`` + ``rs_delta_begin``
/ ``rs_patch_begin`` driven by ``rs_job_iter``). Its output is byte for byte what the
``rdiff`` command line tool and the tools' own bindings produce for the same arguments.

- :func:`signature` summarises a basis (the old version): one weak and one strong
  checksum per block of ``block_len`` bytes;
- :func:`delta` encodes new bytes against a :class:`Signature`; :func:`measure_delta`
  gives the same delta's size and composition (:class:`DeltaStats`) without keeping it;
- :func:`patch` applies a delta to the basis and returns the new bytes;
- :func:`write_delta` and :func:`write_patch` stream their output into a callable
  instead (a file's or an upload's ``write``).

Inputs are a buffer or an iterable of buffers (chunks), so a large file streams
through: librsync reads the chunks in place, the output goes through one 64 KiB buffer,
and nothing but the result is kept (a :class:`Signature` is about
``(4 + strong_len) / block_len`` of the basis; :func:`measure_delta` keeps nothing).

Signature arguments (:class:`SignatureArgs`), with the source of each rule:

- librsync's own recommendation, what ``rdiff signature`` uses (``rs_sig_args`` in
  librsync 2.3's ``src/sumset.c``): ``block_len`` = 256 for files up to 64 KiB, else
  ``isqrt(size)`` rounded down to a multiple of 128; ``strong_len`` = the hash's whole
  length (32 bytes of BLAKE2); format ``RS_RK_BLAKE2_SIG_MAGIC`` (Rabin-Karp rollsum).
  :meth:`SignatureArgs.recommended` asks the installed library itself.
- rdiff-backup 2.2 (``rdiff_backup/Rdiff.py``, ``_find_blocksize``): 64 bytes below
  10 240 bytes, else about ``sqrt(size)`` rounded down to a multiple of 16
  (``(size >> (size.bit_length() // 2 + 4)) << 4``); its C binding
  (``src/_librsyncmodule.c``, ``new_sigmaker``) calls ``rs_sig_begin(blocklen, 8,
  RS_MD4_SIG_MAGIC)``: MD4 with 8-byte strong sums. :meth:`SignatureArgs.rdiff_backup`.
- duplicity 0.8 (``duplicity/diffdir.py``, ``get_block_size``): 512 bytes below
  1 024 000 bytes, else ``size // (2000 × 512) × 512`` capped at ``--max-blocksize``
  (2048 by default, ``duplicity/config.py``); its binding (``duplicity/_librsyncmodule.c``)
  also calls ``rs_sig_begin(blocklen, 8, RS_MD4_SIG_MAGIC)``.
  :meth:`SignatureArgs.duplicity`.

A delta's size is its 4-byte magic, then per run of matched blocks a COPY command
(1 + 1–8 + 1–8 bytes) and per run of unmatched bytes a LITERAL command (1 + 0–8 bytes)
followed by those bytes, then one END byte: the literal bytes plus a small overhead.
The bytes do not depend on how the input is cut into chunks, with one exception: against
an empty basis (a signature of no blocks) librsync writes one LITERAL command per chunk
it is given (1 to 9 bytes each; ``rdiff`` writes one per 256 bytes there, so its delta of
3 000 000 bytes against an empty file has 11 719 commands and 3 035 161 bytes, against
3 000 010 for one buffer here). rdiff-backup and duplicity store new files whole, never
as such deltas.

What the tools store (``tests/test_delta.py`` checks each against the real tool):

- rdiff-backup keeps the newest version whole in its mirror and the previous one as a
  *reverse* delta, ``delta(signature(new, SignatureArgs.rdiff_backup(len(new))), old)``,
  gzipped, in ``rdiff-backup-data/increments/<path>.<time>.diff.gz``;
- duplicity's full backup stores each file's ``signature(old, SignatureArgs.duplicity(n))``
  as ``signature/<path>`` in ``duplicity-full-signatures.<time>.sigtar.gz``, and an
  incremental the forward ``delta(that signature, new)`` as ``diff/<path>`` in its
  ``duplicity-inc.<times>.vol<n>.difftar.gz`` (gzip; GnuPG too unless
  ``--no-encryption``), with the new signatures in a ``new-signatures`` sigtar.

For example, a 4 MiB file with three regions (1 451 bytes) rewritten in place: both
tools' block is 2048 bytes, the delta 8 239 bytes, rdiff-backup's ``.diff.gz`` 8 297, the
whole duplicity incremental volume 8 397, the signature 24 588 (its sigtar.gz 24 879).

The library is loaded on first use, not at import; where it is missing, every function
raises :class:`~storeprobe.errors.MissingDependencyError` naming the package.

Why one module (~760 lines, 70 of them this docstring): the ctypes binding (prototypes,
the job loop ``_run``, its buffers and the library's lifetime) and the six operations
built on it are one contract with librsync 2.3's ``librsync.h``, read side by side with
it; apart, the binding's private types would become API.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import enum
import functools
import io
import re
import struct
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Protocol

import numpy as np
from attrs import field, frozen

from storeprobe.errors import ConfigurationError, MissingDependencyError

__all__ = [
    "DELTA_MAGIC",
    "Basis",
    "BasisFile",
    "Data",
    "DeltaStats",
    "Magic",
    "Signature",
    "SignatureArgs",
    "delta",
    "librsync_version",
    "measure_delta",
    "patch",
    "signature",
    "write_delta",
    "write_patch",
]

Buffer = bytes | bytearray | memoryview
#: what the functions read: one buffer, or an iterable of buffers (chunks, in order)
Data = Buffer | Iterable[Buffer]


class BasisFile(Protocol):
    """A binary file :func:`patch` can read a basis from (``open(path, "rb")``, BytesIO)."""

    def seek(self, offset: int, whence: int = 0, /) -> int:
        """Move to ``offset``."""
        ...

    def readinto(self, buffer: memoryview, /) -> int | None:
        """Read into ``buffer``; the count read."""
        ...


#: a basis for :func:`patch`: a buffer, or a readable and seekable binary file
Basis = Buffer | BasisFile

DELTA_MAGIC = 0x72730236  # "rs\x026": every librsync delta starts with it
_HEADER = struct.Struct(">III")  # a signature's magic, block_len, strong_len
_OUT_LEN = 64 * 1024  # the one output buffer a job writes into
#: input handed to a job at a time: librsync's delta job, given a whole 1 MiB chunk of
#: unmatched data at once, kept what it had read in its own buffer and grew it by
#: the whole input (256 MiB of RSS for a 256 MiB file rewritten whole); in 64 KiB
#: pieces it holds about 2 MiB, with the same output byte for byte
_IN_LEN = 64 * 1024
_MAX_BLOCK_LEN = 1 << 30

# rs_result codes (librsync.h)
_RS_DONE = 0
_RS_BLOCKED = 1
_RS_IO_ERROR = 100
_RS_MEM_ERROR = 102
_RS_INPUT_ENDED = 103
_RS_LOG_WARNING = 4

_INSTALL = (
    "binary deltas need librsync 2.2 or later (the C library rdiff-backup and duplicity "
    "use), and {problem}: install it with 'apt-get install librsync2' (Debian, Ubuntu), "
    "'dnf install librsync' (Fedora) or 'brew install librsync' (macOS)"
)


class Magic(enum.IntEnum):
    """A signature format: its rolling checksum and strong hash (librsync's magic numbers)."""

    #: original rollsum + MD4 (what rdiff-backup and duplicity write)
    MD4 = 0x72730136
    #: original rollsum + BLAKE2
    BLAKE2 = 0x72730137
    #: Rabin-Karp rollsum + MD4
    RK_MD4 = 0x72730146
    #: Rabin-Karp rollsum + BLAKE2 (librsync's and rdiff's default since 2.2)
    RK_BLAKE2 = 0x72730147

    @property
    def max_strong_len(self) -> int:
        """The strong hash's full length in bytes (16 for MD4, 32 for BLAKE2)."""
        return 16 if self in (Magic.MD4, Magic.RK_MD4) else 32


# -- the library ----------------------------------------------------------------------


class _Buffers(ctypes.Structure):
    """``rs_buffers_t``."""

    _fields_ = [
        ("next_in", ctypes.c_void_p),
        ("avail_in", ctypes.c_size_t),
        ("eof_in", ctypes.c_int),
        ("next_out", ctypes.c_void_p),
        ("avail_out", ctypes.c_size_t),
    ]


class _Stats(ctypes.Structure):
    """``rs_stats_t`` (``rs_long_t`` is ``intmax_t``)."""

    _fields_ = [
        ("op", ctypes.c_char_p),
        ("lit_cmds", ctypes.c_int),
        ("lit_bytes", ctypes.c_int64),
        ("lit_cmdbytes", ctypes.c_int64),
        ("copy_cmds", ctypes.c_int64),
        ("copy_bytes", ctypes.c_int64),
        ("copy_cmdbytes", ctypes.c_int64),
        ("sig_cmds", ctypes.c_int64),
        ("sig_bytes", ctypes.c_int64),
        ("false_matches", ctypes.c_int),
        ("sig_blocks", ctypes.c_int64),
        ("block_len", ctypes.c_size_t),
        ("in_bytes", ctypes.c_int64),
        ("out_bytes", ctypes.c_int64),
        ("start", ctypes.c_long),
        ("end", ctypes.c_long),
    ]


_COPY_CB = ctypes.CFUNCTYPE(
    ctypes.c_int,
    ctypes.c_void_p,
    ctypes.c_int64,
    ctypes.POINTER(ctypes.c_size_t),
    ctypes.POINTER(ctypes.c_void_p),
)
_TRACE_CB = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_char_p)
_messages = threading.local()


def _keep_message(level: int, message: bytes | None) -> None:
    """librsync's log callback: keep this thread's first warning or error, print none."""
    if message is not None and not getattr(_messages, "first", ""):
        _messages.first = message.decode("utf-8", "replace").strip()


_TRACE = _TRACE_CB(_keep_message)


def _first_message() -> str:
    """The first message librsync logged since the last call (in this thread), or ""."""
    message: str = getattr(_messages, "first", "")
    _messages.first = ""
    return message


@functools.cache
def _library() -> ctypes.CDLL:
    """librsync, loaded once; its log goes to :func:`_keep_message`, never to stderr."""
    candidates = [ctypes.util.find_library("rsync"), "librsync.so.2", "librsync.2.dylib"]
    lib: ctypes.CDLL | None = None
    for name in candidates:
        if name is None:
            continue
        try:
            lib = ctypes.CDLL(name)
            break
        except OSError:
            continue
    if lib is None:
        raise MissingDependencyError(_INSTALL.format(problem="it is not installed"))
    try:
        version = _version_of(lib)
        lib.rs_sig_args  # noqa: B018 (2.0.1+; the RK formats are 2.2+)
    except (AttributeError, ValueError) as exc:
        raise MissingDependencyError(
            _INSTALL.format(problem="the library found is not librsync 2")
        ) from exc
    major, minor = (int(part) for part in version.split(".")[:2])
    if (major, minor) < (2, 2):
        raise MissingDependencyError(_INSTALL.format(problem=f"librsync {version} is older"))
    lib.rs_job_iter.argtypes = [ctypes.c_void_p, ctypes.POINTER(_Buffers)]
    lib.rs_job_iter.restype = ctypes.c_int
    lib.rs_job_free.argtypes = [ctypes.c_void_p]
    lib.rs_job_free.restype = ctypes.c_int
    lib.rs_job_statistics.argtypes = [ctypes.c_void_p]
    lib.rs_job_statistics.restype = ctypes.POINTER(_Stats)
    lib.rs_sig_begin.argtypes = [ctypes.c_size_t, ctypes.c_size_t, ctypes.c_int]
    lib.rs_sig_begin.restype = ctypes.c_void_p
    lib.rs_loadsig_begin.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
    lib.rs_loadsig_begin.restype = ctypes.c_void_p
    lib.rs_build_hash_table.argtypes = [ctypes.c_void_p]
    lib.rs_build_hash_table.restype = ctypes.c_int
    lib.rs_free_sumset.argtypes = [ctypes.c_void_p]
    lib.rs_free_sumset.restype = None
    lib.rs_delta_begin.argtypes = [ctypes.c_void_p]
    lib.rs_delta_begin.restype = ctypes.c_void_p
    lib.rs_patch_begin.argtypes = [_COPY_CB, ctypes.c_void_p]
    lib.rs_patch_begin.restype = ctypes.c_void_p
    lib.rs_sig_args.argtypes = [
        ctypes.c_int64,
        ctypes.POINTER(ctypes.c_int),
        ctypes.POINTER(ctypes.c_size_t),
        ctypes.POINTER(ctypes.c_size_t),
    ]
    lib.rs_sig_args.restype = ctypes.c_int
    lib.rs_strerror.argtypes = [ctypes.c_int]
    lib.rs_strerror.restype = ctypes.c_char_p
    lib.rs_trace_to.argtypes = [_TRACE_CB]
    lib.rs_trace_to.restype = None
    lib.rs_trace_set_level.argtypes = [ctypes.c_int]
    lib.rs_trace_set_level.restype = None
    lib.rs_trace_to(_TRACE)
    lib.rs_trace_set_level(_RS_LOG_WARNING)
    return lib


def _version_of(lib: ctypes.CDLL) -> str:
    raw = ctypes.string_at(ctypes.addressof(ctypes.c_char.in_dll(lib, "rs_librsync_version")))
    found = re.search(r"\d+\.\d+(?:\.\d+)?", raw.decode("ascii", "replace"))
    if found is None:
        raise ValueError(f"unexpected librsync version {raw!r}")
    return found.group()


def librsync_version() -> str:
    """The loaded librsync's version, e.g. ``"2.3.2"`` (loads it; raises if missing)."""
    return _version_of(_library())


# -- signature arguments ------------------------------------------------------------


def _whole(name: str, value: object, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigurationError(f"{name} must be an int, not {value!r}")
    if not low <= value <= high:
        raise ConfigurationError(f"{name} must be between {low:,} and {high:,}, not {value:,}")
    return value


def _valid_block_len(_: object, attribute: object, value: int) -> None:
    _whole("block_len", value, 1, _MAX_BLOCK_LEN)


def _valid_magic(_: object, attribute: object, value: Magic) -> None:
    if not isinstance(value, Magic):
        raise ConfigurationError(f"magic must be a Magic (e.g. Magic.RK_BLAKE2), not {value!r}")


@frozen(kw_only=True)
class SignatureArgs:
    """How a signature is made: block length (bytes), strong-sum length (bytes), format.

    Use :meth:`recommended` (librsync's and ``rdiff``'s choice), :meth:`rdiff_backup` or
    :meth:`duplicity` to make what a tool makes for a file of a given size.
    """

    block_len: int = field(validator=_valid_block_len)
    strong_len: int
    magic: Magic = field(default=Magic.RK_BLAKE2, validator=_valid_magic)

    def __attrs_post_init__(self) -> None:
        _whole(f"strong_len for {self.magic.name}", self.strong_len, 1, self.magic.max_strong_len)

    @classmethod
    def recommended(cls, size: int | None, *, magic: Magic = Magic.RK_BLAKE2) -> SignatureArgs:
        """librsync's own choice (``rs_sig_args``) for a basis of ``size`` bytes.

        This is what ``rdiff signature`` uses (it passes the file's size): ``block_len``
        256 up to 64 KiB, else ``isqrt(size)`` rounded down to a multiple of 128; the
        hash's full ``strong_len``. ``size=None`` (unknown, e.g. a stream): 2048 bytes.
        """
        _valid_magic(None, None, magic)
        old_size = -1 if size is None else _whole("size", size, 0, 2**62)
        lib = _library()
        c_magic = ctypes.c_int(int(magic))
        block_len = ctypes.c_size_t(0)
        strong_len = ctypes.c_size_t(0)
        result = lib.rs_sig_args(
            old_size, ctypes.byref(c_magic), ctypes.byref(block_len), ctypes.byref(strong_len)
        )
        _check(result, "rs_sig_args")
        return cls(block_len=block_len.value, strong_len=strong_len.value, magic=Magic(magic))

    @classmethod
    def rdiff_backup(cls, size: int) -> SignatureArgs:
        """What rdiff-backup 2.2 uses for a basis of ``size`` bytes (see the module doc)."""
        size = _whole("size", size, 0, 2**62)
        block_len = 64 if size < 10240 else (size >> (size.bit_length() // 2 + 4)) << 4
        return cls(block_len=block_len, strong_len=8, magic=Magic.MD4)

    @classmethod
    def duplicity(cls, size: int, *, max_blocksize: int = 2048) -> SignatureArgs:
        """What duplicity 0.8 uses for a basis of ``size`` bytes (``--max-blocksize``)."""
        size = _whole("size", size, 0, 2**62)
        max_blocksize = _whole("max_blocksize", max_blocksize, 1, _MAX_BLOCK_LEN)
        block_len = 512 if size < 1024000 else min(size // (2000 * 512) * 512, max_blocksize)
        return cls(block_len=block_len, strong_len=8, magic=Magic.MD4)


# -- values ---------------------------------------------------------------------------


def _valid_signature(_: object, attribute: object, value: bytes) -> None:
    if not isinstance(value, bytes) or len(value) < _HEADER.size:
        raise ConfigurationError("a signature is librsync's signature bytes (12 or more)")
    magic, block_len, strong_len = _HEADER.unpack_from(value)
    if magic not in Magic._value2member_map_:
        raise ConfigurationError(
            f"not a librsync signature: magic {magic:#010x} (a delta starts {DELTA_MAGIC:#x})"
        )
    if block_len < 1 or not 1 <= strong_len <= Magic(magic).max_strong_len:
        raise ConfigurationError(
            f"corrupt librsync signature header: block_len {block_len}, strong_len {strong_len}"
        )
    if (len(value) - _HEADER.size) % (4 + strong_len):
        raise ConfigurationError(
            f"truncated librsync signature: {len(value) - _HEADER.size} bytes after the "
            f"header are not whole blocks of {4 + strong_len}"
        )


@frozen
class Signature:
    """A librsync signature, as ``rdiff signature`` writes it: ``data`` is its bytes.

    A 12-byte header (magic, ``block_len``, ``strong_len``, big-endian) and per block of
    the basis a 4-byte weak checksum and ``strong_len`` bytes of strong hash. Build one
    with :func:`signature`, or from stored bytes with ``Signature(data)``.
    """

    data: bytes = field(validator=_valid_signature, repr=False)

    def __repr__(self) -> str:
        return (
            f"<Signature {self.magic.name} block_len={self.block_len} "
            f"strong_len={self.strong_len} blocks={self.block_count} size={self.size}>"
        )

    @property
    def magic(self) -> Magic:
        """The format."""
        return Magic(_HEADER.unpack_from(self.data)[0])

    @property
    def block_len(self) -> int:
        """Bytes of basis per block."""
        return int(_HEADER.unpack_from(self.data)[1])

    @property
    def strong_len(self) -> int:
        """Bytes of strong hash per block."""
        return int(_HEADER.unpack_from(self.data)[2])

    @property
    def block_count(self) -> int:
        """Blocks of the basis (the last may be short)."""
        return (len(self.data) - _HEADER.size) // (4 + self.strong_len)

    @property
    def size(self) -> int:
        """Bytes of the signature (what a tool stores for it)."""
        return len(self.data)

    @property
    def args(self) -> SignatureArgs:
        """The arguments it was made with."""
        return SignatureArgs(block_len=self.block_len, strong_len=self.strong_len, magic=self.magic)


@frozen(kw_only=True)
class DeltaStats:
    """What a delta is made of, as librsync counts it (``rs_stats_t``); all in bytes.

    ``size`` is the delta's length; ``literal_bytes`` the new bytes it carries
    (unmatched), ``copy_bytes`` the bytes it copies from the basis; ``overhead`` the
    rest (magic, command headers, END).
    """

    size: int
    literal_bytes: int
    literal_commands: int
    copy_bytes: int
    copy_commands: int
    #: bytes of new data read
    new_bytes: int

    @property
    def overhead(self) -> int:
        """``size - literal_bytes``: the magic, the command bytes and the END byte."""
        return self.size - self.literal_bytes


# -- running a job --------------------------------------------------------------------


def _check(result: int, what: str) -> None:
    if result in (_RS_DONE, _RS_BLOCKED):
        return
    detail = _first_message()
    reason = _library().rs_strerror(result).decode("ascii", "replace")
    message = f"librsync {what} failed: {reason}" + (f" ({detail})" if detail else "")
    if result == _RS_MEM_ERROR:
        raise MemoryError(message)
    raise ConfigurationError(message)


def _chunks(data: Data) -> Iterator[memoryview]:
    if isinstance(data, bytes | bytearray | memoryview):
        yield memoryview(data).cast("B")
        return
    if isinstance(data, str) or not isinstance(data, Iterable):
        raise ConfigurationError(
            f"data must be bytes, a bytearray, a memoryview or an iterable of them, not "
            f"{type(data).__name__}"
        )
    for chunk in data:
        if not isinstance(chunk, bytes | bytearray | memoryview):
            raise ConfigurationError(
                f"each chunk must be bytes, a bytearray or a memoryview, not {type(chunk).__name__}"
            )
        yield memoryview(chunk).cast("B")


def _pieces(data: Data) -> Iterator[memoryview]:
    """The non-empty pieces of ``data``'s chunks, :data:`_IN_LEN` bytes at the most."""
    for chunk in _chunks(data):
        for start in range(0, len(chunk), _IN_LEN):
            yield chunk[start : start + _IN_LEN]


def _address(array: np.ndarray[tuple[int], np.dtype[np.uint8]]) -> int:
    return int(array.ctypes.data)


def _run(job: int, data: Data, emit: Callable[[bytes], object], what: str) -> tuple[int, int]:
    """Feed ``data`` to ``job`` until it is done; each piece of output goes to ``emit``.

    librsync reads the chunks in place; what it leaves unread of a chunk (it does so only
    when it needs more before it can go on) is carried over into the next one. Returns the
    bytes of ``data`` read and the bytes of output given to ``emit``.
    """
    lib = _library()
    out = ctypes.create_string_buffer(_OUT_LEN)
    out_address = ctypes.addressof(out)
    buffers = _Buffers()
    read = written = 0

    def step() -> tuple[int, int]:
        nonlocal written
        buffers.next_out = out_address
        buffers.avail_out = _OUT_LEN
        result = int(lib.rs_job_iter(job, ctypes.byref(buffers)))
        produced = _OUT_LEN - int(buffers.avail_out)
        if produced:
            written += produced
            emit(ctypes.string_at(out_address, produced))
        _check(result, what)
        return result, produced

    _first_message()
    carry = b""
    for chunk in _pieces(data):
        read += len(chunk)
        source: Buffer = carry + chunk.tobytes() if carry else chunk
        array = np.frombuffer(source, dtype=np.uint8)
        buffers.next_in = _address(array)
        buffers.avail_in = len(array)
        buffers.eof_in = 0
        while buffers.avail_in:
            before = int(buffers.avail_in)
            result, produced = step()
            if result == _RS_DONE:
                return read, written
            if not produced and int(buffers.avail_in) == before:
                break
        left = int(buffers.avail_in)
        carry = array[len(array) - left :].tobytes() if left else b""
    array = np.frombuffer(carry, dtype=np.uint8)
    buffers.next_in = _address(array) if len(array) else None
    buffers.avail_in = len(array)
    buffers.eof_in = 1
    while True:
        before = int(buffers.avail_in)
        result, produced = step()
        if result == _RS_DONE:
            return read, written
        if not produced and int(buffers.avail_in) == before:
            detail = _first_message()
            raise ConfigurationError(
                f"librsync {what} stopped before the end of its input: the input is "
                "truncated or not what it should be" + (f" ({detail})" if detail else "")
            )


def _free(job: int | None) -> None:
    if job:
        _library().rs_job_free(job)


# -- the three operations -------------------------------------------------------------


def signature(
    data: Data,
    args: SignatureArgs | None = None,
    *,
    block_len: int | None = None,
    strong_len: int | None = None,
    magic: Magic = Magic.RK_BLAKE2,
    size: int | None = None,
) -> Signature:
    """The signature of ``data`` (the basis, the old version).

    Pass ``args`` (e.g. ``SignatureArgs.rdiff_backup(len(data))``) or any of
    ``block_len`` / ``strong_len`` / ``magic``; what is not given is librsync's
    recommendation for ``size`` bytes (:meth:`SignatureArgs.recommended`), which for a
    buffer defaults to its length: so ``signature(data)`` equals ``rdiff signature`` of
    the same file, and ``signature(data, block_len=n)`` equals ``rdiff -b n signature``.
    For an iterable of chunks give ``size`` (else librsync's 2048-byte default applies).
    """
    if args is not None:
        if not isinstance(args, SignatureArgs):
            raise ConfigurationError(f"args must be a SignatureArgs, not {args!r}")
        if block_len is not None or strong_len is not None or magic != Magic.RK_BLAKE2:
            raise ConfigurationError("give args or block_len/strong_len/magic, not both")
    else:
        if size is None and isinstance(data, bytes | bytearray | memoryview):
            size = memoryview(data).nbytes
        default = SignatureArgs.recommended(size, magic=magic)
        args = SignatureArgs(
            block_len=default.block_len if block_len is None else block_len,
            strong_len=default.strong_len if strong_len is None else strong_len,
            magic=magic,
        )
    lib = _library()
    pieces: list[bytes] = []
    job = lib.rs_sig_begin(args.block_len, args.strong_len, int(args.magic))
    try:
        _run(job, data, pieces.append, "signature")
    finally:
        _free(job)
    return Signature(b"".join(pieces))


def write_delta(sig: Signature, new_data: Data, write: Callable[[bytes], object]) -> DeltaStats:
    """Stream the delta from the basis ``sig`` summarises to ``new_data`` into ``write``.

    ``write`` gets the delta in order, in pieces of at most 64 KiB (e.g. a file's
    ``write``, or an upload's); nothing is kept. Returns its :class:`DeltaStats`.
    """
    if not isinstance(sig, Signature):
        raise ConfigurationError(f"a delta needs a Signature (from signature()), not {sig!r}")
    lib = _library()
    sumset = ctypes.c_void_p()
    loader = lib.rs_loadsig_begin(ctypes.byref(sumset))
    job = None
    try:
        try:
            _run(loader, sig.data, lambda _: None, "loading a signature")
        finally:
            _free(loader)
        _check(lib.rs_build_hash_table(sumset), "indexing a signature")
        job = lib.rs_delta_begin(sumset)
        read, written = _run(job, new_data, write, "delta")
        stats = lib.rs_job_statistics(job).contents
        return DeltaStats(
            size=written,
            literal_bytes=int(stats.lit_bytes),
            literal_commands=int(stats.lit_cmds),
            copy_bytes=int(stats.copy_bytes),
            copy_commands=int(stats.copy_cmds),
            new_bytes=read,
        )
    finally:
        _free(job)
        if sumset.value:
            lib.rs_free_sumset(sumset)


def delta(sig: Signature, new_data: Data) -> bytes:
    """The delta from the basis ``sig`` summarises to ``new_data``, as ``rdiff delta``
    writes it (librsync's delta format, magic ``rs\\x026``)."""
    out = io.BytesIO()
    write_delta(sig, new_data, out.write)
    return out.getvalue()


def measure_delta(sig: Signature, new_data: Data) -> DeltaStats:
    """The size and make-up of :func:`delta` ``(sig, new_data)``, keeping none of it.

    ``measure_delta(sig, data).size == len(delta(sig, data))``; memory stays at the
    signature's index plus one output buffer, however large ``new_data`` is.
    """
    return write_delta(sig, new_data, lambda _: None)


class _Reader:
    """The basis side of a patch: librsync's copy callback over a buffer or a file."""

    def __init__(self, basis: Basis) -> None:
        self.error: BaseException | None = None
        self.beyond: tuple[int, int] | None = None
        self.file: BasisFile | None = None
        self.array: np.ndarray[tuple[int], np.dtype[np.uint8]] | None = None
        if isinstance(basis, bytes | bytearray | memoryview):
            self.array = np.frombuffer(memoryview(basis).cast("B"), dtype=np.uint8)
        elif callable(getattr(basis, "readinto", None)) and callable(getattr(basis, "seek", None)):
            self.file = basis
        else:
            raise ConfigurationError(
                f"a basis is bytes, a bytearray, a memoryview or a binary file opened for "
                f"reading, not {type(basis).__name__}"
            )
        self.callback = _COPY_CB(self._copy)

    def _copy(
        self,
        opaque: int | None,
        position: int,
        length: ctypes._Pointer[ctypes.c_size_t],
        buffer: ctypes._Pointer[ctypes.c_void_p],
    ) -> int:
        try:
            wanted = int(length[0])
            if self.array is not None:
                got = max(0, min(wanted, len(self.array) - position))
                if got:
                    buffer[0] = _address(self.array) + position
            else:
                assert self.file is not None
                self.file.seek(position)
                target = (ctypes.c_char * wanted).from_address(int(buffer[0] or 0))
                got = self.file.readinto(memoryview(target).cast("B")) or 0
            if got == 0:
                self.beyond = (position, wanted)
                return _RS_INPUT_ENDED
            length[0] = got
            return _RS_DONE
        except BaseException as exc:  # a callback must not raise into C
            self.error = exc
            return _RS_IO_ERROR


def write_patch(basis: Basis, delta_data: Data, write: Callable[[bytes], object]) -> int:
    """Stream ``delta_data`` applied to ``basis`` (the new bytes) into ``write``.

    ``write`` gets the new bytes in order, in pieces of at most 64 KiB; returns their
    count. ``basis`` is the old version's bytes, or a binary file opened for reading (read
    at the offsets the delta copies from, never whole). Raises
    :class:`~storeprobe.errors.ConfigurationError` if the delta is not a librsync delta
    or copies from beyond the end of the basis (the wrong basis); an error of the basis
    file is raised as it is.
    """
    reader = _Reader(basis)
    lib = _library()
    job = lib.rs_patch_begin(reader.callback, None)
    try:
        _, written = _run(job, delta_data, write, "patch")
    except ConfigurationError as exc:
        if reader.error is not None:
            raise reader.error from exc
        if reader.beyond is not None:
            position, wanted = reader.beyond
            raise ConfigurationError(
                f"the delta copies {wanted} bytes at offset {position:,}, beyond the end of "
                "the basis: patch the version the delta was made against"
            ) from exc
        raise
    finally:
        _free(job)
    return written


def patch(basis: Basis, delta_data: Data) -> bytes:
    """The new bytes: ``delta_data`` applied to ``basis`` (``rdiff patch``); see
    :func:`write_patch` for the basis and the errors."""
    out = io.BytesIO()
    write_patch(basis, delta_data, out.write)
    return out.getvalue()
