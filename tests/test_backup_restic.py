"""The ``restic`` method: its repository layout on the local disk, and side by side with
restic 0.14 itself on the same versions against the logging S3 server (moto).

Side by side: each version is materialized into a directory and backed up by the real
restic (bucket ``restic-tool``, with a cache dir, the default a user has, and
``GOMAXPROCS=1``: one blob saver, so blobs enter packs in file order), then the method
runs on the same versions through storeprobe (bucket ``restic-method``, obstore) with
the chunker polynomial of restic's repository (``restic cat config``); per backup and
per restore, requests of each kind must be within 30 % or 3 of restic's, bytes written
and read within 10 %, objects and space on the target within 10 % (issue 23's
tolerances). restic's ``init`` is counted in its first backup: the method's first
backup makes the repository, as a user's first ``restic init && restic backup``.
Requests about the bucket itself (restic's HEAD of the bucket in ``init``) are left out:
a storeprobe run never asks about its bucket.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import attrs
import pytest

from storeprobe import Probe
from storeprobe.backup import Replay, Restic, Session, method_for
from storeprobe.dataset import Image, Sizes, Tree
from storeprobe.errors import ConfigurationError
from storeprobe.result import Result
from storeprobe.units import KiB, MiB
from tests.backup_tools import (
    LoggingS3,
    ToolStep,
    Workspace,
    logging_s3,
    run_tool,
)
from tests.backup_tools import (
    Restic as ResticTool,
)
from tests.conftest import s3_options, ssh_options
from tests.helpers import tree
from tests.servers import Server

TREE = Tree.source_tree(size="8MiB", seed=1)
TREES: tuple[Tree, ...] = (TREE, TREE.evolve(seed=1), TREE.evolve(seed=1).evolve(seed=2))
IMAGE = Image.create("16MiB", block_size="64KiB", seed=5)
IMAGES: tuple[Image, ...] = (
    IMAGE,
    IMAGE.evolve(fraction=0.03, seed=1),
    IMAGE.evolve(fraction=0.03, seed=1).evolve(fraction=0.03, seed=2),
)
#: the request classes of issue 23's tolerances (tests/s3_log.py, Requests.by_class)
CLASSES = ("writes", "reads", "checks", "listings", "deletes")
_METHOD_CLASS = {
    "put": "writes",
    "put-part": "writes",
    "create-multipart": "control",
    "complete-multipart": "control",
    "get": "reads",
    "head": "checks",
    "list": "listings",
    "delete": "deletes",
}


# -- the method alone, on the local disk ---------------------------------------------------
def _local(tmp_path: Path, versions: Sequence[Tree | Image], **kw: object) -> list[Result]:
    root = tmp_path / "target"
    root.mkdir()
    method = kw.pop("method", "restic")
    results = Probe.from_url(str(root), streams=2).backup_restore(
        versions[0],
        versions=list(versions),
        method=method,  # type: ignore[arg-type]
        **kw,  # type: ignore[arg-type]
    )
    assert all(r.ok for r in results), [r.errors for r in results]
    assert tree(root) == {}  # everything written is gone
    return list(results)


def test_the_repository_step_by_step(tmp_path: Path) -> None:
    results = _local(tmp_path, TREES)
    counts = [r.requests_by_kind for r in results]
    # backup 1 makes the repository (key, config) then backs up: lock, one data pack and
    # one tree pack (8 MiB < 16 MiB), index, snapshot; the lock deleted
    assert counts[0] == {"list": 9, "head": 2, "put": 7, "get": 2, "delete": 1}
    # later backups: the same opening, no existence check of any blob (the index answers)
    assert counts[1] == counts[2] == {"list": 7, "head": 1, "get": 2, "put": 5, "delete": 1}
    steps = [r.step for r in results if r.step is not None]
    assert [s.objects_stored for s in steps] == [6, 10, 14, 14, 14, 14]
    # a restore reads key and config, then one range of each pack holding its data: the
    # first version's pack, then each later backup's data pack too
    assert [c["get"] for c in counts[3:]] == [3, 4, 5]
    assert all(c["put"] == c["delete"] == 1 for c in counts[3:])  # the lock
    # incremental backups write about what changed (new chunks, trees, index, snapshot)
    for step, (new, old) in zip(steps[1:3], zip(TREES[1:], TREES, strict=False), strict=True):
        changed = new.diff(old).changed_bytes
        assert changed < step.moved_bytes < changed + 64 * KiB


@attrs.frozen
class _Watching(Restic):
    """``restic`` that records the sizes of the data packs on the target after each backup."""

    name: ClassVar[str] = "restic-watching"
    seen: ClassVar[list[list[int]]] = []

    def replay(self) -> Replay:
        inner = super().replay()
        seen = self.seen

        class Watching(Replay):
            def backup(self, session: Session, version: Any, previous: Any) -> None:
                inner.backup(session, version, previous)
                found = session.target.fs.find(session.key("data"), detail=True)
                seen.append(sorted(int(entry["size"]) for entry in found.values()))

            def restore(self, session: Session, version: Any, held: Any, directory: Path) -> None:
                inner.restore(session, version, held, directory)

        return Watching()


def test_packs_fill_to_the_pack_size(tmp_path: Path) -> None:
    _Watching.seen.clear()
    _local(tmp_path, TREES[:1], method=_Watching(pack_size="1MiB"), restore=[])
    (packs,) = _Watching.seen
    tree_pack, *data = packs  # the one tree pack is the smallest (40 trees, ~28 KB)
    assert tree_pack < 64 * KiB
    assert len(data) >= 8  # 8 MiB of chunks in packs of 1 MiB
    full, last = data[1:], data[0]  # every pack full at 1 MiB (plus its last blob) but one
    assert all(MiB <= size < 2 * MiB for size in full)
    assert last < 2 * MiB


def test_chunks_stay_within_restics_limits_and_dedup_an_image(tmp_path: Path) -> None:
    results = _local(tmp_path, IMAGES[:2], restore=[1])
    first, second = (r.step for r in results[:2])
    assert first is not None
    assert second is not None
    # 16 MiB cut into chunks of 0.5-8 MiB (about 1.5 MiB each) in two data packs
    assert IMAGE.total_bytes < first.moved_bytes < IMAGE.total_bytes * 1.01
    changed = IMAGES[1].diff(IMAGE).changed_bytes
    # only the chunks around the rewritten blocks are stored again
    assert changed < second.moved_bytes < IMAGE.total_bytes * 0.7


def test_an_older_version_after_a_newer_one(tmp_path: Path) -> None:
    small = Tree.generate(40, Sizes.lognormal("8KiB", 1.5, "2MiB"), seed=4)
    versions = [small, small.evolve(seed=1), small.evolve(seed=1).evolve(seed=2)]
    results = _local(tmp_path, versions, restore=[2, 0])  # every byte verified
    assert [r.step.version for r in results[3:] if r.step] == [2, 0]


def test_the_chunks_are_restics_own(tmp_path: Path) -> None:
    """restic backs up one 12 MiB file into a local repository; with its polynomial the
    method cuts the same chunks: every data blob ID the same."""
    image = Image.create("12MiB", block_size="1MiB", seed=9)
    source = tmp_path / "source"
    source.mkdir()
    (source / "disk.img").write_bytes(image.payload(image.files[0]))
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp_path),
        "RESTIC_PASSWORD": "storeprobe",
        "RESTIC_REPOSITORY": str(tmp_path / "repository"),
        "RESTIC_CACHE_DIR": str(tmp_path / "cache"),
    }

    def restic(*args: str) -> str:
        done = subprocess.run(
            ["restic", *args], env=env, cwd=source, capture_output=True, text=True, check=True
        )
        return done.stdout

    restic("init")
    restic("backup", ".")
    polynomial = json.loads(restic("cat", "config"))["chunker_polynomial"]
    stored = {
        line.split()[1] for line in restic("list", "blobs").splitlines() if line.startswith("data ")
    }
    replay = Restic(polynomial=polynomial).replay()
    cut = {blob_id for blob_id, _ in replay._chunks(image, image.files[0])}  # type: ignore[attr-defined]
    assert len(stored) > 3
    assert cut == stored


def test_bad_options_are_refused() -> None:
    assert Restic().pack_size == 16 * MiB
    assert Restic(pack_size="20MiB").pack_size == 20 * MiB  # kopia's packs
    assert isinstance(method_for("restic", "s3"), Restic)
    with pytest.raises(ConfigurationError, match="pack_size must be from 1 MiB to 1 GiB"):
        Restic(pack_size="512KiB")
    with pytest.raises(ConfigurationError, match="pack_size must be from 1 MiB to 1 GiB"):
        Restic(pack_size="2GiB")
    assert Restic(polynomial="30b8dbb4dc44a3").polynomial == 0x30B8DBB4DC44A3
    for bad in ("xyz", 0x1234, True):
        with pytest.raises(ConfigurationError, match="polynomial must be restic's chunker"):
            Restic(polynomial=bad)


# -- side by side with restic 0.14 on the logging S3 server -----------------------------------
@pytest.fixture(scope="module")
def s3() -> Iterator[LoggingS3]:
    with logging_s3() as server:
        yield server


def _tool_counts(steps: Sequence[ToolStep]) -> dict[str, int]:
    counts = dict.fromkeys(CLASSES, 0)
    for step in steps:
        assert step.requests is not None
        for name in CLASSES:
            counts[name] += step.requests.by_class[name]
    return counts


def _method_counts(result: Result) -> dict[str, int]:
    counts = dict.fromkeys(CLASSES, 0)
    for kind, count in result.requests_by_kind.items():
        name = _METHOD_CLASS[kind]
        if name in counts:
            counts[name] += count
    return counts


def _figures(tool: Sequence[ToolStep], method: Result) -> tuple[dict[str, int], dict[str, int]]:
    assert method.step is not None
    last = tool[-1]
    restic = _tool_counts(tool) | {
        "bytes written": sum(s.bytes_sent or 0 for s in tool),
        "bytes read": sum(s.bytes_received or 0 for s in tool),
        "objects": last.objects,
        "space": last.space,
    }
    replay = _method_counts(method) | {
        "bytes written": sum(s.bytes_sent for s in method.samples),
        "bytes read": sum(s.bytes_received for s in method.samples),
        "objects": method.step.objects_stored or 0,
        "space": method.step.space_used or 0,
    }
    return restic, replay


Row = tuple[str, Mapping[str, int], Mapping[str, int]]


class _OneBlobSaver(Workspace):
    """restic with ``GOMAXPROCS=1``: one blob saver, so the blobs enter their packs in
    the order the files' chunks come (with more, the order varies from run to run, and
    so do the ranges a restore reads)."""

    def env(self, **extra: str) -> dict[str, str]:
        return super().env(GOMAXPROCS="1", **extra)


def side_by_side(
    s3: LoggingS3, root: Path, versions: Sequence[Tree | Image], label: str
) -> list[Row]:
    """Run restic, then the method with restic's chunker polynomial, on ``versions``; per
    step (name, restic's figures, the method's)."""
    workspace = _OneBlobSaver(root / "workspace", s3)
    source = root / "source"
    source.mkdir()
    tool = ResticTool.on_s3(workspace, source, bucket="restic-tool", prefix=label)
    run = run_tool(tool, versions, source, root / "restored")
    assert all(not step.problems for step in run.restores)
    config, _ = workspace.run(tool._argv("cat", "config", "--no-lock"))
    polynomial = json.loads(config)["chunker_polynomial"]
    if "restic-method" not in s3.buckets():
        s3.create_bucket("restic-method")
    probe = Probe.from_url(
        f"s3://restic-method/{label}", s3_options(s3.endpoint), client="obstore", streams=4
    )
    method = Restic(polynomial=polynomial)
    results = probe.backup_restore(versions[0], versions=list(versions), method=method)
    assert all(r.ok for r in results), [r.errors for r in results]
    assert s3.objects("restic-method", label) == ()
    assert run.init is not None
    steps = [[run.init, run.backups[0]], *([s] for s in run.backups[1:])]
    steps += [[s] for s in run.restores]
    names = [r.step.label for r in results if r.step]
    return [
        (name, *_figures(tool_steps, result))
        for name, tool_steps, result in zip(names, steps, results, strict=True)
    ]


def table(rows: Sequence[Row]) -> str:
    """The side-by-side rows as a markdown table (restic / method in each cell)."""
    keys = list(rows[0][1])
    lines = ["| step | " + " | ".join(keys) + " |", "|---" * (len(keys) + 1) + "|"]
    for name, tool, method in rows:
        cells = [f"{tool[k]:,} / {method[k]:,}" for k in keys]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _check(rows: Sequence[Row]) -> None:
    shown = table(rows)
    for name, tool, method in rows:
        for kind in CLASSES:
            assert abs(method[kind] - tool[kind]) <= max(3, 0.3 * tool[kind]), (
                f"{name}: {kind}\n{shown}"
            )
        for figure in ("bytes written", "bytes read", "objects", "space"):
            if name.startswith("restore") and figure == "bytes written":
                assert method[figure] < 1024, f"{name}\n{shown}"
                continue  # the lock alone (restic's count adds aws-chunked framing)
            if name.startswith("backup") and figure == "bytes read":
                continue  # key and config: a few hundred bytes
            assert abs(method[figure] - tool[figure]) <= 0.1 * tool[figure], (
                f"{name}: {figure}\n{shown}"
            )


def test_side_by_side_with_restic_on_a_tree(s3: LoggingS3, tmp_path: Path) -> None:
    _check(side_by_side(s3, tmp_path, TREES, "tree"))


def test_side_by_side_with_restic_on_an_image(s3: LoggingS3, tmp_path: Path) -> None:
    _check(side_by_side(s3, tmp_path, IMAGES, "image"))


# -- the method on other targets: ranged reads wherever restic can restore ---------------------
def test_restic_over_sftp_and_rclone_s3(
    ssh_server: Server, s3_server: Server, s3_bucket_dir: Path
) -> None:
    small = Tree.generate(30, Sizes.lognormal("8KiB", 1.5, "3MiB"), seed=2)
    assert ssh_server.root is not None
    root = ssh_server.root / "restic"
    root.mkdir(exist_ok=True)
    before = tree(root), tree(s3_bucket_dir)
    probes = [
        Probe.from_url(f"sftp://127.0.0.1{root}", ssh_options(ssh_server), streams=2),
        # rclone answers ranged GETs with 200: the range check picks s3fs
        Probe.from_url("s3://bench/restic", s3_options(s3_server.endpoint), streams=2),
    ]
    for probe in probes:
        results = probe.backup_restore(small, versions=2, method="restic")
        assert all(r.ok for r in results), [r.errors for r in results]
        assert [r.requests_by_kind.get("get") for r in results[2:]] == [3, 4]
    assert (tree(root), tree(s3_bucket_dir)) == before


def test_restic_chunks_cut_window_by_window_are_the_chunks_of_the_whole() -> None:
    """restic's chunker restarts at every chunk, so cutting a file a window at a time
    (the backup's bounded memory) finds exactly the chunks of the whole file."""
    from storeprobe.backup.restic import CHUNK_MAX, POLYNOMIAL, _cut
    from storeprobe.dataset import Image
    from storeprobe.manifest import cut_windows

    image = Image.create("40MiB", block_size="1MiB", seed=4)
    data = image.payload(image.file)
    polynomial = POLYNOMIAL

    def cut(part: bytes) -> list[tuple[int, int]]:
        return _cut(part, polynomial)

    whole = [(offset, data[offset : offset + length]) for offset, length in cut(data)]
    windowed = list(cut_windows(cut, lambda a, b: data[a:b], len(data), 2 * CHUNK_MAX + 123))
    assert len(whole) > 4
    assert windowed == whole


def test_the_two_pass_split_search_finds_every_twenty_bit_zero() -> None:
    """``_splits`` (the fingerprint's low 16 bits first, 20 where those are zero) gives
    exactly the positions where the 20-bit fingerprint, computed at every position from
    the pair tables, is zero; the pair tables agree with the fingerprint computed bit by
    bit over GF(2) (restic's definition), so no restic binary is needed to check it."""
    import numpy as np

    from storeprobe.backup.restic import POLYNOMIAL, _pair_tables, _splits

    data = np.random.default_rng(7).integers(0, 256, 4 * MiB, dtype=np.uint8)
    low, high = 63, data.size
    window = data.astype(np.intp)
    words = window[1:] | (window[:-1] << 8)
    everywhere = np.zeros(high - low, dtype=np.uint32)
    for pair, table in enumerate(_pair_tables(POLYNOMIAL)):
        everywhere ^= table[words[62 - 2 * pair : 62 - 2 * pair + high - low]]
    expected = low + np.flatnonzero(everywhere == 0)
    assert len(expected) >= 2  # the seed's data has splits: the check is not vacuous
    assert _splits(data, low, high, POLYNOMIAL).tolist() == expected.tolist()

    def bitwise(window_bytes: bytes) -> int:  # the 64 bytes as a polynomial, mod POLYNOMIAL
        value, degree = 0, POLYNOMIAL.bit_length() - 1
        for byte in window_bytes:
            for bit in range(7, -1, -1):
                value = (value << 1) | ((byte >> bit) & 1)
                if value >> degree:
                    value ^= POLYNOMIAL
        return value & ((1 << 20) - 1)

    for end in [63, 1000, int(expected[0])]:
        assert bitwise(data[end - 63 : end + 1].tobytes()) == int(everywhere[end - low])
