"""Score arithmetic, model-free: the Boolean probability and the per-item combination."""

from __future__ import annotations

import math
from typing import Sequence

from .dimensions import get_dimension


def boolean_prob(logit_yes: float, logit_no: float) -> float:
    """P(Yes) / (P(Yes) + P(No)) from the two logits of one decoding step.

    Equal to the release's softmax-over-the-vocabulary ratio (the normaliser cancels), written
    as a logistic of the difference so that it neither overflows nor loses precision.
    """
    diff = float(logit_yes) - float(logit_no)
    if diff >= 0:
        return 1.0 / (1.0 + math.exp(-diff))
    e = math.exp(diff)
    return e / (1.0 + e)


def combine(
    task: str,
    dimension: str,
    per_unit_scores: Sequence[float],
    item_index: Sequence[int],
    n_items: int,
) -> list[float]:
    """One score per item from the scores of its units (see `questions.build_inputs`).

    Whole-output dimensions have exactly one unit per item; sentence-level ones take the mean
    of their sentences (summarization consistency & fluency, fact consistency) or the sum
    (dialogue engagingness, so longer informative replies score higher, as in the release).
    """
    spec = get_dimension(task, dimension)
    if len(per_unit_scores) != len(item_index):
        raise ValueError(f"{len(per_unit_scores)} unit scores for {len(item_index)} item indices")
    buckets: list[list[float]] = [[] for _ in range(n_items)]
    for score, i in zip(per_unit_scores, item_index):
        if not 0 <= i < n_items:
            raise ValueError(f"item index {i} outside 0..{n_items - 1}")
        buckets[i].append(float(score))
    empty = [i for i, b in enumerate(buckets) if not b]
    if empty:
        raise ValueError(f"items without any scored unit: {empty[:10]}")
    if spec.combine == "single":
        many = [i for i, b in enumerate(buckets) if len(b) != 1]
        if many:
            raise ValueError(f"{spec.full_name} scores each output whole, but items {many[:10]} have several units")
        return [b[0] for b in buckets]
    if spec.combine == "sum":
        return [math.fsum(b) for b in buckets]
    return [math.fsum(b) / len(b) for b in buckets]
