"""A griffe extension for the API pages: classes as their users see them.

- Special members (``__repr__``, ``__len__``, ``__attrs_post_init__``, ``__slots__``, ...)
  are not listed: what they do is said in the class docstring (``str(result)``,
  ``len(results)``). ``filters: public`` alone keeps them (griffe counts special names
  as public). ``__init__`` stays, unlisted, as the class's signature
  (``merge_init_into_class``).
- An attrs field shows its default, not the ``field(...)`` call that declares it:
  ``seed: int | None = None`` rather than ``field(default=None, validator=_valid_seed)``,
  ``requests_by_kind: dict[str, int] = dict()`` for ``field(factory=dict, ...)``, and
  no value at all for a
  required field or a default made by a private helper. Fields are labelled
  instance attributes (attrs makes them per instance, not class attributes).
"""

from __future__ import annotations

from typing import Any

import griffe

# the class decorators of attrs (and its older `attr` namespace) that make fields
ATTRS_DECORATORS = {
    f"{module}.{name}"
    for module in ("attrs", "attr")
    for name in ("frozen", "define", "mutable", "s", "attrs")
}
# the calls that declare a field
FIELD_CALLS = {"attrs.field", "attr.field", "attr.ib", "attr.attrib"}
# a default made per instance
FACTORIES = {"attrs.Factory", "attr.Factory"}


def _is_attrs_class(cls: griffe.Class) -> bool:
    return any(decorator.callable_path in ATTRS_DECORATORS for decorator in cls.decorators)


def _path(expr: str | griffe.Expr) -> str:
    return expr.canonical_path if isinstance(expr, griffe.Expr) else str(expr)


def _made_by(factory: str | griffe.Expr) -> str | None:
    """``F()`` for a factory named by a public name (``list``, ``Settings``), else None
    (a lambda, a private helper: nothing a reader could write)."""
    if isinstance(factory, griffe.ExprName | griffe.ExprAttribute):
        name = str(factory)
        return None if name.rsplit(".", 1)[-1].startswith("_") else f"{name}()"
    return None


def _default(call: griffe.ExprCall) -> str | griffe.Expr | None:
    """What ``field(...)`` makes the default: ``default=X`` is X (``F()`` for
    ``default=attrs.Factory(F)``), ``factory=F`` is ``F()`` when F is a public name,
    anything else no value shown."""
    for argument in call.arguments:
        if isinstance(argument, griffe.ExprKeyword) and argument.name == "default":
            value = argument.value
            if isinstance(value, griffe.ExprCall) and _path(value.function) in FACTORIES:
                first = value.arguments[0] if value.arguments else None
                return _made_by(first) if first is not None else None
            return value
        if isinstance(argument, griffe.ExprKeyword) and argument.name == "factory":
            return _made_by(argument.value)
    return None


def _field_value(value: str | griffe.Expr | None) -> tuple[bool, str | griffe.Expr | None]:
    """Whether ``value`` declares an attrs field, and the value to show instead."""
    if not isinstance(value, griffe.ExprCall):
        return False, value
    function = value.function
    if _path(function) in FIELD_CALLS:
        return True, _default(value)
    if _path(function) in FACTORIES:  # `x: list[int] = attrs.Factory(list)`
        first = value.arguments[0] if value.arguments else None
        return True, _made_by(first) if first is not None else None
    if str(function).rsplit(".", 1)[-1].startswith("_"):  # a private helper making a field
        return True, None
    return False, value


class AttrsClasses(griffe.Extension):
    """Hide special members of every class; show attrs fields by their defaults."""

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        self._walk(pkg, set())

    def _walk(self, obj: griffe.Object, seen: set[str]) -> None:
        if obj.path in seen:
            return
        seen.add(obj.path)
        if obj.is_class:
            self._tidy(obj)  # type: ignore[arg-type]
        for member in obj.members.values():
            if not member.is_alias:
                self._walk(member, seen)  # type: ignore[arg-type]

    def _tidy(self, cls: griffe.Class) -> None:
        attrs_class = _is_attrs_class(cls)
        for name, member in list(cls.members.items()):
            if name.startswith("__") and name.endswith("__"):
                # removed, not marked private: a re-exported class is rendered through an
                # alias whose members ignore the target's `public`; the signature
                # (merge_init_into_class) still needs __init__ and __new__
                if name not in {"__init__", "__new__"}:
                    del cls.members[name]
            elif attrs_class and not member.is_alias and member.is_attribute:
                is_field, shown = _field_value(member.value)  # type: ignore[union-attr]
                if is_field:
                    member.value = shown  # type: ignore[union-attr]
                # every annotated name but a ClassVar is a field, made per instance
                annotation = str(member.annotation or "")  # type: ignore[union-attr]
                if is_field or (annotation and "ClassVar" not in annotation):
                    member.labels.discard("class-attribute")
