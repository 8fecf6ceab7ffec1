"""Warnings that can be acted on: spelled per surface, never repeating what was done."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from storeprobe.cli import main
from storeprobe.mounts import filesystem_type, memory_notice
from storeprobe.notices import Code, Notice
from storeprobe.stats import ADVISED_REPEATS, stability_notices


def _varying(n: int) -> list[Notice]:
    rates = np.array([100.0, 200.0] * (n // 2), dtype=np.float64)
    return stability_notices(
        rates,
        np.full(n, 10**9, dtype=np.int64),
        np.full(n, np.nan),
        operation="upload",
        remote=True,
    )


def test_fix_is_spelled_for_python_and_for_the_command_line() -> None:
    (notice,) = [n for n in _varying(4) if n.code == Code.HIGH_VARIATION]
    assert "repeats=10" in str(notice)
    assert "--repeats 10" in notice.cli_text
    assert "repeats=10" not in notice.cli_text
    assert Notice.from_dict(notice.to_dict()) == notice  # the setting survives the JSON


def test_no_advice_to_do_what_the_run_already_did() -> None:
    (notice,) = [n for n in _varying(ADVISED_REPEATS) if n.code == Code.HIGH_VARIATION]
    assert "--repeats" not in notice.cli_text
    assert "repeats=" not in str(notice)
    assert notice.option == ""


def test_no_obstore_advice_for_local_targets() -> None:
    def client_bound(remote: bool) -> Notice:
        (notice,) = stability_notices(
            np.array([1e9]),
            np.array([10**9]),
            np.array([1.0]),
            operation="upload",
            remote=remote,
        )
        assert notice.code == Code.CLIENT_BOUND
        return notice

    assert "obstore" in client_bound(remote=True).fix
    assert "obstore" not in client_bound(remote=False).fix


def test_filesystem_type_reads_mountinfo(tmp_path: Path) -> None:
    mountinfo = tmp_path / "mountinfo"
    mountinfo.write_text(
        "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n"
        "30 22 0:26 / /scratch rw,nosuid shared:5 - tmpfs tmpfs rw,size=1024k\n",
        encoding="utf-8",
    )
    assert filesystem_type("/scratch/run", mountinfo) == "tmpfs"
    assert filesystem_type("/home/me", mountinfo) == "ext4"
    assert filesystem_type("/scratchy", mountinfo) == "ext4"  # a prefix, not a parent
    notice = memory_notice("/scratch/run", mountinfo)
    assert notice is not None
    assert notice.code == Code.MEMORY_FILESYSTEM
    assert "TMPDIR" in notice.fix
    assert memory_notice("/home/me", mountinfo) is None
    assert filesystem_type("/x", tmp_path / "absent") is None


def test_default_target_on_tmpfs_is_flagged(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A real tmpfs (/dev/shm) as TMPDIR: the run says it measured RAM."""
    shm = Path("/dev/shm")
    if filesystem_type(shm) != "tmpfs":
        pytest.skip("this machine has no tmpfs at /dev/shm")
    monkeypatch.setenv("TMPDIR", str(shm))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)  # tempfile caches TMPDIR at first use
    assert main(["run", "--workload", "2x1KiB", "--repeats", "1", "--no-progress"]) == 0
    err = capsys.readouterr().err
    assert "probing a temporary directory in memory (tmpfs)" in err
    warned = [
        line
        for line in err.splitlines()
        if line.startswith("warning: ") and "memory-filesystem" in line
    ]
    assert [line.split()[1] for line in warned] == ["upload", "download"]
