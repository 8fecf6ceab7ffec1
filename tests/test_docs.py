"""Every ```python block in README.md and docs/ runs; the docs changelog is current."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

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
