"""The ``duplicity`` method side by side with duplicity 0.8.22, per step (issue 23).

The same runs as ``tests/test_backup_duplicity.py`` (a source-shaped tree with files
rewritten in place, and a disk image with 1 % of its blocks rewritten, each in three
versions), printed as tables: per backup and restore, tool / method for requests by
class (S3: what the logging server saw from duplicity, what storeprobe counted for the
method), bytes written and read, objects stored and space on the target.

    python benchmarks/backup_duplicity.py [--tree-size 8MiB] [--image-size 16MiB]
        [--versions 3] [--tree-volsize 200] [--image-volsize 5] [--tree-part 5]
        [--image-part 25] [--targets s3 disk]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from storeprobe.dataset import Image, Tree
from tests.backup_tools import logging_s3
from tests.test_backup_duplicity import _versions, check, run_side_by_side, table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree-size", default="8MiB")
    parser.add_argument("--image-size", default="16MiB")
    parser.add_argument("--versions", type=int, default=3)
    parser.add_argument("--tree-volsize", type=int, default=200, help="MiB")
    parser.add_argument("--image-volsize", type=int, default=5, help="MiB")
    parser.add_argument("--tree-part", type=int, default=5, help="--s3-multipart-chunk-size")
    parser.add_argument("--image-part", type=int, default=25, help="--s3-multipart-chunk-size")
    parser.add_argument("--targets", nargs="+", default=["s3", "disk"], choices=["s3", "disk"])
    args = parser.parse_args()
    cases: dict[str, tuple[Sequence[Tree | Image], int, int]] = {
        "tree": (
            _versions(
                Tree.source_tree(size=args.tree_size, seed=1),
                args.versions,
                lambda v: v.evolve(rewrite=0.5),
            ),
            args.tree_volsize,
            args.tree_part,
        ),
        "image": (
            _versions(
                Image.create(args.image_size, seed=1),
                args.versions,
                lambda v: v.evolve(fraction=0.01),
            ),
            args.image_volsize,
            args.image_part,
        ),
    }
    with logging_s3() as s3, tempfile.TemporaryDirectory(prefix="dup-side-") as work:
        for label, (versions, volsize, part) in cases.items():
            for target in args.targets:
                rows = run_side_by_side(s3, Path(work), label, target, versions, volsize, part)
                print(
                    f"\n### {label} ({versions[0].describe()}), {target}, --volsize {volsize}"
                    f", --s3-multipart-chunk-size {part}"
                )
                print("tool / method in every cell\n")
                print(table(rows))
                wrong = check(rows)
                print("\nwithin tolerances" if not wrong else "\n" + "\n".join(wrong))


if __name__ == "__main__":
    main()
