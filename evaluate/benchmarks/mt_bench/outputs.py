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

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from ...backends.cache import VOLATILE_FIELDS
from ...backends.registry import capabilities
from .run import Inputs, RunResult
from .judge import PairJudgment, PairMatch, SingleJudgment
from ...core.errors import InputError
from ...core.io import check_output_dir, clean_json
from ...core.records import Record, Turn, turn_key
from ...core.scores import Invalid, ItemScores
from .. import folders
from ...savepath.manifest import model_entry
from ...judges.battle import CONVERSATION_RULE, BattleItem, BattleResult, OrderJudgment
from .formats import QUESTIONS
from ..benchmark import Benchmark, Scored, register_benchmark
from ...pipeline.savedir import SaveDir
from .records import MtBenchSummary  # noqa: F401  (registers the files: eval.py schema)

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
    from ...judges.battle_summary import battle_ranking, by_category, controlled

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


def add_run(save: SaveDir, inputs: Inputs, result: RunResult, *, mode: str) -> list[dict[str, Any]]:
    """Results (single) or battles (pairwise) of a run into `save`; returns the manifest's `models`
    entries (each answer file's sha256 as FastChat's files were read)."""
    recs = records_of(inputs)
    for model in inputs.models:
        save.open_model(model, str(inputs.answer_paths[model]), recs[model])
    if mode == "single":
        add_single(save, inputs, result, recs)
    else:
        add_pairs(save, inputs, result, recs)
    files = result.summary["files"]["answers"]
    return [model_entry(m, p, len(recs[m]), sha256=(files[m] or {}).get("sha256"))
            for m, p in inputs.answer_paths.items()]


# ------------------------------------------------------------------ the benchmark, as eval.py mt-bench runs it
@dataclass
class _Run:
    args: argparse.Namespace
    judge: Any  # JudgeOptions
    inputs: Inputs
    baseline: str | None
    record: dict[str, Any] | None = None  # the judge check this run made
    key: str = ""  # the judge check's key of this judge and these prompts


@register_benchmark
class MTBench(Benchmark):
    """MT-bench from FastChat's own files (evaluate/benchmarks/mt_bench/run.py says how). Writes
    OUT/model_judgment/<judge>_{single,pair}.jsonl (FastChat's files, appended: the driver holds the save
    path's lock), OUT/judge_cache.sqlite and OUT/mt_bench_summary.json, prints show_result.py's tables,
    then the project's outputs of the run (its results or battles, `add_run`) and their closing lines.
    `--judge-check N`: the label-free judge check on N of the run's judged turns
    (evaluate/benchmarks/mt_bench/judge_check.py), stored and shown like a run's."""

    name, key, family = "mt-bench", "mt_bench", FAMILY
    generates = QUESTIONS.kind  # its question file, declared in formats.py
    config_block = "mt_bench"  # its --config file's block
    summary = "MT-bench from FastChat's files and judge prompts"
    description = "MT-bench judged as FastChat's gen_judgment.py does, scored as its show_result.py does."
    dry_run_cost = False
    _config_judge: Any = None

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        p.add_argument("--config", type=Path, help="YAML/JSON file with an mt_bench: block (data, answers, mode, "
                                                    "baseline, judge_prompts, limit, judge_check), judge: and save_path:")
        p.add_argument("--data", type=Path, help="FastChat's data/mt_bench folder (question.jsonl, reference_answer/)")
        p.add_argument("--answers", nargs="+", type=Path, metavar="FILE",
                       help="model_answer/<model>.jsonl files; the file name names the model")
        p.add_argument("--judge-config", type=Path, help="YAML/JSON file with a judge: block")
        p.add_argument("--mode", choices=["single", "pairwise-baseline", "pairwise-all"])
        p.add_argument("--baseline", help="pairwise-baseline: the baseline model (default gpt-3.5-turbo, as FastChat)")
        p.add_argument("--save_path", type=Path, help="output folder")
        p.add_argument("--judge-prompts", type=Path, help="judge_prompts.jsonl (default: DIR/../judge_prompts.jsonl)")
        p.add_argument("--limit", type=int, help="only the first N questions of each category")
        p.add_argument("--judge-check", type=int, metavar="N",
                       help="after judging, the label-free judge check on N of the run's judged turns")
        p.add_argument("--no-charts", action="store_true", help="no PNG charts (the report and the files as usual)")
        p.add_argument("--dry-run", action="store_true", help="count the judge calls per prompt; contact nothing")

    def check(self, args: argparse.Namespace) -> None:
        """The run's settings from the flags, the config file filling what the flags leave out."""
        from .config import load_config

        if args.config is not None:
            cfg = load_config(args.config)
            o = cfg.options
            args.data = args.data or cfg.path(o.data)
            args.answers = args.answers or ([cfg.path(a) for a in o.answers] if o.answers else None)
            args.mode = args.mode or o.mode
            args.baseline = args.baseline if args.baseline is not None else o.baseline
            args.judge_prompts = args.judge_prompts or cfg.path(o.judge_prompts)
            args.limit = args.limit if args.limit is not None else o.limit
            args.judge_check = args.judge_check if args.judge_check is not None else o.judge_check
            args.save_path = args.save_path or cfg.save_path
            self._config_judge = cfg.judge
        where = f" (or mt_bench.{{}} in {args.config})" if args.config else ""
        missing = [f"--{flag}" + where.format(key) for flag, key, value in (
            ("data", "data", args.data), ("answers", "answers", args.answers or args.generate),
            ("mode", "mode", args.mode), ("save_path", "save_path", args.save_path)) if not value]
        if args.judge_config is None and self._config_judge is None:
            missing.append("--judge-config" + (f" (or a judge: block in {args.config})" if args.config else ""))
        if missing:
            raise InputError(f"missing: {', '.join(missing).replace('mt_bench.save_path', 'save_path')}")

    def judge_options(self, args: argparse.Namespace, load: Any) -> Any:
        judge = load(args.judge_config) if args.judge_config is not None else self._config_judge
        if args.judge_check is not None and args.judge_check < 1:
            raise InputError(f"--judge-check: expected a positive number of judged turns, got {args.judge_check}")
        return judge

    def judge_file(self, args: argparse.Namespace) -> Path | None:
        return args.judge_config or args.config

    def generation(self, args: argparse.Namespace) -> tuple[Path, Path]:
        return args.data / "question.jsonl", folders.model_answer_dir(args.save_path)

    def read(self, args: argparse.Namespace, judge: Any) -> _Run:
        from . import run as bench

        if args.limit is not None and args.limit < 1:
            raise InputError(f"--limit: expected a positive number of questions per category, got {args.limit}")
        baseline = args.baseline
        if args.mode == "pairwise-baseline" and baseline is None:
            baseline = "gpt-3.5-turbo"
        check_output_dir(args.save_path, "--save_path", subdirs=folders.FOLDERS)
        inputs = bench.load_inputs(args.data, args.answers, judge_model=judge.model, mode=args.mode,
                                   baseline=baseline, prompts_path=args.judge_prompts, limit=args.limit)
        return _Run(args, judge, inputs, baseline)

    def requests(self, run: _Run) -> dict[str, list[Any]]:
        return {}  # counted per prompt by dry_run_text, from the matches still missing in FastChat's file

    def dry_run_text(self, run: _Run, requests: dict[str, list[Any]], judge: Any) -> str:
        from . import files, judge_check
        from . import run as bench
        from .judge import plan

        inputs, mode, n = run.inputs, run.args.mode, run.args.judge_check
        matches = bench.make_matches(inputs, mode, run.baseline)
        path = bench.judgment_file(run.args.save_path, judge.model, mode)
        resumed = bench.resume(matches, files.read_rows(path, "single" if mode == "single" else "pair"), judge.model)
        total, todo = plan(matches), plan([matches[i] for i in resumed.todo])
        cached = self._cached(run, judge, [matches[i] for i in resumed.todo])
        lines = [f"MT-bench dry run: mode {mode}, judge {judge.model}, {len(inputs.questions)} questions, "
                 f"models {', '.join(inputs.models)}\n",
                 f"{'prompt':<30}{'judge calls':>14}{'in the file':>14}{'in the cache':>14}{'to send':>10}\n"]
        for name, k in total.calls.items():
            left, hit = todo.calls.get(name, 0), cached.get(name, 0)
            lines.append(f"{name:<30}{k:>14}{k - left:>14}{hit:>14}{left - hit:>10}\n")
        hits = sum(cached.values())
        lines.append(f"{'total':<30}{total.total:>14}{total.total - todo.total:>14}{hits:>14}{todo.total - hits:>10}\n")
        if inputs.unjudged:
            from ..tables import wrap

            lines.append(wrap(bench.unjudged_note(inputs.unjudged)))
        if n:
            lines.append(f"judge check: at most {judge_check.most_calls(matches, inputs.models, mode, n)} more "
                         f"calls ({n} judged turns x each corruption that applies; the cache may hold some)\n")
        return "".join(lines)

    def _cached(self, run: _Run, judge: Any, todo: list[Any]) -> dict[str, int]:
        """Judge calls of the matches still to judge that the judge cache answers, per prompt (issue 39: the
        dry run counted them as to send). The cache by the run's rule; none is created."""
        from ...backends.cache_path import cache_file, relative_to
        from ...pipeline.collect import cached_flags
        from .judge import PairMatch, pair_user_prompt, request, single_user_prompt

        reqs, names = [], []
        for m in todo:
            users = ([pair_user_prompt(m, False), pair_user_prompt(m, True)] if isinstance(m, PairMatch)
                     else [single_user_prompt(m)])
            reqs += [request(m.prompt, u) for u in users]
            names += [m.prompt.name] * len(users)
        path = cache_file(judge.cache, run.args.save_path, relative_to(self.judge_file(run.args)))
        out: dict[str, int] = {}
        for name, hit in zip(names, cached_flags(judge, path, reqs)):
            out[name] = out.get(name, 0) + int(hit)
        return out

    def notes(self, run: _Run, judge: Any) -> str:
        if capabilities(judge).in_process and judge.max_tokens < 2048:
            return f"note: judge.max_tokens {judge.max_tokens} caps the local judge's replies (FastChat asks for 2048)"
        return ""

    def lock(self, args: argparse.Namespace) -> Any:
        from ...savepath.lock import SaveLock

        return _held(SaveLock.acquire(args.save_path, "mt-bench"))  # FastChat's files are appended: one run at a time

    def judge(self, run: _Run, backend: Any) -> RunResult:
        from . import run as bench

        return bench.run_mt_bench(run.inputs, run.args.mode, backend, run.args.save_path,
                                  judge_model=run.judge.model, baseline=run.baseline)

    def scores(self, run: _Run, judged: RunResult) -> Scored:
        from .text import summary_text

        failed = judged.summary["counts"]["failed"]
        return Scored(summary_text(judged.summary) + "\n",
                      errors=[f"the judge failed on {failed} match(es); run again to judge them"] if failed else [],
                      detail={"counts": judged.summary["counts"]})

    def check_judge(self, args: argparse.Namespace, run: _Run, judged: RunResult, backend: Any,
                    signature: dict[str, Any], log: Any) -> tuple[str, int]:
        from . import judge_check as check

        _, _, run.key = check.identity(backend.signature(), run.inputs, args.mode)
        if not args.judge_check:
            return "", 0
        try:
            run.record, run.key = check.run_check(args.save_path, backend, run.inputs, judged.matches, judged.records,
                                                  args.mode, n=args.judge_check, log=log)
            return "\n" + check.report_text(run.record) + "\n", 0
        except InputError:
            raise
        except Exception as exc:  # a check that fails to run is reported; the run's files are still written
            log(f"exit 3: the judge check could not run: {type(exc).__name__}: {exc}")
            return "", 3

    def save(self, save: SaveDir, run: _Run, judged: RunResult, scored: Scored, judge: dict[str, Any]) -> None:
        """Results or battles into `save`; the manifest keeps the `mt_bench:` config and the judge check
        of this judge and these prompts (the run's own, `--judge-check N`, or the stored one)."""
        from .config import config_dict
        from ...judgecheck.store import lookup
        from ...pipeline.config import scrubbed_judge

        args = run.args
        record = run.record or lookup(args.save_path, run.key)
        models = add_run(save, run.inputs, judged, mode=args.mode)
        save.header.update({
            "models": models, "judge_check": _check_summary(record, run.key),
            "config": config_dict(args.data, args.answers, args.mode, run.baseline, args.judge_prompts, args.limit,
                                  args.judge_check, args.save_path, scrubbed_judge(run.judge)),
            self.key: {k: judged.summary[k] for k in ("mode", "baseline", "counts", "files")},
            **({"config_file": str(args.config)} if args.config else {})})

    def exit_line(self, log: Any, scored: Scored) -> str:
        counts = scored.detail["counts"]
        errors = [e for e in log.errors if isinstance(e, dict) and e.get("family") != FAMILY]
        if counts["failed"]:
            return (f"error: the judge failed on {counts['failed']} match(es); they were not written: run again to "
                    "judge them")
        if counts["matches"] and not counts["valid"]:
            return "error: no judgment could be read (every reply is invalid); see mt_bench_summary.json"
        return f"exit 3: {errors[0].get('error')}" if errors else ""

    def closing(self, log: Any, report: Path | None) -> str:
        from ...report.terminal import closing_summary

        return "\n" + closing_summary(log) + "\n" if log.results else ""


class _held:
    """A SaveLock as a context: released when the run ends, however it ends."""

    def __init__(self, lock: Any) -> None:
        self.lock = lock

    def __enter__(self) -> Any:
        return self.lock

    def __exit__(self, *exc: Any) -> None:
        self.lock.release()


def _check_summary(record: dict[str, Any] | None, key: str) -> dict[str, Any]:
    """What the manifest and each signature say of the judge check of this judge and these prompts."""
    from ...judgecheck.store import summary_of

    if record is None:
        return {"checked": False, "trustworthy": None, "key": key,
                "verdict": "not checked: no judge check for this judge and these prompts (add --judge-check N)"}
    return summary_of(record, key, None)
