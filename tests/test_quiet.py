"""tests/quiet.py: a ``quiet`` test runs with no other test running, in a run of several
pytest-xdist processes (an inner pytest run, wired as the suite's conftest wires it)."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

CONFTEST = """
import pytest
from tests import quiet

def pytest_configure(config):
    config.addinivalue_line("markers", "quiet: runs alone")

@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node):
    quiet.hand_to(node, node.config)

def pytest_unconfigure(config):
    quiet.close_run(config)

@pytest.fixture(autouse=True)
def _share_the_machine(request):
    with quiet.share(request):
        yield
"""

TESTS = """
import os, time
from pathlib import Path
import pytest

RUNNING = Path(os.environ["QUIET_TEST_RUNNING"])

def busy(name):
    mark = RUNNING / name
    mark.touch()
    time.sleep(0.2)  # long enough for the other processes' tests to run beside it
    mark.unlink()

@pytest.mark.parametrize("n", range(6))
def test_busy_before(n):
    busy(f"before-{n}")

@pytest.mark.quiet
@pytest.mark.parametrize("n", range(3))
def test_quiet(n):
    mark = RUNNING / f"quiet-{n}"
    mark.touch()
    seen = []
    for _ in range(6):  # the other processes are running tests meanwhile, or waiting
        seen.append(sorted(p.name for p in RUNNING.iterdir()))
        time.sleep(0.05)
    mark.unlink()
    assert seen == [[mark.name]] * 6

@pytest.mark.parametrize("n", range(6))
def test_busy_after(n):
    busy(f"after-{n}")
"""


def test_a_quiet_test_runs_with_no_other_test_running(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    running = tmp_path / "running"
    running.mkdir()
    monkeypatch.setenv("QUIET_TEST_RUNNING", str(running))
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    temporary = tmp_path / "tmp"  # where the inner run's controller makes its lock folder
    temporary.mkdir()
    monkeypatch.setenv("TMPDIR", str(temporary))
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_inner=TESTS)
    result = pytester.runpytest_subprocess("-p", "xdist", "-n", "3", "--dist", "load")
    result.assert_outcomes(passed=15)
    assert not list(temporary.iterdir())  # the run's lock folder is removed at its end
