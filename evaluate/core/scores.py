"""What an evaluator family hands back for one item: scores, invalid entries, details.

A score that could not be made (a judge reply that does not parse, a failed call) is an
`Invalid` with its reason and the raw text; it is counted, shown, and never averaged in.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from .records import split_judge_key


PASS_FAIL = "pass/fail"
"""A signature's `outcome` for scores that are 1 (passed) or 0 (failed): rule checks. Their per-model
interval is Wilson's and their paired test McNemar's exact test (`stats.scales.pass_fail`)."""


@dataclass
class Invalid:
    reason: str
    raw: str = ""

    def to_dict(self) -> dict[str, str]:
        return {"reason": self.reason, "raw": self.raw}


@dataclass
class ItemScores:
    """One item's results from one evaluator family. Keys are metric names local to the family
    ("BLEU-1", "relevance", "summarization-fluency"); the runner prefixes the family name."""

    scores: dict[str, float] = field(default_factory=dict)
    invalid: dict[str, Invalid] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)

    def merge(self, other: "ItemScores") -> None:
        self.scores.update(other.scores)
        self.invalid.update(other.invalid)
        self.details.update(other.details)


def _derived(item: ItemScores, key: str) -> bool:
    details = item.details.get(key)
    return isinstance(details, dict) and details.get("derived") is True


@dataclass
class InvalidTally:
    """Valid and invalid scores per family over one run, and the reasons seen most: the judge-failure
    contract (a family whose invalid share reaches `threshold` fails the run) and the closing summary.
    A panel's judges are also counted each on its own (`judges`), under the same contract: the
    panel's share can look fine while one of its judges gave nothing valid (its scores were then
    the other judges' alone)."""

    counts: dict[str, list[int]] = field(default_factory=dict)  # family -> [valid, invalid]
    reasons: dict[str, dict[str, int]] = field(default_factory=dict)  # family -> reason -> count
    judges: dict[str, dict[str, list[int]]] = field(default_factory=dict)  # family -> panel judge -> [valid, invalid]
    judge_reasons: dict[tuple[str, str], dict[str, int]] = field(default_factory=dict)  # (family, judge) -> ...

    def add(self, family: str, items: list[ItemScores], judges: Sequence[str] = ()) -> None:
        """Count each judged score once: a score derived from others of the same item (its details say
        `"derived": true`, e.g. a conversation's whole score from its turns, a panel's from its judges')
        is not a judgment of its own, so an invalid turn is not counted twice. `judges`: a panel's judge
        names; their scores (`<metric>@<judge>`) are also counted per judge."""
        c = self.counts.setdefault(family, [0, 0])
        r = self.reasons.setdefault(family, {})
        per = {j: self.judges.setdefault(family, {}).setdefault(j, [0, 0]) for j in judges}
        for item in items:
            for k in item.scores:
                if not _derived(item, k):
                    c[0] += 1
                    if (j := split_judge_key(k)[1]) in per:
                        per[j][0] += 1
            for k, inv in item.invalid.items():
                if _derived(item, k):
                    continue
                c[1] += 1
                reason = inv.reason[:160]
                r[reason] = r.get(reason, 0) + 1
                if (j := split_judge_key(k)[1]) in per:
                    per[j][1] += 1
                    mine = self.judge_reasons.setdefault((family, j), {})
                    mine[reason] = mine.get(reason, 0) + 1

    def add_counts(self, family: str, valid: int, invalid: int, reasons: dict[str, int] | None = None,
                   judge: str | None = None) -> None:
        """Verdicts that are not item scores (a battle's): counted under `family` like scores; with
        `judge`, one panel judge's own verdicts, counted under that judge only."""
        if judge is None:
            c = self.counts.setdefault(family, [0, 0])
            r = self.reasons.setdefault(family, {})
        else:
            c = self.judges.setdefault(family, {}).setdefault(judge, [0, 0])
            r = self.judge_reasons.setdefault((family, judge), {})
        c[0] += valid
        c[1] += invalid
        for reason, n in (reasons or {}).items():
            r[reason[:160]] = r.get(reason[:160], 0) + n

    def judge_counts(self, family: str) -> dict[str, dict[str, int]]:
        """{judge: {"valid", "invalid"}} of a panel's judges in `family` (empty for one judge)."""
        return {j: {"valid": v, "invalid": i} for j, (v, i) in self.judges.get(family, {}).items()}

    def totals(self) -> tuple[int, int]:
        """Valid and invalid over every family."""
        return sum(v for v, _ in self.counts.values()), sum(i for _, i in self.counts.values())

    def share(self, family: str) -> float:
        valid, invalid = self.counts.get(family, (0, 0))
        return invalid / (valid + invalid) if valid + invalid else 0.0

    def failures(self, threshold: float) -> list[dict[str, Any]]:
        """One manifest error per family, and per judge of a panel, whose invalid share is >= threshold
        (0 < threshold <= 1)."""
        out = []
        for fam, (valid, invalid) in self.counts.items():
            if invalid and self.share(fam) >= threshold:
                top = max(self.reasons.get(fam, {}).items(), key=lambda kv: kv[1], default=("", 0))[0]
                out.append({"family": fam, "error": f"{invalid} of {valid + invalid} scores invalid "
                            f"({self.share(fam):.0%} >= max_invalid_share {threshold:g}); most common reason: {top}",
                            "invalid": invalid, "valid": valid})
        for fam, per in self.judges.items():
            for judge, (valid, invalid) in per.items():
                share = invalid / (valid + invalid) if valid + invalid else 0.0
                if invalid and share >= threshold:
                    top = max(self.judge_reasons.get((fam, judge), {}).items(), key=lambda kv: kv[1],
                              default=("", 0))[0]
                    out.append({"family": fam, "judge": judge,
                                "error": f"judge {judge}: {invalid} of {valid + invalid} of its scores invalid "
                                f"({share:.0%} >= max_invalid_share {threshold:g}; the panel's scores were its "
                                f"other judges' alone); most common reason: {top}", "invalid": invalid, "valid": valid})
        return out

    def lines(self) -> list[str]:
        out = []
        for fam, (valid, invalid) in self.counts.items():
            line = f"{fam}: {valid} scores, {invalid} invalid ({self.share(fam):.0%})"
            per = self.judges.get(fam)
            if per:
                line += "; per judge: " + ", ".join(
                    f"{j} {v} valid, {i} invalid" for j, (v, i) in per.items())
            out.append(line)
        return out
