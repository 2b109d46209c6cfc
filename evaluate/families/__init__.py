"""Evaluator families: the keys of a category's config entry.

Each module of this folder declares one family with `@register_family` (see `base.py`); they are
all imported here, so adding a family is adding a file. Families from other packages register
the same way when imported, or through the `llm_eval.families` entry point group.
"""

from __future__ import annotations

import importlib
import pkgutil
from importlib.metadata import entry_points

from .base import FAMILY_REGISTRY, Context, Family, FamilyOutput, NoOptions, register_family  # noqa: F401

BUILTIN = ("GPT", "Metrics", "UniEval", "RepEval", "SAGEval")  # ColossalAI's three first, then this project's


def _discover() -> None:
    for info in pkgutil.iter_modules(__path__):
        if not info.name.startswith("_") and info.name != "base":
            importlib.import_module(f"{__name__}.{info.name}")
    for ep in entry_points(group="llm_eval.families"):
        ep.load()


_discover()


def family_names() -> list[str]:
    """Every registered family, the built-in ones first (their order is the order they run in)."""
    names = FAMILY_REGISTRY.names()
    return [n for n in BUILTIN if n in names] + [n for n in names if n not in BUILTIN]


def get_family(name: str) -> Family:
    canon = FAMILY_REGISTRY.canonical(name)
    if canon is None:
        raise KeyError(name)
    return FAMILY_REGISTRY._items[canon]()
