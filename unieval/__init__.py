"""UniEval (Zhong et al. 2022): multi-dimensional evaluation as Boolean questions to T5.

Importing the package is cheap (no torch): names can be checked when a config is loaded,
before any model is. `UniEvaluator` loads torch and transformers when first used.
"""

from __future__ import annotations

from typing import Any

from .dimensions import ALL_NAMES, CHECKPOINTS, DIMENSIONS, Dimension, get_dimension, parse_name
from .questions import build_inputs
from .scoring import boolean_prob, combine
from .sentences import split_sentences

__all__ = [
    "ALL_NAMES", "CHECKPOINTS", "DIMENSIONS", "Dimension", "UniEvaluator", "boolean_prob", "build_inputs",
    "check_checkpoint", "combine", "download_hint", "get_dimension", "parse_name", "split_sentences",
]


def __getattr__(name: str) -> Any:
    if name in ("UniEvaluator", "check_checkpoint", "download_hint"):
        from . import model

        return getattr(model, name)
    raise AttributeError(f"module 'unieval' has no attribute {name!r}")
