"""`--fail-under [CATEGORY:]METRIC=VALUE`: parsed and checked before any work, so a typo never
costs a whole run (a spec without '=', an empty name, a value that is not a finite number)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..core.errors import InputError


@dataclass(frozen=True)
class Threshold:
    spec: str
    category: str  # "" = the overall aggregate
    metric: str  # with or without its family prefix ("BLEU-4" or "Metrics/BLEU-4")
    value: float


def parse_fail_under(spec: str) -> Threshold:
    """One `[CATEGORY:]METRIC=VALUE`; InputError naming the spec and what was expected."""
    example = "expected [CATEGORY:]METRIC=VALUE, e.g. BLEU-4=0.2 or closed_qa:GPT/correctness=3.5"
    if "=" not in spec:
        raise InputError(f'--fail-under "{spec}": no "=": {example}')
    lhs, _, value = spec.rpartition("=")
    try:
        threshold = float(value)
    except ValueError:
        raise InputError(f'--fail-under "{spec}": "{value}" is not a number; {example}') from None
    if not math.isfinite(threshold):
        raise InputError(f'--fail-under "{spec}": the threshold must be a finite number, got "{value}" '
                         "(a NaN threshold can never fail)")
    cat, _, metric = lhs.rpartition(":") if ":" in lhs else ("", "", lhs)
    if not metric.strip() or (":" in lhs and not cat.strip()):
        raise InputError(f'--fail-under "{spec}": empty {"metric" if not metric.strip() else "category"} name; {example}')
    return Threshold(spec=spec, category=cat.strip(), metric=metric.strip(), value=threshold)


def parse_all(specs: list[str]) -> list[Threshold]:
    return [parse_fail_under(s) for s in specs]
