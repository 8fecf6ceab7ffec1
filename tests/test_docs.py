"""Every ```python block in README.md and docs/ runs; the docs changelog is current; every
public name is on a generated API page (a ``::: module`` directive) with a docstring."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import griffe
import pytest
import yaml

import storeprobe

ROOT = Path(__file__).parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)


def _blocks() -> list[tuple[str, str]]:
    found = []
    for page in PAGES:
        for number, match in enumerate(BLOCK.finditer(page.read_text()), start=1):
            found.append((f"{page.relative_to(ROOT)}#{number}", match[1]))
    return found


@pytest.mark.parametrize(("where", "code"), _blocks(), ids=[where for where, _ in _blocks()])
def test_doc_block_runs(
    where: str, code: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    exec(compile(code, where, "exec"), {"__name__": "__doc_example__"})


def test_docs_have_python_examples() -> None:
    assert len(_blocks()) >= 3


def test_docs_changelog_is_the_changelog() -> None:
    assert (ROOT / "docs" / "changelog.md").read_text() == (ROOT / "CHANGELOG.md").read_text()


# ::: storeprobe.module, then its options indented by four spaces (mkdocstrings)
DIRECTIVE = re.compile(r"^::: (?P<path>[\w.]+)[ ]*\n(?P<options>(?:[ ]{4}.*\n?)*)", re.MULTILINE)
# the modules users import directly, besides the package itself
IMPORTED_DIRECTLY = {
    "backends",
    "backup",
    "comparison",
    "dataset",
    "delta",
    "distributed",
    "metadata",
    "notices",
    "planning",
    "plot",
    "render",
    "request",
    "stats",
    "step",
    "timeline",
}


def _directives() -> dict[str, list[str] | None]:
    """Each ``:::`` identifier on a docs page, with its ``members`` option (None: all)."""
    found: dict[str, list[str] | None] = {}
    for page in sorted((ROOT / "docs").rglob("*.md")):
        for match in DIRECTIVE.finditer(page.read_text()):
            options = (yaml.safe_load(textwrap.dedent(match["options"])) or {}).get("options", {})
            found[match["path"]] = options.get("members")
    return found


def _api() -> griffe.Object | griffe.Alias:
    # griffe_sphinx: `#:` comments document attributes, as on the built pages
    extensions = griffe.load_extensions("griffe_sphinx")
    return griffe.load("storeprobe", search_paths=[ROOT], extensions=extensions)


def _final(obj: griffe.Object | griffe.Alias) -> griffe.Object | griffe.Alias:
    return obj.final_target if obj.is_alias else obj


def _rendered(
    api: griffe.Object | griffe.Alias, directive: str, members: list[str] | None
) -> set[str]:
    """The paths of what ``::: directive`` renders: the object, and its public members
    (filters: public renders a module's ``__all__``, re-exported names too)."""
    obj = api if directive == "storeprobe" else api[directive.removeprefix("storeprobe.")]
    if directive == "storeprobe":  # the package page renders only the members it lists
        names = members or []
    elif members is not None:
        names = members
    else:
        exports = obj.exports if obj.is_module else None
        names = (
            [str(name) for name in exports]
            if exports
            else [name for name in obj.members if not name.startswith("_")]
        )
    return {obj.path} | {_final(obj[name]).path for name in names}


def test_every_public_name_is_on_an_api_page() -> None:
    api, directives = _api(), _directives()
    rendered = set().union(*(_rendered(api, path, members) for path, members in directives.items()))
    missing = [name for name in storeprobe.__all__ if _final(api[name]).path not in rendered]
    assert not missing, f"public names on no API page (add a ::: directive): {missing}"
    assert {f"storeprobe.{module}" for module in IMPORTED_DIRECTLY} <= set(directives)


def test_every_public_name_has_a_docstring() -> None:
    api = _api()
    api_page = (ROOT / "docs" / "api.md").read_text()
    undocumented = []
    for name in storeprobe.__all__:
        target = _final(api[name])
        # a name without a docstring of its own is described in words on api.md
        if (
            not (target.docstring and target.docstring.value.strip())
            and f"`storeprobe.{name}`" not in api_page
        ):
            undocumented.append(name)
    assert not undocumented, f"public names without a docstring: {undocumented}"
