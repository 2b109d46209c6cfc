"""Meta-evaluation: how well does an evaluator agree with human judgments?

    python eval.py meta-eval --data ../shared/data/metaeval/summeval.jsonl \
        --evaluator ROUGE --set ROUGE.multi_ref=mean --output out.json

Absolute files (rows with `doc_id`, `system_id`, `output`, `human`): each row's `output` is scored
by the evaluators, and each score is correlated (Spearman, Kendall tau-b, Pearson) with each human
dimension at three levels:
- summary level: within each `doc_id`, over its systems; groups where either side is constant
  (or with fewer than 2 scored rows) are skipped; the mean over groups is reported;
- system level: the mean per `system_id`, correlated across systems;
- dataset level: all rows at once.
Pairwise files (rows with `response_a`, `response_b`, `label`): rows labelled "tie" are dropped
(before --limit, so `--limit 100` means the first 100 decided pairs); both responses are scored and
the higher one is picked; accuracy against `label`, and Cohen's kappa beside it (evaluate.stats.
label_agreement: 0 for any rule blind to the answers). `GPT:battle` instead shows both responses to
the judge in a battle (in both orders unless the config's judge says otherwise) and reports, for its
three verdicts (parsed, probability-weighted, position-calibrated), agreement and kappa with their
95% intervals beside the trivial rules' (`trivial_verdicts`: the longer / shorter answer, always the
first / the second, always a tie) on the same items, the judge's estimated position prior, and the
order-flip and position-bias figures that a battle has and a score does not.

Evaluator names: a metric name (`ROUGE`, `BLEU`, ...) or `FAMILY:NAME` (`Metrics:ROUGE`,
`UniEval:summarization-coherence`, `GPT:coherence`, `RepEval:fluency`), plus the baseline `Length`
(number of characters; "pick the longer answer").
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from ..pipeline.config import parse_config
from ..core.errors import InputError
from ..core.io import clean_json
from types import SimpleNamespace

from ..backends.pool import JudgePool
from ..families import Context, family_names, get_family
from ..judges.configured import battle_judge
from ..stats.label_agreement import KAPPA_NOTE, verdict_agreement
from ..core.records import Record
from ..core.io import read_jsonl as core_read_jsonl


PAIR_LABELS = ("a", "b", "tie")


def read_metaeval_rows(path: Path) -> list[dict[str, Any]]:
    """The rows of a meta-evaluation file, each checked: an object; a pairwise file's rows (the first
    row has response_a, response_b and label) all have both responses as text (a JSON number or
    true/false, as some PandaLM answers are, becomes its text) and a label a/b/tie."""
    numbered = core_read_jsonl(path, "meta-evaluation data")
    if not numbered:
        raise InputError(f"{path}: no rows")
    for line, row in numbered:
        if not isinstance(row, dict):
            raise InputError(f"{path}: line {line}: expected a JSON object per row, got {type(row).__name__}")
    rows = [row for _, row in numbered]
    if _is_pairwise(rows):
        for line, row in numbered:
            missing = [k for k in ("response_a", "response_b", "label") if k not in row]
            if missing:
                raise InputError(f"{path}: line {line} (id {row.get('id', '?')}): a pairwise row needs "
                                 f"{', '.join(missing)} (the first row is pairwise)")
            for k in ("response_a", "response_b"):
                if isinstance(row[k], (bool, int, float)):  # PandaLM has answers that are JSON `true`
                    row[k] = json.dumps(row[k])
                elif not isinstance(row[k], str):
                    raise InputError(f"{path}: line {line} (id {row.get('id', '?')}): {k} must be a string "
                                     f"(a number or true/false is read as its text), got {type(row[k]).__name__}")
            if row["label"] not in PAIR_LABELS:
                raise InputError(f"{path}: line {line} (id {row.get('id', '?')}): label must be one of "
                                 f"{', '.join(PAIR_LABELS)}, got {str(row['label'])[:40]!r}")
    return rows


def check_positive(value: int | None, flag: str) -> None:
    if value is not None and value < 1:
        raise InputError(f"{flag}: expected a positive integer, got {value}")


def parse_evaluator(spec: str) -> tuple[str, str]:
    if ":" in spec:
        fam, _, name = spec.partition(":")
        if fam not in family_names() and fam != "baseline":
            from ..core.registry import suggest

            raise InputError(f'--evaluator "{spec}": unknown family "{fam}"{suggest(fam, family_names())}')
        return fam, name
    if spec.lower() in ("length", "baseline:length"):
        return "baseline", "Length"
    return "Metrics", spec


def parse_sets(values: list[str]) -> dict[str, dict[str, Any]]:
    """--set METRIC.option=value (value parsed as JSON when it can be, else kept as a string)."""
    out: dict[str, dict[str, Any]] = {}
    for v in values:
        lhs, eq, rhs = v.partition("=")
        name, dot, opt = lhs.partition(".")
        if not eq or not dot or not name or not opt:
            raise InputError(f'--set "{v}": expected NAME.option=value, e.g. ROUGE.multi_ref=mean')
        try:
            value = json.loads(rhs)
        except json.JSONDecodeError:
            value = rhs
        out.setdefault(name, {})[opt] = value
    return out


def row_record(row: dict[str, Any], idx: int, output_key: str = "output") -> Record:
    src = row.get("source", "")
    refs = tuple(r for r in (row.get("references") or []) if isinstance(r, str) and r.strip())
    task = row.get("task") or row.get("dataset") or "general"
    instruction = row.get("instruction") or {
        "summarization": "Summarize the following article.",
        "dialogue": "Continue the following dialogue.",
        "simplification": "Simplify the following sentence.",
    }.get(task, "Respond to the following input.")
    inp = row.get("input", src) if "instruction" in row else src
    return Record(id=str(row.get("id", idx)), category=task, instruction=instruction, input=inp or "",
                  output=row.get(output_key) or "", targets=refs,
                  extra={"source": src, "context": row.get("context", ""), "doc_id": row.get("doc_id")})


def score_records(evaluators: list[tuple[str, str]], records: list[Record], language: str,
                  options: dict[str, dict[str, Any]], extra_config: dict[str, Any],
                  config_source: Path | None = None,
                  memos: dict[str, dict] | None = None) -> tuple[list[dict[str, float | None]], dict]:
    """Per record: score key -> value (None when invalid). Returns (scores, signatures).
    `config_source`: the --config file, against which relative paths in `extra_config` resolve.
    Each family gets the same kind of context as in a run: the records (so RepEval fits its
    synthetic pairs on the rows' references, with their sources), a judge pool, a memo (`memos`
    keeps fitted directions and loaded models between calls on the same rows)."""
    out: list[dict[str, float | None]] = [{} for _ in records]
    sigs: dict[str, Any] = {}
    by_family: dict[str, list[str]] = {}
    for fam, name in evaluators:
        by_family.setdefault(fam, []).append(name)
    if "baseline" in by_family:
        for i, r in enumerate(records):
            out[i]["baseline/Length"] = float(len(r.output))
        sigs["baseline/Length"] = {"metric": "Length", "unit": "characters"}
    category = records[0].category if records else "general"
    raw = {"language": language, "metric_options": options, "category": {category: {}}, **extra_config}
    for fam, names in by_family.items():
        if fam == "baseline":
            continue
        raw["category"][category][fam] = names
    cfg = parse_config(raw, config_source)
    sets = [SimpleNamespace(name="meta-eval", path=config_source, records=list(records))]
    memos = {} if memos is None else memos
    judges = JudgePool()
    try:
        for fam, names in by_family.items():
            if fam == "baseline":
                continue
            try:
                family = get_family(fam)
            except KeyError:
                raise InputError(f"evaluator family {fam} is not available in this version") from None
            ctx = Context(cfg=cfg, options=cfg.family_options(fam), sets=sets, model="meta-eval", judges=judges,
                          memo=memos.setdefault(fam, {}), family=fam)
            problems = family.validate(ctx, category, names, f"--evaluator {fam}", used=True)
            if problems:
                raise InputError("; ".join(problems))
            _collect(out, sigs, fam, family.score(ctx, category, names, records))
    finally:
        judges.close()
    return out, sigs


def _collect(out: list[dict[str, float | None]], sigs: dict, fam: str, result: Any) -> None:
    for i, item in enumerate(result.items):
        for k, v in item.scores.items():
            out[i][f"{fam}/{k}"] = v
        for k in item.invalid:
            out[i][f"{fam}/{k}"] = None
    for k, sig in result.signatures.items():
        sigs[f"{fam}/{k}"] = sig


def _corr(x: np.ndarray, y: np.ndarray) -> dict[str, float]:
    from scipy import stats

    return {"spearman": float(stats.spearmanr(x, y).statistic), "kendall": float(stats.kendalltau(x, y).statistic),
            "pearson": float(stats.pearsonr(x, y).statistic)}


def _constant(v: np.ndarray) -> bool:
    return len(v) < 2 or float(np.max(v) - np.min(v)) == 0.0


def correlations(rows: list[dict[str, Any]], scores: list[float | None], dim: str) -> dict[str, Any]:
    """Summary-, system- and dataset-level correlations of one score with one human dimension."""
    data = [(r.get("doc_id"), r.get("system_id"), s, r["human"][dim]) for r, s in zip(rows, scores)
            if s is not None and math.isfinite(s) and isinstance(r.get("human", {}).get(dim), (int, float))]
    result: dict[str, Any] = {"n": len(data)}
    if len(data) < 3:
        return result
    groups: dict[Any, list[tuple[float, float]]] = {}
    for doc, _, s, h in data:
        groups.setdefault(doc, []).append((s, h))
    per = {"spearman": [], "kendall": [], "pearson": []}
    skipped = 0
    for pairs in groups.values():
        x = np.array([p[0] for p in pairs], dtype=float)
        y = np.array([p[1] for p in pairs], dtype=float)
        if _constant(x) or _constant(y):
            skipped += 1
            continue
        for k, v in _corr(x, y).items():
            per[k].append(v)
    if per["spearman"]:
        result["summary"] = {k: float(np.mean(v)) for k, v in per.items()}
        result["summary"].update(groups=len(per["spearman"]), skipped=skipped)
    systems: dict[Any, list[tuple[float, float]]] = {}
    for _, sys_id, s, h in data:
        systems.setdefault(sys_id, []).append((s, h))
    if len(systems) >= 3:
        xs = np.array([np.mean([p[0] for p in v]) for v in systems.values()])
        ys = np.array([np.mean([p[1] for p in v]) for v in systems.values()])
        if not (_constant(xs) or _constant(ys)):
            result["system"] = {**_corr(xs, ys), "systems": len(systems)}
    x = np.array([d[2] for d in data], dtype=float)
    y = np.array([d[3] for d in data], dtype=float)
    if not (_constant(x) or _constant(y)):
        result["dataset"] = _corr(x, y)
    return result


def _is_pairwise(rows: list[dict[str, Any]]) -> bool:
    return all(k in rows[0] for k in ("response_a", "response_b", "label"))


def select_rows(rows: list[dict[str, Any]], *, docs: int | None = None, limit: int | None = None,
                sample: int | None = None, seed: int = 0) -> list[dict[str, Any]]:
    """The rows a meta-evaluation judges (its report's "selection"): pairwise rows without tie labels; the
    first `docs` documents' rows; the first `limit`; a seeded random `sample`, kept in file order."""
    if _is_pairwise(rows):
        rows = [r for r in rows if r.get("label") != "tie"]
    if docs is not None:
        keep = set(list(dict.fromkeys(r.get("doc_id") for r in rows))[:docs])
        rows = [r for r in rows if r.get("doc_id") in keep]
    if limit is not None:
        rows = rows[:limit]
    if sample is not None and sample < len(rows):
        # a seeded random subset, kept in file order (files are often sorted by subset or system)
        keep_idx = sorted(np.random.default_rng(seed).choice(len(rows), sample, replace=False).tolist())
        rows = [rows[i] for i in keep_idx]
    return rows


def run_metaeval(data: Path, evaluators: list[str], *, language: str = "en", options: dict | None = None,
                 docs: int | None = None, limit: int | None = None, extra_config: dict | None = None,
                 config_source: Path | None = None, sample: int | None = None, seed: int = 0) -> dict[str, Any]:
    rows = select_rows(read_metaeval_rows(data), docs=docs, limit=limit, sample=sample, seed=seed)
    evs = [parse_evaluator(e) for e in evaluators]
    report: dict[str, Any] = {"data": str(data), "rows": len(rows), "evaluators": evaluators,
                              "options": options or {}, "selection": {"docs": docs, "limit": limit, "sample": sample,
                                                                      "seed": seed if sample else None}}
    if _is_pairwise(rows):
        return _pairwise_report(report, rows, evs, language, options or {}, extra_config or {}, config_source)
    missing = [i for i, r in enumerate(rows) if "output" not in r or "human" not in r]
    if missing:
        raise InputError(f"{data}: row {missing[0] + 1}: expected fields output and human (or response_a, "
                         "response_b, label for a pairwise file)")
    records = [row_record(r, i) for i, r in enumerate(rows)]
    scores, sigs = score_records(evs, records, language, options or {}, extra_config or {}, config_source)
    dims = sorted({d for r in rows for d in r.get("human", {})})
    report["signatures"] = sigs
    report["dimensions"] = dims
    report["row_ids"] = [r.id for r in records]
    report["scores"] = {key: [d.get(key) for d in scores] for key in sorted({k for d in scores for k in d})}
    report["correlations"] = {}
    report["invalid"] = {}
    for key in sorted({k for d in scores for k in d}):
        vals = [d.get(key) for d in scores]
        report["invalid"][key] = sum(v is None for v in vals)
        report["correlations"][key] = {dim: correlations(rows, vals, dim) for dim in dims}
    return report


def _pairwise_report(report, rows, evs, language, options, extra_config, config_source) -> dict[str, Any]:
    recs_a = [row_record({**r, "output": r["response_a"]}, i) for i, r in enumerate(rows)]
    recs_b = [row_record({**r, "output": r["response_b"]}, i) for i, r in enumerate(rows)]
    battles = [e for e in evs if e == ("GPT", "battle")]
    scored = [e for e in evs if e != ("GPT", "battle")]
    report["signatures"], report["pairwise"] = {}, {}
    report["row_ids"] = [r.id for r in recs_a]
    if scored:
        memos: dict[str, dict] = {}  # one fit of a RepEval direction serves both sides
        sa, sigs = score_records(scored, recs_a, language, options, extra_config, config_source, memos)
        sb, _ = score_records(scored, recs_b, language, options, extra_config, config_source, memos)
        report["signatures"].update(sigs)
        for key in sorted({k for d in sa for k in d}):
            report["pairwise"][key] = pairwise_accuracy(rows, [d.get(key) for d in sa], [d.get(key) for d in sb])
    if battles:
        raw = {"language": language, "category": {}, **extra_config}
        cfg = parse_config(raw, config_source)
        judges = JudgePool()
        ctx = Context(cfg=cfg, options=cfg.family_options("GPT"), judges=judges, family="GPT")
        try:
            judge = battle_judge(ctx)
            result = judge.run({"response_a": recs_a, "response_b": recs_b})[0]
        finally:
            judges.close()
        report["signatures"]["GPT/battle"] = judge.signature()
        report["pairwise"]["GPT/battle"] = battle_accuracy(rows, result)
        members = getattr(result, "judges", None) or {}  # a panel: each judge's verdicts beside the panel's
        if members:
            report["pairwise"]["GPT/battle"]["position_prior_note"] = (
                "a panel has no order of its own: its calibrated verdict votes its judges' calibrated verdicts, "
                "each fitted on its own two orders (each judge's prior below)")
            for name, one in members.items():
                report["signatures"][f"GPT/battle@{name}"] = one.signature
                report["pairwise"][f"GPT/battle@{name}"] = battle_accuracy(rows, one)
            report["panel"] = {"judges": list(members), **cfg.panel.policy.to_dict(),
                               "battle_agreement": clean_json(result.agreement())}
    return report


TRIVIAL_RULES = {"longer": "picks the response with more characters; equal lengths are a tie",
                 "shorter": "picks the response with fewer characters; equal lengths are a tie",
                 "first": "always picks response_a (judged in both orders such a judge ties every item)",
                 "second": "always picks response_b",
                 "tie": "always says tie"}


def trivial_verdicts(rows: list[dict[str, Any]]) -> dict[str, list[str]]:
    """What each trivial rule says on each pair ("A" / "B" / "tie"): the rules a judge must beat
    (TRIVIAL_RULES). Their kappa is 0 for the constant ones by construction; their raw agreement is not."""
    out: dict[str, list[str]] = {name: [] for name in TRIVIAL_RULES}
    for r in rows:
        la, lb = len(r["response_a"]), len(r["response_b"])
        longer = "tie" if la == lb else "A" if la > lb else "B"
        out["longer"].append(longer)
        out["shorter"].append({"A": "B", "B": "A", "tie": "tie"}[longer])
        out["first"].append("A")
        out["second"].append("B")
        out["tie"].append("tie")
    return out


def rules_agreement(rows: list[dict[str, Any]], keep: list[bool] | None = None) -> dict[str, dict[str, Any]]:
    """Agreement and kappa of every trivial rule with the labels, on the rows `keep` marks (all by default)."""
    keep = keep if keep is not None else [True] * len(rows)
    labels = [r["label"] for r, k in zip(rows, keep) if k]
    return {name: {**verdict_agreement([v for v, k in zip(vs, keep) if k], labels), "rule": TRIVIAL_RULES[name]}
            for name, vs in trivial_verdicts(rows).items()}


def battle_accuracy(rows: list[dict[str, Any]], result: Any) -> dict[str, Any]:
    """Accuracy of a battle's verdicts against the human labels (rows in the order of the records;
    label ties already dropped). A battle tie (equal scores, or the orders disagree) counts half;
    an invalid item is left out and counted. Also per single order: how often the verdict of the
    first order alone ("AB", response_a shown first) and of the second alone would be right."""
    def credit(verdict: str, label: str) -> float:
        return 1.0 if verdict == label else 0.5 if verdict == "tie" else 0.0

    result.calibrated()  # sets each item's calibrated verdict (the position prior is fitted on all of them)
    by_id = {it.id: it for it in result.items}
    right = wrong = tied = invalid = 0
    w_right = w_n = 0.0
    per_order = {"AB": [0, 0], "BA": [0, 0]}
    subsets: dict[str, list[float]] = {}
    items = []
    for i, r in enumerate(rows):
        it = by_id[str(r.get("id", i))]
        label = "A" if r["label"] == "a" else "B"
        if it.weighted_verdict is not None:
            w_n += 1
            w_right += credit(it.weighted_verdict, label)
        for o in it.orders:
            if o.verdict != "invalid":
                per_order[o.order][0] += credit(o.verdict, label)
                per_order[o.order][1] += 1
        items.append({"id": it.id, "label": r["label"], "verdict": it.verdict, "weighted_margin": it.weighted_margin,
                      "weighted_verdict": it.weighted_verdict, "calibrated_verdict": it.calibrated_verdict,
                      "calibrated_margin": None if it.calibrated_margin is None else round(it.calibrated_margin, 4),
                      "orders": [[o.order, o.verdict, o.raw] for o in it.orders],
                      "order_scores": [{"order": o.order, "scores": list(o.scores) if o.scores else None,
                                        "weighted": [round(v, 4) for v in o.weighted] if o.weighted else None,
                                        "p_first": None if o.p_first is None else round(o.p_first, 6),
                                        "reason": o.reason} for o in it.orders]})
        if it.verdict == "invalid":
            invalid += 1
            continue
        right += it.verdict == label
        wrong += it.verdict not in (label, "tie")
        tied += it.verdict == "tie"
        sub = subsets.setdefault(str(r.get("subset", "")), [0.0, 0])
        sub[0] += credit(it.verdict, label)
        sub[1] += 1
    n = right + wrong + tied
    s = {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in result.summary().items()}
    ordered = [by_id[str(r.get("id", i))] for i, r in enumerate(rows)]
    labels = [r["label"] for r in rows]
    verdicts = {"raw": verdict_agreement([it.verdict for it in ordered], labels),
                "weighted": verdict_agreement([it.weighted_verdict for it in ordered], labels),
                "calibrated": verdict_agreement([it.calibrated_verdict for it in ordered], labels)}
    cal = result.calibrated()
    return {"accuracy": (right + 0.5 * tied) / n if n else None, "n": n, "right": right, "wrong": wrong,
            "predicted_ties": tied, "invalid": invalid,
            "accuracy_decisive_only": right / (right + wrong) if right + wrong else None,
            "single_order_accuracy": {k: (v[0] / v[1] if v[1] else None) for k, v in per_order.items()},
            "order_flip_rate": s.get("flip_rate"), "inconsistency_rate": s.get("inconsistency_rate"),
            "first_position_win_rate": s.get("first_position_win_rate"),
            "weighted_accuracy": w_right / w_n if w_n else None, "weighted_n": int(w_n),
            "weighted_note": "probability-weighted scores averaged over both orders (see judges/battle.py); "
                             "items whose orders lack log-probs are left out",
            "note": "ties (equal scores or orders that disagree) count as half right; invalid items left out",
            "kappa": verdicts["raw"]["kappa"], "kappa_ci": verdicts["raw"]["kappa_ci"],
            "calibrated_accuracy": verdicts["calibrated"]["accuracy"], "calibrated_n": verdicts["calibrated"]["n"],
            "verdicts": verdicts,
            "verdicts_note": "raw: the parsed verdicts (orders that disagree are a tie); weighted: the sign of the "
                             "mean probability-weighted score difference over both orders; calibrated: the judge's "
                             "preference with its position lean (fitted on this run's own two-order pairs, no "
                             "labels) taken out. Agreement: ties half, 95% Wilson; " + KAPPA_NOTE,
            "position_prior": cal.summary() if cal else None,
            "trivial_rules": rules_agreement(rows, [it.verdict != "invalid" for it in ordered]),
            "trivial_rules_note": "on the items with a valid raw verdict",
            "by_subset": {k: v[0] / v[1] for k, v in subsets.items() if v[1]}, "items": items}


def pairwise_accuracy(rows: list[dict[str, Any]], a: list[float | None], b: list[float | None]) -> dict[str, Any]:
    """The evaluator's pick (the higher score; equal scores a tie) against the labels: accuracy (ties
    half) and Cohen's kappa of the picks."""
    right = wrong = tied = invalid = 0
    picks: list[str | None] = []
    labels: list[str] = []
    by_subset: dict[str, list[int]] = {}
    for r, x, y in zip(rows, a, b):
        if r["label"] == "tie":
            continue
        labels.append(r["label"])
        picks.append(None if x is None or y is None else "tie" if x == y else "A" if x > y else "B")
        if x is None or y is None:
            invalid += 1
            continue
        if x == y:
            tied += 1
            outcome = 0
        else:
            pick = "a" if x > y else "b"
            outcome = 1 if pick == r["label"] else -1
            right += outcome == 1
            wrong += outcome == -1
        sub = by_subset.setdefault(str(r.get("subset", "")), [0, 0])
        sub[0] += outcome == 1
        sub[1] += 1
    n = right + wrong + tied
    return {"accuracy": (right + 0.5 * tied) / n if n else None, "n": n, "right": right, "wrong": wrong,
            "predicted_ties": tied, "invalid": invalid, "note": "ties count as half right; label ties excluded",
            **_kappa_of(verdict_agreement(picks, labels)),
            "by_subset": {k: v[0] / v[1] for k, v in by_subset.items() if v[1]}}


def _kappa_of(block: dict[str, Any]) -> dict[str, Any]:
    return {"kappa": block["kappa"], "kappa_ci": block["kappa_ci"], "agreement": block}


VERDICT_NAMES = {"raw": "judge, parsed (orders that disagree: tie)", "weighted": "judge, probability-weighted",
                 "calibrated": "judge, position-calibrated"}
RULE_LABELS = {"longer": "rule: the longer answer", "shorter": "rule: the shorter answer",
               "first": "rule: always the first", "second": "rule: always the second", "tie": "rule: always a tie"}


def _kappa_cell(block: dict[str, Any] | None) -> str:
    if not block or block.get("kappa") is None:
        return "-"
    ci = block.get("kappa_ci")
    return f"{block['kappa']:.3f}" + (f" ({ci[0]:.2f} to {ci[1]:.2f})" if ci else "")


def battle_table(acc: dict[str, Any]) -> list[str]:
    """A battle's three verdicts and the trivial rules: agreement and kappa with their intervals, and the
    judge's position prior, as markdown lines."""
    def cell(b: dict[str, Any]) -> str:
        if b.get("accuracy") is None:
            return "-"
        return f"{b['accuracy']:.3f}" + (f" ({b['ci'][0]:.3f}-{b['ci'][1]:.3f})" if b.get("ci") else "")

    lines = ["| verdict | agreement (95% CI) | Cohen's kappa (95% CI) | n |", "|---|---|---|---|"]
    for name, b in acc["verdicts"].items():
        lines.append(f"| {VERDICT_NAMES[name]} | {cell(b)} | {_kappa_cell(b)} | {b['n']} |")
    for name, b in acc["trivial_rules"].items():
        lines.append(f"| {RULE_LABELS[name]} | {cell(b)} | {_kappa_cell(b)} | {b['n']} |")
    prior = acc.get("position_prior")
    lines += ["", "position prior: " + (prior["text"] if prior else acc.get("position_prior_note")
                                        or "none (no item valid in both orders)"),
              "(agreement: ties half; kappa over A / B / tie, 0 = chance; rules on the items with a valid parsed "
              "verdict)"]
    return lines


def format_report(report: dict[str, Any]) -> str:
    lines = [f"{report['data']}: {report['rows']} rows"]
    if "pairwise" in report:
        def num(v: Any) -> str:
            return "-" if v is None else f"{v:.3f}"

        lines += ["", "| evaluator | accuracy | Cohen's kappa (95% CI) | n | predicted ties | invalid | order flips "
                  "| first position wins | weighted accuracy (n) | calibrated accuracy (n) |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        for key, acc in report["pairwise"].items():
            w = f"{num(acc['weighted_accuracy'])} ({acc['weighted_n']})" if acc.get("weighted_n") else "-"
            c = f"{num(acc['calibrated_accuracy'])} ({acc['calibrated_n']})" if acc.get("calibrated_n") else "-"
            lines.append(f"| {key} | {num(acc['accuracy'])} | {_kappa_cell(acc.get('agreement') or (acc.get('verdicts') or {}).get('raw'))} "
                         f"| {acc['n']} | {acc['predicted_ties']} | {acc['invalid']} | "
                         f"{num(acc.get('order_flip_rate'))} | {num(acc.get('first_position_win_rate'))} | {w} | {c} |")
        for key, acc in report["pairwise"].items():
            if "verdicts" in acc:
                lines += ["", f"{key}: agreement with the labels", ""] + battle_table(acc)
        panel = report.get("panel")
        if panel:
            ag = panel.get("battle_agreement") or {}
            k = ag.get("fleiss_kappa")
            lines += ["", f"panel of {len(panel['judges'])} judges ({', '.join(panel['judges'])}): GPT/battle is their "
                          f"vote{' (weights ' + str(panel['weights']) + ')' if panel.get('weights') else ''}, "
                          f"GPT/battle@<judge> each judge's own; Fleiss' kappa between the judges "
                          f"{'-' if k is None else f'{k:.3f}'} ({ag.get('strength') or 'undefined'}) on "
                          f"{ag.get('items') or 0} items, effective judges {num(ag.get('effective_judges'))}"]
        return "\n".join(lines)
    dims = report["dimensions"]
    for level in ("summary", "system", "dataset"):
        lines += ["", f"Spearman, {level} level", "| evaluator | " + " | ".join(dims) + " |",
                  "|---" * (len(dims) + 1) + "|"]
        for key, per_dim in report["correlations"].items():
            cells = [f"{per_dim[d][level]['spearman']:.3f}" if level in per_dim[d] else "-" for d in dims]
            lines.append(f"| {key} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
