"""What a run document must hold before it is read, derived from the dataclass that reads it
(:func:`shape_of`) and checked with errors that name the file, the field and the value
(:func:`check_shape`): the shape is declared once, as the dataclass's fields.

A field's JSON name is its own unless its metadata says otherwise: ``{"json": "from"}``
(another name), ``{"json": "evaluations.run"}`` (inside a nested object) or ``{"json": ""}``
(its fields inline, beside the others); ``{"shape": ...}`` replaces the shape its type gives.
A field with a default may be missing."""

from __future__ import annotations

import typing
from collections.abc import Mapping
from dataclasses import MISSING, fields, is_dataclass
from types import NoneType, UnionType
from typing import Any

from simulator.errors import ParetoSearchError, located

__all__ = ["NUMBER", "Or", "check_shape", "shape_of"]


class Or:
    """A shape that is any one of ``shapes``."""

    def __init__(self, *shapes: Any) -> None:
        self.shapes = shapes


NUMBER = Or(int, float, None)
"""A number as JSON holds it (null: NaN)."""


def shape_of(cls: type) -> dict[str, Any]:
    """The shape of the JSON object a dataclass reads (see the module's documentation)."""
    hints = typing.get_type_hints(cls)
    shape: dict[str, Any] = {}
    for f in fields(cls):
        sub = f.metadata.get("shape", _of_type(hints[f.name]))
        name = f.metadata.get("json", f.name)
        optional = f.default is not MISSING or f.default_factory is not MISSING
        if name == "":
            shape |= sub
            continue
        *outer, name = name.split(".")
        into = shape
        for part in outer:
            into = into.setdefault(part, {})
        into[name + "?" * optional] = sub
    return shape


def _of_type(kind: Any) -> Any:
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if kind is Any:
        return object
    if kind is NoneType:
        return None
    if kind is float:
        return NUMBER
    if origin in (UnionType, typing.Union):
        return Or(*(_of_type(a) for a in args))
    if origin in (tuple, list):
        return [_of_type(args[0])]
    if origin in (Mapping, dict):
        return dict if args[1] is Any else {str: _of_type(args[1])}
    if isinstance(kind, type) and is_dataclass(kind):
        return shape_of(kind)
    return kind


def check_shape(value: Any, shape: Any, path: str, field: str = "") -> None:
    """Raise naming ``path``, the field and the value unless ``value`` has ``shape``: a type
    (``object``: anything), None, :class:`Or`, ``[item]``, ``{str: value}`` (any keys) or
    ``{name: shape}`` (a name ending in ``?`` may be missing)."""
    if isinstance(shape, Or):
        nested = [s for s in shape.shapes if (isinstance(s, dict) and isinstance(value, dict))
                  or (isinstance(s, list) and isinstance(value, list))]
        if len(nested) == 1:  # an object or a list where one is allowed: name what is inside
            check_shape(value, nested[0], path, field)
            return
        for option in shape.shapes:
            try:
                check_shape(value, option, path, field)
                return
            except ParetoSearchError:
                continue
        ok = False
    elif shape is object:
        ok = True
    elif shape is None:
        ok = value is None
    elif isinstance(shape, list):
        ok = isinstance(value, list)
        for i, item in enumerate(value if ok else []):
            check_shape(item, shape[0], path, f"{field}[{i}]")
    elif isinstance(shape, dict):
        ok = isinstance(value, dict)
        for name, sub in shape.items() if ok else ():
            if name is str:
                for key, item in value.items():
                    check_shape(item, sub, path, f"{field}.{key}".lstrip("."))
            elif name.rstrip("?") in value:
                check_shape(value[name.rstrip("?")], sub, path,
                            f"{field}.{name.rstrip('?')}".lstrip("."))
            elif not name.endswith("?"):
                raise ParetoSearchError(located(path, column=f"{field}.{name}".lstrip("."),
                                                problem="missing"))
    else:
        ok = isinstance(value, shape) and (shape is bool or not isinstance(value, bool))
    if not ok:
        shown = value if isinstance(value, int | float | str | None) else type(value).__name__
        raise ParetoSearchError(located(path, column=field or None, value=shown,
                                        problem=f"expected {_describe(shape)}"))


def _describe(shape: Any) -> str:
    if isinstance(shape, Or):
        return " or ".join(_describe(s) for s in shape.shapes)
    if shape is None:
        return "null"
    if isinstance(shape, list):
        return "a list"
    if isinstance(shape, dict):
        return "an object"
    return {int: "an integer", float: "a number", str: "a string", bool: "true or false",
            dict: "an object"}[shape]
