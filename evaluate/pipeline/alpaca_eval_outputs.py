"""An `eval.py alpaca-eval` run as the project's own outputs, beside AlpacaEval's annotations.json: the
save path then holds results/, battles/, summary.csv, comparisons/, report.html and manifest.json like
any run, so `eval.py report`, `eval.py summary` and the report read it unchanged.

- `results/<model>.json`: one item per instruction (id: its position in the reference outputs,
  category: AlpacaEval's `dataset`), scored `AlpacaEval/preference` = AlpacaEval's preference - 1,
  the judge's probability that the model's output beats the baseline's (a draw 0.5). Its mean x 100 is
  AlpacaEval's `win_rate`. A reply the preference cannot be read from, or a failed call, is *invalid*
  with its reason, never a number. The baseline's file holds its outputs scored as AlpacaEval scores
  the baseline against itself (0.5 each: identical outputs are a draw, no judge call).
- `battles/<model>__vs__<baseline>.json`: the project's battle schema with one order per instruction
  (AlpacaEval's: "AB" when the model's output was shown first), the verdict the side the preference
  favours (1.5 a tie), the soft verdict as `weighted_scores` = (P(model), P(baseline)) when it came from
  log-probabilities, and a `benchmark` block with AlpacaEval's win rate, its length-controlled win rate
  (fitted over the models judged in this run, the run's reference set) and the discrete win rate, the
  numbers of the command's table.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from ..core.io import clean_json
from ..core.records import Record
from ..core.scores import Invalid, ItemScores
from ..judges.battle import BattleItem, BattleResult, OrderJudgment
from .benchmark_outputs import block, judge_signature, row
from .savedir import SaveDir

FAMILY = "AlpacaEval"
SCORE = "preference"
RULE = ("AlpacaEval's preference - 1: the judge's probability that the model's output is better than the "
        "baseline's (a draw 0.5); the mean x 100 is AlpacaEval's win_rate")


def records_of(pairs: Sequence[Any], side: str) -> list[Record]:
    """One record per judged instruction; `side` "model" (output_2) or "baseline" (output_1)."""
    return [Record(id=str(i), category=p.dataset or "", instruction=p.instruction,
                   output=p.output_2 if side == "model" else p.output_1) for i, p in enumerate(pairs)]


def _preference(rec: Mapping[str, Any]) -> float | None:
    p = rec.get("preference")
    return None if p is None else 1.5 if float(p) == 0 else float(p)


def _why_invalid(rec: Mapping[str, Any]) -> str:
    if rec.get("error"):
        return f"judge call failed: {rec['error']}"
    return str(rec.get("invalid_reason") or "no preference could be read from the reply")


def _reply(rec: Mapping[str, Any]) -> str:
    raw = rec.get("raw_completion") or {}
    return str(raw.get("text") or "")


def item_scores(annotations: Sequence[Mapping[str, Any]]) -> list[ItemScores]:
    out = []
    for rec in annotations:
        item = ItemScores()
        p = _preference(rec)
        if p is None:
            item.invalid[SCORE] = Invalid(_why_invalid(rec), _reply(rec))
        else:
            item.scores[SCORE] = p - 1
        item.details[SCORE] = {"preference": rec.get("preference"), "method": rec.get("preference_method") or "",
                               "model_shown_first": bool(rec.get("is_switched_outputs"))}
        out.append(item)
    return out


def battle_item(i: int, rec: Mapping[str, Any]) -> BattleItem:
    """One instruction from the model's side (model A, baseline B): AlpacaEval's one order."""
    order = "AB" if rec.get("is_switched_outputs") else "BA"
    p = _preference(rec)
    category = str(rec.get("dataset") or "")
    if p is None:
        o = OrderJudgment(order=order, verdict="invalid", raw=_reply(rec), reason=_why_invalid(rec))
        return BattleItem(id=str(i), verdict="invalid", orders=[o], category=category)
    verdict = "A" if p > 1.5 else "B" if p < 1.5 else "tie"
    method = rec.get("preference_method") or ""
    weighted = (p - 1, 2 - p) if method == "logprobs" else None
    reason = "identical outputs: a draw without a judge call" if method == "identical outputs" else ""
    o = OrderJudgment(order=order, verdict=verdict, raw=_reply(rec), weighted=weighted, reason=reason)
    return BattleItem(id=str(i), verdict=verdict, orders=[o], category=category, p_a=p - 1)


def benchmark_block(model: str, baseline: str, wr: Any, lc: Mapping[str, Any] | None, lc_note: str) -> dict[str, Any]:
    """The numbers of `eval.py alpaca-eval`'s table for one model, as the battle file's `benchmark` block."""
    lc = lc or {}

    def se(x: Any) -> str:
        return "-" if x is None or x != x else f"{x:.2f}"

    rows = [
        row("win rate (%)", wr.win_rate, note=f"AlpacaEval's: the mean preference (probability-weighted); standard "
                                              f"error {se(wr.standard_error)}"),
        row("length-controlled win rate (%)", lc.get("length_controlled_winrate"),
            note=f"AlpacaEval 2's; standard error {se(lc.get('lc_standard_error'))}; {lc_note}"),
        row("discrete win rate (%)", wr.discrete_win_rate, note="wins, draws as halves"),
        row("instructions counted", wr.n_total, digits=0,
            note=f"{wr.n_invalid} invalid and {wr.n_failed} failed judge calls not counted (kept in annotations.json)"),
    ]
    return block("AlpacaEval 2", model, baseline, rows,
                 note=f"{model} against {baseline}; one judgment per instruction in AlpacaEval's order")


def _add_scores(save: SaveDir, name: str, answer_file: str, recs: list[Record],
                annotations: Sequence[Mapping[str, Any]], sig: dict[str, Any]) -> None:
    save.open_model(name, answer_file, recs)
    items = item_scores(annotations)
    by_cat: dict[str, list[int]] = {}
    for i, r in enumerate(recs):
        by_cat.setdefault(r.category, []).append(i)
    for cat, idx in by_cat.items():
        save.add(name, FAMILY, cat, [recs[i] for i in idx], [items[i] for i in idx],
                 {SCORE: {**sig, "metric": SCORE, "scale": [0, 1], "rule": RULE}}, {})


def add_run(save: SaveDir, *, evaluator: Any, reference: Any, models: Sequence[Any], pairs: Mapping[str, Sequence[Any]],
            annotations: Mapping[str, Sequence[Mapping[str, Any]]], win_rates: Mapping[str, Any],
            lc: Mapping[str, Mapping[str, Any]], lc_note: str, judge: dict[str, Any], seed: int) -> list[dict[str, Any]]:
    """Results of every model and of the baseline, and one battle per model against the baseline.
    The baseline, unless it was given as a model too, is scored as AlpacaEval scores it against itself
    (identical outputs: a draw, 0.5, without a judge call; AlpacaEval lists it at 50%), so the paired
    comparison of a model with the baseline tests its win rate against 50%. Returns the manifest's
    `models` entries."""
    from ..judges.battle_summary import by_category

    baseline = reference.generator
    sig = {"evaluator": "alpaca_eval", "benchmark": "AlpacaEval 2 (tatsu-lab/alpaca_eval's protocol)",
           "judge": judge_signature(judge), "annotator": evaluator.signature(), "baseline": baseline, "seed": seed}
    entries = []
    for m in models:
        name = m.generator
        recs = records_of(pairs[name], "model")
        _add_scores(save, name, str(m.path), recs, annotations[name], sig)
        entries.append({"name": name, "answer_file": str(m.path), "records": len(recs)})
        if name == baseline:
            continue
        res = BattleResult(name, baseline, [battle_item(i, rec) for i, rec in enumerate(annotations[name])],
                           both_orders=False, signature={**sig, "verdict_rule": "the side the preference favours; "
                                                         "1.5 a tie; weighted_scores = (P(model), P(baseline))"})
        data = res.to_dict()
        data["summary"] = clean_json(res.summary())
        data["by_category"] = by_category(res)
        data["benchmark"] = benchmark_block(name, baseline, win_rates[name], lc.get(name), lc_note)
        save.add_battle(name, baseline, data)
    if baseline not in save.models:
        first = next(iter(pairs.values()))
        recs = records_of(first, "baseline")
        itself = [{"preference": 1.5, "preference_method": "identical outputs", "is_switched_outputs": False,
                   "dataset": p.dataset} for p in first]
        _add_scores(save, baseline, str(reference.path), recs, itself, sig)
        entries.append({"name": baseline, "answer_file": str(reference.path), "records": len(recs),
                        "role": "baseline: against itself, a draw on every instruction without a judge call"})
    return entries
