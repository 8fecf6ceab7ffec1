"""A quiet machine for the tests that compare timings, when the suite runs in processes.

The suite runs in several pytest-xdist processes on a 2-core machine. A test marked
``quiet`` (``tests/test_accuracy.py``: storeprobe's windows against a bare client, a
shaped link's rate) compares timings that the other processes' work disturbs: with the
suite in four processes, the bare obstore loop's least-disturbed request came out 0.67 ms
slower than storeprobe's, 3.01 % over 32 requests, against a bound of 3 %.

So every test holds a lock on a file of the run while it runs: a shared lock, or, for a
``quiet`` test, the exclusive one, which waits for the tests running in other processes
to end and keeps new ones from starting until it has ended. A second file is the
turnstile that gives the quiet test its turn: each test passes it on its way in, and a
quiet test holds it while it waits, so the processes' next tests queue behind it rather
than keeping a shared lock held for ever. The files are in a folder the controlling
process makes for the run and removes at its end. In one process (``-n 0``) nothing runs
beside a test, and nothing is locked.
"""

from __future__ import annotations

import contextlib
import fcntl
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

#: the key of the run's lock folder in what the controller hands each worker
KEY = "storeprobe_quiet_folder"
#: the marker of a test that runs with no other test running
MARKER = "quiet"


def hand_to(node: object, config: pytest.Config) -> None:
    """In the controlling process, as xdist starts a worker (``pytest_configure_node``):
    give it the run's lock folder, made for the first."""
    folder = config.stash.get(_FOLDER, None)
    if folder is None:
        folder = config.stash[_FOLDER] = tempfile.mkdtemp(prefix="storeprobe-tests-")
    node.workerinput[KEY] = folder  # type: ignore[attr-defined]


def close_run(config: pytest.Config) -> None:
    """In the controlling process: remove the lock folder (``pytest_unconfigure``)."""
    folder = config.stash.get(_FOLDER, None)
    if folder is not None:
        shutil.rmtree(folder, ignore_errors=True)


@contextlib.contextmanager
def share(request: pytest.FixtureRequest) -> Iterator[None]:
    """Hold the run's lock while a test runs: exclusive for a ``quiet`` test, shared
    for the others; nothing in a run of one process."""
    given: dict[str, str] = getattr(request.config, "workerinput", {})
    folder = given.get(KEY)
    if folder is None:
        yield
        return
    quiet = request.node.get_closest_marker(MARKER) is not None
    with (
        open(Path(folder) / "turnstile", "a") as turnstile,
        open(Path(folder) / "lock", "a") as lock,
    ):
        fcntl.flock(turnstile, fcntl.LOCK_EX)
        try:
            if not quiet:
                fcntl.flock(turnstile, fcntl.LOCK_UN)  # passed: let the next one in
            fcntl.flock(lock, fcntl.LOCK_EX if quiet else fcntl.LOCK_SH)
        finally:
            fcntl.flock(turnstile, fcntl.LOCK_UN)  # a quiet test holds the lock now
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


_FOLDER = pytest.StashKey[str]()
