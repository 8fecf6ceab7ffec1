"""Restores read the disk: a restore of many small files against an evicted download of
the same files, on the same local disk, in the same run.

Before the fix, a backup scenario's restores were served from the page cache (what the
backup had just written was still cached), so the restore of 2 000 files of 16 KiB with
the ``files`` method ran 2.8× faster than an evicted download of 2 000 × 16 KiB on the
same disk. Both now read files evicted from the page cache. This script runs, in
alternating order for ``--pairs`` pairs:

- **restore**: ``Probe.backup_restore`` of a tree of ``--count`` files of ``--size``
  (one version, ``files`` method), its ``restore 1 (full)`` step's throughput (the GETs
  of the files; its other requests are a handful of HEADs and listings);
- **download**: ``Probe.download(Workload(count, size))``, best of 1 repeat,

- **cached restore**: the same restore with the page-cache eviction made a no-op
  (``os.posix_fadvise`` replaced in this process): what restores measured before,

and prints the median over pairs of each throughput and of the ratios. With eviction
applied to both, restore ÷ download is about 1; the cached restore shows the page
cache's speed.

    python benchmarks/restore_truth.py [--dir /var/tmp] [--pairs 5] [--count 2000] [--size 16KiB]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import tempfile
from collections.abc import Iterator
from pathlib import Path

from storeprobe import Probe, Workload
from storeprobe.dataset import Sizes, Tree
from storeprobe.units import parse_size


def _restore_rate(root: Path, tree: Tree) -> float:
    results = Probe.from_url(str(root), streams=1).backup_restore(tree, versions=1, method="files")
    (restore,) = [r for r in results if r.step is not None and r.step.kind == "restore"]
    if not restore.ok:
        raise SystemExit(f"restore failed: {restore.errors}")
    sample = restore.samples[0]
    gets = sample.requests_by_kind.get("get", 0)
    if gets < tree.files.__len__():
        raise SystemExit(f"the restore made {gets} GETs for {len(tree.files)} files")
    return restore.kib_per_s


@contextlib.contextmanager
def _no_eviction() -> Iterator[None]:
    real = os.posix_fadvise
    os.posix_fadvise = lambda fd, offset, length, advice: None
    try:
        yield
    finally:
        os.posix_fadvise = real


def _download_rate(root: Path, count: int, size: int) -> float:
    probe = Probe.from_url(str(root), streams=1, repeats=1)
    result = probe.download(Workload(count=count, size=size))
    if not result.ok:
        raise SystemExit(f"download failed: {result.errors}")
    return result.kib_per_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", default="/var/tmp", help="a directory on the disk to measure")
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--count", type=int, default=2000)
    parser.add_argument("--size", default="16KiB")
    args = parser.parse_args()
    size = parse_size(args.size)
    tree = Tree.generate(args.count, Sizes.fixed(size), seed=7)
    restores: list[float] = []
    downloads: list[float] = []
    cached: list[float] = []
    for pair in range(args.pairs):
        with tempfile.TemporaryDirectory(dir=args.dir) as scratch:
            root = Path(scratch)
            order = ("restore", "download", "cached")
            for which in order if pair % 2 == 0 else reversed(order):
                if which == "restore":
                    restores.append(_restore_rate(root, tree))
                elif which == "download":
                    downloads.append(_download_rate(root, args.count, size))
                else:
                    with _no_eviction():
                        cached.append(_restore_rate(root, tree))
    ratios = [r / d for r, d in zip(restores, downloads, strict=True)]
    print(f"{args.count} × {args.size} on {args.dir}, 1 stream, {args.pairs} pairs (medians)")
    print(f"  restore (files method, restore 1):  {statistics.median(restores):10.1f} KiB/s")
    print(f"  evicted download (same files):      {statistics.median(downloads):10.1f} KiB/s")
    print(f"  restore, eviction a no-op (cached): {statistics.median(cached):10.1f} KiB/s")
    for name, values in (
        ("restore ÷ download", ratios),
        ("cached restore ÷ download", [c / d for c, d in zip(cached, downloads, strict=True)]),
    ):
        pairs = ", ".join(f"{r:.2f}" for r in values)
        print(f"  {name}: {statistics.median(values):.2f} (pairs: {pairs})")


if __name__ == "__main__":
    main()
