"""The ``duplicacy`` method proven against Duplicacy's documented algorithm and code
(Duplicacy itself is not packaged here), on real storages: the local disk and S3
(``rclone serve s3`` behind a proxy that sees every request)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import attrs
import numpy as np
import pytest

from storeprobe import Probe
from storeprobe.backup import Chunking, Duplicacy, Replay, Session
from storeprobe.backup._buzhash import Cutter
from storeprobe.backup.duplicacy import SNAPSHOT_ID, chunk_id
from storeprobe.backup.objects import Blob, BlobPayloads
from storeprobe.dataset import Image, Tree
from storeprobe.errors import ConfigurationError
from storeprobe.notices import Code
from tests.conftest import s3_options, ssh_options
from tests.duplicacy_chunkmaker import GoChunkMaker
from tests.helpers import tree
from tests.http_proxy import CountingProxy
from tests.servers import Server

AVERAGE = 64 * 1024
TREE = Tree.source_tree(size="3MiB", seed=7)
# a few files changed, a few added and deleted: the second backup's stream is small
NEXT = TREE.evolve(changed=4, added=2, deleted=2, seed=1)
LAST = NEXT.evolve(changed=4, added=2, deleted=2, seed=2)


# -- the chunk maker, byte for byte ---------------------------------------------------------
def _files(seed: int) -> list[bytes]:
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 24_000, 20)
    files = [rng.integers(0, 256, int(n), dtype=np.uint8).tobytes() for n in sizes]
    files.insert(3, bytes(9_000))  # no boundary inside: a chunk cut at the maximum
    files.append(b"ab" * 3_000)
    return files


@pytest.mark.parametrize("seed", [1, 2])
def test_the_cutter_is_duplicacys_chunk_maker(seed: int) -> None:
    files = _files(seed)
    average, minimum, maximum = 4096, 1024, 8192
    reference: list[bytes] = []
    go = GoChunkMaker(average, minimum, maximum, b"duplicacy")
    for data in files:  # BackupManager.Backup: AddData file after file on one maker
        go.add_data(data, reference.append)
    go.add_data(None, reference.append)
    ends = np.cumsum([len(chunk) for chunk in reference]).tolist()
    stream = b"".join(files)
    assert b"".join(reference) == stream
    cutter = Cutter(average, minimum, maximum, seed=b"duplicacy")
    fed = [end for data in files for end in cutter.feed(data)] + cutter.finish()
    assert fed == ends  # fed file by file
    blocks = [stream[i : i + 5_000] for i in range(0, len(stream), 5_000)]
    assert list(Cutter(average, minimum, maximum).cut(blocks)) == ends  # any blocks
    lengths = np.diff([0, *ends])
    assert lengths.max() == maximum  # the zero run forced a cut at the maximum
    assert (lengths[:-1] >= minimum).all()


def test_chunk_sizes_follow_duplicacys_distribution() -> None:
    data = np.random.default_rng(3).integers(0, 256, 8 << 20, dtype=np.uint8).tobytes()
    average = 16 * 1024
    method = Duplicacy(chunking=Chunking(average=average))
    ends = list(
        method.cutter(average).cut(data[i : i + (1 << 20)] for i in range(0, 8 << 20, 1 << 20))
    )
    lengths = np.diff([0, *ends])
    # min + average·(1 − e^−3.75) on average: about 1.23 × average, so ≈ size ÷ (1.23 average)
    assert 0.7 * len(data) / average < len(lengths) < 1.0 * len(data) / average
    assert (lengths[:-1] >= average // 4).all()
    assert (lengths <= 4 * average).all()


def test_chunk_ids_are_duplicacys() -> None:
    import hashlib

    data = b"pack and split"
    inner = hashlib.blake2b(data, digest_size=32, key=b"duplicacy").digest()
    assert chunk_id(data) == hashlib.blake2b(inner, digest_size=32, key=b"duplicacy").hexdigest()


# -- a method that records what the storage holds after each step ------------------------------
@attrs.frozen
class _Watched(Duplicacy):
    """``duplicacy``, and after each step the objects under the run prefix (untimed)."""

    log: list[Any] = attrs.field(factory=list, eq=False)

    def replay(self) -> Replay:
        options = {f.name: getattr(self, f.name) for f in attrs.fields(Duplicacy)}
        inner = Duplicacy(**options).replay()
        log = self.log

        class Watching(Replay):
            def backup(self, session: Session, version: Any, previous: Any) -> None:
                log.append(("step", f"backup {version.version}"))
                inner.backup(session, version, previous)
                log.append(("stored", _objects(session), inner))

            def restore(self, session: Session, version: Any, held: Any, directory: Path) -> None:
                log.append(("step", f"restore {version.version}"))
                inner.restore(session, version, held, directory)

        return Watching()


def _objects(session: Session) -> dict[str, int]:
    fs = session.target.fs
    fs.invalidate_cache()
    found = fs.find(session.prefix, detail=True)
    base = session.prefix.rstrip("/") + "/"
    return {
        key.split(base, 1)[1]: int(entry["size"])
        for key, entry in found.items()
        if entry.get("type") != "directory"
    }


def _replay(log: list[Any]) -> Any:
    return next(entry[2] for entry in log if entry[0] == "stored")


def _stored(log: list[Any]) -> list[dict[str, int]]:
    return [entry[1] for entry in log if entry[0] == "stored"]


def _chunks(objects: dict[str, int]) -> dict[str, int]:
    return {key: size for key, size in objects.items() if key.startswith("chunks/")}


def _cleaned(results: Any) -> None:
    """No step warns that cleanup left something behind."""
    codes = [w.code for r in results for w in r.warnings]
    assert Code.CLEANUP_INCOMPLETE not in codes, [w.message for r in results for w in r.warnings]


def _local(tmp_path: Path) -> tuple[Probe, Path]:
    root = tmp_path / "target"
    root.mkdir()
    return Probe.from_url(str(root), streams=3), root


def test_local_backups_pack_split_and_check_only_new_chunks(tmp_path: Path) -> None:
    probe, root = _local(tmp_path)
    method = _Watched(chunking=Chunking(average=AVERAGE))
    results = probe.backup_restore(TREE, versions=[TREE, NEXT, LAST], method=method)
    assert all(r.ok for r in results), [r.errors for r in results]  # every restore verified
    _cleaned(results)
    assert not list(root.iterdir())  # nothing left, not even a folder
    first, second, _ = _stored(method.log)
    replay = _replay(method.log)
    snapshots = replay.snapshots
    # one object per chunk, named by its id, nested chunks/<2 hex>/<62 hex>
    for key in _chunks(first):
        _, nest, rest = key.split("/")
        assert (len(nest), len(rest)) == (2, 62)
    assert f"snapshots/{SNAPSHOT_ID}/1" in first
    assert "config" in first
    # the first snapshot: every file of v0 in one stream, cut into chunks
    snapshot = snapshots[0]
    file_chunks = set(snapshot.chunks)
    lengths = [replay.stored[cid].size for cid in snapshot.chunks]
    assert sum(lengths) == TREE.total_bytes  # nothing repeated, nothing lost
    assert 0.7 * TREE.total_bytes / AVERAGE <= len(lengths) <= TREE.total_bytes / AVERAGE
    assert all(AVERAGE // 4 <= n <= 4 * AVERAGE for n in lengths[:-1])
    assert lengths[-1] <= 4 * AVERAGE
    # chunks cross file boundaries, and their stored bytes are the files' bytes
    crossing = [
        cid for cid in file_chunks if len({p.file.path for p in replay.stored[cid].segments}) >= 2
    ]
    assert crossing
    sample = replay.stored[crossing[0]]
    payload = BlobPayloads([Blob(key="x", segments=sample.segments)]).payload_bytes(0)
    assert chunk_id(payload) == sample.id
    # the snapshot's own file list is chunks too: the metadata sequences are objects
    for cid in snapshot.metadata:
        assert f"chunks/{cid[:2]}/{cid[2:]}" in first
    assert set(_chunks(first)) == {f"chunks/{c[:2]}/{c[2:]}" for c in snapshot.referenced}
    # backup 2: one lookup per chunk the first snapshot does not reference, and no other
    counts = [r.requests_by_kind for r in results]
    new_objects = set(_chunks(second)) - set(_chunks(first))
    previous = {f"chunks/{c[:2]}/{c[2:]}" for c in snapshot.referenced}
    assert not new_objects & previous
    new_referenced = snapshots[1].referenced - snapshot.referenced
    assert len(new_objects) == len(new_referenced)
    # HEADs: config, nesting, the last snapshot file, its 3+ sequence chunks (local disk:
    # no snapshot cache on upload, so they are read back), then the new chunks
    sequence_reads = len(set(snapshot.metadata))
    assert counts[1]["head"] == 3 + sequence_reads + len(new_referenced)
    assert counts[1]["head"] < len(set(snapshots[1].chunks)) / 2
    assert counts[1]["put"] == len(new_referenced) + 1  # the chunks, then the snapshot file
    assert counts[1]["get"] == 1 + 1 + sequence_reads  # config, snapshot file, sequences
    assert counts[1]["list"] == 1  # snapshots/<id>/
    # backup 1: init (HEAD + PUT config), open (HEAD, GET config, HEAD nesting), LIST
    # snapshots; no chunk listing on a local disk; every chunk looked up and written
    all_first = len(set(snapshot.referenced))
    assert counts[0] == {"head": 3 + all_first, "put": 1 + all_first + 1, "get": 1, "list": 1}
    # the changed files' bytes were moved, not the tree's
    changed = NEXT.diff(TREE).changed_bytes
    assert changed <= results[1].step.moved_bytes < TREE.total_bytes / 2  # type: ignore[union-attr]
    # restores: the first reads every chunk (a lookup and a GET each), the next only
    # chunks of changed files
    restores = counts[3:]
    # HEAD config, nesting and the snapshot file; GET config and the snapshot file; then
    # a HEAD and a GET per sequence chunk the cache lacks and per file chunk
    assert restores[0]["get"] == restores[0]["head"] - 1
    assert restores[1]["get"] < restores[0]["get"] / 2
    assert [r.step.version for r in results[3:]] == [0, 1, 2]  # type: ignore[union-attr]


def test_a_hash_backup_repacks_every_file_and_checks_only_new_chunks(tmp_path: Path) -> None:
    probe, _ = _local(tmp_path)
    quick = _Watched(chunking=Chunking(average=AVERAGE))
    rehash = _Watched(chunking=Chunking(average=AVERAGE), hash_all=True)
    counts = []
    for method in (quick, rehash):
        results = probe.backup_restore(TREE, versions=[TREE, NEXT], method=method)
        assert all(r.ok for r in results), [r.errors for r in results]
        _cleaned(results)
        counts.append(results[1].requests_by_kind)
    (q1, q2), (h1, h2) = ([_replay(m.log).snapshots[v] for v in (0, 1)] for m in (quick, rehash))
    assert q1.chunks == h1.chunks  # the first backup packs every file either way
    # -hash re-cuts the whole stream: unchanged stretches give the same chunks back,
    # so it checks only chunks around the changed files, which quick mode packs alone
    fresh = h2.referenced - h1.referenced
    assert 0 < len(fresh) < len(set(h2.chunks)) / 2
    reused = set(q2.chunks) & set(q1.chunks)
    assert len(reused) > len(set(q2.chunks)) / 2
    # HEADs: config, nesting, snapshot file; the chunks and lengths sequences read back
    # (a -hash backup lists no remote files, so not the files sequence); the new chunks
    read_back = len(set(h1.sequence_chunks(["chunks", "lengths"])))
    assert counts[1]["head"] == 3 + read_back + len(fresh)
    assert counts[0]["head"] == 3 + len(set(q1.metadata)) + len(q2.referenced - q1.referenced)


@pytest.mark.parametrize("budget", [256 * 1024 * 1024, 200_000])
def test_an_image_restore_reads_only_the_chunks_that_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, budget: int
) -> None:
    # a small window: backups write and restores fetch in many windows, the restore
    # writing the image as they come
    monkeypatch.setattr("storeprobe.backup.duplicacy._WINDOW", budget)
    probe, _ = _local(tmp_path)
    image = Image.create("2MiB", block_size="64KiB", seed=2)
    versions = [image, image.evolve(fraction=0.05, pattern="clustered", seed=1)]
    results = probe.backup_restore(
        image, versions=versions, method="duplicacy", chunk_size="64KiB", restore=[0, 1]
    )
    assert all(r.ok for r in results), [r.errors for r in results]
    _cleaned(results)
    full, patch = (r.step for r in results[2:])
    assert full is not None
    assert patch is not None
    changed = versions[1].diff(versions[0]).changed_bytes
    # in place: chunks wholly inside the local file with the same bytes are not read
    assert changed <= patch.moved_bytes < full.moved_bytes / 2


# -- S3: what the server sees ----------------------------------------------------------------
@pytest.mark.parametrize("client", ["obstore", "s3fs"])
def test_s3_requests_per_step_match_the_server(
    counting_proxy: CountingProxy, s3_bucket_dir: Path, client: str
) -> None:
    seen: list[Any] = []
    lock = threading.Lock()

    def record(method: str, path: str, number: int) -> None:
        with lock:
            seen.append((method, path))

    method = _Watched(chunking=Chunking(average=AVERAGE), log=seen)
    counting_proxy.fail_when = record
    options = s3_options(f"http://127.0.0.1:{counting_proxy.port}")
    before = tree(s3_bucket_dir)
    probe = Probe.from_url("s3://bench/dup", options, client=client, streams=4)
    results = probe.backup_restore(TREE, versions=[TREE, NEXT], method=method)
    assert all(r.ok for r in results), [r.errors for r in results]
    _cleaned(results)
    assert tree(s3_bucket_dir) == before
    steps = _by_step(seen)
    inner = _replay(seen)
    first = inner.snapshots[0]
    for label, result in zip(
        ["backup 0", "backup 1", "restore 0", "restore 1"], results, strict=True
    ):
        wire = steps[label]
        # a request the client retried reaches the server twice and the step once: the
        # extra ones are the retries the sample counted (rclone serve s3 answers some
        # concurrent first PUTs into a fresh folder with 500), never more
        retried = sum(sample.retries or 0 for sample in result.samples)
        extra = 0
        for verb, kind, wanted in (
            ("HEAD", "head", [p for m, p in wire if m == "HEAD"]),
            ("PUT", "put", [p for m, p in wire if m == "PUT"]),
            ("GET", "get", [p for m, p in wire if m == "GET" and "?" not in p]),  # not lists
        ):
            reported = result.requests_by_kind.get(kind, 0)
            assert reported <= len(wanted), (label, verb)
            extra += len(wanted) - reported
        assert extra <= retried, (label, extra, retried)
    # backup 2 on S3: the previous snapshot and its sequences come from the local
    # snapshot cache; only its file is looked up; every chunk HEAD is of a new chunk
    wire = steps["backup 1"]
    referenced = {f"chunks/{c[:2]}/{c[2:]}" for c in first.referenced}
    chunk_heads = [p for m, p in wire if m == "HEAD" and "/chunks/" in p]
    assert chunk_heads
    assert not {p.split("/dup/", 1)[1].split("/", 1)[1] for p in chunk_heads} & referenced
    gets = [p for m, p in wire if m == "GET" and p.endswith("/config")]
    assert len(gets) == 1
    assert results[1].requests_by_kind["get"] == 1  # config only
    # the first backup lists chunks/ (S3 lists fast), the second does not
    assert results[0].requests_by_kind["list"] == 2
    assert results[1].requests_by_kind["list"] == 1


def _by_step(seen: list[Any]) -> dict[str, list[tuple[str, str]]]:
    steps: dict[str, list[tuple[str, str]]] = {}
    current = "setup"
    for entry in seen:
        if entry[0] == "step":
            current = entry[1]
        elif entry[0] != "stored":
            steps.setdefault(current, []).append(entry)
    return steps


def test_sftp_and_memory_restore_the_latest_then_an_older_version(ssh_server: Server) -> None:
    from fsspec.implementations.memory import MemoryFileSystem

    assert ssh_server.root is not None
    root = ssh_server.root / "duplicacy"
    root.mkdir(exist_ok=True)
    before = tree(root)
    sftp = Probe.from_url(f"sftp://127.0.0.1{root}", ssh_options(ssh_server), streams=2)
    MemoryFileSystem.store.clear()
    memory = Probe.from_url("memory://dup", streams=2)
    for probe in (sftp, memory):
        results = probe.backup_restore(
            TREE, versions=[TREE, NEXT], method="duplicacy", chunk_size="64KiB", restore=[1, 0]
        )
        assert all(r.ok for r in results), [r.errors for r in results]  # verified
        _cleaned(results)
        # not the local disk: the snapshot cache serves the last snapshot and its
        # sequences, and the first backup lists chunks/
        assert results[1].requests_by_kind["get"] == 1
        assert results[0].requests_by_kind["list"] == 2
    assert tree(root) == before
    assert not list(root.iterdir())
    assert not [k for k in MemoryFileSystem.store if k.startswith("/dup/")]


# -- bad input -------------------------------------------------------------------------------
def test_bad_chunk_sizes_are_refused_before_any_io(tmp_path: Path) -> None:
    probe, root = _local(tmp_path)
    with pytest.raises(ConfigurationError, match=r"power of two.*use 2 MiB or 4 MiB"):
        Duplicacy(chunking=Chunking.of("3MiB"))
    with pytest.raises(ConfigurationError, match="power of two"):
        probe.backup_restore(TREE, versions=1, method="duplicacy", chunk_size="96KiB")
    with pytest.raises(ConfigurationError, match="metadata chunk size must be a power of two"):
        Duplicacy(metadata_chunk_size="3MiB")
    with pytest.raises(ConfigurationError, match="at least 256 B"):
        Duplicacy(metadata_chunk_size=128)
    with pytest.raises(ConfigurationError, match="hash_all must be True or False"):
        Duplicacy(hash_all="yes")  # type: ignore[arg-type]
    assert tree(root) == {}
