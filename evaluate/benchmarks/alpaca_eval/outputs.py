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

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from ...core.errors import InputError
from ...core.io import check_output_dir, clean_json, safe_name
from ...core.records import Record
from ...core.scores import Invalid, ItemScores
from ...judges.battle import BattleItem, BattleResult, OrderJudgment
from .formats import QUESTIONS
from ..benchmark import Benchmark, Scored, register_benchmark
from ..outputs import block, judge_signature, row
from ...pipeline.savedir import SaveDir
from .records import AlpacaEvalJudgeRun  # noqa: F401  (registers the files: eval.py schema)

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
    from ...judges.battle_summary import by_category

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


# ------------------------------------------------------------------ the benchmark, as eval.py alpaca-eval runs it
@dataclass
class _Inputs:
    args: Any
    evaluator: Any
    reference: Any
    models: list[Any]
    pairs: dict[str, Any]
    logprobs: bool
    planned: dict[str, list[Any]]


@register_benchmark
class AlpacaEval(Benchmark):
    """Judges model outputs against a baseline by AlpacaEval's protocol (evaluate/benchmarks/
    alpaca_eval/judge.py) with the judge of --judge-config's `judge:` block. Writes
    OUT/<model>/<annotator>/annotations.json (AlpacaEval's results layout) with judge_run.json beside it,
    prints each model's win rate beside its length-controlled one, and leaves the project's outputs.
    Decoding (max_tokens, temperature, top_logprobs) comes from the evaluator config, as AlpacaEval sends
    it; `judge.mode: generate` asks for no log-probabilities (preferences then read from the token)."""

    name, key, family = "alpaca-eval", "alpaca_eval", FAMILY
    generates = QUESTIONS.kind  # its question file, declared in formats.py
    summary = "judge model outputs by AlpacaEval 2's protocol"
    description = ("Judge model outputs against a baseline by AlpacaEval 2's protocol (one randomised order per "
                   "instruction, preference from the log-probabilities of m / M).")

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        p.add_argument("--model-outputs", nargs="+", type=Path, metavar="FILE",
                       help="AlpacaEval model_outputs.json files: lists of {instruction, output, generator, dataset} "
                            "(or --generate NAME=MODEL.yaml)")
        p.add_argument("--reference-outputs", required=True, type=Path, metavar="FILE",
                       help="the baseline's outputs (AlpacaEval 2: gpt4_1106_preview), same format")
        p.add_argument("--evaluator-config", required=True, type=Path, metavar="DIR_OR_YAML",
                       help="an AlpacaEval evaluator folder (e.g. .../evaluators_configs/weighted_alpaca_eval_gpt4_"
                            "turbo) or its configs.yaml; its prompt file is read from where the config names it")
        p.add_argument("--judge-config", required=True, type=Path, help="YAML/JSON file with a judge: block")
        p.add_argument("--save_path", required=True, type=Path, help="output folder")
        p.add_argument("--limit", type=int, help="only the reference's first N instructions")
        p.add_argument("--seed", type=int, default=0,
                       help="seed of the per-instruction order (default 0: AlpacaEval's)")
        p.add_argument("--dry-run", action="store_true", help="count the judge calls (and the cost, with "
                                                              "judge.price); contact nothing")

    def check(self, args: argparse.Namespace) -> None:
        if args.limit is not None and args.limit < 1:
            raise InputError(f"--limit: expected a positive number of instructions, got {args.limit}")

    def generation(self, args: argparse.Namespace) -> tuple[Path, Path]:
        from .judge import model_outputs_dir

        return args.reference_outputs, model_outputs_dir(args.save_path)

    def read(self, args: argparse.Namespace, judge: Any) -> _Inputs:
        from . import judge as ae

        evaluator = ae.read_evaluator(args.evaluator_config)
        reference = ae.read_outputs(args.reference_outputs)
        models = [ae.read_outputs(p) for p in args.model_outputs]
        seen: dict[str, Path] = {}
        for m in models:
            key = safe_name(m.generator)
            if key in seen:
                raise InputError(f"{m.path}: model {m.generator!r} is given twice (also {seen[key]}); each model "
                                 "needs its own results folder")
            seen[key] = m.path
        pairs = {m.generator: ae.pair_up(m, reference, args.limit) for m in models}
        for m in models:
            extra = ae.extra_instructions(m, reference)
            if extra:
                print(f"note: {m.path}: {extra} instruction(s) not in the reference are left out", file=sys.stderr)
        check_output_dir(args.save_path, "--save_path")
        logprobs = evaluator.top_logprobs > 0 and judge.mode != "generate"
        planned = {name: ae.plan(evaluator, ps, args.seed, logprobs) for name, ps in pairs.items()}
        return _Inputs(args, evaluator, reference, models, pairs, logprobs, planned)

    def requests(self, inputs: _Inputs) -> dict[str, list[Any]]:
        return {name: [p.request for p in ps if p.request is not None] for name, ps in inputs.planned.items()}

    def dry_run_text(self, inputs: _Inputs, requests: dict[str, list[Any]], judge: Any) -> str:
        planned = inputs.planned
        lines = [f"AlpacaEval dry run: annotator {inputs.evaluator.name}, judge {judge.model}, "
                 f"baseline {inputs.reference.generator}",
                 f"{'model':<28}{'pairs':>7}{'identical':>10}{'judge calls':>12}"]
        for name, ps in planned.items():
            lines.append(f"{name[:27]:<28}{len(ps):>7}{len(ps) - len(requests[name]):>10}{len(requests[name]):>12}")
        lines.append(f"{'total':<28}{sum(len(ps) for ps in planned.values()):>7}{'':>10}"
                     f"{sum(len(r) for r in requests.values()):>12}")
        return "\n".join(lines) + "\n"

    def judge(self, inputs: _Inputs, backend: Any) -> dict[str, Any]:
        """Annotate every pair; write each model's annotations.json; the win rates and LC over the models."""
        from . import judge as ae

        args, evaluator, planned = inputs.args, inputs.evaluator, inputs.planned
        if inputs.logprobs and not backend.supports_logprobs:
            planned = {name: ae.plan(evaluator, ps, args.seed, False) for name, ps in inputs.pairs.items()}
        flat = [p for ps in planned.values() for p in ps]
        records = ae.annotate(evaluator, flat, backend)
        info = {"baseline": inputs.reference.generator, "seed": args.seed, "limit": args.limit,
                "judge": backend.signature(),
                "order": f"AlpacaEval's: swapped when random.Random('is_switched_outputs' + instruction + "
                         f"'{args.seed}').random() >= 0.5",
                "reference_outputs": str(inputs.reference.path)}
        results: dict[str, Any] = {}
        annotations: dict[str, list[dict[str, Any]]] = {}
        start = 0
        for m in inputs.models:
            recs = records[start:start + len(planned[m.generator])]
            start += len(planned[m.generator])
            annotations[m.generator] = recs
            methods = sorted({r["preference_method"] for r in recs if r.get("preference_method")})
            path = ae.write_annotations(args.save_path, m.generator, evaluator, recs,
                                        {**info, "model_outputs": str(m.path), "preference_methods": methods})
            results[m.generator] = (ae.win_rate(recs), path, "token" in methods)
        return {"results": results, "annotations": annotations, "judge_model": info["judge"].get("model")}

    def scores(self, inputs: _Inputs, judged: dict[str, Any]) -> Scored:
        from ..tables import alpaca_eval_table, wrap

        results = judged["results"]
        lc, lc_note = _length_controlled([path for _, path, _ in results.values()])
        rows = []
        for name, (w, _, _) in results.items():
            r = {"model": name, "win_rate": w.win_rate, "standard_error": w.standard_error,
                 "discrete_win_rate": w.discrete_win_rate, "n_total": w.n_total, "n_invalid": w.n_invalid,
                 "n_failed": w.n_failed}
            r.update({k: lc.get(name, {}).get(k) for k in ("length_controlled_winrate", "lc_standard_error",
                                                           "avg_length")})
            rows.append(r)
        text = wrap(f"AlpacaEval: annotator {inputs.evaluator.name}, judge {judged.get('judge_model')}, "
                    f"baseline {inputs.reference.generator}, seed {inputs.args.seed}")
        text += alpaca_eval_table(rows)
        text += wrap("win rate: the model's mean preference (probability-weighted), %, with its standard error; "
                     f"LC win: AlpacaEval 2's length-controlled win rate, {lc_note}; discrete: wins with draws as "
                     "halves, %; len: mean output length (characters); inv: kept in the file, not counted; fail: "
                     "the judge call failed.")
        text += "".join(f"  {name}: {path}\n" for name, (_, path, _) in results.items())
        failed = sum(w.n_failed for w, _, _ in results.values())
        exit_line = ""
        if failed:
            exit_line = (f"error: the judge failed on {failed} pair(s) (written with preference null and the "
                         "error); run again to judge them")
        elif all(w.n_total == 0 for w, _, _ in results.values()):
            exit_line = ("error: no preference could be read (every annotation is invalid); see invalid_reason in "
                         "annotations.json")
        return Scored(text, [], rows, errors=[f"the judge failed on {failed} pair(s); run again to judge them"]
                      if failed else [], exit_line=exit_line, detail={"lc": lc, "lc_note": lc_note})

    def save(self, save: SaveDir, inputs: _Inputs, judged: dict[str, Any], scored: Scored,
             judge: dict[str, Any]) -> None:
        results = judged["results"]
        entries = add_run(save, evaluator=inputs.evaluator, reference=inputs.reference, models=inputs.models,
                          pairs=inputs.pairs, annotations=judged["annotations"],
                          win_rates={k: w for k, (w, _, _) in results.items()}, lc=scored.detail["lc"],
                          lc_note=scored.detail["lc_note"], judge=judge, seed=inputs.args.seed)
        extra = {"annotator": inputs.evaluator.name, "baseline": inputs.reference.generator,
                 "seed": inputs.args.seed, "limit": inputs.args.limit,
                 "annotations": {k: str(p) for k, (_, p, _) in results.items()}}
        if any(fallback for _, _, fallback in results.values()):
            print("note: the judge gave no log-probabilities: preferences were read from the generated token "
                  "(m -> 1, M -> 2, as a binarized AlpacaEval config reads them), so the win rate is a discrete one",
                  file=sys.stderr)
        save.header.update({"models": entries, self.key: extra})

    def closing(self, log: Any, report: Path | None) -> str:
        return f"  report: {report}\n" if report else ""


def _length_controlled(paths: Sequence[Path]) -> tuple[dict[str, dict[str, Any]], str]:
    """AlpacaEval's length-controlled win rates of the models just judged, the models judged together
    being the reference set (`eval.py leaderboard --alpaca-eval` refits them over a larger one)."""
    from . import leaderboard as board

    try:
        b = board.leaderboard([m for p in paths for m in board.read_annotations(p)])
    except InputError as exc:
        return {}, f"not computed ({exc})"
    k = len(b.reference_models)
    note = (f"{b.lc_method}, fitted over the {k} model{'' if k == 1 else 's'} judged here" +
            ("; `eval.py leaderboard --alpaca-eval` with more models fits instruction difficulty jointly"
             if k < 2 else ""))
    return {str(r["model"]): r for r in b.rows}, note
