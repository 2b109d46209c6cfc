"""The judge check: can I trust this judge on this kind of data?

1. With labels (`--data`, a pairwise file: instruction, input, response_a, response_b, label
   a/b/tie): the config's battle judge (both orders when the config says so) on each pair.
   Agreement with the humans (a judge tie counts half; **label ties are left out** and counted),
   with a 95% Wilson interval, next to the baselines "pick the longer answer" (equal lengths count
   half) and "always the first" (response_a) on the same pairs; the judge's order-flip rate,
   P(first position wins), P(longer answer wins), invalid rate, tokens and cost.
   `--limit N`: a seeded random N of the decided pairs (the same draw as `meta-eval --sample N
   --seed S`, so both read one judge cache).
2. Without labels (no `--data`), on the run's own records (the config's answer files and
   targets, the categories that list GPT metrics): sanity pairs of each item's reference (or,
   where it has none or the judge is given the reference, each model's answer) against a
   corrupted copy: sentences shuffled, truncated to its first third, the answer to a different
   question of the same category, a number or a named entity swapped (a one-sentence text has its
   clauses shuffled). Each pair goes to the
   configured battle prompt (both orders, the intact text shown first in a seeded half of the
   pairs) and to the rating prompt (the category's GPT metrics). Per corruption and category: how
   often the judge prefers the intact text (ties half, chance is 50%, 95% Wilson interval) and how
   far its rating drops. `--limit N` pairs per corruption (seeded, spread over the categories).

Verdict rules (stated in every output):
- labels: the judge "does not beat the length baseline" when the lower end of its agreement's 95%
  Wilson interval is not above the accuracy of "pick the longer answer"; it "decides by position"
  when at least half of its items flip with the order.
- sanity: a preference for the intact text is "near chance" when its point estimate is below 0.6
  or its 95% Wilson interval reaches down to 0.5; judged on all pairs pooled, separately for the
  battle and the rating, and on the "different question's answer" pairs alone (a judge that cannot
  tell an answer from another question's answer should not be trusted to rank models).

The outcome is stored with the judge's signature and the prompts' hashes in
`<save_path>/judge_checks/<key>.json` (key: sha256 of both; a labelled and a label-free check of
the same judge and prompts are merged into one record) and copied to `<save_path>/judge_check.json`.
Every later run with the same judge and prompts finds it (`attach_to_run`): manifest.json
("judge_check"), each result file's GPT signatures, the run's closing lines; a judge that failed
is named in a plain warning. A changed prompt file or judge setting gives another key: "not checked".
"""

from __future__ import annotations

from .check import check_config, has_gpt_work  # noqa: F401
from .corrupt import SanityPair, corrupt, sanity_pairs, split_sentences  # noqa: F401
from .labelled import baselines, labelled_check, read_pairs, select_pairs  # noqa: F401
from . import labels as _labels  # noqa: F401 (hands the report the labels' verdict: report.analysis.use_label_verdicts)
from .rules import CORRUPTIONS, RULES, near_chance  # noqa: F401
from .sanity import sanity_check  # noqa: F401
