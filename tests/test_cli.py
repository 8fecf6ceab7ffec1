"""The command line, run as a user would run it."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from storeprobe import load_results
from storeprobe.cli import main
from tests.servers import S3_KEY, S3_SECRET, Server


def test_default_run_probes_a_local_temporary_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "r.json"
    code = main(
        [
            "run",
            "--workload",
            "4x1KiB",
            "--workload",
            "1x2MiB",
            "--repeats",
            "1",
            "--json",
            str(out),
        ]
    )
    captured = capsys.readouterr()
    assert code == 0, captured.err
    lines = captured.out.splitlines()
    assert lines[0].split("|")[1].strip() == "probe"
    assert [line.split("|")[1].strip() for line in lines[2:]] == [
        "upload 4 × 1 KiB",
        "download 4 × 1 KiB",
        "upload 1 × 2 MiB",
        "download 1 × 2 MiB",
    ]
    assert "KiB/s" in lines[2]
    assert "MiB/s" in lines[4]
    results = load_results(out.read_text())
    assert [r.protocol for r in results] == ["file"] * 4
    temporary = Path(results[0].url.removeprefix("file://"))
    assert not temporary.exists()


def test_python_dash_m_and_help() -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "storeprobe", "run", "--help"], capture_output=True, text=True
    )
    assert completed.returncode == 0
    for flag in ("--streams", "--repeats", "--workload", "--json", "--label", "--option"):
        assert flag in completed.stdout


@pytest.mark.parametrize(
    "argv",
    [
        ["run", "--workload", "16 KB"],
        ["run", "--streams", "0"],
        ["run", "--repeats", "0"],
        ["run", "--label", "bad\x07label"],
        ["run", "gopher://nowhere"],
        ["run", "-o", "novalue"],
    ],
)
def test_usage_errors_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    assert "storeprobe: error:" in capsys.readouterr().err


def test_missing_directory_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", str(tmp_path / "absent"), "--workload", "2x1KiB"]) == 1
    assert "does not exist" in capsys.readouterr().err


def test_cli_against_the_s3_server_never_prints_the_secret(
    s3_server: Server, tmp_path: Path
) -> None:
    out = tmp_path / "s3.json"
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "storeprobe",
            "run",
            "s3://bench/cli",
            "--streams",
            "1",
            "4",
            "--repeats",
            "1",
            "--workload",
            "16x16KiB",
            "-o",
            f"key={S3_KEY}",
            "-o",
            f"secret={S3_SECRET}",
            "-o",
            "client_kwargs=" + json.dumps({"endpoint_url": s3_server.endpoint}),
            "--json",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert completed.returncode == 0, completed.stderr
    table = completed.stdout.splitlines()
    assert len(table) == 2 + 4
    assert S3_SECRET not in completed.stdout + completed.stderr + out.read_text()
    assert [r.streams for r in load_results(out.read_text())] == [1, 1, 4, 4]


def test_run_two_targets_then_report_and_plot(
    s3_server: Server, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results = tmp_path / "results.json"
    local = tmp_path / "disk"
    local.mkdir()
    endpoint = json.dumps({"endpoint_url": s3_server.endpoint, "region_name": "us-east-1"})
    argv = ["run", str(local), "s3://bench/cli-report", "--streams", "1", "2", "--repeats", "1"]
    argv += ["--workload", "8x4KiB", "-o", f"key={S3_KEY}", "-o", f"secret={S3_SECRET}"]
    argv += ["-o", f"client_kwargs={endpoint}", "--label", "laptop", "--json", str(results)]
    assert main(argv) == 0, capsys.readouterr().err
    # a second run into the same file keeps the first one
    assert (
        main(
            [
                *argv[:2],
                "--repeats",
                "1",
                "--workload",
                "8x4KiB",
                "--label",
                "vm",
                "--json",
                str(results),
            ]
        )
        == 0
    )
    assert len(load_results(results.read_text())) == 8 + 2
    capsys.readouterr()

    chart = tmp_path / "chart.png"
    assert main(["report", str(results), "--plot", str(chart)]) == 0
    out = capsys.readouterr().out
    assert "**upload 8 × 4 KiB, 1 stream**" in out
    assert "laptop (KiB/s)" in out
    assert "vm (KiB/s)" in out
    assert "👑" in out
    assert chart.read_bytes().startswith(b"\x89PNG")

    assert main(["report", str(results), "--format", "csv", "--by", "probe", "--plain"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert {row["target"] for row in rows} == {f"file://{local}", "s3://bench/cli-report"}
    assert S3_SECRET not in results.read_text()


def test_report_refuses_a_wrong_schema(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema": "storeprobe.results", "version": 99, "results": []}')
    assert main(["report", str(bad)]) == 2
    assert "version 99" in capsys.readouterr().err


def test_sweep_names_the_saturation_point(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "sweep.json"
    code = main(
        [
            "sweep",
            str(tmp_path),
            "--workload",
            "16x4KiB",
            "--streams",
            "1",
            "2",
            "4",
            "--repeats",
            "1",
            "--json",
            str(out),
            "--plot",
            str(tmp_path / "s.svg"),
        ]
    )
    assert code == 0
    printed = capsys.readouterr().out
    assert "saturation:" in printed
    assert [r.streams for r in load_results(out.read_text())] == [1, 2, 4]
    assert (tmp_path / "s.svg").read_text().startswith("<?xml")


def test_progress_only_on_a_terminal(tmp_path: Path) -> None:
    import os
    import pty

    argv = [
        sys.executable,
        "-m",
        "storeprobe",
        "run",
        str(tmp_path),
        "--workload",
        "64x64KiB",
        "--repeats",
        "1",
    ]
    piped = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert piped.returncode == 0
    assert "\r" not in piped.stderr
    assert "MiB/s" not in piped.stderr.split("upload")[0]

    controller, terminal = pty.openpty()
    process = subprocess.Popen(argv, stdin=terminal, stdout=subprocess.PIPE, stderr=terminal)
    os.close(terminal)
    seen = b""
    while True:
        try:
            chunk = os.read(controller, 4096)
        except OSError:  # the terminal closed: the process has finished
            break
        if not chunk:
            break
        seen += chunk
    process.wait(60)
    os.close(controller)
    assert process.returncode == 0
    assert b"\r  upload 64 \xc3\x97 64 KiB" in seen  # the progress line, redrawn in place
    assert b" %" in seen


def test_run_stages_a_large_split_object(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import tempfile

    staging = tmp_path / "staging"
    staging.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(staging))
    results = tmp_path / "results.json"
    argv = ["run", str(tmp_path), "--workload", "1x12MiB", "--streams", "4", "--repeats", "1"]
    assert main([*argv, "--stage-above", "4MiB", "--json", str(results)]) == 0
    loaded = load_results(results.read_text())
    assert [r.probe for r in loaded] == ["upload 1 × 12 MiB", "download 1 × 12 MiB"]
    assert all("(staged through a local file)" in r.strategy for r in loaded)
    assert list(staging.iterdir()) == []
    capsys.readouterr()
