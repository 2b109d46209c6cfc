"""Statistics of comparisons: is B better than A, where, and by how much.

- ``intervals``: bootstrap interval of a mean that never leaves the score's scale; Wilson.
- ``paired``: paired bootstrap interval and test of a mean difference, Holm adjustment, verdict;
  what an n can detect.
- ``mcnemar``: paired pass/fail outcomes (rule checks): McNemar's exact test and its dual exact interval.
- ``family``: the multiple-comparison family of one pair of models and verdicts read off their intervals.
- ``scales``: the (low, high) scale of a score from its signature.
- ``bradley_terry``: the Bradley-Terry ranking of several models from their battles.
- ``battle``: battle verdicts controlled for length and style (LC win rate, style-controlled
  Bradley-Terry) and the judge's biases (position, order flips, length).

Only numpy / scipy here: these modules know numbers, not result files (``evaluate.pipeline``
reads and writes those).
"""

from __future__ import annotations

from .intervals import bootstrap_mean_ci, wilson_interval
from .paired import PairedResult, holm, paired_compare, verdict
from .scales import score_scale

__all__ = ["PairedResult", "bootstrap_mean_ci", "holm", "paired_compare", "score_scale", "verdict",
           "wilson_interval"]
