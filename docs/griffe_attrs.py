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
- An attrs class has the signature attrs gives it (``Workload(*, count: int, size: int
  | str, seed: int | None = None, name: str | None = None)``), written as the
  ``__init__`` griffe never sees (attrs makes it at import); ``tests/test_docs.py``
  compares it with ``inspect.signature`` of the real class.
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


def _keyword(call: griffe.ExprCall, name: str) -> str | griffe.Expr | None:
    for argument in call.arguments:
        if isinstance(argument, griffe.ExprKeyword) and argument.name == name:
            return argument.value
    return None


def _class_kw_only(cls: griffe.Class) -> bool:
    return any(
        isinstance(decorator.value, griffe.ExprCall)
        and str(_keyword(decorator.value, "kw_only")) == "True"
        for decorator in cls.decorators
        if decorator.callable_path in ATTRS_DECORATORS
    )


def _accepts(
    pkg: griffe.Module, cls: griffe.Class, converter: str | griffe.Expr
) -> str | griffe.Expr | None:
    """What a field with this converter accepts: the converter's first parameter's
    annotation when it is a function of the package, else unknown (None)."""
    path = _path(converter)
    if path.startswith(f"{cls.path}."):  # a converter named as the field: the module's
        path = f"{cls.module.path}.{converter}"
    if not path.startswith(f"{pkg.name}."):
        return None
    try:
        target = pkg[path.removeprefix(f"{pkg.name}.")]
        target = target.final_target if target.is_alias else target
    except (KeyError, griffe.AliasResolutionError, griffe.CyclicAliasError):
        return None
    if not isinstance(target, griffe.Function) or not len(target.parameters):
        return None
    return target.parameters[0].annotation


def _init(pkg: griffe.Module, cls: griffe.Class) -> griffe.Function:
    """The ``__init__`` attrs writes for ``cls``, from its fields in order: the name
    (a leading ``_`` dropped, or ``alias=``), what it accepts (a converter's parameter
    type where the field converts), its default (``...`` where the default cannot be
    written), keyword-only where the class or field says so."""
    class_kw_only = _class_kw_only(cls)
    positional: list[griffe.Parameter] = []
    keyword: list[griffe.Parameter] = []
    for name, member in cls.members.items():
        if member.is_alias or not member.is_attribute or "property" in member.labels:
            continue
        annotation = member.annotation  # type: ignore[union-attr]
        # a ClassVar is labelled a class attribute only; a field is an instance one too
        if annotation is None or "instance-attribute" not in member.labels:
            continue
        value = member.value  # type: ignore[union-attr]
        call = value if isinstance(value, griffe.ExprCall) else None
        is_field, shown = _field_value(value)
        if call is not None and is_field and _path(call.function) in FIELD_CALLS:
            if str(_keyword(call, "init")) == "False":
                continue
            alias = _keyword(call, "alias")
            kw_only = class_kw_only or str(_keyword(call, "kw_only")) == "True"
            converter = _keyword(call, "converter")
            if converter is not None:
                annotation = _accepts(pkg, cls, converter)
            has_default = any(
                _keyword(call, option) is not None for option in ("default", "factory")
            )
        elif call is not None and is_field:  # a private helper making the field
            alias, kw_only = None, class_kw_only
            # the helper's own `required=True` (storeprobe.sample._array_field) says so
            has_default = str(_keyword(call, "required")) != "True"
        else:
            alias, kw_only, has_default = None, class_kw_only, value is not None
        parameter = griffe.Parameter(
            str(alias).strip("'\"") if alias is not None else name.lstrip("_"),
            annotation=annotation,
            kind=griffe.ParameterKind.keyword_only
            if kw_only
            else griffe.ParameterKind.positional_or_keyword,
            default=(shown if shown is not None else "...") if has_default else None,
        )
        (keyword if kw_only else positional).append(parameter)
    init = griffe.Function(
        "__init__",
        parameters=griffe.Parameters(griffe.Parameter("self"), *positional, *keyword),
        returns="None",
        lineno=cls.lineno,
        endlineno=cls.lineno,
    )
    init.extra["griffe_attrs"]["made_by_attrs"] = True
    return init


class AttrsClasses(griffe.Extension):
    """Hide special members of every class; show attrs fields by their defaults and an
    attrs class by the signature attrs gives it."""

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        self._pkg = pkg
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
        if attrs_class and "__init__" not in cls.members:
            cls.set_member("__init__", _init(self._pkg, cls))
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
                # every annotated name but a ClassVar (labelled a class attribute only)
                # is a field, made per instance
                if "instance-attribute" in member.labels:
                    member.labels.discard("class-attribute")
