"""The example notebooks execute from top to bottom (nbclient, a real kernel)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from nbformat import NotebookNode

EXAMPLES = Path(__file__).parent.parent / "examples"
NOTEBOOKS = ["compare_targets.ipynb", "notebook.ipynb"]


def _execute(name: str, tmp_path: Path) -> list[NotebookNode]:
    """Run the notebook in ``tmp_path``; every output of every code cell, in order."""
    read: Callable[..., NotebookNode] = nbformat.read  # nbformat's read has no annotations
    notebook = read(EXAMPLES / name, as_version=4)
    NotebookClient(
        notebook,
        timeout=300,
        kernel_name="python3",
        resources={"metadata": {"path": str(tmp_path)}},
    ).execute()
    outputs = [
        output for cell in notebook.cells if cell.cell_type == "code" for output in cell.outputs
    ]
    assert not [o for o in outputs if o.output_type == "error"]
    return outputs


def _data(outputs: list[NotebookNode], mime: str) -> list[str]:
    return [o["data"][mime] for o in outputs if "data" in o and mime in o["data"]]


def test_every_notebook_is_executed() -> None:
    assert sorted(path.name for path in EXAMPLES.glob("*.ipynb")) == NOTEBOOKS


def test_notebook_executes(tmp_path: Path) -> None:
    outputs = _execute("notebook.ipynb", tmp_path)
    assert any("KiB/s" in block for block in _data(outputs, "text/html"))
    assert any(_data(outputs, "image/png"))
    assert any(
        "saturation" in o.get("text", "") and "None" not in o.get("text", "") for o in outputs
    )


@pytest.mark.timeout(120)
def test_compare_targets_notebook_executes(tmp_path: Path) -> None:
    outputs = _execute("compare_targets.ipynb", tmp_path)
    # the ResultSet's _repr_html_: one row per Result
    html = _data(outputs, "text/html")
    assert any("<table" in block and "KiB/s" in block for block in html)
    # the comparison table by probe, as markdown and as HTML: one row per target
    column = "download 64 × 16 KiB, 4 streams"  # a probe, a column of the comparison
    markdown = _data(outputs, "text/markdown")
    assert any(column in block and "| memory://compare" in block for block in markdown)
    assert any(column in block and "<td>memory://compare</td>" in block for block in html)
    # the bootstrap comparison of one probe, and the chart
    printed = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    assert "memory ÷ local:" in printed
    assert any(_data(outputs, "image/png"))
