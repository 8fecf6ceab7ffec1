"""docs/architecture.md stays true: it names every module of the package, and its layer
list is the layers contract of pyproject.toml, line for line."""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = (ROOT / "docs" / "architecture.md").read_text()


def _modules() -> set[str]:
    """Every module and subpackage of storeprobe, dotted below it (``backup.restic``)."""
    package = ROOT / "storeprobe"
    found: set[str] = set()
    for path in package.rglob("*.py"):
        parts = list(path.relative_to(package).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if parts:
            found.add(".".join(parts))
    return found


def _mapped() -> set[str]:
    """The module names the module map's rows start with (backticked, first cell)."""
    names: set[str] = set()
    for line in DOC.splitlines():
        match = re.match(r"\| `([A-Za-z_][\w.]*)`", line)
        if match:
            names.add(match.group(1))
    return names


def test_the_module_map_names_every_module() -> None:
    missing = sorted(_modules() - _mapped() - {"__init__"})
    assert not missing, f"docs/architecture.md's module map lacks {missing}"


def test_the_module_map_names_no_module_that_is_gone() -> None:
    gone = sorted(_mapped() - _modules() - {"storeprobe"})
    assert not gone, f"docs/architecture.md's module map names modules that are gone: {gone}"


def test_the_layer_list_is_the_layers_contract() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    (contract,) = [
        c for c in config["tool"]["importlinter"]["contracts"] if c.get("id") == "layers"
    ]
    section = DOC.split("The layers, from the top, as in `pyproject.toml`:", 1)[1]
    listed = section.split("```text", 1)[1].split("```", 1)[0].strip().splitlines()
    assert [line.strip() for line in listed] == contract["layers"]


#: a module longer than this says why it is one module (issue 20: "no module over ~500
#: lines without a reason a reader accepts"; the house rule is stricter)
LONG_MODULE = 400


def _why_one_module(source: str) -> int | None:
    """The size a module's docstring states in its ``Why one module (~N lines`` reason."""
    docstring = ast.get_docstring(ast.parse(source)) or ""
    match = re.search(r"Why one module \(~(\d+) lines", docstring)
    return int(match.group(1)) if match else None


def test_a_long_module_says_why_it_is_one_and_its_size_is_true() -> None:
    wrong: list[str] = []
    for path in sorted((ROOT / "storeprobe").rglob("*.py")):
        source = path.read_text()
        lines = source.count("\n")
        stated = _why_one_module(source)
        name = str(path.relative_to(ROOT))
        if stated is None:
            if lines > LONG_MODULE:
                wrong.append(f"{name}: {lines} lines, no 'Why one module (~N lines' reason")
        elif abs(stated - lines) > 0.1 * lines:
            wrong.append(f"{name}: says ~{stated} lines, has {lines}")
    assert not wrong, "\n".join(wrong)


def test_the_size_reason_is_read_from_the_docstring_only() -> None:
    assert _why_one_module('"""Why one module (~450 lines): one concept."""\n') == 450
    assert _why_one_module('"""A module."""\n# Why one module (~450 lines)\n') is None
    assert _why_one_module("x = 1\n") is None
