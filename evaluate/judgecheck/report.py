"""The judge check's report as text: aligned columns a person reads in a terminal, usage in words."""

from __future__ import annotations

from typing import Any, Sequence

from ..core.numbers import ci_text, fmt3, pct
from .rules import RULE_NAMES, RULES


def table(head: Sequence[str], rows: Sequence[Sequence[Any]], right: Sequence[bool] | None = None) -> list[str]:
    """Columns padded to their widest cell (numbers right-aligned where `right` says so), a rule under
    the head; no markup, so the lines read the same in a terminal, a log or a CI artifact."""
    cells = [[str(c) for c in head]] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(head))]
    right = list(right) if right is not None else [False] * len(head)

    def line(r: list[str]) -> str:
        return "  ".join(c.rjust(w) if right[i] else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))).rstrip()

    return [line(cells[0]), "  ".join("-" * w for w in widths)] + [line(r) for r in cells[1:]]


def usage_text(usage: dict[str, Any] | None) -> str:
    """A usage block (`store.usage_of`) in words: requests, cache hits, failures, tokens, cost."""
    if not usage:
        return "no requests"
    tokens = (usage.get("prompt_tokens") or 0) + (usage.get("completion_tokens") or 0)
    cost = usage.get("cost_usd")
    text = (f"{usage.get('requests') or 0:,} requests ({usage.get('cache_hits') or 0:,} from the cache, "
            f"{usage.get('failures') or 0:,} failed), {tokens:,} tokens, "
            + (f"${cost:.4f}" if isinstance(cost, (int, float)) else "cost unknown (no judge.price)"))
    per = usage.get("judges")  # a panel's: each judge's share
    if per:
        text += " [" + "; ".join(f"{n} {u.get('requests') or 0:,} ({u.get('cache_hits') or 0:,} cached)"
                                 for n, u in per.items()) + "]"
    return text


def judge_line(record: dict[str, Any]) -> str:
    """The judge a check is of: backend and model, or a panel's judges and its rules."""
    sig = record["judge"]["battle"]
    panel = sig.get("panel")
    if panel:
        names = ", ".join(f"{n} ({(s.get('judge') or {}).get('backend')} {(s.get('judge') or {}).get('model')})"
                          for n, s in (sig.get("judges") or {}).items())
        weights = panel.get("weights")
        return (f"judge: a panel of {len(panel.get('judges') or [])} judges: {names}; battle verdicts voted"
                f"{' with weights ' + str(weights) if weights else ''}, ratings by {panel.get('rating')}"
                f"  (key {record['key']})")
    j = sig["judge"]
    return f"judge: {j.get('backend')} {j.get('model')}  (key {record['key']})"


def _kci(ci: Any) -> str:
    return "-" if not ci else f"{ci[0]:.2f} to {ci[1]:.2f}"


def format_report(record: dict[str, Any], labelled: dict | None, sanity: dict | None) -> str:
    from ..core.verdicts import verdict_detail  # one helper drops the verdict's leading "NOT trustworthy: "

    lines = [judge_line(record)]
    if labelled:
        a, base, pos = labelled["agreement"], labelled["baselines"], labelled["position"]
        lines += ["", f"With labels: {labelled['data']} ({labelled['pairs']} decided pairs, "
                      f"{labelled['label_ties_left_out']} label ties left out)", ""]
        vs = a.get("verdicts") or {}  # records written before kappa: no verdicts block

        def kap(b: dict | None) -> list[str]:
            if not b or b.get("kappa") is None:
                return ["-", "-"]
            return [f"{b['kappa']:.3f}", _kci(b.get("kappa_ci"))]

        cal = vs.get("calibrated") or {}
        lines += table(["who", "agreement", "95% Wilson CI", "Cohen's kappa", "95% CI", "n"], [
            ["judge, parsed (ties half)", fmt3(a["accuracy"]), ci_text(a["ci95"]), *kap(vs.get("raw")), a["n"]],
            ["judge, probability-weighted", fmt3(a["weighted"]), ci_text(a["weighted_ci95"]), *kap(vs.get("weighted")),
             a["weighted_n"]],
            *([["judge, position-calibrated", fmt3(cal.get("accuracy")), ci_text(cal.get("ci")), *kap(cal), cal.get("n")]]
              if vs else []),
            *([RULE_NAMES.get(name, name) + (" (best rule)" if name == labelled.get("best_trivial_rule") else ""),
               fmt3(b["accuracy"]), ci_text(b["ci95"]), *kap(b), b["n"]] for name, b in base.items())],
            right=[False, True, False, True, False, True])
        prior = labelled.get("position_prior")
        if prior:
            lines += ["", "position prior: " + prior["text"]]
        lines += ["",
                  f"judge ties {a['judge_ties']}, invalid {a['invalid']}; flip rate {fmt3(pos['flip_rate']['rate'])}, "
                  f"P(first) {fmt3(pos['p_first']['rate'])}, P(longer) {fmt3((labelled['p_longer'] or {}).get('rate'))}, "
                  f"invalid rate {fmt3(labelled['invalid_rate']['rate'])}",
                  f"usage: {usage_text(labelled['usage'])}; {labelled['wall_s']} s"]
    if sanity:
        lines += ["", f"Without labels: {sanity['pairs']} sanity pairs from {sanity['source']}; seed {sanity['seed']}",
                  ""]

        def row(name: str, cat: str, blk: dict) -> list[Any]:
            b, r = blk["battle"], blk["rating"]
            return [name, cat, blk["pairs"], f"{pct(b['preference'])} ({ci_text(b['ci95'])})",
                    f"{pct(r['preference'])} ({ci_text(r['ci95'])})", f"{fmt3(r['mean_drop'])} ({ci_text(r['drop_ci95'])})"]

        rows = []
        for kind, blk in sanity["by_corruption"].items():
            rows.append(row(kind, "(all)", blk))
            for cat, cb in blk["by_category"].items():
                rows.append(row("", cat, cb))
        rows.append(row("(pooled)", "(all)", sanity["pooled"]))
        lines += table(["corruption", "category", "pairs", "battle prefers intact", "rating prefers intact",
                        "rating drop"], rows, right=[False, False, True, False, False, False])
        lines += ["", "(95% intervals: Wilson for preferences, bootstrap for the rating drop)"]
        bv = sanity["pooled"].get("battle_verdicts")
        if bv:  # records written before kappa have none
            names = {"raw": "parsed", "weighted": "probability-weighted", "calibrated": "position-calibrated"}
            said = [f"{names[k]} {b['kappa']:.2f} ({_kci(b.get('kappa_ci'))}, n={b['n']})" for k, b in bv.items()
                    if b.get("kappa") is not None]
            if said:
                lines.append("battle, Cohen's kappa against the side the intact text was shown on (0: chance): "
                             + "; ".join(said))
            prior = sanity["pooled"].get("position_prior")
            if prior:
                lines.append("position prior: " + prior["text"])
        panel = sanity["pooled"].get("panel")
        if panel:
            ag = panel.get("battle_agreement") or {}
            k = ag.get("fleiss_kappa")
            lines.append(f"the panel's judges on these pairs: Fleiss' kappa {'-' if k is None else f'{k:.2f}'} "
                         f"({ag.get('strength') or 'undefined'}, {ag.get('items') or 0} items every judge decided), "
                         f"effective judges {fmt3(ag.get('effective_judges'))} of {len(panel.get('judges') or [])}; "
                         "position priors: each judge's own check")
        u = sanity["usage"] or {}
        lines.append(f"usage: battle {usage_text(u.get('battle'))}; rating {usage_text(u.get('rating'))}; "
                     f"{sanity['wall_s']} s")
    lines += ["", ("TRUSTWORTHY" if record["trustworthy"] else "NOT TRUSTWORTHY") + ": "
              + verdict_detail(record["verdict_text"]),
              "rules: " + " | ".join(RULES[k] for k, v in (("labelled", labelled), ("sanity", sanity)) if v)]
    return "\n".join(lines)
