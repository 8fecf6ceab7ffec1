"""rsnapshot and rdiff-backup beside their methods, per backup step, at full size.

The same versions of a disk image (``--image-size``, 1 % of its 64 KiB blocks rewritten
per version) and of a source-shaped tree (``--tree-size``, 5 % of files changed per
version, half of them in place) are backed up by the real tool (rdiff-backup 2.2 from
tests/backup_tools.py, rsnapshot 1.4 with ``link_dest 1`` from
tests/disk_side_by_side.py) and by the method (``Probe.from_url(dir).backup_restore``)
on the local disk; the newest and the oldest version are then restored by both and
checked byte for byte (the tool's restores traced with ``strace``). Printed per tool and
dataset: per backup, the space (``du -sb`` against ``space_used``), bytes written (new
files and growth on the tool's target against the method's bytes sent), files, what the
tool created, linked, deleted and rotated (its target before and after) and the
method's requests by kind; per restore, the files and bytes the tool read from its
target against the method's GETs and bytes received (tests/disk_side_by_side.py).

    python benchmarks/disk_side_by_side.py [--image-size 128MiB] [--tree-size 64MiB]
        [--versions 3] [--methods rsnapshot rdiff-backup]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from storeprobe.dataset import Image, Tree
from tests.backup_tools import RdiffBackup
from tests.disk_side_by_side import (
    RealRsnapshot,
    pairs,
    restore_table,
    run_disk_tool,
    run_method,
    table,
    workspace,
)

TOOLS = {"rsnapshot": RealRsnapshot, "rdiff-backup": RdiffBackup}


def _versions(first: Tree | Image, count: int) -> list[Tree | Image]:
    versions = [first]
    for seed in range(1, count):
        last = versions[-1]
        if isinstance(last, Image):
            versions.append(last.evolve(fraction=0.01, seed=seed))
        elif isinstance(last, Tree):
            versions.append(last.evolve(rewrite=0.5, seed=seed))
    return versions


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--image-size", default="128MiB")
    parser.add_argument("--tree-size", default="64MiB")
    parser.add_argument("--versions", type=int, default=3)
    parser.add_argument("--methods", nargs="+", default=list(TOOLS), choices=list(TOOLS))
    args = parser.parse_args()
    datasets: list[tuple[str, Tree | Image]] = [
        (f"image {args.image_size}", Image.create(args.image_size, block_size="64KiB", seed=1)),
        (f"tree {args.tree_size}", Tree.source_tree(size=args.tree_size, seed=1)),
    ]
    last = args.versions - 1
    for label, first in datasets:
        versions = _versions(first, args.versions)
        for method in args.methods:
            with tempfile.TemporaryDirectory() as work:
                root = Path(work)
                tool = TOOLS[method](workspace(root), root / "source", root / "tool")
                order = [last, 0]
                steps, reads = run_disk_tool(tool, versions, root / "source", root / "out", order)
                (root / "method").mkdir()
                results = run_method(str(root / "method"), versions, method, order)
            title = f"\n{method}, {label}, tool / method"
            print(table(title, pairs(steps, results)))
            print(restore_table(title, order, reads, results), flush=True)


if __name__ == "__main__":
    main()
