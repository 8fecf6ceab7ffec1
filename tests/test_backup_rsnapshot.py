"""The ``rsnapshot`` method beside rsnapshot's own rsync step, on the same versions.

rsnapshot itself (Debian's 1.4.5, ``link_dest 1``: rotation, then ``rsync -a --delete
--link-dest``; tests/disk_side_by_side.py's :class:`RealRsnapshot`) and the method run
on the local disk; per backup: space (``du -sb`` against
``space_used``) within 10 %, bytes written (new inodes on the tool's target against the
method's bytes sent) within 10 %, files within 30 % or 3, and the tool's hard links
against the method's LINK requests, whole files written against its PUTs, snapshots
rotated and files written against its RENAMEs (on a disk the
tool's requests cannot be counted by a server: its target's inodes before and after each
step show what it created and linked). Over SFTP (sshd) the method makes the same links
(OpenSSH's hardlink extension) and counts the same space.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from storeprobe import Probe
from storeprobe.dataset import Image, Sizes, Tree
from storeprobe.errors import ConfigurationError
from tests.conftest import ssh_options
from tests.disk_side_by_side import (
    RealRsnapshot,
    run_method,
    side_by_side,
    workspace,
)
from tests.servers import Server

IMAGE = Image.create("8MiB", block_size="64KiB", seed=5)
IMAGES = [IMAGE, IMAGE.evolve(fraction=0.01, seed=1)]
IMAGES.append(IMAGES[-1].evolve(fraction=0.01, seed=2))
TREE = Tree.generate(120, Sizes.uniform("4KiB", "96KiB"), seed=3, fanout=3, depth=2)
TREES = [TREE, TREE.evolve(rewrite=0.5, seed=1)]
TREES.append(TREES[-1].evolve(rewrite=0.5, seed=2))


def _side_by_side(tmp_path: Path, versions: list[Image] | list[Tree], title: str) -> None:
    tool = RealRsnapshot(workspace(tmp_path), tmp_path / "source", tmp_path / "rsnapshot")
    rows, _ = side_by_side(tool, "rsnapshot", versions, tmp_path, title)
    for row in rows:
        kinds = row.kinds
        assert kinds.get("link", 0) == row.tool.linked, row
        assert kinds.get("put", 0) == row.tool.created, row
        # each written file renamed into place, each snapshot held rotated
        assert kinds.get("rename", 0) == row.tool.created + row.tool.moved_folders, row
    # the finding: every backup after the first stores each changed file whole again
    assert rows[-1].method_space > 2.5 * rows[0].method_space or isinstance(versions[0], Tree)


def test_image_side_by_side(tmp_path: Path) -> None:
    _side_by_side(tmp_path, IMAGES, "rsnapshot, 8 MiB image, 1 % of 64 KiB blocks per version")


def test_tree_side_by_side(tmp_path: Path) -> None:
    _side_by_side(tmp_path, TREES, "rsnapshot, 120-file tree, half the changes in place")


def test_links_over_sftp(tmp_path: Path, ssh_server: Server) -> None:
    """Over SFTP the unchanged files are hard links (OpenSSH's hardlink@openssh.com) and
    the space counts each once, as on the disk, though SFTP reports no inodes."""
    assert ssh_server.root is not None
    root = ssh_server.root / "rsnapshot"
    root.mkdir(exist_ok=True)
    local = tmp_path / "local"
    local.mkdir()
    remote = run_method(
        f"sftp://127.0.0.1{root}", TREES[:2], "rsnapshot", [1], **ssh_options(ssh_server)
    )
    disk = run_method(str(local), TREES[:2], "rsnapshot", [1])
    for over_ssh, on_disk in zip(remote, disk, strict=True):
        assert over_ssh.step is not None
        assert on_disk.step is not None
        assert over_ssh.samples[0].requests_by_kind == on_disk.samples[0].requests_by_kind
        assert over_ssh.step.space_used == on_disk.step.space_used
        assert over_ssh.step.objects_stored == on_disk.step.objects_stored
    assert remote[1].samples[0].requests_by_kind["link"] > 0
    assert list(root.iterdir()) == []


def test_object_store_refused_before_io() -> None:
    probe = Probe.from_url("memory://rsnapshot-refused")
    with pytest.raises(ConfigurationError, match="file://, local://, sftp://, ssh://"):
        probe.backup_restore(TREE, versions=2, method="rsnapshot")
