"""Automatic metrics, registered by the names ColossalAI configs use.

Importing this package registers every metric in `METRICS`; `build` turns a config name
(any alias, any case) into a ready Metric. Heavy libraries (torch, the encoder) load only
when a metric that needs them first scores.
"""

from __future__ import annotations

from typing import Any

from . import bertscore, bleu, chrf, distinct, overlap, rouge  # noqa: F401  (registers the metrics)
from .base import METRICS, Metric, MetricInput


def build(name: str, language: str = "en", **options: Any) -> Metric:
    """The metric registered as `name`, set up for `language` ("en" or "cn") and `options`.

    Raises InputError for an unknown name (with the closest known names), language or option.
    """
    return METRICS.get(name)(language, **options)


__all__ = ["METRICS", "Metric", "MetricInput", "build"]
