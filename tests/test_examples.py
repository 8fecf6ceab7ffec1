"""Every script in examples/ runs, and none is left out."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.servers import S3_KEY, S3_SECRET, Server

EXAMPLES = Path(__file__).parent.parent / "examples"
RUN_HERE = {
    "backup.py",
    "duplicacy_table.py",
    "quickstart.py",
    "rsnapshot_vs_rdiff.py",
    "save_results.py",
    "s3_streams.py",
}


def test_no_example_is_left_out() -> None:
    assert {path.name for path in EXAMPLES.glob("*.py")} == RUN_HERE
    # the notebooks run in tests/test_notebook.py
    assert {path.name for path in EXAMPLES.iterdir() if path.suffix not in (".py",)} == {
        "compare_targets.ipynb",
        "notebook.ipynb",
    }


@pytest.mark.parametrize("name", sorted(RUN_HERE))
def test_example_runs(name: str, s3_server: Server) -> None:
    env = {
        **os.environ,
        "STOREPROBE_S3_ENDPOINT": s3_server.endpoint,
        "STOREPROBE_S3_KEY": S3_KEY,
        "STOREPROBE_S3_SECRET": S3_SECRET,
        "STOREPROBE_EXAMPLE_SIZE": "2MiB",  # the backup examples at a small scale
    }
    completed = subprocess.run(
        [sys.executable, str(EXAMPLES / name)], capture_output=True, text=True, env=env, timeout=300
    )
    assert completed.returncode == 0, completed.stderr
    figures = ("KiB/s", "MiB/s", "restore 1 (full) (s)", "| space after |")
    assert any(figure in completed.stdout for figure in figures), completed.stdout
    assert S3_SECRET not in completed.stdout + completed.stderr
