"""Reference figures of the real backup tools: what each backup and restore asks of its target.

For each dataset (a source-shaped tree and a disk image, each in ``--versions``
versions), each tool backs up version 0, 1, ... of the same directory in turn, then
restores every version (each restore checked byte for byte against its version), with
tests/backup_tools.py: restic, duplicity (``boto3+s3://``) and ``rclone sync
--backup-dir`` against the logging S3 server (moto on 127.0.0.1, every request logged);
duplicity (``file://``), rdiff-backup and rsnapshot's rsync step on the local disk.

Printed per tool per step: requests by kind (S3), body bytes in (as sent, and the
content they carried without aws-chunked framing) and out at the server,
objects on the target after the step and its space (S3: sum of object sizes; disk:
``du -sb``, hard links once), wall seconds; then the request sequences other code
models: restic's backups 1 and 2 folder by folder, duplicity's files per step and what an
incremental reads first, rclone's counts.

    python benchmarks/backup_tools.py [--tree-size 64MiB] [--image-size 128MiB]
        [--versions 3] [--tools restic restic-no-cache duplicity duplicity-file rdiff-backup
        rsnapshot rclone] [--datasets tree image] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import attrs

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import itertools

from storeprobe.dataset import Dataset, Image, Tree
from tests.backup_tools import (
    KINDS,
    BackupTool,
    Duplicity,
    LoggingS3,
    RcloneSync,
    RdiffBackup,
    Restic,
    Rsnapshot,
    ToolRun,
    ToolStep,
    Workspace,
    logging_s3,
    run_tool,
)

TOOLS = (
    "restic",
    "restic-no-cache",
    "duplicity",
    "duplicity-file",
    "rdiff-backup",
    "rsnapshot",
    "rclone",
)
Factory = Callable[[Workspace, Path, Path], BackupTool]
FACTORIES: dict[str, tuple[str, Factory]] = {
    "restic": ("s3", lambda ws, src, _: Restic.on_s3(ws, src, bucket="restic")),
    "restic-no-cache": (
        "s3",
        lambda ws, src, _: attrs.evolve(
            Restic.on_s3(ws, src, bucket="restic-no-cache", cache=False), name="restic-no-cache"
        ),
    ),
    "duplicity": ("s3", lambda ws, src, _: Duplicity.on_s3(ws, src, bucket="duplicity")),
    "duplicity-file": ("disk", lambda ws, src, t: Duplicity.on_disk(ws, src, t)),
    "rdiff-backup": ("disk", lambda ws, src, t: RdiffBackup(ws, src, t)),
    "rsnapshot": ("disk", lambda ws, src, t: Rsnapshot(ws, src, t)),
    "rclone": ("s3", lambda ws, src, _: RcloneSync.on_s3(ws, src, bucket="rclone")),
}


def versions_of(first: Dataset, count: int) -> list[Dataset]:
    out = [first]
    while len(out) < count:
        previous = out[-1]
        assert isinstance(previous, Tree | Image)
        out.append(previous.evolve())
    return out


def changes(previous: Dataset, version: Dataset) -> str:
    if isinstance(version, Tree) and isinstance(previous, Tree):
        return version.diff(previous).describe()
    assert isinstance(version, Image)
    assert isinstance(previous, Image)
    return version.diff(previous).describe()


def run_one(name: str, versions: list[Dataset], s3: LoggingS3, work: Path) -> ToolRun:
    kind, factory = FACTORIES[name]
    root = work / name
    workspace = Workspace(root / "ws", s3)
    tool = factory(workspace, root / "src", root / "target")
    try:
        return run_tool(tool, versions, root / "src", root / "restored")
    finally:
        shutil.rmtree(root, ignore_errors=True)
        if kind == "s3":
            s3.delete_bucket(name)  # each S3 tool's bucket is named after it


def _label(step: ToolStep) -> str:
    """``init``, ``backup v0``, ``restore v2`` (versions numbered as the datasets are)."""
    return "init" if step.action == "init" else f"{step.action} v{step.version}"


def _tool(run: ToolRun) -> str:
    scheme = run.backups[0].target.split(":", 1)[0]
    return f"{run.tool} ({'s3' if scheme == 's3' else 'disk'})"


def _ok(step: ToolStep) -> str:
    """``yes``, or what is wrong: a restore that differs, a log that misses objects."""
    wrong = [f"{len(step.problems)} files differ"] if step.problems else []
    if step.log_consistent is False:
        wrong.append("log does not explain the objects")
    return "; ".join(wrong) or "yes"


def table(runs: list[ToolRun]) -> str:
    kinds = [
        k for k in KINDS if any(s.requests and s.requests.count(k) for r in runs for s in r.steps)
    ]
    head = ["tool", "step", *kinds, "ranged get", "bytes in", "payload in", "bytes out"]
    head += ["objects", "space B"]
    head += ["s", "ok"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * 2 + "---:|" * (len(head) - 3) + "---|"]
    for run in runs:
        for step in run.steps:
            requests = step.requests
            counts = [str(requests.count(k)) if requests else "" for k in kinds]
            lines.append(
                "| "
                + " | ".join(
                    [
                        _tool(run),
                        _label(step),
                        *counts,
                        str(requests.ranged_gets) if requests else "",
                        f"{requests.bytes_in:,}" if requests else "",
                        f"{requests.payload_in:,}" if requests else "",
                        f"{requests.bytes_out:,}" if requests else "",
                        f"{step.objects:,}",
                        f"{step.space:,}",
                        f"{step.seconds:.2f}",
                        _ok(step),
                    ]
                )
                + " |"
            )
    return "\n".join(lines)


def sequence(step: ToolStep, strip: str, depth: int = 1) -> str:
    assert step.requests is not None
    return ", ".join(
        f"{label} {folder or '(prefix)'}" + (f" ×{n}" if n > 1 else "")
        for label, folder, n in step.requests.runs(strip=strip, depth=depth)
    )


def details(runs: list[ToolRun]) -> str:
    out: list[str] = []
    for run in runs:
        if run.tool.startswith("restic"):
            for step in run.backups[:2]:
                out.append(f"{run.tool} {_label(step)}: {sequence(step, 'repo/')}")
            if run.init:
                out.append(f"{run.tool} init: {sequence(run.init, 'repo/')}")
            out.append(f"{run.tool} restore v0: {sequence(run.restores[0], 'repo/')}")
        elif run.tool == "duplicity" and run.backups[0].requests is not None:
            for step in run.backups:
                assert step.requests is not None
                written: dict[str, list[int]] = {}  # key: [body bytes, requests]
                for r in step.requests:
                    if r.kind in ("put", "part"):
                        entry = written.setdefault(r.key.removeprefix("dup/"), [0, 0])
                        entry[0] += r.bytes_in
                        entry[1] += 1
                puts = [
                    f"{key} ({nbytes:,} B" + (f" in {n} parts" if n > 1 else "") + ")"
                    for key, (nbytes, n) in written.items()
                ]
                out.append(f"duplicity {_label(step)} writes: " + "; ".join(puts))
                out.append(f"duplicity {_label(step)} sequence: {sequence(step, 'dup/', 9)}")
            for step in run.restores:
                out.append(f"duplicity {_label(step)} sequence: {sequence(step, 'dup/', 9)}")
        elif run.tool == "rclone":
            for step in run.steps:
                assert step.requests is not None
                counts = {k: v for k, v in step.requests.by_kind.items() if v}
                out.append(
                    f"rclone {_label(step)}: {counts}; keys deleted {step.requests.keys_deleted}, "
                    f"ranged GETs {step.requests.ranged_gets}, failed (404s) {step.requests.failed}"
                )
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree-size", default="64MiB")
    parser.add_argument("--image-size", default="128MiB")
    parser.add_argument("--versions", type=int, default=3)
    parser.add_argument("--tools", nargs="+", default=list(TOOLS), choices=TOOLS)
    parser.add_argument(
        "--datasets", nargs="+", default=["tree", "image"], choices=["tree", "image"]
    )
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    datasets = {
        "tree": versions_of(Tree.source_tree(size=args.tree_size, seed=1), args.versions),
        "image": versions_of(Image.create(args.image_size, seed=1), args.versions),
    }
    report: dict[str, object] = {}
    with logging_s3() as s3, tempfile.TemporaryDirectory(prefix="backup-tools-") as work_name:
        for label in args.datasets:
            versions = datasets[label]
            print(f"\n## {label}: " + "; ".join(v.describe() for v in versions), flush=True)
            for previous, version in itertools.pairwise(versions):
                print(f"- v{version.version}: {changes(previous, version)}")
            runs = []
            for name in args.tools:
                print(f"  running {name}...", file=sys.stderr, flush=True)
                runs.append(run_one(name, versions, s3, Path(work_name)))
            print()
            print(table(runs))
            print()
            print(details(runs))
            report[label] = [
                {
                    "tool": run.tool,
                    "steps": [
                        {
                            "step": _label(step),
                            "by_kind": dict(step.requests.by_kind) if step.requests else None,
                            "bytes_in": step.bytes_sent,
                            "payload_in": step.requests.payload_in if step.requests else None,
                            "bytes_out": step.bytes_received,
                            "objects": step.objects,
                            "space": step.space,
                            "file_bytes": step.file_bytes,
                            "seconds": step.seconds,
                            "problems": list(step.problems),
                            "requests": [r.describe() for r in step.requests]
                            if step.requests
                            else None,
                        }
                        for step in run.steps
                    ],
                }
                for run in runs
            ]
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
