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

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from ...core.errors import InputError
from ...core.io import check_output_dir, clean_json, read_text, safe_name, sha256_text
from ...core.records import Record
from ...judges.battle import BattleItem, BattleResult, OrderJudgment
from .formats import QUESTIONS
from ..benchmark import Benchmark, Scored, ScoringFailed, register_benchmark
from ..outputs import block, judge_signature, row
from ...pipeline.savedir import SaveDir
from ...savepath.records import GeneratedAnswers
from ...savepath.log import write_run_log
from .records import ArenaHardLeaderboard
from .. import folders
from . import files as ah_files

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
    from ...judges.battle_summary import by_category

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


# ------------------------------------------------------------------ the benchmark, as eval.py arena-hard runs it
MISSING = ("refuse", "common")  # what a question some model did not answer does: the run's `missing:` names


@dataclass
class _Inputs:
    args: Any
    judge_model: str
    prompt: Any
    questions: list[dict[str, Any]]
    baseline: Any
    models: list[Any]
    out_dir: Path
    done: dict[str, dict[str, Any]]
    left_out: dict[str, list[str]]
    todo: dict[str, list[Any]]


@register_benchmark
class ArenaHard(Benchmark):
    """Judges models against the baseline by Arena-Hard's protocol (evaluate/benchmarks/arena_hard/run.py)
    with the judge of --judge-config's `judge:` block. --bench holds question.jsonl and
    model_answer/<model>.jsonl (Arena-Hard's data/<bench_name>/ folder); --judge-prompt defaults to
    judge_prompt_v0.1.json there or in its parent. Writes OUT/model_judgment/<judge>/<model>.jsonl in
    Arena-Hard's schema, judging only the games still missing there, prints the leaderboard (raw and
    style-controlled), writes OUT/leaderboard.csv and the project's outputs. Decoding (temperature,
    max_tokens) comes from the judge prompt file, as Arena-Hard's config gives it."""

    name, key, family = "arena-hard", "arena_hard", FAMILY
    generates = QUESTIONS.kind  # its question file, declared in formats.py
    summary = "judge model answers by Arena-Hard's protocol"
    description = ("Judge models against a baseline by Arena-Hard's protocol and print its leaderboard "
                   "(raw and style-controlled).")

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        p.add_argument("--bench", required=True, type=Path, help="folder with question.jsonl and model_answer/")
        p.add_argument("--judge-config", required=True, type=Path, help="YAML/JSON file with a judge: block")
        p.add_argument("--model", action="extend", nargs="+", metavar="NAME",
                       help="model(s) to judge, by model_answer file name: --model a b, or --model a --model b "
                            "(or --generate NAME=MODEL.yaml)")
        p.add_argument("--baseline", default=None, help="baseline model (default: the judge prompt's, else "
                                                        "gpt-4-0314)")
        p.add_argument("--judge-prompt", type=Path, help="judge prompt JSON (default: judge_prompt_v0.1.json in "
                                                         "--bench or its parent)")
        p.add_argument("--limit", type=int, help="only the first N questions")
        p.add_argument("--seed", type=int, default=0, help="bootstrap seed")
        p.add_argument("--missing", choices=MISSING, default=None,
                       help="a question some model (or the baseline) did not answer: refuse (default; exit 2, the "
                            "ids named) or common (score only the questions every model answered, the others "
                            "named); also `missing:` in the --judge-config file")
        p.add_argument("--dry-run", action="store_true", help="count the judge calls (and the cost with judge.price)")
        p.add_argument("--save_path", required=True, type=Path, help="output folder")

    def check(self, args: argparse.Namespace) -> None:
        if args.limit is not None and args.limit < 1:
            raise InputError(f"--limit: expected a positive number of questions, got {args.limit}")

    def generation(self, args: argparse.Namespace) -> tuple[Path, Path]:
        return args.bench / "question.jsonl", folders.model_answer_dir(args.save_path)

    def read(self, args: argparse.Namespace, judge: Any) -> _Inputs:
        from . import run as ah

        policy = args.missing or _missing_key(args.judge_config)
        check_output_dir(args.save_path, "--save_path", subdirs=folders.FOLDERS)
        prompt = ah.read_judge_prompt(_prompt_path(args))
        questions = ah.read_questions(args.bench / "question.jsonl")[:args.limit]
        base_name = args.baseline or prompt.baseline or ah.DEFAULT_BASELINE
        baseline = ah.read_answers(_answer_file(args.bench, base_name))
        generated = getattr(args, "generated", None) or {}
        models = [ah.read_answers(generated.get(m) or _answer_file(args.bench, m)) for m in dict.fromkeys(args.model)]
        questions, left_out = _common_questions(questions, [baseline, *models], policy)
        out_dir = ah_files.judgment_dir(args.save_path, safe_name(judge.model))
        if out_dir.is_dir():
            ah.read_judgment_dir(out_dir)  # a (model, question) judged twice is refused before anything is paid
        done = {}
        for m in models:
            path = ah_files.judgment_file(args.save_path, safe_name(judge.model), m.model)
            done[m.model] = {r["uid"]: r for r in ah.read_judgments(path)} if path.is_file() else {}
        todo = {m.model: ah.plan(questions, m, baseline, prompt, done[m.model]) for m in models}
        return _Inputs(args, judge.model, prompt, questions, baseline, models, out_dir, done, left_out, todo)

    def requests(self, inputs: _Inputs) -> dict[str, list[Any]]:
        return {name: [g.request(inputs.prompt) for g in gs] for name, gs in inputs.todo.items()}

    def dry_run_text(self, inputs: _Inputs, requests: dict[str, list[Any]], judge: Any) -> str:
        lines = [f"Arena-Hard dry run: judge {judge.model}, baseline {inputs.baseline.model}, "
                 f"{len(inputs.questions)} questions\n"]
        if inputs.left_out:
            lines.append(_left_out_line(inputs.left_out))
        lines += [f"  {name}: {len(rs)} judge calls\n" for name, rs in requests.items()]
        return "".join(lines) + f"total: {sum(len(rs) for rs in requests.values())} judge calls\n"

    def judge(self, inputs: _Inputs, backend: Any) -> int:
        """Judge what is missing, write the judgment files, copy the answers beside them (the leaderboard
        reads them there, as show_result.py does); returns the number of games that failed."""
        from . import run as ah

        failed = 0
        for m in inputs.models:
            recs = ah.judge(inputs.questions, m, inputs.baseline, inputs.prompt, backend, inputs.judge_model,
                            inputs.done[m.model])
            failed += sum(1 for r in recs for g in r["games"] if g is None)
            ah.write_judgments(ah_files.judgment_file(inputs.args.save_path, safe_name(inputs.judge_model),
                                                               m.model), recs)
        for a in [inputs.baseline, *inputs.models]:
            copy = folders.model_answer_file(inputs.args.save_path, a.model)
            if a.path.resolve() != copy.resolve():
                write_run_log(copy.parent, [GeneratedAnswers(name=copy.name, source=a.path)])
        return failed

    def scores(self, inputs: _Inputs, judged: int) -> Scored:
        from . import run as ah
        from ..tables import arena_hard_table

        save_path = inputs.args.save_path
        try:
            cols, rows = ah.leaderboard_table(save_path, safe_name(inputs.judge_model),
                                              baseline=inputs.baseline.model, seed=inputs.args.seed)
        except InputError as exc:
            raise ScoringFailed(f"no verdict could be scored ({exc})") from None
        lengths = ah.lengths_note(save_path)
        text = arena_hard_table(rows, inputs.judge_model, inputs.baseline.model, lengths)
        if inputs.left_out:
            text += _left_out_line(inputs.left_out)
        failed = f"the judge failed on {judged} game(s) (left null); run again to judge them" if judged else ""
        return Scored(text, cols, rows, errors=[failed] if failed else [],
                      exit_line=f"exit 3: {failed}" if failed else "", detail={"lengths": lengths})

    def save(self, save: SaveDir, inputs: _Inputs, judged: int, scored: Scored, judge: dict[str, Any]) -> None:
        from . import run as ah

        args = inputs.args
        write_run_log(args.save_path, [ArenaHardLeaderboard(rows=list(scored.rows), columns=list(scored.columns),
                                                            file=ah_files.leaderboard_csv(Path()))])
        baseline = inputs.baseline.model
        judgments: dict[str, list[dict[str, Any]]] = {}
        for r in ah.read_judgment_dir(inputs.out_dir):
            if r.get("baseline", baseline) == baseline:
                judgments.setdefault(str(r["model"]).split("/")[-1], []).append(r)
        questions = {q["uid"]: q for q in ah.read_questions(args.bench / "question.jsonl")}
        entries = add_run(save, judgments=judgments, table=scored.rows, baseline=baseline,
                          answers=ah.read_answer_dir(folders.model_answer_dir(args.save_path)), questions=questions,
                          weights=ah.SHOW_RESULT_WEIGHTS, judge=judge, judge_name=safe_name(inputs.judge_model),
                          prompt=inputs.prompt, lengths=scored.detail["lengths"], seed=args.seed)
        extra = {"bench": str(args.bench), "judge_prompt": str(inputs.prompt.path), "baseline": baseline,
                 "judgments": str(inputs.out_dir), "seed": args.seed, "limit": args.limit, "leaderboard": scored.rows,
                 **({"missing": "common", "left_out": inputs.left_out} if inputs.left_out else {})}
        save.header.update({"models": entries, self.key: extra})

    def written(self, log: Any) -> list[str]:
        return [str((log.header.get(self.key) or {}).get("judgments")), str(ah_files.leaderboard_csv(log.path))]


def _prompt_path(args: argparse.Namespace) -> Path:
    if args.judge_prompt:
        return args.judge_prompt
    for p in (args.bench / "judge_prompt_v0.1.json", args.bench.parent / "judge_prompt_v0.1.json"):
        if p.is_file():
            return p
    raise InputError(f"{args.bench}: no judge_prompt_v0.1.json here or in the parent folder; give --judge-prompt")


def _answer_file(bench: Path, model: str) -> Path:
    p = folders.model_answer_file(bench, model)
    if not p.is_file():
        raise InputError(f"{p}: no answers for model {model!r}")
    return p


def _missing_key(config: Path) -> str:
    """`missing:` beside the judge: block of --judge-config (refuse when absent)."""
    from ...core.io import read_structured
    from ...core.registry import suggest

    raw = read_structured(config, "judge config")
    value = raw.get("missing", "refuse") if isinstance(raw, dict) else "refuse"
    if value not in MISSING:
        raise InputError(f"{config}: missing: {value!r} is not a policy{suggest(str(value), list(MISSING))}; expected "
                         "refuse (the default) or common (score only the questions every model answered)")
    return value


def _common_questions(questions: list[dict[str, Any]], answers: list[Any], policy: str
                      ) -> tuple[list[dict[str, Any]], dict[str, list[str]]]:
    """The questions to judge and, per model, the ids left out because its file has no answer for them.
    By default a missing answer is refused: the score would cover other questions than its neighbours'."""
    from . import run as ah

    gone = ah.missing_answers(questions, answers)
    if not gone:
        return questions, {}
    if policy != "common":
        said = "; ".join(f"{a.path}: {len(ids)} ({_ids(ids)})" for a in answers if (ids := gone.get(a.model)))
        raise InputError(f"questions with no answer: {said}; answer them, or score only the questions every model "
                         "answered with --missing common (or missing: common in the --judge-config file)")
    drop = {u for ids in gone.values() for u in ids}
    return [q for q in questions if q["uid"] not in drop], gone


def _ids(ids: list[str], most: int = 10) -> str:
    return ", ".join(ids[:most]) + (f" and {len(ids) - most} more" if len(ids) > most else "")


def _left_out_line(left_out: dict[str, list[str]]) -> str:
    from ..tables import wrap

    drop = {u for ids in left_out.values() for u in ids}
    return wrap(f"missing: common: {len(drop)} question(s) left out for every model, not answered by "
                + "; ".join(f"{m} ({_ids(ids)})" for m, ids in left_out.items()))
