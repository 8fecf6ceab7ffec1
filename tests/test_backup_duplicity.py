"""The ``duplicity`` method side by side with duplicity 0.8.22 itself (issue 23).

The same versions of a small tree (files rewritten in place, so deltas are small) and of
a small image (1 % of its blocks rewritten per version) are backed up and restored by
real duplicity (``--no-encryption``, gzip as by default, its archive dir kept between
runs) and by the method, on the same kinds of target: the logging S3 server (duplicity's
``boto3+s3://`` backend, the method through storeprobe's S3 client) and a directory
(``file://``). Per backup step and per restore: requests by class (writes, reads, checks,
listings, deletes) within 30 % or 3 of the tool's, bytes written (and read by restores)
within 10 %, objects stored and space within 10 %. The image uses ``--volsize 5`` (and
``volume_size="5MiB"``), so its full backup spans volumes and a file crosses them.
"""

from __future__ import annotations

import io
import itertools
import shutil
import tarfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TypeVar

import attrs
import pytest
from attrs import frozen

from storeprobe import Probe
from storeprobe.backup import Duplicity as DuplicityMethod
from storeprobe.backup.duplicity import _DuplicityReplay, _sigtar, _VolumeWriter
from storeprobe.backup.objects import Blob, BlobPayloads
from storeprobe.dataset import Image, Sizes, Tree
from storeprobe.errors import ConfigurationError
from storeprobe.result import Result
from tests.backup_tools import (
    Duplicity,
    LoggingS3,
    ToolStep,
    Workspace,
    _Target,
    logging_s3,
    materialize,
    run_tool,
)
from tests.conftest import s3_options, ssh_options
from tests.helpers import tree
from tests.servers import Server

CLASSES = ("writes", "reads", "checks", "listings", "deletes")
_CLASS_OF = {"put": "writes", "put-part": "writes", "get": "reads", "head": "checks"}
_CLASS_OF |= {"list": "listings", "delete": "deletes"}  # the rest: multipart control


_D = TypeVar("_D", Tree, Image)


def _versions(first: _D, count: int, evolve: Callable[[_D], _D]) -> list[_D]:
    out = [first]
    while len(out) < count:
        out.append(evolve(out[-1]))
    return out


TREE = _versions(Tree.source_tree(size="8MiB", seed=1), 3, lambda v: v.evolve(rewrite=0.5))
IMAGE = _versions(Image.create("16MiB", seed=1), 3, lambda v: v.evolve(fraction=0.01))
#: (dataset versions, duplicity's --volsize and --s3-multipart-chunk-size in MiB): the
#: tree's full volume (8.4 MB) is a multipart upload of two parts on S3, the image's
#: four volumes single PUTs
CASES: dict[str, tuple[Sequence[Tree | Image], int, int]] = {
    "tree": (TREE, 200, 5),
    "image": (IMAGE, 5, 25),
}


@frozen(kw_only=True)
class Figures:
    """One step's figures, the tool's or the method's."""

    label: str
    requests: dict[str, int] | None  # by class; None where nothing logs them (file://)
    written: int
    read: int
    objects: int
    space: int


@frozen(kw_only=True)
class Row:
    step: str
    tool: Figures
    method: Figures


def tool_figures(step: ToolStep, before: ToolStep | None) -> Figures:
    label = f"{step.action} v{step.version}"
    if step.requests is not None:
        by_class = step.requests.by_class
        requests = {name: by_class[name] for name in CLASSES}
        # bytes read: GET bodies (a listing's XML is not an object's bytes)
        written, read = step.requests.bytes_in, step.requests.where(kind="get").bytes_out
    else:  # on disk: what a backup added to the target's files
        requests = None
        grown = step.file_bytes - (before.file_bytes if before else 0)
        written = grown if step.action == "backup" else 0
        read = 0
    return Figures(
        label=label,
        requests=requests,
        written=written,
        read=read,
        objects=step.objects,
        space=step.space,
    )


def method_figures(result: Result, logged: bool) -> Figures:
    assert result.step is not None
    requests = dict.fromkeys(CLASSES, 0)
    for kind, count in result.requests_by_kind.items():
        if kind in _CLASS_OF:
            requests[_CLASS_OF[kind]] += count
    return Figures(
        label=result.step.label,
        requests=requests if logged else None,
        written=sum(sample.bytes_sent for sample in result.samples),
        read=result.bytes_received,
        objects=result.step.objects_stored or 0,
        space=result.step.space_used or 0,
    )


def run_side_by_side(
    s3: LoggingS3,
    work: Path,
    label: str,
    target: str,
    versions: Sequence[Tree | Image],
    volsize: int,
    part_mib: int = 25,
) -> list[Row]:
    """duplicity, then the method, on ``target`` ("s3" or "disk"); one row per step.
    ``volsize`` and ``part_mib`` are duplicity's ``--volsize`` and
    ``--s3-multipart-chunk-size`` (MiB) and the method's options."""
    extra = ("--s3-multipart-chunk-size", str(part_mib))
    root = work / f"{label}-{target}"
    workspace = Workspace(root / "ws", s3)
    source = root / "src"
    bucket = f"dup-{label}"
    if target == "s3":
        tool = Duplicity.on_s3(
            workspace, source, bucket=bucket, prefix="tool", volsize=volsize, extra=extra
        )
    else:
        tool = Duplicity.on_disk(workspace, source, root / "tool", volsize=volsize)
    run = run_tool(tool, versions, source, root / "restored")
    for step in run.restores:
        assert step.problems == (), step.problems  # the tool restored every version
    method = DuplicityMethod(
        volume_size=volsize * 1024 * 1024, s3_multipart_chunk_size=part_mib * 1024 * 1024
    )
    if target == "s3":
        probe = Probe.from_url(f"s3://{bucket}/method", s3_options(s3.endpoint), streams=1)
    else:
        (root / "method").mkdir()
        probe = Probe.from_url(str(root / "method"), streams=1)
    results = probe.backup_restore(versions[0], versions=versions, method=method)
    assert all(r.ok for r in results), [r.errors for r in results]  # every restore verified
    shutil.rmtree(root, ignore_errors=True)
    steps = [*run.backups, *run.restores]
    rows = []
    for index, (step, result) in enumerate(zip(steps, results, strict=True)):
        before = steps[index - 1] if 0 < index < len(run.backups) else None
        tool_side = tool_figures(step, before)
        method_side = method_figures(result, logged=target == "s3")
        rows.append(Row(step=tool_side.label, tool=tool_side, method=method_side))
    return rows


def _close(method: int, tool: int, *, share: float, slack: int = 0) -> bool:
    return abs(method - tool) <= max(share * tool, slack)


def check(rows: Sequence[Row]) -> list[str]:
    """Every figure outside issue 23's tolerances, described; [] when all are within."""
    wrong = []
    for row in rows:
        tool, method = row.tool, row.method
        if tool.requests is not None and method.requests is not None:
            for name in CLASSES:
                if not _close(method.requests[name], tool.requests[name], share=0.3, slack=3):
                    wrong.append(f"{row.step} {name}: {method.requests[name]} vs {tool.requests}")
        pairs = {"written": (method.written, tool.written)}
        if tool.requests is not None:  # what was read is logged on S3 only
            pairs["read"] = (method.read, tool.read)
        pairs |= {"objects": (method.objects, tool.objects), "space": (method.space, tool.space)}
        for name, (mine, theirs) in pairs.items():
            if not _close(mine, theirs, share=0.1, slack=1024 if name != "objects" else 0):
                wrong.append(f"{row.step} {name}: method {mine:,} vs tool {theirs:,}")
    return wrong


def table(rows: Sequence[Row]) -> str:
    """A markdown table: per step, tool / method for each figure."""
    head = "| step | writes | reads | checks | listings | bytes written | bytes read "
    lines = [head + "| objects | space |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for row in rows:
        tool, method = row.tool, row.method

        def pair(name: str, t: Figures = tool, m: Figures = method) -> str:
            if t.requests is None or m.requests is None:
                return "–"
            return f"{t.requests[name]} / {m.requests[name]}"

        cells = [pair(name) for name in ("writes", "reads", "checks", "listings")]
        read = "–" if tool.requests is None else f"{tool.read:,}"  # disk reads: no log
        cells += [f"{tool.written:,} / {method.written:,}", f"{read} / {method.read:,}"]
        cells += [f"{tool.objects} / {method.objects}", f"{tool.space:,} / {method.space:,}"]
        lines.append(f"| {row.step} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


@pytest.fixture(scope="module")
def s3() -> Iterator[LoggingS3]:
    with logging_s3() as server:
        yield server


@pytest.mark.parametrize("target", ["s3", "disk"])
@pytest.mark.parametrize("label", ["tree", "image"])
def test_the_method_matches_duplicity(
    s3: LoggingS3, tmp_path: Path, label: str, target: str
) -> None:
    versions, volsize, part_mib = CASES[label]
    rows = run_side_by_side(s3, tmp_path, label, target, versions, volsize, part_mib)
    assert [row.step for row in rows] == [
        "backup v0",
        "backup v1",
        "backup v2",
        "restore v0",
        "restore v1",
        "restore v2",
    ]
    assert [row.method.label for row in rows][:3] == ["backup 1", "backup 2", "backup 3"]
    assert check(rows) == [], "\n" + table(rows)
    # a restore reads the chain: each later version reads the whole full backup again,
    # plus one incremental more; the tool and the method alike
    restores = rows[3:]
    if target == "s3":
        full = rows[0].tool.written  # the full backup: its volumes, signatures, manifest
        for earlier, later in itertools.pairwise(restores):
            for side in (earlier.tool, later.tool), (earlier.method, later.method):
                assert full * 0.95 <= side[0].read < side[1].read  # volumes, not sigs
        if label == "image":  # 5 MiB volumes: the full backup is 4, one GET and HEAD each
            assert restores[0].tool.requests == restores[0].method.requests
            assert restores[0].method.requests is not None
            assert restores[0].method.requests["reads"] == 4
            assert restores[2].method.requests["reads"] == 6  # type: ignore[index]


def test_volumes_split_a_large_file_into_64_kib_blocks_across_volumes(tmp_path: Path) -> None:
    image = Image.create("3MiB", seed=2)
    method = DuplicityMethod(volume_size="1MiB")
    results = Probe.from_url(str(tmp_path), streams=1).backup_restore(
        image, versions=[image], method=method
    )
    assert all(r.ok for r in results), [r.errors for r in results]
    backup = results[0]
    # 3 MiB in 48 blocks of 64 KiB + an empty 49th, about 15 blocks per 1 MiB volume
    assert backup.requests_by_kind["put"] == 4 + 2  # 4 volumes, signatures, manifest
    assert backup.requests_by_kind["head"] == 2 * 4
    assert backup.step is not None
    assert backup.step.objects_stored == 6


def test_no_compression_stores_the_tar_stream(tmp_path: Path) -> None:
    image = Image.create("1MiB", seed=2)
    sizes = {}
    for compression in (True, False):
        method = DuplicityMethod(compression=compression)
        (backup, restore) = Probe.from_url(str(tmp_path), streams=1).backup_restore(
            image, versions=[image], method=method
        )
        assert backup.ok
        assert restore.ok
        sizes[compression] = sum(s.bytes_sent for s in backup.samples)
    # gzip deflates the tar headers and the footer's zeros (17 headers, 10 KiB of
    # footer here) by more than its framing adds to the file bytes (18 B + 5 B per
    # 16 383 B)
    assert 0 < sizes[False] - sizes[True] < 0.03 * sizes[False]


def test_bad_options_are_refused() -> None:
    with pytest.raises(ConfigurationError, match="volume_size must be at least 1 MiB"):
        DuplicityMethod(volume_size=1000)
    with pytest.raises(ConfigurationError, match="compression must be True or False"):
        DuplicityMethod(compression="yes")  # type: ignore[arg-type]
    assert attrs.evolve(DuplicityMethod(), volume_size="8MiB").volume_size == 8 * 1024 * 1024


# -- over ssh: duplicity's paramiko+sftp:// backend against OpenSSH on loopback -------------
@attrs.define
class _SftpDuplicity(Duplicity):
    """duplicity to ``paramiko+sftp://`` (its pexpect backend waits for a prompt here)."""

    port: int = 0

    @property
    def url(self) -> str:
        assert self.target.path is not None
        return f"paramiko+sftp://root@127.0.0.1:{self.port}/{self.target.path}"


def test_the_method_matches_duplicity_over_sftp(
    s3: LoggingS3, ssh_server: Server, tmp_path: Path
) -> None:
    assert ssh_server.root is not None
    keys = ssh_server.root.parent / "ssh"
    workspace = Workspace(tmp_path / "ws", s3)
    known = workspace.root / "home" / ".ssh" / "known_hosts"
    known.parent.mkdir(parents=True)
    kind, key = (keys / "host.pub").read_text().split()[:2]
    known.write_text(f"[127.0.0.1]:{ssh_server.port} {kind} {key}\n")
    target = ssh_server.root / "dup-tool"
    tool = _SftpDuplicity(
        workspace,
        tmp_path / "src",
        _Target.disk(workspace, target),
        extra=(f"--ssh-options=-oIdentityFile={keys / 'client'}",),
        port=ssh_server.port,
    )
    run = run_tool(tool, TREE, tmp_path / "src", tmp_path / "restored")
    assert [s.problems for s in run.restores] == [()] * 3
    (ssh_server.root / "dup-method").mkdir()
    probe = Probe.from_url(
        f"sftp://127.0.0.1{ssh_server.root / 'dup-method'}", ssh_options(ssh_server), streams=1
    )
    results = probe.backup_restore(TREE[0], versions=TREE, method=DuplicityMethod())
    assert all(r.ok for r in results), [r.errors for r in results]
    steps = [*run.backups, *run.restores]
    rows = [
        Row(
            step=f"{step.action} v{step.version}",
            tool=tool_figures(step, steps[i - 1] if 0 < i < 3 else None),
            method=method_figures(result, logged=False),
        )
        for i, (step, result) in enumerate(zip(steps, results, strict=True))
    ]
    assert check(rows) == [], "\n" + table(rows)


def _tar_members(data: bytes) -> list[tuple[str, int]]:
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
        return [(member.name, member.size) for member in tar.getmembers()]


def test_volumes_without_compression_are_duplicitys_tar_streams(
    s3: LoggingS3, tmp_path: Path
) -> None:
    """With ``--no-compression`` a volume is a plain tar: the method's volumes hold the
    same members (names, sizes: file blocks, deltas, deleted entries, directories), in
    the same order, cut into the same volumes, as duplicity's, full and incremental; and
    so do the signature archives (librsync signatures of the same sizes); the manifests
    have the same lines but for host, directory and volume hashes."""
    first = Tree.generate(40, Sizes.lognormal("20KiB", 1.5, "900KiB"), seed=4)
    versions = [first, first.evolve(changed=0.2, added=0.1, deleted=0.1, rewrite=0.5)]
    source, target = tmp_path / "src", tmp_path / "target"
    tool = Duplicity.on_disk(
        Workspace(tmp_path / "ws", s3), source, target, volsize=1, extra=("--no-compression",)
    )
    replay = DuplicityMethod(volume_size="1MiB", compression=False).replay()
    assert isinstance(replay, _DuplicityReplay)
    for version, previous, kind in (
        (versions[0], None, "full"),
        (versions[1], versions[0], "inc"),
    ):
        materialize(version, source)
        tool.backup(version)
        found = sorted(target.glob(f"duplicity-{kind}.*.difftar"), key=_volume)
        theirs = [_tar_members(path.read_bytes()) for path in found]
        writer = _VolumeWriter(size=1024 * 1024, compression=False)
        ours: list[list[tuple[str, int]]] = []

        def take(writer: _VolumeWriter = writer, ours: list[list[tuple[str, int]]] = ours) -> None:
            writer.finish()
            segments, _ = writer.volumes.pop()
            volume = BlobPayloads([Blob(key="v", segments=segments)]).payload_bytes(0)
            ours.append(_tar_members(volume))

        sigs: list[tuple[str, bytes | None, bool, int]] = []
        listed: list[tuple[str, str]] = []
        for block in replay._blocks_of(version, previous, sigs, listed):
            if writer.entries and writer.full():
                take()
            writer.add(block)
        take()
        assert [len(v) for v in ours] == [len(v) for v in theirs]
        assert ours == theirs
        # the signature archive: the same members, and the same bytes count
        (signatures,) = target.glob(f"duplicity-{'full' if kind == 'full' else 'new'}-sig*")
        assert _tar_members(_sigtar(sigs, False)) == _tar_members(signatures.read_bytes())
        assert len(_sigtar(sigs, False)) == signatures.stat().st_size
        # the manifest: the same volumes' first and last paths and the same file list
        (manifest,) = target.glob(f"duplicity-{kind}.*.manifest")
        assert _manifest_lines(replay._manifest(listed, writer.bounds).decode()) == (
            _manifest_lines(manifest.read_text())
        )
        names = {name.split("/")[0] for volume in ours for name, _ in volume}
        if kind == "full":
            assert len(theirs) > 1  # the tree spans volumes
            assert names == {"snapshot", "multivol_snapshot"}
        else:
            assert {"diff", "deleted", "snapshot"} <= names  # deltas, deletions, new files


def _manifest_lines(text: str) -> list[str]:
    """A manifest's lines but the host's name, the source directory and volume hashes."""
    return [
        line
        for line in text.splitlines()
        if not line.startswith(("Hostname ", "Localdir ", "    Hash SHA1 "))
    ]


def _volume(path: Path) -> int:
    return int(path.name.split(".vol")[1].split(".")[0])


def test_restore_the_latest_then_an_older_version(tmp_path: Path) -> None:
    versions = _versions(
        Tree.generate(30, Sizes.lognormal("8KiB", 1.5, "300KiB"), seed=6), 3, Tree.evolve
    )
    results = Probe.from_url(str(tmp_path), streams=2).backup_restore(
        versions[0], versions=versions, method="duplicity", restore=[2, 0]
    )
    assert all(r.ok for r in results), [r.errors for r in results]  # every byte verified
    latest, older = (r.requests_by_kind for r in results[3:])
    # duplicity restores into an empty directory, whatever it held: v2 reads the full
    # backup's volume and both incrementals', v0 the full backup's alone
    assert (latest["get"], latest["head"]) == (3, 3)
    assert (older["get"], older["head"]) == (1, 1)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("client", ["obstore", "s3fs"])
def test_restores_read_ranges_from_a_server_that_answers_them_with_200(
    s3_server: Server, s3_bucket_dir: Path, client: str
) -> None:
    """rclone serve s3 answers a ranged GET with 200 and the whole object, which obstore
    refuses: the method's 8 MiB ranged reads go through the client the scenario's range
    check chose (s3fs there), and every version restores."""
    big = Tree.generate(3, Sizes.fixed("9MiB"), seed=2)  # restores read 8 MiB ranges
    before = tree(s3_bucket_dir)
    probe = Probe.from_url("s3://bench/dupranges", s3_options(s3_server.endpoint), client=client)
    results = probe.backup_restore(big, versions=2, method="duplicity")
    assert all(r.ok for r in results), [r.errors for r in results]
    restores = [r for r in results if r.step is not None and r.step.kind == "restore"]
    assert all(r.requests_by_kind.get("get", 0) >= 2 for r in restores)
    assert tree(s3_bucket_dir) == before
