"""Statistics of comparisons: is B better than A, where, and by how much.

- ``intervals``: bootstrap interval of a mean that never leaves the score's scale; Wilson.
- ``paired``: the exact sign-flip test for tiny n and what an n of paired differences can detect.
- ``mcnemar``: paired pass/fail outcomes (rule checks): McNemar's exact test and its dual exact interval.
- ``family``: the multiple-comparison family of one pair of models and verdicts read off their intervals.
- ``scales``: the (low, high) scale of a score from its signature.
- ``bradley_terry``: the one Bradley-Terry (logistic) fit, and the ranking of several models from their
  battles; the run's ranking, the battle files' style control, length control and Arena-Hard's scores use it.
- ``agreement``: Cohen's and Fleiss' kappa, Krippendorff's alpha, pairwise correlation, effective raters.
- ``battle``: battle verdicts controlled for length and style (LC win rate, style features) and the
  judge's biases (position, order flips, length).

Only numpy / scipy here: these modules know numbers, not result files (``evaluate.pipeline``
reads and writes those).
"""

from __future__ import annotations

from .intervals import bootstrap_mean_ci, wilson_interval
from .scales import score_scale

__all__ = ["bootstrap_mean_ci", "score_scale", "wilson_interval"]
