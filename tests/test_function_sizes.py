"""No function of storeprobe over 60 lines without a reason a reader accepts (issue 20).

A function's length runs from its ``def`` line to its last line, docstring included,
decorators not. A longer one passes only if its body opens with a comment
``# one function: <the reason>`` (above its docstring, if any), or if it is one of
:data:`KNOWN_LONG`, the functions still waiting to be split. The list is kept exact: a
function split below the limit must leave it, and none joins it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "storeprobe"
LIMIT = 60
MARK = "# one function:"

#: functions over the limit that are still to be split, by file (below storeprobe/)
#: and qualified name, each with its reason: none since the last nine were split
KNOWN_LONG: dict[tuple[str, str], str] = {}

Function = ast.FunctionDef | ast.AsyncFunctionDef


def _functions(node: ast.AST, prefix: str = "") -> Iterator[tuple[str, Function]]:
    """Every function below ``node`` (methods and nested functions too), with its
    qualified name (``Class.method``, ``outer.<locals>.inner``)."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
            name = prefix + child.name
            yield name, child
            yield from _functions(child, f"{name}.<locals>.")
        elif isinstance(child, ast.ClassDef):
            yield from _functions(child, f"{prefix}{child.name}.")
        else:
            yield from _functions(child, prefix)


def _length(function: Function) -> int:
    assert function.end_lineno is not None
    return function.end_lineno - function.lineno + 1


def _reason(function: Function, lines: list[str]) -> str | None:
    """The reason of the ``# one function:`` comment opening ``function``'s body (the
    comment lines right above its first statement, the first of them), or None."""
    index = function.body[0].lineno - 2  # the line above the first statement, from 0
    first: str | None = None
    while index >= function.lineno and lines[index].strip().startswith("#"):
        first = lines[index].strip()
        index -= 1
    if first is None or not first.startswith(MARK):
        return None
    return first[len(MARK) :].strip()


def _long_functions() -> dict[tuple[str, str], tuple[int, str | None]]:
    """Every function over :data:`LIMIT` lines: its length and its comment's reason."""
    found: dict[tuple[str, str], tuple[int, str | None]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        text = path.read_text()
        lines = text.splitlines()
        where = path.relative_to(PACKAGE).as_posix()
        for name, function in _functions(ast.parse(text, filename=str(path))):
            if _length(function) > LIMIT:
                found[where, name] = (_length(function), _reason(function, lines))
    return found


def test_no_function_over_the_limit_without_a_reason() -> None:
    unexplained = [
        f"storeprobe/{where} {name}: {length} lines"
        for (where, name), (length, reason) in _long_functions().items()
        if reason is None and (where, name) not in KNOWN_LONG
    ]
    assert not unexplained, (
        f"functions over {LIMIT} lines: split them into well-named private functions, or "
        f"open the body with '{MARK} <why it reads best as one>': {unexplained}"
    )


def test_every_reason_says_something() -> None:
    empty = [
        f"storeprobe/{where} {name}"
        for (where, name), (_, reason) in _long_functions().items()
        if reason is not None and len(reason) < 10
    ]
    assert not empty, f"'{MARK}' comments without a reason: {empty}"


def test_the_known_long_functions_are_exact() -> None:
    long = {key for key, (_, reason) in _long_functions().items() if reason is None}
    stale = sorted(f"storeprobe/{where} {name}" for where, name in set(KNOWN_LONG) - long)
    assert not stale, (
        f"no longer over {LIMIT} lines without a reason (or gone): remove them from "
        f"KNOWN_LONG: {stale}"
    )
    assert set(KNOWN_LONG.values()) <= {"split pending (issue 20)"}


def test_the_rule_sees_a_long_function_and_its_reason() -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(LIMIT))
    source = f'def long():\n    """Doc."""\n{body}\n'
    marked = f'def long():\n    {MARK} one table read as one\n    """Doc."""\n{body}\n'
    ((_, plain),) = _functions(ast.parse(source))
    ((_, kept),) = _functions(ast.parse(marked))
    assert _length(plain) == LIMIT + 2
    assert _reason(plain, source.splitlines()) is None
    assert _reason(kept, marked.splitlines()) == "one table read as one"
