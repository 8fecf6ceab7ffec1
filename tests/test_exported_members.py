from __future__ import annotations

import ast
from pathlib import Path

import storeprobe


def test_all_matches_public_names() -> None:
    public = {name for name in vars(storeprobe) if not name.startswith("_")}
    modules = {name for name in public if type(getattr(storeprobe, name)).__name__ == "module"}
    assert set(storeprobe.__all__) - {"__version__"} == public - modules - {
        "annotations",
        "importlib",
    }
    assert storeprobe.__all__ == sorted(storeprobe.__all__, key=lambda n: (not n.isupper(), n))


def test_version() -> None:
    assert storeprobe.__version__


def _imports(module: Path) -> set[str]:
    """Every storeprobe module ``module`` imports (anywhere in it, as import-linter sees)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(module.read_text())):
        if (
            isinstance(node, ast.ImportFrom)
            and node.module
            and node.module.startswith("storeprobe")
        ):
            for alias in node.names:
                name = f"{node.module}.{alias.name}"
                path = PACKAGE.parent / name.replace(".", "/")
                is_module = path.with_suffix(".py").exists() or (path / "__init__.py").exists()
                found.add(name if is_module else node.module)
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("storeprobe")}
    return found


PACKAGE = Path(storeprobe.__file__).parent


def test_no_module_imports_the_package_root() -> None:
    # importing `storeprobe` from inside it would hide a cycle through __init__
    for module in PACKAGE.rglob("*.py"):
        if module.name in ("__init__.py", "__main__.py"):
            continue
        assert "storeprobe" not in _imports(module), module


def _sources(name: str) -> list[Path]:
    """The files of module or package ``name`` under storeprobe."""
    package = PACKAGE / name
    return sorted(package.rglob("*.py")) if package.is_dir() else [PACKAGE / f"{name}.py"]


def test_statistics_and_rendering_never_import_results() -> None:
    for name in ("stats", "render", "units", "notices"):
        for source in _sources(name):
            imported = _imports(source)
            assert not imported & {"storeprobe.result", "storeprobe.resultset"}, source
    assert not any(i.startswith("storeprobe.render") for i in _imports(PACKAGE / "stats.py"))
