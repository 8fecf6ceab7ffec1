"""Packaging metadata, checked without building anything (``.ci/wheel-check`` builds the
sdist and the wheel and installs the wheel into a fresh venv): the version comes from git
tags and is what ``storeprobe.__version__`` and ``--version`` report, the classifiers and
project URLs are complete, the console script and ``py.typed`` are there."""

from __future__ import annotations

import importlib.metadata
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import storeprobe
from storeprobe import cli

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
PROJECT = PYPROJECT["project"]

REQUIRED_CLASSIFIERS = {
    "Environment :: Console",
    "Operating System :: OS Independent",
    "Programming Language :: Python :: 3",
    "Programming Language :: Python :: 3 :: Only",
    "Programming Language :: Python :: 3.11",
    "Programming Language :: Python :: 3.12",
    "Programming Language :: Python :: 3.13",
    "Topic :: System :: Benchmark",
    "Topic :: System :: Filesystems",
    "Typing :: Typed",
}
EXTRAS = {"s3", "gcs", "azure", "ssh", "plot", "pandas", "backup"}


def test_version_comes_from_git_tags_with_a_fallback() -> None:
    assert "version" not in PROJECT
    assert PROJECT["dynamic"] == ["version"]
    assert any(req.startswith("hatch-vcs") for req in PYPROJECT["build-system"]["requires"])
    version = PYPROJECT["tool"]["hatch"]["version"]
    assert version["source"] == "vcs"
    assert version["fallback-version"] == "0.1.0.dev0"
    # no version file is generated into the package: _version.py reads the metadata
    assert "hooks" not in PYPROJECT["tool"]["hatch"].get("build", {})


def test_version_is_the_installed_distributions() -> None:
    assert storeprobe.__version__ == importlib.metadata.version("storeprobe")
    assert storeprobe.__version__ != "0+unknown"


def test_cli_version_reports_it(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.strip() == f"storeprobe {storeprobe.__version__}"


def test_version_module_works_without_the_package_installed() -> None:
    # -S: no site-packages, so neither the distribution's metadata nor any dependency
    code = "import runpy; print(runpy.run_path('storeprobe/_version.py')['__version__'])"
    out = subprocess.run(
        [sys.executable, "-S", "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out.strip() == "0+unknown"


def test_classifiers_complete_and_valid() -> None:
    classifiers = PROJECT["classifiers"]
    assert len(classifiers) == len(set(classifiers))
    assert set(classifiers) >= REQUIRED_CLASSIFIERS
    assert any(c.startswith("Development Status :: ") for c in classifiers)
    assert any(c.startswith("Intended Audience :: ") for c in classifiers)
    # a license expression (PEP 639) rules out License :: classifiers; PyPI refuses both
    assert isinstance(PROJECT["license"], str)
    assert not [c for c in classifiers if c.startswith("License ::")]
    # every Python the classifiers name is allowed by requires-python
    assert PROJECT["requires-python"] == ">=3.11"
    trove = pytest.importorskip("trove_classifiers")
    assert not set(classifiers) - trove.classifiers


def test_project_urls() -> None:
    urls = PROJECT["urls"]
    assert {"Documentation", "Source", "Issues", "Changelog"} <= set(urls)
    assert all(url.startswith("https://") for url in urls.values())
    assert urls["Issues"] == urls["Source"] + "/issues"
    assert urls["Changelog"].startswith(urls["Source"] + "/")


def test_installed_metadata_has_the_urls_and_classifiers() -> None:
    meta = importlib.metadata.metadata("storeprobe")
    labels = {entry.split(",", 1)[0] for entry in meta.get_all("Project-URL") or []}
    assert {"Documentation", "Source", "Issues", "Changelog"} <= labels
    assert set(meta.get_all("Classifier") or []) >= REQUIRED_CLASSIFIERS


def test_console_script_entry_point() -> None:
    (entry,) = importlib.metadata.entry_points(group="console_scripts", name="storeprobe")
    assert entry.value == "storeprobe.cli:main"
    assert entry.load() is cli.main
    assert PROJECT["scripts"] == {"storeprobe": "storeprobe.cli:main"}


def test_py_typed_in_the_package() -> None:
    assert (Path(storeprobe.__file__).parent / "py.typed").is_file()
    assert PYPROJECT["tool"]["hatch"]["build"]["targets"]["wheel"]["packages"] == ["storeprobe"]


def test_sdist_leaves_out_node_modules_and_caches() -> None:
    sdist = PYPROJECT["tool"]["hatch"]["build"]["targets"]["sdist"]
    assert "/storeprobe" in sdist["include"]
    assert not {"/", "*", "/node_modules"} & set(sdist["include"])
    assert "node_modules" in sdist["exclude"]


def test_extras_checked_by_wheel_check_exist() -> None:
    assert set(PROJECT["optional-dependencies"]) >= EXTRAS
    script = (ROOT / ".ci" / "wheel-check").read_text()
    for extra in EXTRAS:
        assert f'"{extra}:' in script


def _name(requirement: str) -> str:
    match = re.match(r"[\w.-]+", requirement)
    assert match is not None, requirement
    return match[0]


def test_build_tools_in_dev_extra() -> None:
    names = {_name(req) for req in PROJECT["optional-dependencies"]["dev"]}
    assert {"build", "twine"} <= names


def test_ci_runs_wheel_check_after_the_checks_and_before_the_tests() -> None:
    run = (ROOT / ".ci" / "run").read_text()
    at = run.index(".ci/wheel-check")
    assert run.index("mkdocs build") < at < run.index("python -m pytest")
