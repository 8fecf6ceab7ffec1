"""The free space a backup scenario's restores need, checked before anything is written:
the version itself plus what the method writes beside it (its scratch files)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from storeprobe import Probe
from storeprobe.backup import METHODS, method_for
from storeprobe.backup.scenario import check_restore_room
from storeprobe.backup.session import WINDOW_BUDGET
from storeprobe.dataset import Image, Sizes, Tree
from storeprobe.errors import ConfigurationError

MiB = 1024 * 1024
MARGIN = 64 * MiB


def _images(size: int, versions: int) -> list[Image]:
    """``versions`` successive versions of an image of ``size`` bytes (nothing generated:
    an image is its blocks' generations until it is read)."""
    chain = [Image.create(size, block_size="64MiB")]
    for seed in range(1, versions):
        chain.append(chain[-1].evolve(seed=seed))
    return chain


@pytest.mark.parametrize("name", sorted(METHODS))
def test_each_method_says_what_its_restores_write_beside_the_version(
    name: str, tmp_path: Path
) -> None:
    tree = Tree.generate(40, Sizes.lognormal("8KiB", 1.0, "3MiB"), seed=3)
    versions = [tree, tree.evolve(changed=4, added=2, deleted=1, seed=1)]
    biggest = max(f.size for version in versions for f in version.files)
    largest = max(version.total_bytes for version in versions)
    method = method_for(name, "file")
    scratch = method.restore_scratch(versions)
    if name == "rdiff-backup":
        # a window's files (a file above the window alone) with a reverse delta of each
        # later version beside them, a patched copy and a basis
        assert scratch == max(biggest, WINDOW_BUDGET) * (len(versions) + 1)
    else:
        assert scratch == 2 * biggest
    assert check_restore_room(versions, scratch, str(tmp_path)) == largest + scratch + MARGIN


def test_rdiff_backup_scratch_grows_with_the_chain_and_the_largest_file() -> None:
    method = method_for("rdiff-backup", "file")
    small = _images(64 * MiB, 2)
    assert method.restore_scratch(small) == WINDOW_BUDGET * 3
    assert method.restore_scratch(_images(64 * MiB, 4)) == WINDOW_BUDGET * 5
    big = _images(1024 * MiB, 3)
    assert method.restore_scratch(big) == 1024 * MiB * 4
    assert method_for("restic", "file").restore_scratch(big) == 2 * 1024 * MiB


def test_an_rdiff_backup_restore_that_would_not_fit_is_refused_before_any_write(
    tmp_path: Path,
) -> None:
    """An image a quarter of the free space, four versions: the version and two copies
    of its one file fit (what every other method needs), its chain of reverse deltas
    does not; rdiff-backup is refused with the scratch named, and the target stays
    empty."""
    free = shutil.disk_usage(tmp_path).free
    size = free // 4 // (64 * MiB) * (64 * MiB)
    versions = _images(size, 4)
    assert check_restore_room(versions, method_for("duplicity", "file").restore_scratch(versions))
    target = tmp_path / "target"
    target.mkdir()
    probe = Probe.from_url(f"file://{target}")
    with pytest.raises(ConfigurationError) as refused:
        probe.backup_restore(versions[0], versions=versions, method="rdiff-backup")
    message = str(refused.value)
    for part in ("free space", "scratch files", "TMPDIR", "fewer versions"):
        assert part in message, message
    assert list(target.iterdir()) == []
