"""The docs cases of issue 22, counted on a built site and a tree.

python notes/ev/docs_counts.py SITE TREE   (SITE from ``mkdocs build -q -d SITE`` in TREE)
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

site, tree = Path(sys.argv[1]), Path(sys.argv[2])
index = (site / "index.html").read_text()
navbar = re.search(
    r'<ul class="nav navbar-nav">(.*?)</ul>\s*<ul class="nav navbar-nav ms-md-auto">', index, re.S
)
print(
    "first-level navbar entries:",
    len(re.findall(r'<li class="nav-item', navbar.group(1) if navbar else "")),
)
external = sorted(
    {
        m.group(1)
        for page in site.rglob("*.html")
        for m in re.finditer(
            r'<(?:script|link)[^>]+(?:src|href)="(https?://[^"]+)"', page.read_text()
        )
    }
)
print("external scripts and styles:", external)
pages = sorted((site / "reference").rglob("*.html"))
text = [p.read_text() for p in pages]
DUNDER = re.compile(r'id="[^"]*__[a-z]+__"')
dunders = sum(len(DUNDER.findall(t)) for t in text)
fields = sum(t.count("field(") for t in text)
print(f"API pages: {len(pages)}; dunder anchors: {dunders}; 'field(' occurrences: {fields}")
cli = (tree / "docs" / "cli.md").read_text()
print(
    "cli.md:",
    {
        option: cli.count(option)
        for option in ("--workers", "--scheduler", "--per-worker", "--html")
    },
)
readme = (tree / "README.md").read_text()
print(
    "README:",
    {
        w: readme.count(w)
        for w in (
            "storeprobe compare",
            "storeprobe sweep",
            "--html",
            "pytest",
            "wasabi:",
            "storeprobe.toml",
        )
    },
)
