"""The pytest plugin, through pytester: sessions in a subprocess probing memory://.

A regression is made deterministic by editing a saved run: its windows divided (a base
1000 × faster) or multiplied (1000 × slower) before the next session compares with it.
"""

from __future__ import annotations

import importlib.metadata
import inspect
import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from storeprobe import Probe, load_results
from storeprobe.pytest_plugin import Recorder, machine_id, saved_runs
from storeprobe.render import repeat_figures
from storeprobe.stats import compare_runs

ROOT = Path(__file__).parent.parent

TESTS = """
from storeprobe import Workload

def test_upload(storeprobe):
    result = storeprobe.upload(Workload.parse("4x1KiB"))
    assert result.ok

def test_run(storeprobe):
    assert len(storeprobe.run([Workload.parse("2x1KiB")])) == 2
"""


def _installed() -> bool:
    return any(
        entry.value == "storeprobe.pytest_plugin"
        for entry in importlib.metadata.entry_points(group="pytest11")
    )


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    """A pytest session in a subprocess, with the plugin (by its entry point once the
    package is installed with it, else by name)."""
    plugin = () if _installed() else ("-p", "storeprobe.pytest_plugin")
    return pytester.runpytest_subprocess(*plugin, "-p", "no:cacheprovider", *args)


@pytest.fixture
def tests(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(test_storage=TESTS)
    return pytester


def storage(pytester: pytest.Pytester) -> Path:
    return pytester.path / ".storeprobe" / machine_id()


def scale_saved(path: Path, factor: float) -> None:
    """Multiply every window of a saved run by ``factor`` (< 1: the run was faster)."""
    document = json.loads(path.read_text())
    for record in document["results"]:
        for sample in record["samples"]:
            sample["elapsed_ns"] = max(1, round(sample["elapsed_ns"] * factor))
    path.write_text(json.dumps(document))


URL = "--storeprobe-url=memory://bench"


def test_the_entry_point_is_declared() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["entry-points"]["pytest11"] == {"storeprobe": "storeprobe.pytest_plugin"}


def test_every_result_of_the_fixture_is_saved_per_machine(tests: pytest.Pytester) -> None:
    outcome = run(tests, URL, "--storeprobe-save=base")
    outcome.assert_outcomes(passed=2)
    path = storage(tests) / "0001_base.json"
    outcome.stdout.fnmatch_lines([f"storeprobe: saved 3 results to {path}"])
    results = load_results(path)
    assert [(r.operation, r.subject.label) for r in results] == [
        ("upload", "4 × 1 KiB"),
        ("upload", "2 × 1 KiB"),
        ("download", "2 × 1 KiB"),
    ]
    assert {(r.url, r.streams, len(r.samples)) for r in results} == {("memory://bench", 1, 3)}
    assert re.fullmatch(r"[A-Za-z0-9._-]+-[0-9a-f]{8}", machine_id())
    again = run(tests, URL, "--storeprobe-save=base", "--storeprobe-repeats=1")
    again.assert_outcomes(passed=2)
    assert [(n, name) for n, name, _ in saved_runs(storage(tests))] == [(1, "base"), (2, "base")]


def save_base_runs(tests: pytest.Pytester, factor: float, runs: int = 3) -> list[str]:
    """``runs`` saved runs named base, each window × ``factor``; their file names."""
    for _ in range(runs):
        run(tests, URL, "--storeprobe-save=base", "--storeprobe-repeats=2").assert_outcomes(
            passed=2
        )
    names = [f"{n:04d}_base.json" for n in range(1, runs + 1)]
    for name in names:
        scale_saved(storage(tests) / name, factor)
    return names


def test_a_slower_run_fails_the_session(tests: pytest.Pytester) -> None:
    names = save_base_runs(tests, 1 / 1000)  # the base runs were 1000 × faster
    outcome = run(tests, URL, "--storeprobe-compare=base", "--storeprobe-compare-fail=median:5%")
    outcome.assert_outcomes(passed=2)
    assert outcome.ret == 1
    outcome.stdout.fnmatch_lines(
        [
            f"storeprobe: compared with 3 saved runs: {', '.join(names)}",
            "storeprobe: FAILED: 3 of 3 probes slower by more than 5% (--storeprobe-compare-fail)",
            "*new against base: 3 probes compared, 3 regressed*",
        ]
    )


def test_a_faster_run_passes_and_shows_the_table(tests: pytest.Pytester) -> None:
    save_base_runs(tests, 1000)  # the base runs were 1000 × slower
    outcome = run(tests, URL, "--storeprobe-compare=base", "--storeprobe-compare-fail=median:5%")
    assert outcome.ret == 0
    outcome.stdout.fnmatch_lines(["*new against base: 3 probes compared, 0 regressed*"])
    assert outcome.stdout.str().count(" not slower") >= 3


def test_one_saved_run_is_inconclusive_and_does_not_fail(tests: pytest.Pytester) -> None:
    save_base_runs(tests, 1 / 1000, runs=1)  # 1000 × faster, but one run: no evidence
    outcome = run(tests, URL, "--storeprobe-compare=base", "--storeprobe-compare-fail=median:5%")
    assert outcome.ret == 0
    outcome.stdout.fnmatch_lines(
        [
            "storeprobe: compared with 1 saved run: 0001_base.json",
            "storeprobe: 3 of 3 probes inconclusive, not failing: too little evidence of how "
            "much runs differ (save more runs: --storeprobe-save, up to the last 10 are compared)",
            "*inconclusive (1 base run and 1 new run: how much separate runs differ is unknown*",
        ]
    )


def test_compare_without_a_name_takes_the_latest_run(tests: pytest.Pytester) -> None:
    run(tests, URL, "--storeprobe-save=first").assert_outcomes(passed=2)
    run(tests, URL, "--storeprobe-save=second").assert_outcomes(passed=2)
    outcome = run(tests, URL, "--storeprobe-compare", "--storeprobe-save=third")
    assert outcome.ret == 0
    directory = storage(tests)
    outcome.stdout.fnmatch_lines(
        [
            "storeprobe: compared with 1 saved run: 0002_second.json",
            f"storeprobe: saved 3 results to {directory / '0003_third.json'}",
        ]
    )
    by_number = run(tests, URL, "--storeprobe-compare=1")
    by_number.stdout.fnmatch_lines(["storeprobe: compared with 1 saved run: 0001_first.json"])


def test_a_machine_id_can_be_given(tests: pytest.Pytester) -> None:
    run(tests, URL, "--storeprobe-save=main", "--storeprobe-machine=ci-runner").assert_outcomes(
        passed=2
    )
    assert (tests.path / ".storeprobe" / "ci-runner" / "0001_main.json").is_file()
    outcome = run(tests, URL, "--storeprobe-compare=main", "--storeprobe-machine=ci-runner")
    outcome.stdout.fnmatch_lines(["storeprobe: compared with 1 saved run: 0001_main.json"])


def test_nothing_to_compare_with_is_said_and_does_not_fail(tests: pytest.Pytester) -> None:
    outcome = run(tests, URL, "--storeprobe-compare=main", "--storeprobe-compare-fail=median:5%")
    assert outcome.ret == 0
    outcome.stdout.fnmatch_lines(
        ["storeprobe: nothing to compare with: * holds no a run named 'main'"]
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--storeprobe-compare", "--storeprobe-compare-fail=median:5"], "'5%'"),
        (["--storeprobe-compare", "--storeprobe-compare-fail=mean:5%"], "median:5%"),
        (["--storeprobe-compare-fail=median:5%"], "add --storeprobe-compare"),
        (["--storeprobe-save=a/b"], "a run's name is"),
        (["--storeprobe-streams=0"], "out of range"),
        (["--storeprobe-option=novalue"], "KEY=VALUE"),
    ],
)
def test_bad_options_are_usage_errors(
    tests: pytest.Pytester, args: list[str], message: str
) -> None:
    outcome = run(tests, URL, *args)
    assert outcome.ret == pytest.ExitCode.USAGE_ERROR
    assert message in outcome.stderr.str()


def test_options_are_never_printed_or_saved(
    tests: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "SENTINEL-secret-4f1c9a"
    monkeypatch.setenv("STOREPROBE_URL", "memory://from-env")
    outcome = run(tests, f"--storeprobe-option=secret={secret}", "--storeprobe-save=env", "-v")
    outcome.assert_outcomes(passed=2)
    saved = storage(tests) / "0001_env.json"
    assert secret not in outcome.stdout.str() + outcome.stderr.str()
    assert secret not in saved.read_text()
    assert {r.url for r in load_results(saved)} == {"memory://from-env"}


def test_without_a_url_a_local_directory_is_probed(tests: pytest.Pytester) -> None:
    outcome = run(tests, "--storeprobe-save=local", "--storeprobe-repeats=1")
    outcome.assert_outcomes(passed=2)
    urls = {r.url for r in load_results(storage(tests) / "0001_local.json")}
    assert len(urls) == 1
    assert "storeprobe-pytest" in urls.pop()


def test_the_plugin_is_silent_when_not_asked(tests: pytest.Pytester) -> None:
    outcome = run(tests, URL)
    outcome.assert_outcomes(passed=2)
    assert "storeprobe:" not in outcome.stdout.str()
    assert " storeprobe -" not in outcome.stdout.str()
    assert not (tests.path / ".storeprobe").exists()


EXACT_CONFTEST = """
import threading

import pytest
from fsspec.implementations.memory import MemoryFileSystem

from storeprobe import Probe


class StepClock:
    def __init__(self, step):
        self.now, self.step, self.lock = 0, step, threading.Lock()

    def __call__(self):
        with self.lock:
            self.now += self.step
            return self.now


@pytest.fixture(scope="session")
def storeprobe_probe():
    return Probe(MemoryFileSystem(), "/bench", repeats=3, clock=StepClock(1000))
"""


@pytest.mark.parametrize(
    ("factors", "verdict", "ret"),
    [
        ([1.0] * 5, "not slower", 0),  # identical runs
        ([0.50, 0.52, 0.48, 0.51, 0.49], "slower", 1),  # shifted: the base twice as fast
        ([0.80, 1.00, 0.70, 0.95, 0.85], "inconclusive", 0),  # 15 % slower, runs differ more
        ([0.5], "inconclusive", 0),  # one base run: how much runs differ is unknown
    ],
)
def test_compare_fail_is_the_rule_of_compare_runs_and_of_the_cli(
    pytester: pytest.Pytester, factors: list[float], verdict: str, ret: int
) -> None:
    # an injected clock makes every run's figures exact; base run i's windows × factors[i]
    pytester.makepyfile(test_storage=TESTS)
    pytester.makeconftest(EXACT_CONFTEST)
    run(pytester, "--storeprobe-save=base").assert_outcomes(passed=2)
    directory = storage(pytester)
    saved = (directory / "0001_base.json").read_text()
    base = [directory / f"{n:04d}_base.json" for n in range(1, len(factors) + 1)]
    for path, factor in zip(base, factors, strict=True):  # the same exact run, rescaled
        path.write_text(saved)
        scale_saved(path, factor)
    outcome = run(
        pytester,
        "--storeprobe-compare=base",
        "--storeprobe-compare-fail=median:5%",
        "--storeprobe-save=new",
    )
    outcome.assert_outcomes(passed=2)
    assert outcome.ret == ret
    new = directory / f"{len(factors) + 1:04d}_new.json"
    # the rule itself, on the figures of the saved files
    base_results = [load_results(path) for path in base]
    for index, result in enumerate(load_results(new)):
        found = compare_runs(
            [repeat_figures(results[index]) for results in base_results],
            [repeat_figures(result)],
            threshold=0.05,
        )
        assert found.verdict == verdict
    # storeprobe compare on the same files: the same exit status and the same table
    argv = ["compare", *map(str, base), str(new), "--fail-slower", "5%", "--format", "text"]
    cli = subprocess.run(
        [sys.executable, "-m", "storeprobe", *argv],
        capture_output=True,
        text=True,
        check=False,
    )
    assert cli.returncode == ret, cli.stderr
    rows = [line for line in cli.stdout.splitlines() if line.startswith("memory://")]
    assert len(rows) == 3
    assert all(verdict in row for row in rows)
    printed = outcome.stdout.lines
    assert all(row in printed for row in rows)


def test_the_fixture_takes_what_probe_takes() -> None:
    """Every probe call of the ``storeprobe`` fixture has the parameters of the Probe
    method it records (names, kinds, defaults, annotations), so code written against a
    Probe runs against the fixture; only ``backup_restore`` leaves out ``progress`` (the
    fixture draws no bar inside a test session)."""
    calls = [
        name
        for name, member in vars(Recorder).items()
        if inspect.isfunction(member) and not name.startswith("_") and name != "record"
    ]
    assert "backup_restore" in calls
    assert "upload_small" in calls
    for name in calls:
        recorded = inspect.signature(getattr(Recorder, name)).parameters
        probed = dict(inspect.signature(getattr(Probe, name)).parameters)
        if name == "backup_restore":
            del probed["progress"]
        assert list(recorded.values()) == list(probed.values()), name
