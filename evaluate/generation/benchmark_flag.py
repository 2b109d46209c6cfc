"""`--generate NAME=MODEL.yaml` (repeatable) for the benchmark commands: one command from a model to a
leaderboard row.

Each NAME's model answers the benchmark's questions (MT-bench: DATA/question.jsonl; Arena-Hard:
BENCH/question.jsonl; AlpacaEval: the reference outputs' instructions) into the save path, in the
benchmark's own answer format, and the command then judges that file like any other:

    mt-bench      OUT/model_answer/NAME.jsonl     appended to --answers
    arena-hard    OUT/model_answer/NAME.jsonl     added to --model
    alpaca-eval   OUT/model_outputs/NAME.json     appended to --model-outputs

Only the questions the command's --limit selects are asked. With --dry-run nothing is sent: the
requests still to send (after the cache) are counted and the judge's dry run reads stand-in answers.
"""

from __future__ import annotations

import argparse
import atexit
import shutil
import sys
import tempfile
from pathlib import Path

from ..core.errors import InputError
from ..savepath.layout import generated_answer_file
from .formats import QuestionFile, answer_rows, question_format, read_questions, serialise
from .options import load_model_config
from .produce import generate_answers



def add_generate_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--generate", action="append", default=[], metavar="NAME=MODEL.yaml",
                        help="first generate NAME's answers with the model config MODEL.yaml (a model: block) into "
                             "the save path, then judge them (repeatable)")


def _specs(values: list[str]) -> list[tuple[str, Path]]:
    out: dict[str, Path] = {}
    for v in values:
        name, sep, path = v.partition("=")
        if not sep or not name.strip() or not path.strip():
            raise InputError(f"--generate {v}: expected NAME=MODEL.yaml (a model name and a model config file)")
        if name in out:
            raise InputError(f"--generate: {name} is given twice")
        out[name.strip()] = Path(path.strip())
    return list(out.items())


def _select(qf: QuestionFile, kind: str, limit: int | None) -> QuestionFile:
    """The questions the benchmark command will judge: the first `limit` of each category where the kind
    says so (MT-bench), else the first `limit`."""
    if not limit:
        return qf
    if question_format(kind).per_category_limit:
        seen: dict[str, int] = {}
        keep = []
        for q in qf.questions:
            seen[q.category] = seen.get(q.category, 0) + 1
            if seen[q.category] <= limit:
                keep.append(q)
    else:
        keep = qf.questions[:limit]
    return QuestionFile(qf.path, qf.kind, keep, qf.jsonl)


def generate_for_benchmark(args: argparse.Namespace, kind: str, questions_path: Path, answers_dir: Path) -> int:
    """Generate the answers of every --generate model and add them to the command's answers (`args`
    changed in place; `args.generated` maps each name to its file). Returns 0, or 3 when the model's
    server is unreachable or an answer is missing (the command must stop: nothing is judged).
    InputError (exit 2, nothing sent) on a bad flag, model config or question file."""
    attr, what = question_format(kind).answers_flag
    specs = _specs(getattr(args, "generate", None) or [])
    args.generated = {}
    if specs:
        configs = [(name, load_model_config(path)) for name, path in specs]  # all checked before any is asked
        qf = _select(read_questions(Path(questions_path)), kind, getattr(args, "limit", None))
        if qf.kind != kind:
            raise InputError(f"{questions_path}: {qf.kind} questions, but {kind} needs its own")
        stand_ins = None
        for name, opts in configs:
            out = generated_answer_file(answers_dir, name, question_format(kind).extension)
            report = generate_answers(qf, opts, out, name=name, dry_run=bool(getattr(args, "dry_run", False)),
                                      save_path=getattr(args, "save_path", None))
            for line in report.lines():
                print(line, file=sys.stderr)
            if report.code:
                print(f"exit {report.code}: {name}: {report.why()}; nothing was judged", file=sys.stderr)
                return report.code
            if report.estimate is not None and not out.is_file():  # a dry run: the judge counts stand-ins
                stand_ins = stand_ins or _temp_dir()
                out = stand_ins / out.name
                fake = {q.id: ["(to be generated)"] * len(q.turns) for q in qf.questions}
                out.write_text(serialise(kind, answer_rows(qf, fake, name), out), encoding="utf-8")
            args.generated[name] = out
            current = list(getattr(args, attr, None) or [])
            setattr(args, attr, current + [out if what == "path" else name])
    if not getattr(args, attr, None):
        flag = "--" + attr.replace("_", "-")
        raise InputError(f"{flag}: give at least one (or --generate NAME=MODEL.yaml)")
    return 0


def _temp_dir() -> Path:
    path = Path(tempfile.mkdtemp(prefix="eval-generate-"))
    atexit.register(shutil.rmtree, path, True)
    return path
