"""MkDocs hook: the stylesheet of the code colours Pygments gives at build time.

pymdownx.highlight marks code with Pygments' token classes (``<span class="k">``) inside
``<div class="highlight">``; this writes the matching rules as ``css/pygments.css`` (the
``extra_css`` of mkdocs.yml), from the installed Pygments, so they never go stale and
nothing is fetched by the browser.
"""

from __future__ import annotations

from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files
from pygments.formatters import HtmlFormatter

STYLE = "default"
PATH = "css/pygments.css"


def stylesheet() -> str:
    """Pygments' rules for STYLE, scoped to the ``.highlight`` blocks."""
    return str(HtmlFormatter(style=STYLE).get_style_defs(".highlight")) + "\n"


def on_files(files: Files, *, config: MkDocsConfig, **kwargs: Any) -> Files:
    files.append(File.generated(config, PATH, content=stylesheet()))
    return files
