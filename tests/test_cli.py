"""The command line, run as a user would run it."""

from __future__ import annotations

import csv
import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from storeprobe import ResultSet, load_results
from storeprobe.cli import main
from storeprobe.render import resolve_unit
from tests.helpers import interruptible_children, payload
from tests.servers import S3_KEY, S3_SECRET, Server, free_port


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
    results = load_results(out.read_text())
    # the CLI's unit is "auto": each row in the unit its own best figure calls for
    for line, result in zip(lines[2:], results, strict=True):
        assert line.split("|")[3].strip() == resolve_unit("auto", [result.bytes_per_s])
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


def test_bad_stream_count_is_refused_before_a_temporary_directory_exists(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import tempfile

    created: list[str] = []

    def mkdtemp(*args: object, **kwargs: object) -> str:
        created.append("dir")
        return "/nowhere"

    monkeypatch.setattr(tempfile, "mkdtemp", mkdtemp)
    for argv in (
        ["run", "--streams", "0"],
        ["run", "--streams", "1", "5000"],
        ["run", "--repeats", "0"],
    ):
        assert main(argv) == 2
        assert "out of range" in capsys.readouterr().err
    assert created == []


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
    # --unit auto: the unit each column's figures call for
    assert re.search(r"laptop \((KiB|MiB|GiB)/s\)", out)
    assert re.search(r"vm \((KiB|MiB|GiB)/s\)", out)
    # one repeat each cannot show a significant difference: tie marks, and the rule
    assert " fastest" not in out.split("\n\n")[1]
    assert "≈" in out
    assert "significantly faster than the runner-up" in out
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
    loaded = ResultSet.load(out)
    assert [r.streams for r in loaded] == [1, 2, 4]
    saturation = loaded.sweep_saturation()
    assert saturation is not None
    assert printed.splitlines()[-1] == str(saturation)
    if saturation.streams is None:  # never "saturation at 4" when 4 is the largest tried
        assert printed.splitlines()[-1].startswith("no saturation within 1–4 streams")
    assert (tmp_path / "s.svg").read_text().startswith("<?xml")


def _on_a_terminal(argv: list[str]) -> tuple[int, bytes]:
    """Run ``argv`` with stderr on a 24 × 120 pseudo-terminal; its exit code and output."""
    import fcntl
    import pty
    import struct
    import termios

    controller, terminal = pty.openpty()
    fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 120, 0, 0))
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
    return process.returncode, seen


def test_progress_only_on_a_terminal(tmp_path: Path) -> None:
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
    assert "B/s" not in piped.stderr.split("upload")[0]

    code, seen = _on_a_terminal(argv)
    assert code == 0
    assert b"\rupload 64 \xc3\x97 64 KiB (file://" in seen  # tqdm's bar, redrawn in place
    assert b"  0%|" in seen

    # --no-progress on a terminal draws nothing; --progress when piped draws
    code, seen = _on_a_terminal([*argv, "--no-progress"])
    assert code == 0
    assert b"\rupload" not in seen
    forced = subprocess.run([*argv, "--progress"], capture_output=True, text=True, timeout=120)
    assert forced.returncode == 0
    assert "upload 64 × 64 KiB (file://" in forced.stderr  # text mode turns \r into \n
    assert "  0%|" in forced.stderr


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
    assert all("(staged through a local file)" in str(r.strategy) for r in loaded)
    assert list(staging.iterdir()) == []
    capsys.readouterr()


def test_several_urls_print_a_target_column_in_the_unit_asked(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["run", "memory://cli-a", "memory://cli-b", "--workload", "4x1KiB", "--repeats", "2"]
    assert main([*argv, "--unit", "MiB/s", "--no-progress"]) == 0
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert [c.strip() for c in lines[0].split("|")[1:4]] == ["target", "probe", "workload"]
    assert [line.split("|")[1].strip() for line in lines[2:]] == [
        "memory://cli-a",
        "memory://cli-a",
        "memory://cli-b",
        "memory://cli-b",
    ]
    assert {line.split("|")[4].strip() for line in lines[2:]} == {"MiB/s"}
    # every warning says which probe, target and stream count it concerns
    warnings = [line for line in captured.err.splitlines() if line.startswith("warning:")]
    assert warnings
    for line in warnings:
        assert line.startswith(
            (
                "warning: upload 4 × 1 KiB on memory://cli-a, 1 stream: ",
                "warning: download 4 × 1 KiB on memory://cli-a, 1 stream: ",
                "warning: upload 4 × 1 KiB on memory://cli-b, 1 stream: ",
                "warning: download 4 × 1 KiB on memory://cli-b, 1 stream: ",
            )
        )


def test_report_into_a_closed_pipe_ends_quietly(tmp_path: Path) -> None:
    results = tmp_path / "r.json"
    assert (
        main(
            [
                "run",
                "memory://pipe",
                "--workload",
                "2x1KiB",
                "--repeats",
                "1",
                "--no-progress",
                "--json",
                str(results),
            ]
        )
        == 0
    )
    process = subprocess.Popen(
        [sys.executable, "-m", "storeprobe", "report", str(results)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdout is not None
    process.stdout.close()  # as `| head` does once it has its lines
    _, err = process.communicate(timeout=60)
    assert b"Traceback" not in err
    assert b"BrokenPipeError" not in err
    assert process.returncode == 141


@pytest.mark.parametrize("command", ["run", "sweep", "report"])
def test_every_option_has_help_and_shows_its_default(command: str) -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "storeprobe", command, "--help"],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert completed.returncode == 0
    text = completed.stdout
    assert "%%" not in text
    # one block per argument: its invocation, then its help (same line or indented below)
    blocks: list[list[str]] = []
    for line in text.split("positional arguments:")[1].splitlines():
        if line.startswith("  ") and not line.startswith("   "):
            blocks.append([line.strip()])
        elif line.startswith("   ") and blocks:
            blocks[-1].append(line.strip())
    assert len(blocks) >= 3
    for block in blocks:
        invocation, _, rest = block[0].partition("  ")
        if invocation.startswith("-h, --help"):
            continue
        assert (rest.strip() + " ".join(block[1:])).strip(), f"{command}: no help for {invocation}"
    for default in {
        "run": [
            "(default: [1])",
            "(default: 3)",
            "(default: 300.0)",
            "(default: 1GiB)",
            "(default: auto)",
            "(default: auto)",
        ],
        "sweep": [
            "(default: download)",
            "(default: small)",
            "(default: [1, 2, 4, 8, 16, 32])",
            "(default: 3)",
            "(default: auto)",
        ],
        "report": ["(default: markdown)", "(default: environment)", "(default: auto)"],
    }[command]:
        assert default in " ".join(text.split()), f"{command}: {default} missing"
    if command == "sweep":
        assert "95 % of the best" in text


def test_seed_reproduces_a_run_and_no_seed_draws_a_fresh_one(tmp_path: Path) -> None:
    """Needs Probe(seed=...) from the core rewrite (issue 12 item 2)."""
    argv = ["run", "memory://seeded", "--workload", "2x1KiB", "--repeats", "1", "--no-progress"]
    files = [tmp_path / f"{name}.json" for name in ("a", "b", "c", "d")]
    assert main([*argv, "--seed", "7", "--json", str(files[0])]) == 0
    assert main([*argv, "--seed", "7", "--json", str(files[1])]) == 0
    assert main([*argv, "--json", str(files[2])]) == 0
    assert main([*argv, "--json", str(files[3])]) == 0
    seeded = [payload(r).seed for f in files[:2] for r in load_results(f)]
    assert seeded == [7, 7, 7, 7]
    fresh = {payload(r).seed for f in files[2:] for r in load_results(f)}
    assert len(fresh) >= 2  # a fresh random seed per measurement


# -- nothing lost: output paths checked first, results saved as each probe ends ----------------
def _argv_with_bad_output(command: str, tmp: Path) -> tuple[list[str], str]:
    disk = str(tmp / "disk")
    notes = tmp / "notes.txt"
    probe = ["--workload", "2x1KiB", "--repeats", "1", "--no-progress"]
    return {
        "run --json missing dir": (
            ["run", disk, *probe, "--json", str(tmp / "missing" / "r.json")],
            "the directory",
        ),
        "run --json notes": (["run", disk, *probe, "--json", str(notes)], "already exists"),
        "run --json dir": (["run", disk, *probe, "--json", str(tmp)], "is a directory"),
        "run --json /dev/null": (["run", disk, *probe, "--json", "/dev/null"], "regular file"),
        "sweep --json missing dir": (
            ["sweep", disk, *probe, "--streams", "1", "--json", str(tmp / "no" / "s.json")],
            "does not exist",
        ),
        "sweep --plot suffix": (
            ["sweep", disk, *probe, "--streams", "1", "--plot", str(tmp / "chart.json")],
            "a chart is saved as",
        ),
        "backup --json notes": (
            ["backup", disk, "--size", "64KiB", "--versions", "1", "--json", str(notes)],
            "already exists",
        ),
    }[command]


@pytest.mark.parametrize(
    "command",
    [
        "run --json missing dir",
        "run --json notes",
        "run --json dir",
        "run --json /dev/null",
        "sweep --json missing dir",
        "sweep --plot suffix",
        "backup --json notes",
    ],
)
def test_a_bad_output_path_is_refused_before_any_probe_runs(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "disk").mkdir()
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes, not results\n")
    argv, fragment = _argv_with_bad_output(command, tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("storeprobe: error: --"), err  # the one line, first: nothing ran
    assert len(err.splitlines()) == 1
    assert fragment in err
    assert notes.read_text() == "my notes, not results\n"  # never overwritten
    assert sorted(p.name for p in tmp_path.iterdir()) == ["disk", "notes.txt"]
    assert list((tmp_path / "disk").iterdir()) == []


@pytest.mark.parametrize(
    ("option", "name", "fragment"),
    [
        ("--html", "report.txt", "named FILE.html"),
        ("--html", "missing/report.html", "does not exist"),
        ("--plot", "chart.csv", "a chart is saved as"),
    ],
)
def test_report_checks_its_outputs_before_reading(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], option: str, name: str, fragment: str
) -> None:
    results = tmp_path / "r.json"
    argv = ["run", "memory://out", "--workload", "2x1KiB", "--repeats", "1", "--no-progress"]
    assert main([*argv, "--json", str(results)]) == 0
    capsys.readouterr()
    assert main(["report", str(results), option, str(tmp_path / name)]) == 2
    out, err = capsys.readouterr()
    assert out == ""  # no table printed before the refusal
    assert fragment in err
    assert "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json"]


def test_every_target_refused_names_no_results_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """With nothing measured, the closing line does not point at a --json file that was
    never written ("the 0 results measured are in r.json" said so, and r.json was absent)."""
    results = tmp_path / "r.json"
    urls = [str(tmp_path / "absent"), str(tmp_path / "gone")]
    argv = ["run", *urls, "--workload", "2x1KiB", "--repeats", "1", "--no-progress"]
    assert main([*argv, "--json", str(results)]) == 1
    err = capsys.readouterr().err
    assert f"2 of 2 targets refused and were skipped: file://{urls[0]}, file://{urls[1]}" in err
    assert "results measured are in" not in err
    assert not results.exists()


@pytest.mark.parametrize(
    ("failing", "first", "fragment"),
    [
        ("absent directory", False, "does not exist"),
        ("absent directory", True, "does not exist"),
        ("sftp at a closed port", False, "ConnectionRefusedError"),  # refuses as it opens
    ],
)
def test_a_failing_target_keeps_the_results_of_the_others(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], failing: str, first: bool, fragment: str
) -> None:
    disk = tmp_path / "disk"
    disk.mkdir()
    bad = (
        str(tmp_path / "absent")
        if failing == "absent directory"
        else f"sftp://127.0.0.1:{free_port()}/x"
    )
    results = tmp_path / "r.json"
    urls = [bad, str(disk)] if first else [str(disk), bad]
    argv = ["run", *urls, "--workload", "2x1KiB", "--repeats", "1", "--no-progress"]
    assert main([*argv, "--json", str(results)]) == 1
    captured = capsys.readouterr()
    assert "storeprobe: error:" in captured.err
    assert fragment in captured.err
    shown = bad if "://" in bad else f"file://{bad}"
    assert f"1 of 2 targets refused and were skipped: {shown}" in captured.err
    assert "Traceback" not in captured.err
    saved = load_results(results)
    assert [(r.url, r.operation) for r in saved] == [
        (f"file://{disk}", "upload"),
        (f"file://{disk}", "download"),
    ]
    assert all(r.ok for r in saved)
    rows = [line for line in captured.out.splitlines() if line.startswith("| upload")]
    assert len(rows) == 1  # the table shows what was measured
    assert list(disk.iterdir()) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["disk", "r.json"]  # no temporary left


def test_two_default_runs_match_each_other_in_compare(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import tempfile

    files = [tmp_path / "a.json", tmp_path / "b.json"]
    for path in files:
        assert main(["run", "--workload", "2x1KiB", "--repeats", "3", "--json", str(path)]) == 0
    runs = [load_results(path) for path in files]
    # each run wrote its own temporary directory, kept in the url; the name is the same
    assert runs[0][0].url != runs[1][0].url
    assert {r.target_name for run in runs for r in run} == {f"file://{tempfile.gettempdir()}"}
    assert {r.target_id for run in runs for r in run} == {f"file://{tempfile.gettempdir()}"}
    capsys.readouterr()
    code = main(["compare", str(files[0]), str(files[1]), "--format", "csv"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    rows = list(csv.DictReader(io.StringIO(captured.out)))
    assert [(row["target"], row["operation"], row["count"]) for row in rows] == [
        (f"file://{tempfile.gettempdir()}", "upload", "2"),
        (f"file://{tempfile.gettempdir()}", "download", "2"),
    ]


def test_an_interrupted_run_keeps_the_results_of_finished_probes(tmp_path: Path) -> None:
    import contextlib
    import signal
    import time

    from storeprobe import ResultFormatError

    disk = tmp_path / "disk"
    disk.mkdir()
    results = tmp_path / "r.json"
    argv = [sys.executable, "-m", "storeprobe", "run", str(disk), "--no-progress"]
    # the small probes finish at once; the large one would run for minutes
    argv += ["--workload", "1x1KiB", "--workload", "2000x64KiB", "--repeats", "50"]
    with interruptible_children():  # SIGINT at its default even if the suite ignores it
        process = subprocess.Popen(
            [*argv, "--json", str(results)], stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
    try:
        saved: list[object] = []
        deadline = time.monotonic() + 60
        while len(saved) < 2 and time.monotonic() < deadline and process.poll() is None:
            # the file is replaced whole: it is either absent or a complete document
            with contextlib.suppress(FileNotFoundError, ResultFormatError):
                saved = list(load_results(results))
            time.sleep(0.02)
        assert len(saved) == 2, "the two small probes were never saved"
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=120)
    finally:  # a run that outlives its test must not go on beside the next ones
        if process.poll() is None:
            process.kill()
            process.communicate(timeout=10)
    assert process.returncode == 130, err
    kept = load_results(results)
    assert [(r.probe, r.ok) for r in kept[:2]] == [
        ("upload 1 × 1 KiB", True),
        ("download 1 × 1 KiB", True),
    ]
    assert len(kept) == 2  # the large probe was interrupted: never saved half-done
    assert b"results measured are in" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["disk", "r.json"]  # no temporary


def test_children_take_ctrl_c_when_this_suite_was_started_ignoring_it() -> None:
    # Why the interrupted-run tests hung when the suite ran as a background job of a
    # shell without job control (``.ci/run &``): the shell starts it with SIGINT ignored,
    # the ignore is inherited by every child, a Python started that way installs no
    # KeyboardInterrupt handler, and the test's SIGINT was dropped while the run went on.
    import signal

    show = "print({signal.SIG_IGN: 'ignored', signal.default_int_handler: 'ctrl-c'}"
    show += ".get(signal.getsignal(signal.SIGINT), 'other'))"
    child = [sys.executable, "-c", f"import signal; {show}"]
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)  # as such a shell starts us
    try:
        inherited = subprocess.run(child, capture_output=True, text=True, check=True).stdout
        with interruptible_children():
            started = subprocess.Popen(child, stdout=subprocess.PIPE, text=True)
        after = signal.getsignal(signal.SIGINT)
        signal.signal(signal.SIGINT, signal.default_int_handler)  # as a terminal starts us
        with interruptible_children():
            untouched = signal.getsignal(signal.SIGINT)
    finally:
        signal.signal(signal.SIGINT, previous)
    taken, _ = started.communicate(timeout=60)
    assert inherited == "ignored\n"  # the cause: a plain child ignores SIGINT too
    assert taken == "ctrl-c\n"  # started inside the block: SIGINT raises KeyboardInterrupt
    assert after is signal.SIG_IGN  # and this process is left as it was
    assert untouched is signal.default_int_handler  # SIGINT not ignored: nothing changed


def test_run_latency_prints_objects_per_s_and_percentiles(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "lat"
    target.mkdir()
    assert main(["run", str(target), "--workload", "20x1KiB", "--repeats", "1", "--latency"]) == 0
    out = capsys.readouterr().out
    header = next(line for line in out.splitlines() if "objects/s" in line)
    assert "p50 (ms)" in header
    assert "TTFB p99 (ms)" in header
