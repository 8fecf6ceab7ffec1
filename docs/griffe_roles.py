"""A griffe extension for the API pages: reST roles in docstrings become links.

storeprobe's docstrings are plain text with reST roles (``:class:`Result```,
``:func:`~storeprobe.stats.compare```). mkdocstrings reads docstrings as markdown,
where a role would show as ``:class:`` before the name. This turns each role into an
optional cross-reference: a link where the name is documented, the name in code
font otherwise (never a warning). ``~`` keeps the last component only, as in Sphinx.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

ROLE = re.compile(r":(?:class|func|meth|mod|data|attr|exc|obj):`(?P<tilde>~?)(?P<name>[^`]+)`")
LITERAL = re.compile(r"(?<=\S)::$", re.MULTILINE)


def _identifier(obj: griffe.Object, name: str) -> str:
    head, _, rest = name.partition(".")
    scope: griffe.Object | None = obj
    while scope is not None:
        try:
            path = scope.resolve(head)
        except (griffe.NameResolutionError, AttributeError):
            scope = scope.parent
            continue
        return f"{path}.{rest}" if rest else path
    return name


def _rewrite(obj: griffe.Object, text: str) -> str:
    def link(match: re.Match[str]) -> str:
        name = match["name"]
        title = name.rsplit(".", 1)[-1] if match["tilde"] else name
        identifier = _identifier(obj, name)
        return f'<autoref identifier="{identifier}" optional><code>{title}</code></autoref>'

    # a literal block's "::" reads as ":" (as Sphinx shows it); the block is indented
    return LITERAL.sub(":", ROLE.sub(link, text))


class SphinxRoles(griffe.Extension):
    """Rewrite the roles of every docstring once the package is loaded."""

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        self._walk(pkg, set())

    def _walk(self, obj: griffe.Object, seen: set[str]) -> None:
        if obj.path in seen:
            return
        seen.add(obj.path)
        if obj.docstring is not None:
            obj.docstring.value = _rewrite(obj, obj.docstring.value)
        for member in obj.members.values():
            if not member.is_alias:
                self._walk(member, seen)  # type: ignore[arg-type]
