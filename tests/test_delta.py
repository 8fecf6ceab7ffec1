"""storeprobe.delta against the real tools: rdiff (librsync's CLI), rdiff-backup, duplicity.

The tools come from Debian's packages (tests/setup.sh installs rdiff, rdiff-backup and
duplicity); rdiff-backup's and duplicity's own librsync bindings run under Debian's
python3, which is not the project's interpreter.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gzip
import io
import json
import math
import os
import shutil
import subprocess
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from storeprobe import delta as delta_module
from storeprobe.dataset import File, Image, Tree
from storeprobe.delta import (
    DELTA_MAGIC,
    Magic,
    Signature,
    SignatureArgs,
    delta,
    librsync_version,
    measure_delta,
    patch,
    signature,
    write_delta,
    write_patch,
)
from storeprobe.errors import ConfigurationError, MissingDependencyError
from storeprobe.units import KiB, MiB

DEBIAN_PYTHON = "/usr/bin/python3"


def _tool(name: str) -> str:
    path = shutil.which(name)
    assert path is not None, f"{name} is not installed: run tests/setup.sh (apt-get install rdiff)"
    return path


def _versions(size: int = 2 * MiB, fraction: float = 0.01) -> tuple[Image, Image]:
    """Version 0 and 1 of an image of 4 KiB blocks, ``fraction`` of them rewritten."""
    first = Image.create(size, block_size="4KiB", seed=7)
    return first, first.evolve(fraction=fraction)


def _bytes(image: Image) -> bytes:
    return image.payload(image.file)


def _pieces(data: bytes, size: int) -> Iterator[bytes]:
    return (data[i : i + size] for i in range(0, len(data), size))


def _rdiff(tmp_path: Path, old: bytes, new: bytes, *options: str) -> tuple[bytes, bytes]:
    """``rdiff [options] signature old`` then ``rdiff delta``: (signature, delta) bytes."""
    rdiff = _tool("rdiff")
    (tmp_path / "old").write_bytes(old)
    (tmp_path / "new").write_bytes(new)
    subprocess.run([rdiff, *options, "-f", "signature", "old", "old.sig"], cwd=tmp_path, check=True)
    subprocess.run([rdiff, "-f", "delta", "old.sig", "new", "new.delta"], cwd=tmp_path, check=True)
    return (tmp_path / "old.sig").read_bytes(), (tmp_path / "new.delta").read_bytes()


# -- equal to rdiff ---------------------------------------------------------------------


def test_the_library_is_librsync_2() -> None:
    major, minor = (int(part) for part in librsync_version().split(".")[:2])
    assert (major, minor) >= (2, 2)


@pytest.mark.parametrize("block_len", [None, 256, 2048])
def test_signature_and_delta_equal_rdiffs(tmp_path: Path, block_len: int | None) -> None:
    old, new = (_bytes(version) for version in _versions())
    options = () if block_len is None else ("-b", str(block_len))
    rdiff_sig, rdiff_delta = _rdiff(tmp_path, old, new, *options)
    sig = signature(old, block_len=block_len)
    ours = delta(sig, new)
    assert sig.data == rdiff_sig
    assert len(ours) == len(rdiff_delta)
    assert ours == rdiff_delta
    if block_len is None:  # rdiff's own choice for 2 MiB: isqrt(2 MiB) & ~127
        assert sig.block_len == math.isqrt(2 * MiB) & ~127 == 1408


def test_md4_signature_of_rdiff_backup_args_equals_rdiffs(tmp_path: Path) -> None:
    old, new = (_bytes(version) for version in _versions())
    args = SignatureArgs.rdiff_backup(len(old))
    options = ("-H", "md4", "-R", "rollsum", "-S", "8", "-b", str(args.block_len))
    rdiff_sig, rdiff_delta = _rdiff(tmp_path, old, new, *options)
    sig = signature(old, args)
    assert sig.magic is Magic.MD4
    assert (sig.block_len, sig.strong_len) == (args.block_len, 8)
    assert sig.data == rdiff_sig
    assert delta(sig, new) == rdiff_delta


_TOOLS_SCRIPT = """
import json, sys
from rdiff_backup import Rdiff, _librsync as rb
from duplicity import diffdir, _librsync as dup

def run(maker, data, step=65536):
    out, done, offset = [], False, 0
    while not done:
        done, used, piece = maker.cycle(data[offset:offset + step])
        offset += used
        out.append(piece)
    return b"".join(out)

old, new = open(sys.argv[1], "rb").read(), open(sys.argv[2], "rb").read()
answer = {"rdiff_backup": [Rdiff._find_blocksize(n) for n in SIZES],
          "duplicity": [diffdir.get_block_size(n) for n in SIZES]}
for name, module, size in (("rb", rb, Rdiff._find_blocksize(len(old))),
                           ("dup", dup, diffdir.get_block_size(len(old)))):
    sig = run(module.new_sigmaker(size), old)
    answer[name + "_sig"] = sig.hex()
    answer[name + "_delta"] = run(module.new_deltamaker(sig), new).hex()
print(json.dumps(answer))
"""

_SIZES = [0, 1, 64, 10239, 10240, 65536, 1023999, 1024000, 3 * MiB, 10**9, 2**40]


def test_rdiff_backup_and_duplicity_make_the_same_signatures_and_deltas(tmp_path: Path) -> None:
    """Their own bindings (Debian's python3) against SignatureArgs.rdiff_backup/duplicity."""
    old, new = (_bytes(version) for version in _versions(3 * MiB))
    (tmp_path / "old").write_bytes(old)
    (tmp_path / "new").write_bytes(new)
    script = f"SIZES = {_SIZES!r}\n" + _TOOLS_SCRIPT
    done = subprocess.run(
        [DEBIAN_PYTHON, "-c", script, "old", "new"],
        cwd=tmp_path,
        check=True,
        capture_output=True,
        text=True,
    )
    tools = json.loads(done.stdout)
    assert tools["rdiff_backup"] == [SignatureArgs.rdiff_backup(n).block_len for n in _SIZES]
    assert tools["duplicity"] == [SignatureArgs.duplicity(n).block_len for n in _SIZES]
    for name, args in (
        ("rb", SignatureArgs.rdiff_backup(len(old))),
        ("dup", SignatureArgs.duplicity(len(old))),
    ):
        sig = signature(old, args)
        assert sig.data.hex() == tools[name + "_sig"]
        assert delta(sig, new).hex() == tools[name + "_delta"]


def _in_place_file(size: int = 4 * MiB) -> tuple[bytes, bytes]:
    """A file and its next version with a few regions rewritten in place (Tree, rewrite)."""
    v0 = Tree(files=(File("data.bin", size),), seed=3)
    v1 = v0.evolve(changed=1, added=0, deleted=0, rewrite=1.0)
    return v0.payload(v0.files[0]), v1.payload(v1.files[0])


def test_rdiff_backup_stores_exactly_this_reverse_delta(tmp_path: Path) -> None:
    """rdiff-backup keeps the newest file whole and the old one as a gzipped reverse delta:
    the delta from the new version's signature to the old version."""
    rdiff_backup = _tool("rdiff-backup")
    old, new = _in_place_file()
    source, target = tmp_path / "source", tmp_path / "target"
    source.mkdir()
    for when, data in ((100_000, old), (200_000, new)):
        (source / "data.bin").write_bytes(data)
        os.utime(source / "data.bin", (when, when))  # the tools compare sizes and mtimes
        subprocess.run(
            [rdiff_backup, "--current-time", str(when), "backup", str(source), str(target)],
            check=True,
            capture_output=True,
        )
    (increment,) = (target / "rdiff-backup-data" / "increments").glob("data.bin.*.diff.gz")
    stored = gzip.decompress(increment.read_bytes())
    ours = delta(signature(new, SignatureArgs.rdiff_backup(len(new))), old)
    assert len(stored) == len(ours)
    assert stored == ours
    assert patch(new, stored) == old


def test_duplicity_stores_exactly_this_signature_and_delta(tmp_path: Path) -> None:
    """duplicity's full backup stores the signature, its incremental the forward delta
    (``diff/<path>`` in the volume's tar, ``signature/<path>`` in the signature tar)."""
    duplicity = _tool("duplicity")
    old, new = _in_place_file()
    source, target = tmp_path / "source", tmp_path / "target"
    source.mkdir()
    for when, kind, data in ((100_000, "full", old), (200_000, "incremental", new)):
        (source / "data.bin").write_bytes(data)
        os.utime(source / "data.bin", (when, when))
        subprocess.run(
            [
                duplicity,
                kind,
                "--no-encryption",
                "--current-time",
                str(when),
                "--archive-dir",
                str(tmp_path / "cache"),
                str(source),
                f"file://{target}",
            ],
            check=True,
            capture_output=True,
        )
    args = SignatureArgs.duplicity(len(old))
    (signatures,) = target.glob("duplicity-full-signatures.*.sigtar.gz")
    with tarfile.open(signatures) as archive:
        member = archive.extractfile("signature/data.bin")
        assert member is not None
        assert member.read() == signature(old, args).data
    (volume,) = target.glob("duplicity-inc.*.vol1.difftar.gz")
    with tarfile.open(volume) as archive:
        member = archive.extractfile("diff/data.bin")
        assert member is not None
        stored = member.read()
    assert stored == delta(signature(old, args), new)
    assert len(stored) < 3 * 16 * KiB


@settings(max_examples=40, deadline=None)
@given(st.one_of(st.none(), st.integers(0, 2**40)))
def test_recommended_args_follow_librsyncs_rule(size: int | None) -> None:
    args = SignatureArgs.recommended(size)
    if size is None:
        assert args.block_len == 2048
    else:
        assert args.block_len == (256 if size <= 256 * 256 else math.isqrt(size) & ~127)
    assert (args.strong_len, args.magic) == (32, Magic.RK_BLAKE2)
    assert SignatureArgs.recommended(size, magic=Magic.MD4).strong_len == 16


# -- sizes ----------------------------------------------------------------------------


def test_one_percent_of_blocks_rewritten_gives_about_those_bytes() -> None:
    first, second = _versions(4 * MiB, 0.01)
    rewritten = second.diff(first).changed_bytes
    changed = second.generations != first.generations
    runs = int(changed[0]) + int((changed[1:] & ~changed[:-1]).sum())
    assert rewritten == 10 * 4 * KiB  # 1 % of 1 024 blocks, rounded to nearest
    sig = signature(_bytes(first), block_len=2048)
    stats = measure_delta(sig, _pieces(_bytes(second), 100_000))
    # 4 KiB blocks are whole 2 KiB signature blocks: exactly the rewritten bytes are literal
    assert stats.literal_bytes == rewritten
    assert stats.copy_bytes == 4 * MiB - rewritten
    assert stats.new_bytes == 4 * MiB
    # the overhead: 4 bytes of magic, a few bytes per command, the END byte
    assert stats.literal_commands <= runs
    assert stats.overhead <= 5 + 9 * stats.literal_commands + 17 * stats.copy_commands
    assert stats.size == len(delta(sig, _bytes(second)))
    assert stats.size < rewritten * 1.01


def test_blocks_not_aligned_to_the_signature_cost_at_most_a_block_each_side() -> None:
    first, second = _versions(2 * MiB, 0.01)
    sig = signature(_bytes(first), block_len=3000)  # no 4 KiB block is aligned to 3000
    stats = measure_delta(sig, _bytes(second))
    rewritten = second.diff(first).changed_bytes
    changed = second.changed_blocks(first).size
    assert rewritten <= stats.literal_bytes <= rewritten + changed * 2 * 3000


def test_an_unchanged_file_gives_a_tiny_delta() -> None:
    data = _bytes(_versions(4 * MiB)[0])
    stats = measure_delta(signature(data), data)
    assert stats.literal_bytes == 0
    assert stats.copy_bytes == len(data)
    # magic (4) + COPY command (1 + up to 8 + 8) + END (1)
    assert stats.size <= 22
    assert patch(data, delta(signature(data), data)) == data


def test_an_empty_basis_gives_the_whole_new_file_as_literal() -> None:
    new = _bytes(_versions(MiB)[1])
    stats = measure_delta(signature(b""), new)
    assert stats.literal_bytes == len(new)
    assert stats.copy_bytes == 0
    assert len(new) < stats.size <= len(new) + 5 + 9 * stats.literal_commands
    # with no block to match, librsync writes one LITERAL per piece of input it is given
    pieces = measure_delta(signature(b""), _pieces(new, 65536))
    assert pieces.literal_commands == MiB // 65536
    assert pieces.literal_bytes == len(new)


# -- round trips and streaming --------------------------------------------------------


def test_patch_round_trips_from_a_buffer_and_from_a_file(tmp_path: Path) -> None:
    old, new = (_bytes(version) for version in _versions())
    change = delta(signature(old), new)
    assert change[:4] == DELTA_MAGIC.to_bytes(4, "big")
    assert patch(old, change) == new
    assert patch(memoryview(old), _pieces(change, 999)) == new
    (tmp_path / "old").write_bytes(old)
    with (tmp_path / "old").open("rb") as basis:
        assert patch(basis, change) == new
    assert patch(io.BytesIO(old), change) == new


def test_writers_stream_in_pieces_of_at_most_64_kib(tmp_path: Path) -> None:
    first, second = _versions(2 * MiB, 0.2)
    old, new = _bytes(first), _bytes(second)
    sig = signature(old)
    pieces: list[bytes] = []
    stats = write_delta(sig, _pieces(new, 300_000), pieces.append)
    assert len(pieces) > 1
    assert max(len(piece) for piece in pieces) <= 64 * KiB
    assert b"".join(pieces) == delta(sig, new)
    assert stats == measure_delta(sig, new)
    assert stats.size == sum(len(piece) for piece in pieces)
    with (tmp_path / "restored").open("wb") as out:
        assert write_patch(old, pieces, out.write) == len(new)
    assert (tmp_path / "restored").read_bytes() == new


@settings(max_examples=40, deadline=None)
@given(
    st.binary(min_size=1, max_size=20_000),
    st.lists(st.tuples(st.integers(0, 20_000), st.binary(min_size=1, max_size=500)), max_size=6),
    st.integers(1, 5000),
    st.sampled_from([64, 256, 700, 2048]),
)
def test_chunks_give_the_same_bytes_as_whole_buffers(
    old: bytes, edits: list[tuple[int, bytes]], piece: int, block_len: int
) -> None:
    new = bytearray(old)
    for offset, data in edits:
        new[offset : offset + len(data)] = data
    whole = signature(old, block_len=block_len)
    assert signature(_pieces(old, piece), block_len=block_len, size=len(old)) == whole
    change = delta(whole, bytes(new))
    assert delta(whole, _pieces(bytes(new), piece)) == change
    assert measure_delta(whole, [bytes(new)]).size == len(change)
    assert patch(old, _pieces(change, piece)) == new


def test_signature_of_chunks_without_a_size_uses_librsyncs_default_block() -> None:
    data = _bytes(_versions(MiB)[0])
    assert signature(_pieces(data, 65536)).block_len == 2048
    assert signature(data).block_len == 1024  # isqrt(1 MiB) & ~127


def test_a_signature_reads_back_from_its_bytes() -> None:
    data = _bytes(_versions(MiB)[0])
    sig = signature(data, SignatureArgs.duplicity(len(data)))
    again = Signature(sig.data)
    assert again == sig
    assert again.args == SignatureArgs(block_len=512, strong_len=8, magic=Magic.MD4)
    assert again.block_count == len(data) // 512
    assert again.size == 12 + again.block_count * 12
    assert "MD4" in repr(again)


# -- bad input ------------------------------------------------------------------------


def _header(magic: int, block_len: int, strong_len: int) -> bytes:
    return b"".join(value.to_bytes(4, "big") for value in (magic, block_len, strong_len))


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "12 or more"),
        (b"rs\x026" + bytes(8), "not a librsync signature"),
        (_header(Magic.MD4, 512, 17), "corrupt"),
        (_header(Magic.MD4, 512, 8) + b"x", "truncated"),
    ],
)
def test_a_bad_signature_is_refused(data: bytes, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        Signature(data)


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ConfigurationError, match="strong_len for MD4"):
        SignatureArgs(block_len=512, strong_len=17, magic=Magic.MD4)
    with pytest.raises(ConfigurationError, match="block_len"):
        signature(b"abc", block_len=0)
    with pytest.raises(ConfigurationError, match="not both"):
        signature(b"abc", SignatureArgs.rdiff_backup(3), block_len=64)
    with pytest.raises(ConfigurationError, match="iterable"):
        signature("text")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="each chunk"):
        signature([b"a", "b"])  # type: ignore[list-item]
    with pytest.raises(ConfigurationError, match="needs a Signature"):
        delta(b"abc", b"abc")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="a basis is"):
        patch(42, b"")  # type: ignore[arg-type]


def test_a_wrong_delta_or_basis_is_an_error_and_prints_nothing(
    capfd: pytest.CaptureFixture[str],
) -> None:
    old, new = (_bytes(version) for version in _versions())
    change = delta(signature(old), new)
    with pytest.raises(ConfigurationError, match="bad magic"):
        patch(old, b"garbage!")
    with pytest.raises(ConfigurationError, match=r"unexpected end of input|truncated"):
        patch(old, change[:100])
    with pytest.raises(ConfigurationError, match="beyond the end of the basis"):
        patch(old[:1000], change)
    assert capfd.readouterr().err == ""


def test_a_failing_basis_file_raises_its_own_error() -> None:
    class Broken(io.BytesIO):
        def readinto(self, buffer: object) -> int:
            raise OSError("disk on fire")

    old, new = (_bytes(version) for version in _versions())
    with pytest.raises(OSError, match="disk on fire"):
        patch(Broken(old), delta(signature(old), new))


def test_a_missing_library_names_the_package(monkeypatch: pytest.MonkeyPatch) -> None:
    """As on a machine without librsync: no library is found and none loads."""

    def refuse(name: str, *args: object, **kwargs: object) -> ctypes.CDLL:
        raise OSError(f"{name}: cannot open shared object file")

    delta_module._library.cache_clear()
    monkeypatch.setattr(ctypes.util, "find_library", lambda name: None)
    monkeypatch.setattr(ctypes, "CDLL", refuse)
    try:
        with pytest.raises(MissingDependencyError, match="apt-get install librsync2"):
            signature(b"abc")
        with pytest.raises(ImportError):
            librsync_version()
    finally:
        monkeypatch.undo()
        delta_module._library.cache_clear()
    assert signature(b"abc").block_count == 1
