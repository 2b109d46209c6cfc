"""The judge check's store under a save path, and what a run shows of it.

A check is stored with the judge's signature and the prompts' hashes in
`<save_path>/judge_checks/<key>.json` (key: sha256 of both; a labelled and a label-free check of
the same judge and prompts are merged into one record) and copied to `<save_path>/judge_check.json`.
A run with the same judge and prompts finds it (`attach_to_run`) and shows it in the manifest,
in each GPT signature and in the closing lines; a changed prompt or judge setting gives another
key: "not checked". Settings that never change a reply (concurrency, timeouts, price, the server
URL) are left out of the key, as for the judge cache, so replicas of one model share one check."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Callable

from ..backends.cache import VOLATILE_FIELDS
from ..core.numbers import ci_text, fmt3, pct
from ..savepath import layout, read
from ..savepath.log import write_run_log
from ..savepath.records import JudgeCheck
from ..savepath.manifest import iso


def judge_context(cfg: Any, judges: Any, label: str):
    from ..families import Context

    return Context(cfg=cfg, options=cfg.family_options("GPT"), judges=judges, family=label, memo={})


def judge_identity(cfg: Any, judges: Any) -> tuple[dict[str, Any], dict[str, Any], str]:
    """(judge signature, prompt hashes, store key) of the config's GPT judges. The signature is the
    battle and rating judges' own (backend, model, weights, decoding options) without the prompt
    paths and without settings that never change a reply (concurrency, timeouts, price)."""
    from ..judges.configured import battle_judge, battle_prompt_path, eval_prompt_path, rating_judge

    ctx = judge_context(cfg, judges, "judge-check")
    prompts: dict[str, Any] = {}
    sig: dict[str, Any] = {}
    for name, make, path in (("battle", battle_judge, battle_prompt_path(cfg)),
                             ("rating", rating_judge, eval_prompt_path(cfg))):
        j = make(ctx)
        s = dict(j.signature())
        prompts[name] = {"file": str(path), "sha256": s.pop("prompt_sha256", None)}
        s.pop("prompt_file", None)
        s["judge"] = {k: v for k, v in s.get("judge", {}).items() if k not in VOLATILE_FIELDS}
        if "judges" in s:  # a panel: each judge's signature, trimmed the same way
            s["judges"] = {n: {**{k: v for k, v in m.items() if k not in ("prompt_file", "prompt_sha256")},
                               "judge": {k: v for k, v in (m.get("judge") or {}).items() if k not in VOLATILE_FIELDS}}
                           for n, m in s["judges"].items()}
            s.pop("judge")
        sig[name] = s
    ident = json.dumps({"judge": sig, "prompts": {k: v["sha256"] for k, v in prompts.items()}},
                       sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return sig, prompts, hashlib.sha256(ident.encode("utf-8")).hexdigest()[:24]


_USAGE_KEYS = ("requests", "cache_hits", "cache_misses", "failures", "prompt_tokens", "completion_tokens", "cost_usd")


def usage_of(meter: Any) -> dict[str, Any]:
    u = meter.usage()
    return {k: u.get(k) for k in _USAGE_KEYS}


def check_usage(ctx: Any) -> dict[str, Any]:
    """What a check's judge calls cost: the judge's meter; for a panel, its judges' meters added up (the
    cost unknown when any judge's is) with each judge's own under "judges"."""
    panel = getattr(ctx.cfg, "panel", None)
    if panel is None:
        return usage_of(ctx.judge())
    from ..judges.configured import member_backend

    per = {m.name: usage_of(member_backend(ctx, m.name, m.options)) for m in panel.members}
    total: dict[str, Any] = {k: sum(u[k] or 0 for u in per.values()) for k in _USAGE_KEYS if k != "cost_usd"}
    costs = [u["cost_usd"] for u in per.values()]
    total["cost_usd"] = None if any(c is None for c in costs) else round(sum(costs), 6)
    total["judges"] = per
    return total



def store_dir(save_path: Path) -> Path:
    return layout.judge_checks_dir(save_path)


_RULE_WORDS = {"shorter": "the shorter answer", "first": "always the first", "second": "always the second",
               "tie": "always a tie"}


def verdict_of(record: dict[str, Any]) -> tuple[bool, str]:
    parts, ok = [], True
    for name in ("labelled", "sanity"):
        sec = record.get(name)
        if not sec:
            continue
        ok = ok and bool(sec.get("trustworthy"))
        if name == "labelled":
            head = _labelled_head(sec)
        else:
            b, r = sec["pooled"]["battle"], sec["pooled"]["rating"]
            said = {"battle": f"battle prefers the intact text {pct(b['preference'])} (95% CI {ci_text(b['ci95'])})",
                    "rating": (f"rating {pct(r['preference'])}" if "battle" in sec.get("parts", ("battle",)) else
                               f"rating prefers the intact text {pct(r['preference'])} (95% CI {ci_text(r['ci95'])})")
                              + f" (mean drop {fmt3(r['mean_drop'])})"}
            head = (f"without labels ({sec['pairs']} sanity pairs): "
                    + ", ".join(said[p] for p in sec.get("parts", ("battle", "rating"))))
        parts.append(head + (": passes" if sec.get("trustworthy") else ": " + "; ".join(sec["reasons"])))
    if not parts:
        return False, "not checked"
    return ok, ("trustworthy: " if ok else "NOT trustworthy: ") + " | ".join(parts)


def _labelled_head(sec: dict[str, Any]) -> str:
    """The labelled check in words, kappa beside agreement: "with labels (hhh.jsonl, 221 pairs): agreement
    0.514 (95% CI ...) but Cohen's kappa 0.05 (slight, 95% CI -0.03 to 0.12): barely better than chance;
    the best trivial rule, the longer answer, has 0.633 (kappa 0.27)"."""
    a = sec["agreement"]
    best = sec.get("best_trivial_rule") or "longer"  # records written before every rule was compared
    rule = sec["baselines"][best]
    who = "the longer answer" if best == "longer" else _RULE_WORDS[best]
    head = f"with labels ({Path(sec['data']).name}, {sec['pairs']} pairs): agreement {fmt3(a['accuracy'])} (95% CI {ci_text(a['ci95'])})"
    if "kappa" not in a:  # a record written before kappa was reported
        return head + f" vs {fmt3(rule['accuracy'])} for " + (
            "the longer answer" if best == "longer" else f"the best trivial rule ({_RULE_WORDS[best]})")
    k, kci = a.get("kappa"), a.get("kappa_ci")
    if k is None:
        head += " and Cohen's kappa undefined (one verdict throughout)"
    else:
        weak = (kci[0] <= 0) if kci else k <= 0.2
        # "no better than chance" is a reason of its own (labelled_check); a slight kappa above chance is said here
        chance = ": barely better than chance" if k <= 0.2 and not weak else ""
        head += (f" {'but' if weak or k <= 0.2 else 'and'} Cohen's kappa {k:.2f} ({a.get('kappa_strength')}"
                 + (f", 95% CI {kci[0]:.2f} to {kci[1]:.2f}" if kci else "") + ")" + chance)
    rk = rule.get("kappa")
    return head + (f"; the best trivial rule, {who}, has {fmt3(rule['accuracy'])}"
                   + (f" (kappa {rk:.2f})" if rk is not None else ""))


def save_check(save_path: Path, key: str, judge: dict, prompts: dict, labelled: dict | None,
               sanity: dict | None) -> tuple[dict[str, Any], Path]:
    old = read.read_stored_check(save_path, key) or {}
    record = {"schema": "llm-eval-judge-check/1", "key": key, "judge": judge, "prompts": prompts,
              "labelled": labelled if labelled is not None else old.get("labelled"),
              "sanity": sanity if sanity is not None else old.get("sanity")}
    record["trustworthy"], record["verdict_text"] = verdict_of(record)
    record["created"] = iso()
    path = write_run_log(save_path, [JudgeCheck.from_dict(record)])[0]  # the store's file, then the last check
    return record, path


def lookup(save_path: Path, key: str) -> dict[str, Any] | None:
    return read.read_stored_check(save_path, key)


def summary_of(record: dict[str, Any] | None, key: str, config: str | None) -> dict[str, Any]:
    """The short form shown in manifests and signatures."""
    if record is None:
        hint = f"eval.py judge-check --config {config}" if config else "eval.py judge-check --config CFG"
        return {"checked": False, "trustworthy": None, "key": key,
                "verdict": f"not checked: no judge check for this judge and these prompts (run `{hint}`)"}
    return {"checked": True, "trustworthy": record.get("trustworthy"), "key": key,
            "verdict": record.get("verdict_text"), "created": record.get("created"),
            "file": str(layout.judge_check_file(Path(""), key))}


def _panel_summary(cfg: Any, judges: Any, save: Any) -> dict[str, Any]:
    """A panel's check: each judge's own and the panel's as a whole (`eval.py judge-check` stores one per
    judge and one for the panel). The run's scores are the panel's, so the panel's own check decides
    whether they are trustworthy; without it, the panel counts as checked when every judge is, and
    trustworthy only when every judge is."""
    from ..pipeline.config import single_judges

    source = str(cfg.source) if cfg.source else None
    per = {}
    for name, one in single_judges(cfg):
        _, _, key = judge_identity(one, judges)
        per[name] = summary_of(lookup(save.path, key), key, source)
    _, _, panel_key = judge_identity(cfg, judges)
    whole = summary_of(lookup(save.path, panel_key), panel_key, source)
    judges_text = "; ".join(f"judge {n}: {x['verdict']}" for n, x in per.items())
    if whole["checked"]:
        return {**whole, "verdict": f"the panel as a whole: {whole['verdict']}; {judges_text}", "panel": per}
    checked = all(x["checked"] for x in per.values())
    return {"checked": checked, "trustworthy": all(x["trustworthy"] for x in per.values()) if checked else None,
            "key": panel_key, "verdict": judges_text + ("; the panel as a whole: not checked" if checked else ""),
            "panel": per}


def attach_to_run(cfg: Any, plan: Any, judges: Any, save: Any, manifest: dict[str, Any],
                  log: Callable[[str], None]) -> dict[str, Any] | None:
    """Called once by the runner after scoring, before anything is written: find the check of this
    run's judge and prompts and show it in the manifest, in every GPT signature of the results and
    battles (`save`: the run's SaveDir) and in the closing lines, with a plain warning when the judge
    failed it. Never fails the run."""
    if "GPT" not in plan.families:
        return None
    try:
        summary = _panel_summary(cfg, judges, save) if getattr(cfg, "panel", None) is not None else None
        if summary is None:
            _, _, key = judge_identity(cfg, judges)
            summary = summary_of(lookup(save.path, key), key, str(cfg.source) if cfg.source else None)
        manifest["judge_check"] = summary
        save.include_earlier()
        save.stamp("GPT/", "judge_check", {x: summary.get(x) for x in ("trustworthy", "verdict", "key")})
    except Exception as exc:  # a view on an earlier check; never lose a run over it
        log(f"judge check: could not look it up ({type(exc).__name__}: {exc})")
        return None
    if not summary["checked"]:
        log(f"judge check: {summary['verdict']}")
    elif summary["trustworthy"]:
        log(f"judge check: {summary['verdict']}")
    else:
        log("WARNING: the GPT scores and battles above come from a judge that failed its check; do not read "
            "them as a ranking of the models.")
        log(f"judge check: {summary['verdict']}")
    return summary
