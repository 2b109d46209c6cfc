"""The judge check's report as text."""

from __future__ import annotations

from typing import Any

from ..pipeline.checkstore import _ci, _f, _pct
from .rules import RULES


def format_report(record: dict[str, Any], labelled: dict | None, sanity: dict | None) -> str:
    from ..report.analysis import verdict_detail  # one helper drops the verdict's leading "NOT trustworthy: "

    lines = []
    j = record["judge"]["battle"]["judge"]
    lines.append(f"judge: {j.get('backend')} {j.get('model')}  (key {record['key']})")
    if labelled:
        a, base, pos = labelled["agreement"], labelled["baselines"], labelled["position"]
        lines += ["", f"With labels: {labelled['data']} ({labelled['pairs']} decided pairs, "
                      f"{labelled['label_ties_left_out']} label ties left out)",
                  "| | accuracy | 95% Wilson CI | n |", "|---|---|---|---|",
                  f"| judge (ties half) | {_f(a['accuracy'])} | {_ci(a['ci95'])} | {a['n']} |",
                  f"| judge, probability-weighted | {_f(a['weighted'])} | {_ci(a['weighted_ci95'])} | {a['weighted_n']} |",
                  f"| pick the longer answer | {_f(base['longer']['accuracy'])} | {_ci(base['longer']['ci95'])} | "
                  f"{base['longer']['n']} |",
                  f"| always the first (response_a) | {_f(base['first']['accuracy'])} | {_ci(base['first']['ci95'])} | "
                  f"{base['first']['n']} |",
                  f"judge ties {a['judge_ties']}, invalid {a['invalid']}; flip rate {_f(pos['flip_rate']['rate'])}, "
                  f"P(first) {_f(pos['p_first']['rate'])}, P(longer) {_f((labelled['p_longer'] or {}).get('rate'))}, "
                  f"invalid rate {_f(labelled['invalid_rate']['rate'])}",
                  f"usage: {labelled['usage']}; {labelled['wall_s']} s"]
    if sanity:
        lines += ["", f"Without labels: {sanity['pairs']} sanity pairs from {sanity['source']}; seed {sanity['seed']}",
                  "| corruption | category | pairs | battle prefers intact (95% CI) | rating prefers intact (95% CI) "
                  "| rating drop (95% CI) |", "|---|---|---|---|---|---|"]

        def row(name: str, cat: str, blk: dict) -> str:
            b, r = blk["battle"], blk["rating"]
            return (f"| {name} | {cat} | {blk['pairs']} | {_pct(b['preference'])} ({_ci(b['ci95'])}) | "
                    f"{_pct(r['preference'])} ({_ci(r['ci95'])}) | {_f(r['mean_drop'])} ({_ci(r['drop_ci95'])}) |")

        for kind, blk in sanity["by_corruption"].items():
            lines.append(row(kind, "(all)", blk))
            for cat, cb in blk["by_category"].items():
                lines.append(row(kind, cat, cb))
        lines.append(row("(pooled)", "(all)", sanity["pooled"]))
        lines.append(f"usage: {sanity['usage']}; {sanity['wall_s']} s")
    lines += ["", ("TRUSTWORTHY" if record["trustworthy"] else "NOT TRUSTWORTHY") + ": "
              + verdict_detail(record["verdict_text"]),
              "rules: " + " | ".join(RULES[k] for k, v in (("labelled", labelled), ("sanity", sanity)) if v)]
    return "\n".join(lines)


