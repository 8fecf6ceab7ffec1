"""The example notebook executes from top to bottom (nbclient, a real kernel)."""

from __future__ import annotations

from pathlib import Path

import nbformat
from nbclient import NotebookClient

NOTEBOOK = Path(__file__).parent.parent / "examples" / "notebook.ipynb"


def test_notebook_executes(tmp_path: Path) -> None:
    notebook = nbformat.read(NOTEBOOK, as_version=4)
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
    html = [o["data"]["text/html"] for o in outputs if "data" in o and "text/html" in o["data"]]
    assert any("KiB/s" in block for block in html)
    assert any(o["data"].get("image/png") for o in outputs if "data" in o)
    assert any(
        "saturation" in o.get("text", "") and "None" not in o.get("text", "") for o in outputs
    )
