"""A run's `answers:` entries that name a model instead of a file:

    answers:
      - {name: model_a, path: answers_a.json}
      - {name: model_c, generate: model_c.yaml}                  # a model config file (a model: block)
      - {name: model_d, generate: {backend: openai, base_url: ..., model: ...}, questions: targets.json}

Before the run scores anything, each such model answers the run's questions (`questions:`, else the
target file, else the first answer file's records) into `<save_path>/answers/<name>.json`, beside
its generation signature (`<name>.json.generation.json`), through the same request pool, probe,
retries and cache as the judge; then its file is scored like any other. Answers the cache holds cost
nothing, so a second run sends nothing. When any answer is missing after its retries, the run stops
with exit 3 before scoring (a missing answer is never scored as text).
"""

from __future__ import annotations

import contextlib
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

from ..core.errors import InputError
from ..savepath.layout import answers_file
from .formats import QuestionFile, answer_rows, read_questions, serialise
from .options import load_model_config, parse_model_block
from .produce import Report, generate_answers

@dataclass
class Generated:
    """One entry to generate: where its answers go, the model, the questions."""

    entry: Any  # pipeline.config.AnswerFile
    opts: Any  # ModelOptions
    questions: QuestionFile


def answer_path(save_path: Path, name: str) -> Path:
    """The save path's file of a generated model's answers (the run reads the project's format: .json)."""
    return answers_file(save_path, name, "json")


def _questions_path(cfg: Any, entry: Any) -> Path:
    if entry.questions is not None:
        return entry.questions
    if cfg.target_file is not None:
        return cfg.target_file
    files = [a.path for a in cfg.answers if a.generate is None]
    if files:
        return files[0]
    raise InputError(f"answers: {entry.name}: generate: no questions to ask: give questions: FILE in the entry, "
                     "a target_file, or at least one answer file")


def check(cfg: Any) -> list[Generated]:
    """Every generated entry's model config and questions, checked (InputError: exit 2, nothing sent);
    each entry's path set to its file in the save path."""
    out = []
    for entry in cfg.answers:
        if entry.generate is None:
            continue
        where = f"{cfg.source or 'config'}: answers ({entry.name}): generate"
        opts = (load_model_config(entry.generate) if isinstance(entry.generate, Path)
                else parse_model_block(entry.generate, where, cfg.source.resolve().parent if cfg.source else None))
        qf = read_questions(_questions_path(cfg, entry))
        if qf.kind != "target":
            raise InputError(f"{qf.path}: {qf.kind} questions; a run's generated answers need this project's target "
                             "records {id, category, instruction, input} (use the benchmark command's --generate "
                             f"for {qf.kind})")
        entry.path = answer_path(cfg.save_path, entry.name)
        out.append(Generated(entry, opts, qf))
    return out


def generate_for_run(cfg: Any, *, dry_run: bool = False,
                     log: Callable[[str], None] = lambda s: print(s, file=sys.stderr)) -> tuple[int, str, list[Report]]:
    """Generate what the run's generated entries still miss. Returns (exit code, why, reports): 3 when an
    answer is missing or the server is unreachable (the run must not score), else 0. A dry run counts
    the requests (after the cache) and sends nothing."""
    reports = []
    for g in check(cfg):
        report = generate_answers(g.questions, g.opts, g.entry.path, name=g.entry.name, dry_run=dry_run,
                                  api_key=None, log=log, save_path=cfg.save_path)
        for line in report.lines():
            print(line)
        reports.append(report)
        if report.code:
            return report.code, f"answers of {g.entry.name}: {report.why()}; nothing was scored", reports
    return 0, "", reports


@contextlib.contextmanager
def placeholders(cfg: Any) -> Iterator[None]:
    """For a plan before generation (a dry run, the check of several configs): each generated entry whose
    file is not there yet reads a stand-in with a placeholder answer per question (never scored)."""
    tmp = None
    saved: list[tuple[Any, Path]] = []
    try:
        for g in check(cfg):
            if g.entry.path.is_file():
                continue
            tmp = tmp or Path(tempfile.mkdtemp(prefix="eval-generate-"))
            stand_in = tmp / g.entry.path.name
            fake = {q.id: ["(to be generated)"] * len(q.turns) for q in g.questions.questions}
            stand_in.write_text(serialise("target", answer_rows(g.questions, fake, g.entry.name), stand_in),
                                encoding="utf-8")
            saved.append((g.entry, g.entry.path))
            g.entry.path = stand_in
        yield
    finally:
        for entry, path in saved:
            entry.path = path
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
