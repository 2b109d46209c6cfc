"""Automatic metrics, registered by the names ColossalAI configs use.

Each module of this folder registers its metrics in `METRICS` when imported, and importing this
package imports them all: adding a metric is adding a file. `build` turns a config name
(any alias, any case) into a ready Metric. Heavy libraries (torch, the encoder) load only
when a metric that needs them first scores.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any

from .base import METRICS, Metric, MetricInput

def _discover() -> None:
    for info in pkgutil.iter_modules(__path__):
        if not info.name.startswith("_"):
            importlib.import_module(f"{__name__}.{info.name}")


_discover()


def build(name: str, language: str = "en", **options: Any) -> Metric:
    """The metric registered as `name`, set up for `language` ("en" or "cn") and `options`.

    Raises InputError for an unknown name (with the closest known names), language or option.
    """
    return METRICS.get(name)(language, **options)


__all__ = ["METRICS", "Metric", "MetricInput", "build"]
