"""An MT-bench run's judgments as the project's own outputs, beside FastChat's files: the save path then
has results/, battles/, summary.csv, comparisons/, charts/, report.html and manifest.json like any run,
so `eval.py report`, `eval.py summary`, `eval.py compare` and the gates read it unchanged.

Single-answer grading -> `results/<model>.json`, one item per question (its category, and the
conversation as the item's `turns`, the reference answers on the turns of the reference-judged
categories), scored under the family "MT-bench":

- `MT-bench/score@turn1`, `MT-bench/score@turn2`: the judge's rating of that turn (1-10), as FastChat
  reads it; an unreadable reply is *invalid* with its reason and raw text (FastChat's -1), never a number.
- `MT-bench/score`: the question's mean over its judged turns, invalid when any turn is (that turn and
  its reason named). With every judgment valid, the overall mean of this score is show_result.py's
  "average" (each question has the same number of judged turns, so the pooled mean of the judgments
  and the mean of the question means agree); with invalid turns show_result.py pools the valid
  judgments of a half-judged question, which mixes a turn-1-only mean into a two-turn average, so
  here that question is left out of this key and counted invalid. Per-turn means always equal
  show_result.py's turn 1 / turn 2 columns.

The `@turn` keys are variants of the whole (as for the GPT family's conversations): the paired
comparisons count `MT-bench/score` as the primary score and the per-turn and per-category rows as
exploratory.

Pairwise -> `battles/<a>__vs__<b>.json` in the project's battle schema: one item per question with
one judgment per turn (`turns`, each with its two orders: FastChat's game 1 is "AB", game 2 "BA").
A turn's verdict is show_result.py's (the two games agree, else a tie; an "error" game makes it
invalid); the question's verdict is the project's conversation rule (the model that won more turns).
`summary.by_turn` holds FastChat's per-turn counts; the file's `fastchat` block the pooled counts
over every judged turn, as show_result.py counts them. The results of a pairwise run carry the
conversations (for the report's item browser) and no score, so a single-mode run into the same save
path keeps its scores.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any, Callable, Sequence

from ..backends.cache import VOLATILE_FIELDS
from ..benchmarks.mt_bench import Inputs, RunResult
from ..benchmarks.mt_bench_judge import PairJudgment, PairMatch, SingleJudgment
from ..core.clock import utc_now
from ..core.errors import InputError
from ..core.io import clean_json
from ..core.records import Record, Turn, turn_key
from ..core.scores import Invalid, ItemScores
from ..core.secrets import scrub_argv
from ..savepath import manifest as savepath_manifest
from ..judges.battle import CONVERSATION_RULE, BattleItem, BattleResult, OrderJudgment
from .outputs import write_outputs
from .savedir import SaveDir

FAMILY = "MT-bench"
SCORE = "score"
SCALE = [1, 10]
WHOLE_RULE = ("the question's mean over its judged turns; invalid when any turn is (show_result.py's 'average' "
              "pools the valid judgments instead: equal when every judgment is valid)")
TURN_RULE = "the judge's rating of this turn with FastChat's prompt, read as FastChat reads it"


def judge_signature(signature: dict[str, Any]) -> dict[str, Any]:
    """The backend's signature without what never changes a reply (server URL, concurrency, timeouts)."""
    return {k: v for k, v in signature.items() if k not in VOLATILE_FIELDS}


def records_of(inputs: Inputs) -> dict[str, list[Record]]:
    """Per model, one conversation record per selected question, in question.jsonl's order."""
    out: dict[str, list[Record]] = {}
    for model, by_id in inputs.answers.items():
        recs = []
        for q in inputs.questions:
            conv = by_id[q.question_id]
            ref = inputs.references.get(q.question_id) if q.needs_reference else None
            turns = tuple(Turn(user=u, assistant=a, references=(ref.turns[k],) if ref and k < len(ref.turns) else ())
                          for k, (u, a) in enumerate(zip(q.turns, conv.turns)))
            recs.append(Record(id=str(q.question_id), category=q.category, instruction="", output=turns[-1].assistant,
                               targets=turns[-1].references, turns=turns))
        out[model] = recs
    return out


def _base_signature(summary: dict[str, Any], mode: str) -> dict[str, Any]:
    files = summary["files"]
    return {"evaluator": f"mt-bench {'single' if mode == 'single' else 'pairwise'}",
            "benchmark": "MT-bench (FastChat llm_judge, gen_judgment.py's prompts and parsing)",
            "judge": judge_signature(summary["judge"]), "judge_prompts": files["judge_prompts"],
            "reference_answers": files["reference_answers"], "questions": files["questions"]}


def _single_items(recs: list[Record], judged: dict[tuple[str, int], SingleJudgment]) -> list[ItemScores]:
    out = []
    for rec in recs:
        item = ItemScores()
        values: list[float] = []
        first_bad: tuple[int, Invalid] | None = None
        for k in range(1, len(rec.turns) + 1):
            j = judged.get((rec.id, k))
            if j is None:
                continue
            key = turn_key(SCORE, k)
            item.details[key] = {"prompt": j.prompt_name, "judgment": j.game.judgment}
            if j.valid:
                item.scores[key] = float(j.score)  # type: ignore[arg-type]
                values.append(float(j.score))  # type: ignore[arg-type]
                continue
            reason = f"judge call failed: {j.game.error}" if j.game.failed else (j.game.reason or "invalid judgment")
            inv = Invalid(reason, j.game.judgment)
            item.invalid[key] = inv
            first_bad = first_bad or (k, inv)
        if first_bad is not None:
            k, inv = first_bad
            item.invalid[SCORE] = Invalid(f"turn {k}: {inv.reason}", inv.raw)
        elif values:
            item.scores[SCORE] = sum(values) / len(values)
        out.append(item)
    return out


def add_single(save: SaveDir, inputs: Inputs, result: RunResult, recs: dict[str, list[Record]]) -> None:
    sig = {**_base_signature(result.summary, "single"), "scale": SCALE}
    prompts = sorted({m.prompt.name for m in result.matches})
    for model in inputs.models:
        judged = {(str(j.question_id), j.turn): j for j in result.records
                  if isinstance(j, SingleJudgment) and j.model == model}
        by_cat: dict[str, list[Record]] = {}
        for r in recs[model]:
            by_cat.setdefault(r.category, []).append(r)
        for cat, cat_recs in by_cat.items():
            items = _single_items(cat_recs, judged)
            names = sorted({k for it in items for k in (*it.scores, *it.invalid)})
            sigs = {}
            for name in names:
                turn = int(name.rpartition("@turn")[2]) if "@turn" in name else None
                used = sorted({j.prompt_name for (qid, k), j in judged.items()
                               if (turn is None or k == turn) and any(r.id == qid for r in cat_recs)})
                sigs[name] = {**sig, "prompt": used or prompts, "metric": SCORE,
                              **({"turn": turn, "rule": TURN_RULE} if turn else {"rule": WHOLE_RULE})}
            save.add(model, FAMILY, cat, cat_recs, items, sigs, {})


def _order(game_winner: str | None, shown_first: str, game: Any) -> OrderJudgment:
    """One FastChat game as an order of the project's battle: `shown_first` is "A" when model A of the
    battle was FastChat's Assistant A in this game."""
    order = "AB" if shown_first == "A" else "BA"
    if game_winner is None:
        reason = f"judge call failed: {game.error}" if game.failed else (game.reason or "invalid judgment")
        return OrderJudgment(order=order, verdict="invalid", raw=game.judgment, reason=reason)
    return OrderJudgment(order=order, verdict=game_winner, raw=game.judgment)


def _turn_item(j: PairJudgment, model_a: str) -> BattleItem:
    """One judged turn, from model A's side: FastChat's two games as the two orders, show_result.py's verdict."""
    side = {model_a: "A"}
    names = {"model_1": j.model_1, "model_2": j.model_2}

    def verdict(w: str | None) -> str | None:
        return None if w is None else "tie" if w == "tie" else side.get(names[w], "B")

    g1 = _order(verdict(j.g1_winner), "A" if j.model_1 == model_a else "B", j.g1)
    g2 = _order(verdict(j.g2_winner), "A" if j.model_2 == model_a else "B", j.g2)
    orders = sorted([g1, g2], key=lambda o: o.order)
    v = verdict(j.winner) or "invalid"
    both = {g1.verdict, g2.verdict}
    return BattleItem(id=str(j.question_id), verdict=v, orders=orders, category=j.category, turn=j.turn,
                      inconsistent=j.valid and g1.verdict != g2.verdict, flipped=j.valid and both == {"A", "B"})


def _conversation(item_id: str, category: str, turns: list[BattleItem]) -> BattleItem:
    """The question from its turns, by the project's conversation rule (judges.battle.CONVERSATION_RULE)."""
    if any(t.verdict == "invalid" for t in turns):
        return BattleItem(id=item_id, verdict="invalid", orders=[], category=category, turns=turns)
    margin = sum(1 if t.verdict == "A" else -1 if t.verdict == "B" else 0 for t in turns)
    return BattleItem(id=item_id, verdict="A" if margin > 0 else "B" if margin < 0 else "tie", orders=[],
                      category=category, turns=turns, inconsistent=any(t.inconsistent for t in turns),
                      flipped=any(t.flipped for t in turns))


def fastchat_pair_counts(items: Sequence[BattleItem]) -> dict[str, Any]:
    """show_result.py's counts for model A over every judged turn (an invalid turn left out)."""
    turns = [t for it in items for t in it.judgments()]
    win, loss, tie = (sum(t.verdict == v for t in turns) for v in ("A", "B", "tie"))
    n = win + loss + tie
    return {"unit": "judged (question, turn), as show_result.py counts", "win": win, "loss": loss, "tie": tie,
            "invalid": sum(t.verdict == "invalid" for t in turns),
            "win_rate_adjusted": (win + 0.5 * tie) / n if n else None}


def add_pairs(save: SaveDir, inputs: Inputs, result: RunResult, recs: dict[str, list[Record]]) -> None:
    from ..judges.battle_summary import battle_ranking, by_category, controlled

    sig = {**_base_signature(result.summary, "pairwise"), "prompt": sorted({m.prompt.name for m in result.matches}),
           "both_orders": True, "turn_rule": "show_result.py: the two games agree, else a tie; an error game: invalid",
           "conversation_rule": CONVERSATION_RULE}
    pairs: dict[tuple[str, str], dict[str, dict[int, BattleItem]]] = {}
    category = {r.id: r.category for r in next(iter(recs.values()))}
    for m, j in zip(result.matches, result.records):
        assert isinstance(m, PairMatch) and isinstance(j, PairJudgment)
        key = (m.model_1, m.model_2)
        pairs.setdefault(key, {}).setdefault(str(m.question.question_id), {})[m.turn] = _turn_item(j, m.model_1)
    results = []
    outputs = {model: {r.id: "\n\n".join(t.assistant for t in r.turns) for r in rs} for model, rs in recs.items()}
    for (a, b), by_q in pairs.items():
        items = [_conversation(qid, category[qid], [turns[k] for k in sorted(turns)]) for qid, turns in by_q.items()]
        res = BattleResult(a, b, items, both_orders=True, signature=sig)
        data = res.to_dict()
        data["summary"] = clean_json(res.summary())
        data["by_category"] = by_category(res)
        data["controlled"] = controlled(data, outputs[a], outputs[b])
        data["fastchat"] = fastchat_pair_counts(items)
        save.add_battle(a, b, data)
        results.append(res)
    if len(inputs.models) > 2 and results:
        try:
            ranking = battle_ranking(results, outputs)
        except InputError as exc:
            save.log(f"ranking: {exc}")
        else:
            if ranking is None:
                save.log("ranking: fewer than two decided battle verdicts")
            else:
                save.set_ranking(ranking)


def write_run(save_path: Path, inputs: Inputs, result: RunResult, *, mode: str, config: dict[str, Any],
              judge_check: dict[str, Any] | None = None, charts: bool = True,
              log: Callable[[str], None] = lambda s: print(s, file=sys.stderr)) -> Any:
    """Results (single) or battles (pairwise), then every output of a run through write_outputs;
    returns the report's view (None when nothing was written). `judge_check`: the stored check of this
    judge and these prompts (`checkstore.summary_of`), shown in the manifest and every signature."""
    run_id = savepath_manifest.new_run_id()
    save = SaveDir(save_path, log=log)
    recs = records_of(inputs)
    for model in inputs.models:
        save.open_model(model, str(inputs.answer_paths[model]), recs[model])
    if mode == "single":
        add_single(save, inputs, result, recs)
    else:
        add_pairs(save, inputs, result, recs)
    summary = result.summary
    manifest: dict[str, Any] = {
        "run_id": run_id, "status": "ok", "benchmark": "mt_bench", "config": config,
        "argv": scrub_argv(sys.argv), "versions": savepath_manifest.versions(), "finished": utc_now(),
        "models": [{"name": m, "answer_file": str(p), "sha256": (summary["files"]["answers"][m] or {}).get("sha256"),
                    "records": len(recs[m])} for m, p in inputs.answer_paths.items()],
        "mt_bench": {k: summary[k] for k in ("mode", "baseline", "counts", "files")},
        "errors": [], "usage": {},
    }
    if summary["counts"]["failed"]:
        manifest["errors"].append({"family": FAMILY, "error": f"the judge failed on {summary['counts']['failed']} "
                                                              "match(es); run again to judge them"})
    if judge_check is not None:
        manifest["judge_check"] = judge_check
        save.include_earlier()
        save.stamp(f"{FAMILY}/", "judge_check", {x: judge_check.get(x) for x in ("trustworthy", "verdict", "key")})
    if manifest["errors"]:
        manifest["status"] = "finished with errors"
    t0 = time.time()
    view = write_outputs(save, manifest, run_id=run_id, charts=charts)
    log(f"outputs written in {time.time() - t0:.1f} s")
    return view
