"""An `eval.py arena-hard` run as the project's own outputs, beside Arena-Hard's judgment files: the save
path then holds results/, battles/, summary.csv, report.html and manifest.json like any run, so
`eval.py report`, `eval.py summary` and the report read it unchanged.

- `battles/<model>__vs__<baseline>.json`, one per model of the leaderboard (every model judged by this
  judge into the save path, as the command's table shows them): the project's battle schema with one
  item per judged question and its two games as the two orders (game 1, the baseline shown first, is
  "BA"; game 2 is "AB"). Each order's verdict is the side the five-level verdict favours, its `label`
  the judge's own verdict ("A>>B", in the positions of that game); a game without a verdict, or whose
  call failed, is an invalid order with its reason. The item's verdict is the project's rule (the two
  games agree, else a tie; an invalid game makes it invalid), as show_result.py drops such a question.
  A `benchmark` block holds Arena-Hard's score and style-controlled score with their 90% intervals,
  the numbers of the command's table.
- `results/<model>.json`: each model's (and the baseline's) answers to the judged questions, unscored:
  Arena-Hard's score pools weighted battles over questions, so no per-question score averages to it;
  the numbers are in the battle file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

from ..core.io import clean_json, read_text, sha256_text
from ..core.records import Record
from ..judges.battle import BattleItem, BattleResult, OrderJudgment
from .benchmark_outputs import block, judge_signature, row
from .savedir import SaveDir

FAMILY = "Arena-Hard"
GAME_ORDER = ("BA", "AB")  # game 1: the baseline is assistant A (shown first); game 2: the model is


def _order(game: Mapping[str, Any] | None, i: int, weights: Mapping[str, tuple[float, int]]) -> OrderJudgment:
    """Game i+1 from the model's side (model A of the battle, baseline B)."""
    order = GAME_ORDER[i]
    if game is None:
        return OrderJudgment(order=order, verdict="invalid",
                             reason="judge call failed (left null in the judgment file; judged again on the next run)")
    raw = str((game.get("judgment") or {}).get("answer") or "")
    label = game.get("score")
    if label is None:
        return OrderJudgment(order=order, verdict="invalid", raw=raw, reason="no verdict in the reply")
    if label not in weights:
        return OrderJudgment(order=order, verdict="invalid", raw=raw,
                             reason=f"verdict {label!r} has no weight in show_result.py's table")
    first_wins = weights[label][0]  # the outcome of assistant A, the answer shown first
    model = first_wins if order == "AB" else 1 - first_wins
    verdict = "A" if model > 0.5 else "B" if model < 0.5 else "tie"
    return OrderJudgment(order=order, verdict=verdict, raw=raw)


def battle_item(record: Mapping[str, Any], weights: Mapping[str, tuple[float, int]]) -> tuple[BattleItem, list[Any]]:
    """One judged question and the judge's labels of its two games (None where there is none)."""
    games = list(record.get("games") or [None, None])[:2]
    orders = [_order(g, i, weights) for i, g in enumerate(games)]
    labels = [g.get("score") if isinstance(g, dict) else None for g in games]
    uid, category = str(record["uid"]), str(record.get("category") or "")
    if any(o.verdict == "invalid" for o in orders):
        return BattleItem(id=uid, verdict="invalid", orders=orders, category=category), labels
    verdicts = {o.verdict for o in orders}
    if len(verdicts) == 1:
        return BattleItem(id=uid, verdict=orders[0].verdict, orders=orders, category=category), labels
    return BattleItem(id=uid, verdict="tie", orders=orders, category=category, inconsistent=True,
                      flipped=verdicts == {"A", "B"}), labels


def benchmark_block(table_row: Mapping[str, Any], baseline: str, lengths: str) -> dict[str, Any]:
    """The numbers of `eval.py arena-hard`'s table for one model, as the battle file's `benchmark` block."""
    r = table_row

    def iv(lo: Any, hi: Any) -> list[float] | None:
        return [lo, hi] if lo is not None and hi is not None else None

    rows = [
        row("score (%)", r.get("score"), interval=iv(r.get("lower"), r.get("upper")), level=0.9, digits=1,
            note=f"win rate against {baseline} as show_result.py computes it (a strong verdict counts three times; "
                 "100 bootstrap rounds, 5th-95th percentile); the baseline is 50"),
        row("style-controlled score (%)", r.get("sc_score"), interval=iv(r.get("sc_lower"), r.get("sc_upper")),
            level=0.9, digits=1, note="the same controlled for answer length and markdown density (headers, lists, "
                                      f"bold; code blocks removed). {lengths}"),
        row("questions scored", r.get("n_questions"), digits=0,
            note=f"{r.get('n_invalid', 0)} left out: a game without a verdict (kept in the judgment file)"),
        row("mean answer length (tokens)", r.get("avg_tokens"), digits=0, note="of the model's answers"),
    ]
    return block("Arena-Hard", str(r["model"]), baseline, rows,
                 note=f"{r['model']} against {baseline}; two games per question, five-level verdicts")


def add_run(save: SaveDir, *, judgments: Mapping[str, Sequence[Mapping[str, Any]]], table: Sequence[Mapping[str, Any]],
            baseline: str, answers: Mapping[str, Any], questions: Mapping[str, Mapping[str, Any]],
            weights: Mapping[str, tuple[float, int]], judge: dict[str, Any], judge_name: str, prompt: Any,
            lengths: str, seed: int) -> list[dict[str, Any]]:
    """A battle per model of the table against the baseline and every model's answers; returns the
    manifest's `models` entries. `judgments`: model -> its judgment records against `baseline`."""
    from ..judges.battle_summary import by_category

    sig = {"evaluator": "arena_hard", "benchmark": "Arena-Hard (lmarena/arena-hard-auto @ 196f6b8's protocol)",
           "judge": judge_signature(judge), "judge_name": judge_name, "baseline": baseline, "seed": seed,
           "judge_prompt": {"path": str(prompt.path), "sha256": sha256_text(read_text(Path(prompt.path)))},
           "verdict_rule": "each game's verdict is the side its five-level verdict favours (label kept); the two "
                           "games agree, else a tie; a game without a verdict makes the question invalid"}
    by_model = {str(r["model"]): r for r in table}
    judged: dict[str, None] = {}
    for model, recs in judgments.items():
        if model == baseline or model not in by_model or not recs:
            continue
        made = [battle_item(r, weights) for r in recs]
        res = BattleResult(model, baseline, [it for it, _ in made], both_orders=True, signature=sig)
        data = res.to_dict()
        for item, (_, labels) in zip(data["items"], made):
            for o in item["orders"]:
                o["label"] = labels[GAME_ORDER.index(o["order"])]
        data["summary"] = clean_json(res.summary())
        data["by_category"] = by_category(res)
        data["benchmark"] = benchmark_block(by_model[model], baseline, lengths)
        save.add_battle(model, baseline, data)
        for r in recs:
            judged.setdefault(str(r["uid"]), None)
    entries = []
    for model in [*[m for m in judgments if m in by_model and m != baseline], baseline]:
        a = answers.get(model)
        if a is None:
            continue
        uids = [u for u in (judgments.get(model) and [str(r["uid"]) for r in judgments[model]] or judged)
                if u in a.text]
        recs = [Record(id=u, category=str((questions.get(u) or {}).get("category") or ""),
                       instruction=str((questions.get(u) or {}).get("prompt") or ""), output=a.text[u]) for u in uids]
        save.open_model(model, str(Path(a.path)), recs)
        entries.append({"name": model, "answer_file": str(a.path), "records": len(recs),
                        **({"role": "baseline"} if model == baseline else {})})
    return entries
