"""Expected scores from next-token log-probabilities (G-Eval), in one place.

`expected_score`: sum(i * p(i)) / sum(p(i)) over the score tokens low..high of one generated
position. Token text is NFKC-normalised (full-width digits such as "４", common in Chinese
replies, read as "4") and stripped of whitespace, and tokens that then read alike (" 4", "4",
"\\n4") are merged by summing their probabilities. Too little mass on the score tokens
(< `min_mass`) gives no score, with the reason.

`yes_probability`: P(Yes) / (P(Yes) + P(No)) at one position, for Boolean questions (UniEval's
questions asked to a causal-LM judge).
"""

from __future__ import annotations

import math
import re
import unicodedata
from dataclasses import dataclass, field
from typing import Callable, Mapping


@dataclass(frozen=True)
class LogprobScore:
    """Expected score from next-token probabilities; `mass` is the probability on score tokens."""

    value: float | None
    mass: float
    probs: Mapping[str, float] = field(default_factory=dict)  # score token -> merged probability
    reason: str = ""

    @property
    def ok(self) -> bool:
        return self.value is not None


def normalise_token(token: str) -> str:
    return unicodedata.normalize("NFKC", token).strip()


def token_mass(top: Mapping[str, float], key: Callable[[str], str | None]) -> dict[str, float]:
    """Probability per `key(normalised token)` (tokens whose key is None are left out)."""
    out: dict[str, float] = {}
    for token, logprob in top.items():
        if logprob is None or not math.isfinite(logprob):
            continue
        k = key(normalise_token(token))
        if k is not None:
            out[k] = out.get(k, 0.0) + math.exp(logprob)
    return out


def expected_score(top: Mapping[str, float], *, low: int = 1, high: int = 5, min_mass: float = 0.05) -> LogprobScore:
    """G-Eval expected score from one position's top log-probabilities (see the module docstring)."""
    probs = token_mass(top, lambda t: str(int(t)) if re.fullmatch(r"\d+", t) and low <= int(t) <= high else None)
    mass = sum(probs.values())
    if not probs:
        return LogprobScore(value=None, mass=0.0, reason=f"no score token {low}-{high} among the top tokens")
    if mass < min_mass or mass <= 0.0:
        return LogprobScore(value=None, mass=mass, probs=probs,
                            reason=f"score tokens carry {mass:.3f} of the probability (< {min_mass})")
    value = sum(int(k) * p for k, p in probs.items()) / mass
    return LogprobScore(value=value, mass=mass, probs=probs)


def yes_probability(top: Mapping[str, float]) -> float | None:
    """P(Yes) / (P(Yes) + P(No)), case-insensitive; None when neither word is among the top tokens."""
    probs = token_mass(top, lambda t: t.lower() if t.lower() in ("yes", "no") else None)
    total = probs.get("yes", 0.0) + probs.get("no", 0.0)
    return probs.get("yes", 0.0) / total if total > 0 else None
