"""The options of ``paretosearch search`` that say what to search, generated from the fields of
:class:`~paretosearch.config.SearchConfig` and :class:`~paretosearch.settings.SearchSettings`
(their :func:`~paretosearch.settings.option` declarations), and read back into a config."""

from __future__ import annotations

import argparse
import typing
from collections.abc import Callable, Mapping
from dataclasses import MISSING, Field
from typing import Any

from paretosearch.config import SearchConfig
from paretosearch.settings import Option, SearchSettings, options

__all__ = ["add_search_options", "config_from"]


def _declared() -> list[tuple[type, Field[Any], Option, str]]:
    """Each field with a flag: its class, field, option and ``argparse`` destination."""
    return [(cls, f, o, o.flag.lstrip("-").replace("-", "_"))
            for cls in (SearchConfig, SearchSettings) for f, o in options(cls)
            if o.flag is not None]


def add_search_options(p: Any, parse: Mapping[str, Callable[[str], Any]]) -> None:
    """Add a flag per declared field: a repeated flag for a collection (``--set``,
    ``--objective``), a switch for a boolean, else one value of the field's type; ``parse``
    overrides how the value of a named field is read (``seed``: its own range)."""
    for cls, f, o, dest in _declared():
        kind = typing.get_type_hints(cls)[f.name]
        origin = typing.get_origin(kind)
        how: dict[str, Any] = {"dest": dest, "help": o.help, "metavar": o.metavar}
        if kind is bool:
            how = {"dest": dest, "help": o.help, "action": "store_true"}
        elif origin in (tuple, Mapping):
            how |= {"action": "append", "default": [] if f.default is MISSING else None}
        else:
            scalar = next((a for a in typing.get_args(kind) if a is not type(None)), kind)
            how |= {"type": parse.get(f.name, scalar), "default": f.default}
            if o.choices:
                how |= {"choices": o.choices}
        p.add_argument(o.flag, **how)


def config_from(args: argparse.Namespace, profile: str,
                read: Mapping[str, Callable[[Any], Any]]) -> SearchConfig:
    """The config the options in ``args`` ask for, on ``profile``; a repeated flag given
    none takes the field's default; ``read`` turns a named field's values into the field's
    (``fixed``: ``NAME=VALUE`` pairs)."""
    values: dict[type, dict[str, Any]] = {SearchConfig: {"profile": profile}, SearchSettings: {}}
    for cls, f, _, dest in _declared():
        value = getattr(args, dest)
        if value is None and f.default is not MISSING:
            value = f.default
        values[cls][f.name] = read[f.name](value) if f.name in read else value
    return SearchConfig(**values[SearchConfig], settings=SearchSettings(**values[SearchSettings]))
