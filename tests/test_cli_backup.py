"""``storeprobe backup`` and the backup tables of ``storeprobe report``."""

from __future__ import annotations

from pathlib import Path

import pytest

from storeprobe.cli import main
from storeprobe.resultset import ResultSet
from tests.helpers import tree


def _table_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("| ")]


def test_backup_prints_the_published_table_and_report_repeats_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "target"
    target.mkdir()
    out = tmp_path / "results.json"
    code = main(
        [
            "backup", str(target), "--size", "1MiB", "--versions", "2",
            "--method", "files", "chunks", "--streams", "1", "2",
            "--chunk-size", "16KiB", "--json", str(out),
        ]
    )  # fmt: skip
    printed = capsys.readouterr()
    assert code == 0, printed.err
    assert tree(target) == {}  # everything written was deleted
    lines = _table_lines(printed.out)
    headers = [line for line in lines if line.startswith("| target")]
    assert len(headers) == 2  # one table per method
    assert "backup 1 (s)" in headers[0]
    assert "restore 1 (full) (s)" in headers[0]
    assert "restore 2 (s)" in headers[0]
    assert "space used (MiB)" in headers[0]
    rows = [line for line in lines if str(target) in line]
    assert len(rows) == 4  # two methods × two stream counts
    assert "files method" in printed.out
    assert "chunks method" in printed.out
    # per-step lines on stderr say seconds, bytes moved and the space used
    assert "backup 2 (chunks) of tree v1" in printed.err
    assert "dedup" in printed.err
    results = ResultSet.load(out)
    assert len(results) == 2 * 2 * 4  # methods × streams × steps
    assert {r.step.method for r in results if r.step} == {"files", "chunks"}
    assert main(["report", str(out)]) == 0
    reported = capsys.readouterr().out
    assert _table_lines(reported) == lines


@pytest.mark.parametrize(
    ("arguments", "fragment"),
    [
        (["--dataset", "nonsense"], "is not tree, image or an existing directory"),
        (["--versions", "0"], "--versions 0 is out of range"),
        (["--streams", "0"], "--streams 0 is out of range"),
        (["--size", "12 parsecs"], "size"),
        (["--versions", "2", "--restore", "2"], "restore names version 2"),
    ],
)
def test_backup_bad_input_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], arguments: list[str], fragment: str
) -> None:
    assert main(["backup", str(tmp_path), *arguments]) == 2
    assert fragment in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_backup_of_a_real_directorys_shape(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "source"
    (source / "sub").mkdir(parents=True)
    (source / "a.txt").write_bytes(b"x" * 3000)
    (source / "sub" / "b.bin").write_bytes(b"y" * 70000)
    target = tmp_path / "target"
    target.mkdir()
    assert main(["backup", str(target), "--dataset", str(source), "--versions", "2"]) == 0
    assert "2 files" in capsys.readouterr().err
    assert tree(target) == {}
    assert (source / "a.txt").read_bytes() == b"x" * 3000  # the source is only measured


def test_a_failing_target_keeps_the_steps_of_the_others(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target, absent = tmp_path / "target", tmp_path / "absent"
    target.mkdir()
    out = tmp_path / "results.json"
    argv = ["backup", str(target), str(absent), "--size", "256KiB", "--versions", "2"]
    assert main([*argv, "--json", str(out)]) == 1
    printed = capsys.readouterr()
    assert "storeprobe: error:" in printed.err
    assert "does not exist" in printed.err
    assert f"1 of 2 targets refused and were skipped: file://{absent}" in printed.err
    saved = ResultSet.load(out)
    assert {r.url for r in saved} == {f"file://{target}"}
    assert len(saved) == 4  # two backups, two restores, saved as the scenario ended
    assert any(str(target) in line for line in _table_lines(printed.out))
    assert tree(target) == {}
