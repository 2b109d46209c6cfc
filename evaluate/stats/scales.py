"""The scale (low, high) a score lives on, so intervals and charts never leave it.

Read from the score's signature (``"scale": [1, 5]`` in a rating signature, ``"scale": "0-1"`` in a
Metrics signature): an evaluator states it, else the run writes its family's declared scale there
(`Family.scale`), and None (``null``) means unbounded (RepEval's projections). A battle signature's
``scale`` (two scores 1-10 in one reply) describes the judge's reply, not a per-answer rating, and
is ignored.
"""

from __future__ import annotations

import re
from typing import Any, Mapping

from ..core.scores import PASS_FAIL

_RANGE = re.compile(r"^\s*(-?\d+(?:\.\d+)?)\s*(?:-|to|\.\.)\s*(-?\d+(?:\.\d+)?)\s*$")


def _parse(scale: Any) -> tuple[float, float] | None:
    if isinstance(scale, (list, tuple)) and len(scale) == 2 and all(
            isinstance(v, (int, float)) and not isinstance(v, bool) for v in scale):
        lo, hi = float(scale[0]), float(scale[1])
    elif isinstance(scale, str) and (m := _RANGE.match(scale)):
        lo, hi = float(m.group(1)), float(m.group(2))
    else:
        return None
    return (lo, hi) if lo < hi else None


def score_scale(key: str, signature: Mapping[str, Any] | None) -> tuple[float, float] | None:
    """(low, high) of score `key` ("<Family>/<name>"), or None when the score is unbounded or unknown."""
    sig = signature or {}
    if sig.get("evaluator") == "battle":
        return None
    return _parse(sig.get("scale"))


def pass_fail(signature: Mapping[str, Any] | None) -> bool:
    """Whether a score is a pass (1) / fail (0) outcome (a rule check's signature says `outcome: pass/fail`):
    its mean is a pass rate (Wilson interval) and two models' are compared by McNemar's exact test."""
    return (signature or {}).get("outcome") == PASS_FAIL
