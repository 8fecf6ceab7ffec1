"""The pytest plugin (entry point ``pytest11``): storage probes as tests, runs saved per
machine, a build failed when a probe got slower.

A test asks for the ``storeprobe`` fixture, a :class:`Recorder` around a configured
:class:`~storeprobe.probe.Probe`; every Result its probe methods return is kept for the
session::

    def test_small_objects(storeprobe):
        storeprobe.upload_small()
        storeprobe.download_small()

Options (all optional; the plugin does nothing until a test uses the fixture):

- ``--storeprobe-url URL`` (else the ``STOREPROBE_URL`` environment variable, else a
  temporary directory on the local disk, the same path at every run so that runs match);
- ``--storeprobe-option KEY=VALUE``, repeatable: storage options (VALUE read as JSON if
  it can be); never printed;
- ``--storeprobe-streams N``, ``--storeprobe-repeats N`` (defaults 1 and 3);
- ``--storeprobe-save NAME``: at the end, write the session's results to
  ``.storeprobe/<machine>/NNNN_NAME.json`` (NNNN counts up; ``<machine>`` is the host
  name and a short hash of CPU model, operating system and architecture);
- ``--storeprobe-compare[=NAME]``: at the end, compare with the saved runs of that
  name, the newest :data:`HISTORY` (10), each one a base run (a number ``NNNN`` names
  one run; without a value, the runs named as the latest saved run of this machine),
  saved before this session, and print the table in the terminal summary;
- ``--storeprobe-compare-fail=median:5%``: with ``--storeprobe-compare``, exit 1 when a
  probe is slower by more than 5 % by the rule of
  :func:`storeprobe.stats.compare_runs` (the whole 95 % interval, as wide as the saved
  runs differ, below 0.95); an inconclusive probe is named and does not fail;
- ``--storeprobe-storage DIR``: where runs are saved (default ``.storeprobe`` in the
  rootdir);
- ``--storeprobe-machine ID``: the folder of this machine's runs, instead of the host
  name and hash (CI runners change host names from one job to the next).

Override the session fixture ``storeprobe_probe`` in a ``conftest.py`` to build the
Probe in code instead.

Why one module (~530 lines): one concept (the plugin): its options, the fixture and recorder, where
runs are saved per machine and the session-end comparison depend on one another and are
read together; the comparison itself is :mod:`storeprobe.comparison`.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import platform
import re
import socket
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from attrs import define, field, frozen

from storeprobe.backup import Method
from storeprobe.comparison import Report, compare_results, parse_threshold
from storeprobe.dataset import Image, Tree
from storeprobe.environment import Environment
from storeprobe.errors import ConfigurationError
from storeprobe.metadata import MetadataOperation
from storeprobe.probe import MAX_REPEATS, MAX_STREAMS, Probe
from storeprobe.render import percent
from storeprobe.result import Result, Transfer, dump_results, load_results
from storeprobe.resultset import ResultSet
from storeprobe.workload import Workload

__all__ = [
    "Recorder",
    "Settings",
    "machine_id",
    "pytest_addoption",
    "pytest_configure",
    "pytest_sessionfinish",
    "pytest_terminal_summary",
    "saved_runs",
    "storeprobe",
    "storeprobe_probe",
]

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_SAVED = re.compile(r"^(\d{4,})_(.+)\.json$")
#: ``--storeprobe-compare`` given without a value: the latest saved run
LATEST = "latest saved run"


def machine_id() -> str:
    """``<hostname>-<8 hex digits>``: the host name (file-name safe) and a hash of the
    CPU model, operating system and architecture, so runs of different machines (or of
    a host name reused on other hardware) are kept apart."""
    host = re.sub(r"[^A-Za-z0-9._-]", "_", socket.gethostname()) or "host"
    hardware = "|".join(
        [Environment.capture().cpu_model or "", platform.system(), platform.machine()]
    )
    return f"{host}-{hashlib.sha256(hardware.encode()).hexdigest()[:8]}"


def saved_runs(directory: Path) -> list[tuple[int, str, Path]]:
    """``(number, name, path)`` of the runs saved in ``directory``, oldest first."""
    if not directory.is_dir():
        return []
    found = []
    for path in directory.iterdir():
        match = _SAVED.match(path.name)
        if match and path.is_file():
            found.append((int(match[1]), match[2], path))
    return sorted(found)


def _check_name(name: str, option: str) -> str:
    if not _NAME.match(name):
        raise pytest.UsageError(
            f"{option} {name!r}: a run's name is 1 to 64 letters, digits, '.', '_' or '-', "
            "starting with a letter or digit, e.g. 'main' or 'v1.2'"
        )
    return name


def _storage_options(pairs: Sequence[str]) -> dict[str, Any]:
    """``KEY=VALUE`` pairs as storage options (VALUE read as JSON if it can be); the
    error names the key only, never a value (it may be a secret)."""
    options: dict[str, Any] = {}
    for pair in pairs:
        key, separator, value = pair.partition("=")
        if not separator or not key:
            raise pytest.UsageError(
                f"--storeprobe-option {key!r} must be KEY=VALUE, e.g. anon=true"
            )
        try:
            options[key] = json.loads(value)
        except json.JSONDecodeError:
            options[key] = value
    return options


def _fail_threshold(text: str) -> float:
    statistic, separator, threshold = text.partition(":")
    if not separator or statistic.strip() != "median":
        raise pytest.UsageError(
            f"--storeprobe-compare-fail {text!r}: write median:5% or median:0.05 (the "
            "median of each run is what is compared, with an interval from how much runs differ)"
        )
    try:
        return parse_threshold(threshold, option="--storeprobe-compare-fail median:")
    except ConfigurationError as exc:
        raise pytest.UsageError(str(exc)) from None


def _in_range(value: int, high: int, option: str) -> int:
    if not 1 <= value <= high:
        raise pytest.UsageError(f"{option} {value} is out of range: use 1 to {high}")
    return value


def _default_directory() -> Path:
    """The same local directory at every run (so that runs match by URL), per user."""
    suffix = f"-{os.getuid()}" if hasattr(os, "getuid") else ""
    return Path(tempfile.gettempdir()) / f"storeprobe-pytest{suffix}"


@frozen(kw_only=True)
class Settings:
    """The plugin's options, checked once when pytest starts.

    ``url`` is None for the default local directory. ``compare`` is a run's name or
    number, :data:`LATEST`, or None (no comparison).
    """

    url: str | None
    storage_options: dict[str, Any] = field(repr=False)  # may hold secrets: never shown
    streams: int
    repeats: int
    save: str | None
    compare: str | None
    fail_slower: float | None
    storage: Path
    machine: str | None

    @classmethod
    def from_config(cls, config: pytest.Config) -> Settings:
        """Read and check the ``--storeprobe-*`` options; bad ones are a UsageError."""
        url = config.getoption("storeprobe_url") or os.environ.get("STOREPROBE_URL") or None
        save = config.getoption("storeprobe_save")
        compare = config.getoption("storeprobe_compare")
        fail = config.getoption("storeprobe_compare_fail")
        if fail is not None and compare is None:
            raise pytest.UsageError(
                "--storeprobe-compare-fail needs a run to compare with: add "
                "--storeprobe-compare (the latest saved run) or --storeprobe-compare=NAME"
            )
        storage = config.getoption("storeprobe_storage")
        machine = config.getoption("storeprobe_machine")
        return cls(
            url=url,
            storage_options=_storage_options(config.getoption("storeprobe_option")),
            streams=_in_range(
                config.getoption("storeprobe_streams"), MAX_STREAMS, "--storeprobe-streams"
            ),
            repeats=_in_range(
                config.getoption("storeprobe_repeats"), MAX_REPEATS, "--storeprobe-repeats"
            ),
            save=None if save is None else _check_name(save, "--storeprobe-save"),
            compare=(
                None
                if compare is None
                else LATEST
                if compare is True
                else _check_name(compare, "--storeprobe-compare")
            ),
            fail_slower=None if fail is None else _fail_threshold(fail),
            storage=(
                config.rootpath / ".storeprobe"
                if storage is None
                else config.invocation_params.dir / storage
            ),
            machine=None if machine is None else _check_name(machine, "--storeprobe-machine"),
        )

    @property
    def directory(self) -> Path:
        """The folder of this machine's saved runs."""
        return self.storage / (self.machine or machine_id())

    @property
    def wanted(self) -> bool:
        """True when the session ends with a save or a comparison."""
        return self.save is not None or self.compare is not None


@define
class Recorder:
    """What the ``storeprobe`` fixture gives a test: the probe methods of
    :class:`~storeprobe.probe.Probe`, each returning its Result(s) as the Probe does and
    keeping them in ``results`` (shared by the whole session, saved and compared at its
    end). ``record`` keeps a Result made some other way."""

    probe: Probe
    results: list[Result] = field(factory=list, repr=False)

    def record(self, result: Result) -> Result:
        """Keep ``result``; return it."""
        if not isinstance(result, Result):
            raise ConfigurationError(f"record takes a Result, not {type(result).__name__}")
        self.results.append(result)
        return result

    def _all(self, results: ResultSet) -> ResultSet:
        for result in results:
            self.record(result)
        return results

    def with_streams(self, streams: int) -> Recorder:
        """A recorder of the same probe with another stream count, keeping into the same
        results."""
        return Recorder(self.probe.with_streams(streams), self.results)

    def upload_small(self) -> Result:
        """Upload 256 × 16 KiB (kept)."""
        return self.record(self.probe.upload_small())

    def download_small(self) -> Result:
        """Download 256 × 16 KiB (kept)."""
        return self.record(self.probe.download_small())

    def upload_large(self) -> Result:
        """Upload 1 × 256 MiB (kept)."""
        return self.record(self.probe.upload_large())

    def download_large(self) -> Result:
        """Download 1 × 256 MiB (kept)."""
        return self.record(self.probe.download_large())

    def upload(self, workload: Workload) -> Result:
        """Time writing ``workload`` (kept)."""
        return self.record(self.probe.upload(workload))

    def download(self, workload: Workload) -> Result:
        """Time reading ``workload`` back (kept)."""
        return self.record(self.probe.download(workload))

    def measure(self, operation: Transfer, workload: Workload) -> Result:
        """:meth:`~storeprobe.probe.Probe.measure` (kept)."""
        return self.record(self.probe.measure(operation, workload))

    def metadata(
        self, operation: MetadataOperation, count: int = 1000, size: int | str = 0
    ) -> Result:
        """:meth:`~storeprobe.probe.Probe.metadata`, in ops/s (kept)."""
        return self.record(self.probe.metadata(operation, count, size))

    def run(self, workloads: Sequence[Workload] | None = None) -> ResultSet:
        """Upload and download each workload (default: small, then large); all kept."""
        return self._all(self.probe.run(workloads))

    def sweep(
        self,
        operation: Transfer,
        workload: Workload,
        streams: Sequence[int] = (1, 2, 4, 8, 16, 32),
    ) -> ResultSet:
        """One probe at each stream count; all kept."""
        return self._all(self.probe.sweep(operation, workload, streams))

    def backup_restore(
        self,
        dataset: Tree | Image,
        *,
        versions: int | Sequence[Tree | Image] = 6,
        method: Method = "files",
        chunk_size: int | str | None = None,
        restore: Sequence[int] | None = None,
    ) -> ResultSet:
        """The backup-and-restore scenario; its steps are kept and saved, but not compared
        (a step has one sample: see :mod:`storeprobe.comparison`)."""
        return self._all(
            self.probe.backup_restore(
                dataset, versions=versions, method=method, chunk_size=chunk_size, restore=restore
            )
        )


@define
class _Session:
    """The session's settings, results, and what its end found (for the summary)."""

    settings: Settings
    results: list[Result] = field(factory=list)
    lines: list[str] = field(factory=list)
    report: Report | None = None


_SESSION = pytest.StashKey[_Session]()


def pytest_addoption(parser: pytest.Parser) -> None:
    """The ``--storeprobe-*`` options (see the module docstring)."""
    group = parser.getgroup("storeprobe", "storage throughput probes (storeprobe)")
    group.addoption(
        "--storeprobe-url",
        metavar="URL",
        help="fsspec URL the storeprobe fixture probes (default: $STOREPROBE_URL, else a "
        "temporary directory on the local disk)",
    )
    group.addoption(
        "--storeprobe-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a storage option (VALUE read as JSON if it can be); repeatable; never printed",
    )
    group.addoption(
        "--storeprobe-streams", type=int, default=1, metavar="N", help="requests in flight"
    )
    group.addoption(
        "--storeprobe-repeats", type=int, default=3, metavar="N", help="repetitions per probe"
    )
    group.addoption(
        "--storeprobe-save",
        metavar="NAME",
        help="save the session's results as .storeprobe/<machine>/NNNN_NAME.json",
    )
    group.addoption(
        "--storeprobe-compare",
        nargs="?",
        const=True,
        metavar="NAME",
        help="compare with the saved runs named NAME, the newest 10, as base runs (or the "
        "one numbered NNNN); without a value, the runs named as the latest saved run "
        "(write --storeprobe-compare=NAME)",
    )
    group.addoption(
        "--storeprobe-compare-fail",
        metavar="median:PCT",
        help="fail the session when a probe is slower than the compared runs by more than "
        "PCT, e.g. median:5%% or median:0.05 (an inconclusive probe does not fail)",
    )
    group.addoption(
        "--storeprobe-storage",
        metavar="DIR",
        help="where runs are saved, one folder per machine (default: .storeprobe in the rootdir)",
    )
    group.addoption(
        "--storeprobe-machine",
        metavar="ID",
        help="the folder of this machine's runs (default: host name and a hash of CPU model, "
        "OS and architecture); set it on CI runners, whose host names change",
    )


def pytest_configure(config: pytest.Config) -> None:
    """Check the options before any test runs."""
    config.stash[_SESSION] = _Session(Settings.from_config(config))


@pytest.fixture(scope="session")
def storeprobe_probe(pytestconfig: pytest.Config) -> Iterator[Probe]:
    """The session's Probe, from the ``--storeprobe-*`` options; override to build your own."""
    settings = pytestconfig.stash[_SESSION].settings
    url = settings.url
    created: Path | None = None
    if url is None:
        directory = _default_directory()
        if not directory.exists():
            directory.mkdir(parents=True)
            created = directory
        url = str(directory)
    try:
        yield Probe.from_url(
            url,
            settings.storage_options,
            streams=settings.streams,
            repeats=settings.repeats,
        )
    finally:
        if created is not None:
            with contextlib.suppress(OSError):  # only if empty: a probe removes what it wrote
                created.rmdir()


@pytest.fixture
def storeprobe(storeprobe_probe: Probe, pytestconfig: pytest.Config) -> Recorder:
    """A :class:`Recorder`: call probe methods on it; their Results are kept, saved with
    ``--storeprobe-save`` and compared with ``--storeprobe-compare``."""
    return Recorder(storeprobe_probe, pytestconfig.stash[_SESSION].results)


#: the most saved runs of one name taken as the base runs of a comparison (the newest)
HISTORY = 10


def _baseline(session: _Session, directory: Path) -> list[Path]:
    """The saved runs to compare with, oldest first: the newest :data:`HISTORY` runs of
    the name asked for (without a name, of the latest run's name); a number names one."""
    wanted = session.settings.compare
    runs = saved_runs(directory)
    if wanted is None or not runs:
        return []
    if wanted.isdigit():
        return [path for number, _, path in runs if number == int(wanted)][-1:]
    if wanted == LATEST:
        wanted = runs[-1][1]
    named = [
        path
        for _, name, path in runs
        if name == wanted or path.stem == wanted or path.name == wanted
    ]
    return named[-HISTORY:]


def _save(session: _Session, directory: Path, name: str) -> None:
    if not session.results:
        session.lines.append(
            "no results recorded (no test used the storeprobe fixture): nothing saved"
        )
        return
    directory.mkdir(parents=True, exist_ok=True)
    runs = saved_runs(directory)
    number = runs[-1][0] + 1 if runs else 1
    path = directory / f"{number:04d}_{name}.json"
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_text(dump_results(session.results) + "\n")
    temporary.replace(path)
    session.lines.append(f"saved {len(session.results)} results to {path}")


def _compare(session: _Session, directory: Path, exitstatus: int | pytest.ExitCode) -> int | None:
    """Compare with the baseline; the new exit status when the comparison fails the session."""
    settings = session.settings
    baseline = _baseline(session, directory)
    if not baseline:
        which = "any run" if settings.compare == LATEST else f"a run named {settings.compare!r}"
        session.lines.append(f"nothing to compare with: {directory} holds no {which}")
        return None
    report = compare_results(
        [result for path in baseline for result in load_results(path)],
        session.results,
        fail_slower=settings.fail_slower,
    )
    session.report = report
    runs = f"{len(baseline)} saved run{'s' if len(baseline) != 1 else ''}"
    session.lines.append(f"compared with {runs}: {', '.join(path.name for path in baseline)}")
    if report.failed:
        assert settings.fail_slower is not None
        session.lines.append(
            f"FAILED: {len(report.regressions)} of {len(report.rows)} probes slower by more "
            f"than {percent(settings.fail_slower)} (--storeprobe-compare-fail)"
        )
        session.lines += [f"  {row}" for row in report.regressions]
        if exitstatus == pytest.ExitCode.OK:
            return int(pytest.ExitCode.TESTS_FAILED)
    elif report.inconclusive:
        session.lines.append(
            f"{len(report.inconclusive)} of {len(report.rows)} probes inconclusive, not "
            "failing: too little evidence of how much runs differ (save more runs: "
            f"--storeprobe-save, up to the last {HISTORY} are compared)"
        )
        session.lines += [f"  {row}" for row in report.inconclusive]
    return None


def pytest_sessionfinish(session: pytest.Session, exitstatus: int | pytest.ExitCode) -> None:
    """Compare with the saved run asked for (before saving this one), then save."""
    state = session.config.stash.get(_SESSION, None)
    if state is None or not state.settings.wanted:
        return
    directory = state.settings.directory
    if state.settings.compare is not None:
        failed = _compare(state, directory, exitstatus)
        if failed is not None:
            session.exitstatus = failed
    if state.settings.save is not None:
        _save(state, directory, state.settings.save)


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    """The lines of the session's end and the comparison table (text)."""
    state = config.stash.get(_SESSION, None)
    if state is None or not (state.lines or state.report):
        return
    terminalreporter.write_sep("-", "storeprobe")
    for line in state.lines:
        terminalreporter.write_line(f"storeprobe: {line}")
    if state.report is not None:
        terminalreporter.write_line(state.report.render("text"))
