"""Duplicacy's cloud comparison table, replayed with the ``duplicacy`` method on the local
disk: a tree shaped like the Linux code base backed up in six versions, then restored
six times, and a disk image in three, each at 1 and 4 streams (the comparison's
``-threads``). Its layout is that of gilbertchen/cloud-storage-comparison's results:
one row per storage and thread count, seconds per step, then the space used.

Backups are Duplicacy's default (quick mode: only new and changed files are packed);
restores patch the directory (``restore -r N -overwrite``). The comparison's scripts ran
``backup -hash``, which packs every file again: pass ``--hash`` for that. With the
changes of ``Tree.evolve`` (5 % of the files, scattered at random) nearly every 4 MiB
chunk of the full tree (about 170 files each) holds a changed file, so a ``-hash``
backup uploads nearly the whole tree again; the Linux history's changes are clustered.

Small by default: STOREPROBE_EXAMPLE_SIZE sets the tree's and the image's size (default
32MiB), with the average chunk scaled down (to 64 KiB at least) so a version has about
as many chunks as the full tree (1.76 GB in 4 MiB chunks: about 420). ``--full`` (or
STOREPROBE_DUPLICACY_FULL=1) runs the comparison's sizes: the whole tree (58 000 files,
1.76 GB) and a 4 GiB image (the comparison's VM disk was about 4 GB) with Duplicacy's
default 4 MiB chunks; it needs about 12 GB free on the local disk and takes a while.
"""

import os
import resource
import sys
import tempfile
import time

from storeprobe import Probe, render
from storeprobe.backup import Chunking, Duplicacy
from storeprobe.dataset import Image, Tree
from storeprobe.units import MiB, format_size, parse_size

full = "--full" in sys.argv[1:] or os.environ.get("STOREPROBE_DUPLICACY_FULL") == "1"
if full:
    tree = Tree.source_tree(scale=1.0)
    image = Image.create("4GiB", block_size="64KiB")
    average = 4 * MiB
else:
    size = parse_size(os.environ.get("STOREPROBE_EXAMPLE_SIZE", "32MiB"))
    tree = Tree.source_tree(size=size)
    image = Image.create(max(1, size // (64 * 1024)) * 64 * 1024, block_size="64KiB")
    # the largest power of two that gives a version about 420 chunks, 64 KiB to 4 MiB
    average = max(64 * 1024, min(4 * MiB, 1 << max(0, (size // 420).bit_length() - 1)))

method = Duplicacy(chunking=Chunking(average=average), hash_all="--hash" in sys.argv[1:])
trees = [tree]
for _ in range(5):
    trees.append(trees[-1].evolve())
images = [image]
for _ in range(2):
    images.append(images[-1].evolve(fraction=0.05, pattern="clustered"))

print(f"{tree.describe()}; {image.describe()}; chunks of {format_size(average)} on average")
started = time.perf_counter()
results = []
with tempfile.TemporaryDirectory() as local:
    for streams in (1, 4):
        probe = Probe.from_url(local, streams=streams)
        for versions in (trees, images):
            results.extend(probe.backup_restore(versions[0], versions=versions, method=method))
elapsed = time.perf_counter() - started

print(render.render_tables(render.backup_tables(results)))
print("requests per step at 1 stream (HEAD, PUT, GET, LIST):")
for result in results:
    if result.streams == 1 and result.step is not None:
        counts = result.requests_by_kind
        kinds = ", ".join(str(counts.get(kind, 0)) for kind in ("head", "put", "get", "list"))
        print(f"  {result.subject.label:<10} {result.step.label:<18} {kinds}")
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB
print(f"wall time {elapsed:.1f} s, peak RSS {peak / MiB:.0f} MiB")
assert all(result.ok for result in results), [result.errors for result in results]
