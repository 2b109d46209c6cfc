"""MT-bench (FastChat's llm_judge) run from FastChat's own files: read and check them, judge each
match through a project Backend with FastChat's prompts, append FastChat's judgment files, and give
show_result.py's tables with the project's intervals beside them.

The pieces, each usable alone:
- `load_inputs`: question.jsonl, the answer files, the reference answers and judge_prompts.jsonl,
  checked (data) before anything is paid.
- `make_matches`: FastChat's matches for a mode (judge).
- `resume`: which matches an existing judgment file already holds (files).
- `judge_matches`: a backend in, judgment records out (judge).
- `run_mt_bench`: the above in sequence, writing the files of a save path.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from ...backends.base import Backend
from ...core.errors import InputError
from ...core.io import read_text, sha256_text
from ...savepath.log import write_run_log
from .records import MtBenchSummary
from . import files as files
from .data import (Conversation, JudgePrompt, Question, QuestionId, check_coverage, check_references,
                            model_name, read_answers, read_judge_prompts, read_questions, read_references,
                            require_prompt)
from .judge import (PROMPT_NAMES, PairJudgment, PairMatch, SingleJudgment, SingleMatch, judge_pairs,
                             judge_single, pair_matches, pair_user_prompt, prompt_scale, single_matches,
                             single_user_prompt, template_fields_for)
from .stats import pair_stats, single_stats

MODES = ("single", "pairwise-baseline", "pairwise-all")
DEFAULT_REFERENCE = "gpt-4"  # FastChat's file of reference answers; used when the judge has none of its own
Judgment = SingleJudgment | PairJudgment
Match = SingleMatch | PairMatch


@dataclass
class Inputs:
    questions: list[Question]  # the selected ones (after --limit), in file order
    answers: dict[str, dict[QuestionId, Conversation]]  # model -> question_id -> conversation
    answer_paths: dict[str, Path]
    references: dict[QuestionId, Conversation]
    reference_path: Path | None
    prompts: dict[str, JudgePrompt]
    question_path: Path
    prompts_path: Path

    @property
    def models(self) -> list[str]:
        return list(self.answers)

    @property
    def unjudged(self) -> dict[QuestionId, int]:
        """Questions with more user turns than FastChat's prompts judge (turns 1 and 2): id -> turns."""
        return {q.question_id: len(q.turns) for q in self.questions if len(q.turns) > 2}


def unjudged_note(unjudged: dict[QuestionId, int]) -> str:
    """The line that says which turns no prompt judges ("" when every turn is judged)."""
    if not unjudged:
        return ""
    ids = ", ".join(f"{q} ({n} turns)" for q, n in list(unjudged.items())[:10])
    more = f" and {len(unjudged) - 10} more" if len(unjudged) > 10 else ""
    return (f"not judged: {len(unjudged)} question(s) have more than two user turns and FastChat's prompts judge "
            f"turns 1 and 2 only, so their later turns are neither judged nor scored: question {ids}{more}")


def _kind(mode: str) -> str:
    return "single" if mode == "single" else "pairwise"


def select(questions: Sequence[Question], limit: int | None) -> list[Question]:
    """The first `limit` questions of each category, in file order (all of them without a limit), so a
    short run still has every category, the reference-judged ones included."""
    if limit is None:
        return list(questions)
    seen: dict[str, int] = {}
    out = []
    for q in questions:
        seen[q.category] = seen.get(q.category, 0) + 1
        if seen[q.category] <= limit:
            out.append(q)
    return out


def load_inputs(data_dir: Path, answer_files: Sequence[Path], *, judge_model: str, mode: str,
                baseline: str | None = None, prompts_path: Path | None = None, limit: int | None = None) -> Inputs:
    """Read and check every file a run needs; InputError names the first problem found."""
    if mode not in MODES:
        raise InputError(f"mode: expected one of {', '.join(MODES)}, got {mode!r}")
    data_dir = Path(data_dir)
    question_path = data_dir / "question.jsonl"
    prompts_path = Path(prompts_path) if prompts_path else data_dir.parent / "judge_prompts.jsonl"
    all_questions = read_questions(question_path)
    by_id = {q.question_id: q for q in all_questions}
    questions = select(all_questions, limit)

    answers: dict[str, dict[QuestionId, Conversation]] = {}
    paths: dict[str, Path] = {}
    for path in map(Path, answer_files):
        name = model_name(path)
        if name in paths:
            raise InputError(f"{path}: model {name} is given twice (also {paths[name]}); FastChat names a model "
                             "by its answer file")
        paths[name] = path
        answers[name] = read_answers(path, by_id)
    if not answers:
        raise InputError("--answers: no answer file given")
    if mode == "pairwise-baseline":
        if baseline not in answers:
            raise InputError(f"--baseline {baseline}: no answer file of that model among --answers "
                             f"(models: {', '.join(answers)})")
        if len(answers) < 2:
            raise InputError("pairwise-baseline: give the baseline's answers and at least one other model's")
    elif baseline is not None:
        raise InputError(f"--baseline applies to --mode pairwise-baseline only (mode is {mode})")
    if mode == "pairwise-all" and len(answers) < 2:
        raise InputError("pairwise-all: give the answers of at least two models")
    check_coverage(questions, answers, paths)

    prompts = read_judge_prompts(prompts_path)
    kind = _kind(mode)
    used = {}
    for (k, ref, turn), name in PROMPT_NAMES.items():
        if k == kind and any(q.needs_reference == ref and (turn == 1 or len(q.turns) == 2) for q in questions):
            used[name] = require_prompt(prompts, name, k,
                                        template_fields_for(k, ref, turn), prompts_path)

    references: dict[QuestionId, Conversation] = {}
    ref_path = None
    if any(q.needs_reference for q in questions):
        folder = data_dir / "reference_answer"
        own = folder / f"{judge_model}.jsonl"
        ref_path = own if "/" not in judge_model and own.exists() else folder / f"{DEFAULT_REFERENCE}.jsonl"
        references = read_references(ref_path, by_id)
        check_references(questions, references, ref_path)
    return Inputs(questions, answers, paths, references, ref_path, used, question_path, prompts_path)


def make_matches(inputs: Inputs, mode: str, baseline: str | None = None) -> list[Match]:
    """FastChat's matches for `mode`, in gen_judgment.py's order (the baseline only for pairwise-baseline)."""
    if mode == "single":
        return list(single_matches(inputs.questions, inputs.answers, inputs.prompts, inputs.references))
    return list(pair_matches(inputs.questions, inputs.answers, inputs.prompts, inputs.references,
                             baseline if mode == "pairwise-baseline" else None))


def judgment_file(out_dir: Path, judge_model: str, mode: str) -> Path:
    """FastChat's `model_judgment/<judge>_single.jsonl` / `<judge>_pair.jsonl` (the name made file-safe)."""
    return files.judgment_file(out_dir, judge_model, mode)


@dataclass
class Resumed:
    done: dict[int, Judgment] = field(default_factory=dict)  # match index -> record read back
    todo: list[int] = field(default_factory=list)  # match indexes still to judge
    stale: int = 0  # rows kept whose stored prompt differs from today's (answers or prompts changed)


def resume(matches: Sequence[Match], rows: Sequence[tuple[int, dict[str, Any]]], judge_model: str) -> Resumed:
    """Split the matches into those the judgment file already holds and those to judge."""
    out = Resumed()
    pairs = any(isinstance(m, PairMatch) for m in matches)
    single_index = {} if pairs else files.index_single(rows)
    pair_index = files.index_pairs(rows) if pairs else {}
    for i, m in enumerate(matches):
        qid = m.question.question_id
        if isinstance(m, SingleMatch):
            row = single_index.get(files.single_key(judge_model, m.prompt.name, qid, m.model, m.turn))
            if row is None:
                out.todo.append(i)
                continue
            out.done[i] = files.single_from_row(row, m.question.category, m.prompt.system_prompt,
                                               prompt_scale(m.prompt))
            out.stale += int(row.get("user_prompt") != single_user_prompt(m))
        else:
            row = pair_index.get(files.pair_key(judge_model, m.prompt.name, qid, m.model_1, m.model_2, m.turn))
            if row is None:
                out.todo.append(i)
                continue
            out.done[i] = files.pair_from_row(row, m.question.category, m.prompt.system_prompt)
            out.stale += int(row.get("g1_user_prompt") != pair_user_prompt(m, row["model_1"] != m.model_1))
    return out


def judge_matches(backend: Backend, matches: Sequence[Match]) -> list[Judgment]:
    """The judgment records of `matches`, in their order (single and pair matches may be mixed)."""
    singles = [m for m in matches if isinstance(m, SingleMatch)]
    pairs = [m for m in matches if isinstance(m, PairMatch)]
    got_s = iter(judge_single(backend, singles))
    got_p = iter(judge_pairs(backend, pairs))
    return [next(got_s) if isinstance(m, SingleMatch) else next(got_p) for m in matches]


@dataclass
class RunResult:
    records: list[Judgment]  # one per match, in the matches' order (a pair read back may be the other way round)
    summary: dict[str, Any]
    judgment_path: Path
    matches: list[Match] = field(default_factory=list)

    @property
    def failed(self) -> int:
        return self.summary["counts"]["failed"]

    @property
    def valid(self) -> int:
        return self.summary["counts"]["valid"]


def _failed(r: Judgment) -> bool:
    return r.game.failed if isinstance(r, SingleJudgment) else (r.g1.failed or r.g2.failed)


def _invalid_entry(r: Judgment) -> dict[str, Any]:
    head = {"question_id": r.question_id, "turn": r.turn, "prompt": r.prompt_name}
    if isinstance(r, SingleJudgment):
        return {**head, "model": r.model, "reason": r.game.error or r.game.reason, "judgment": r.game.judgment}
    games = {f"g{i}": {"reason": g.error or g.reason, "judgment": g.judgment}
             for i, g in ((1, r.g1), (2, r.g2)) if g.failed or g.reason}
    return {**head, "model_1": r.model_1, "model_2": r.model_2, **games}


def _hash(path: Path | None) -> dict[str, Any] | None:
    return None if path is None else {"path": str(path), "sha256": sha256_text(read_text(path))}


def run_mt_bench(inputs: Inputs, mode: str, backend: Backend, out_dir: Path, *, judge_model: str,
                 baseline: str | None = None) -> RunResult:
    """Judge what the judgment file does not hold yet, append it, and summarise the whole run."""
    matches = make_matches(inputs, mode, baseline)
    path = judgment_file(out_dir, judge_model, mode)
    kind = "single" if mode == "single" else "pair"
    resumed = resume(matches, files.read_rows(path, kind), judge_model)
    fresh = judge_matches(backend, [matches[i] for i in resumed.todo])
    records: list[Judgment] = [resumed.done.get(i) for i in range(len(matches))]  # type: ignore[misc]
    for i, rec in zip(resumed.todo, fresh):
        records[i] = rec
    to_row = files.single_row if kind == "single" else files.pair_row
    files.append_rows(path, (to_row(r, judge_model) for r in fresh if not _failed(r)))  # type: ignore[arg-type]
    rows = [r for _, r in files.read_rows(path, kind)]

    models = inputs.models
    summary: dict[str, Any] = {
        "benchmark": "mt_bench", "mode": mode, "baseline": baseline,
        "judge": {**backend.signature(), "name": judge_model},
        "files": {"questions": _hash(inputs.question_path), "judge_prompts": _hash(inputs.prompts_path),
                  "reference_answers": _hash(inputs.reference_path),
                  "answers": {m: _hash(p) for m, p in inputs.answer_paths.items()}, "judgments": str(path)},
        "questions": len(inputs.questions), "models": models,
        "counts": {"matches": len(matches), "reused": len(resumed.done), "judged": len(fresh),
                   "judge_calls": sum(2 if isinstance(m, PairMatch) else 1 for m in (matches[i] for i in resumed.todo)),
                   "valid": sum(1 for r in records if r.valid),
                   "invalid": sum(1 for r in records if not r.valid and not _failed(r)),
                   "failed": sum(1 for r in records if _failed(r)), "stale": resumed.stale},
    }
    if kind == "single":
        summary["fastchat"] = {"single": files.single_table(rows)}
        summary["stats"] = single_stats([r for r in records if isinstance(r, SingleJudgment)], models)
    else:
        summary["fastchat"] = {"pairwise": files.pairwise_table(rows, baseline)}
        summary["stats"] = pair_stats([r for r in records if isinstance(r, PairJudgment)], models, baseline)
    summary["invalid"] = [_invalid_entry(r) for r in records if not r.valid]
    if inputs.unjudged:
        summary["unjudged_turns"] = {"note": unjudged_note(inputs.unjudged),
                                     "questions": {str(q): n for q, n in inputs.unjudged.items()}}
    write_run_log(out_dir, [MtBenchSummary.from_dict(summary, file=files.summary_file(Path()))])
    return RunResult(records, summary, path, matches)
