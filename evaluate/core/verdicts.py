"""A judge check's verdict as text: the one rule for dropping the word that pages say themselves."""

from __future__ import annotations


def verdict_detail(verdict_text: str) -> str:
    """A judge check's verdict (judge_check.json `verdict_text`) without the "trustworthy: " / "NOT
    trustworthy: " that `judgecheck.verdict_of` puts first, for places that say that word themselves
    (the judge-check report, report.html, the judge warning)."""
    for head in ("trustworthy: ", "NOT trustworthy: "):
        if verdict_text.startswith(head):
            return verdict_text[len(head):]
    return verdict_text
