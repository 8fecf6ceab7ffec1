"""rsnapshot against rdiff-backup: time and space per step, on a disk image and a tree.

The comparison behind "hard links or reverse deltas?": three versions of a disk image
(1 % of its 64 KiB blocks rewritten per version) and of a file tree (5 % of files
changed per version, half of them rewritten in place), each backed up by the
``rsnapshot`` and ``rdiff-backup`` methods onto a local directory, then the newest and
the oldest version restored. The table shows, per step, the seconds of its timed
requests and the space the target holds after it (hard links counted once, as ``du``).
rsnapshot stores each changed file whole again; rdiff-backup stores reverse deltas.

STOREPROBE_EXAMPLE_SIZE sets the image's and the tree's size (default 128MiB, the
published comparison's image; the tests use less).
"""

import os
import tempfile

from storeprobe import Probe
from storeprobe.dataset import Image, Tree
from storeprobe.units import format_bytes

size = os.environ.get("STOREPROBE_EXAMPLE_SIZE", "128MiB")
image = Image.create(size, block_size="64KiB", seed=1)
images = [image]
tree = Tree.source_tree(size=size, seed=1)
trees = [tree]
for version in (1, 2):
    images.append(images[-1].evolve(fraction=0.01, seed=version))
    trees.append(trees[-1].evolve(rewrite=0.5, seed=version))

rows = []
for name, versions in (("image", images), ("tree", trees)):
    for method in ("rsnapshot", "rdiff-backup"):
        with tempfile.TemporaryDirectory() as target:
            results = Probe.from_url(target).backup_restore(
                versions[0], versions=versions, method=method, restore=[2, 0]
            )
        assert all(result.ok for result in results), [result.errors for result in results]
        for result in results:
            step = result.step
            assert step is not None
            label = f"{step.kind} {step.number} (v{step.version})"
            seconds = result.samples[0].seconds
            rows.append((name, method, label, seconds, step.space_used or 0))

print("| dataset | method | step | seconds | space after |")
print("|---|---|---|---|---|")
for name, method, label, seconds, space in rows:
    print(f"| {name} | {method} | {label} | {seconds:.3f} | {format_bytes(space)} |")
