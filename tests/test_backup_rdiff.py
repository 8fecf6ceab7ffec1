"""The ``rdiff-backup`` method beside rdiff-backup 2.2 itself, on the same versions.

Both run on the local disk; per backup: space (``du -sb`` against ``space_used``) within
10 %, bytes written (new inodes and growth on the tool's target against the method's
bytes sent) within 10 %, files within 30 % or 3; files created and deleted on the
tool's target against the method's PUTs and DELETEs that leave a trace (the dozen empty
files of rdiff-backup's file system check come and go within a step, on both sides). On
a disk the tool's requests cannot be counted by a server: its target before and after
each step shows what it created, replaced and deleted. Every restore, the tool's and the
method's (an older version through the increments), is checked byte for byte.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from storeprobe import Probe
from storeprobe.backup.rdiff_backup import _PROBES
from storeprobe.dataset import Image, Sizes, Tree
from storeprobe.errors import ConfigurationError
from tests.backup_tools import RdiffBackup
from tests.conftest import ssh_options
from tests.disk_side_by_side import (
    run_method,
    side_by_side,
    within,
    workspace,
)
from tests.servers import Server

IMAGE = Image.create("8MiB", block_size="64KiB", seed=5)
IMAGES = [IMAGE, IMAGE.evolve(fraction=0.01, seed=1)]
IMAGES.append(IMAGES[-1].evolve(fraction=0.01, seed=2))
TREE = Tree.generate(120, Sizes.uniform("4KiB", "96KiB"), seed=3, fanout=3, depth=2)
TREES = [TREE, TREE.evolve(rewrite=0.5, seed=1)]
TREES.append(TREES[-1].evolve(rewrite=0.5, seed=2))
_CHECK = len(_PROBES)  # the file system check's files, each written and deleted


def _side_by_side(tmp_path: Path, versions: list[Image] | list[Tree], title: str) -> None:
    tool = RdiffBackup(workspace(tmp_path), tmp_path / "source", tmp_path / "rdiff")
    rows, results = side_by_side(tool, "rdiff-backup", versions, tmp_path, title)
    for row in rows:
        kinds = row.kinds
        assert within(kinds.get("put", 0) - _CHECK, row.tool.created, 0.30, 3), row
        assert within(kinds.get("delete", 0) - _CHECK - 1, row.tool.deleted, 0.30, 3), row
    # the finding: a version costs its changed bytes, not its size
    growth = rows[-1].method_space - rows[0].method_space
    assert growth < 0.1 * rows[0].method_space
    restores = [r for r in results if r.operation == "restore"]
    assert restores[1].step is not None
    assert restores[1].step.version == 0


def test_image_side_by_side(tmp_path: Path) -> None:
    _side_by_side(tmp_path, IMAGES, "rdiff-backup, 8 MiB image, 1 % of 64 KiB blocks per version")


def test_tree_side_by_side(tmp_path: Path) -> None:
    _side_by_side(tmp_path, TREES, "rdiff-backup, 120-file tree, half the changes in place")


def test_object_store_refused_before_io() -> None:
    probe = Probe.from_url("memory://rdiff-refused")
    with pytest.raises(ConfigurationError, match="file://, local://, sftp://, ssh://"):
        probe.backup_restore(TREE, versions=2, method="rdiff-backup")


def test_over_sftp_as_on_disk(tmp_path: Path, ssh_server: Server) -> None:
    """Over SFTP (sshd) the same requests, space and files as on the disk; the restore of
    the oldest version through the increments is checked byte for byte."""
    assert ssh_server.root is not None
    root = ssh_server.root / "rdiff"
    root.mkdir(exist_ok=True)
    local = tmp_path / "local"
    local.mkdir()
    remote = run_method(
        f"sftp://127.0.0.1{root}", TREES[:2], "rdiff-backup", [0], **ssh_options(ssh_server)
    )
    disk = run_method(str(local), TREES[:2], "rdiff-backup", [0])
    for over_ssh, on_disk in zip(remote, disk, strict=True):
        assert over_ssh.step is not None
        assert on_disk.step is not None
        assert over_ssh.samples[0].requests_by_kind == on_disk.samples[0].requests_by_kind
        assert over_ssh.step.space_used == on_disk.step.space_used
    assert list(root.iterdir()) == []
