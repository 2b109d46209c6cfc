"""Numbers as the judge check's reports and MT-bench's check print them: one place, so the two reports
write a missing value, a share and an interval the same way ("-" for none, never "nan")."""

from __future__ import annotations

import math
from typing import Any


def fmt3(x: Any) -> str:
    """Three decimals; "-" for None or NaN."""
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.3f}"


def pct(x: Any) -> str:
    """A share as a whole percentage ("62%"); "-" for None."""
    return "-" if x is None else f"{x:.0%}"


def ci_text(ci: Any) -> str:
    """An interval `[lo, hi]` as "lo-hi" with three decimals; "-" when there is none."""
    return "-" if not ci else f"{ci[0]:.3f}-{ci[1]:.3f}"
