"""An MT-bench run said in a config file instead of flags: `eval.py mt-bench --config C.yaml`.

    mt_bench:
      data: ../shared/data/fastchat_mt_bench/fastchat/llm_judge/data/mt_bench
      answers: [model_answer/vicuna-13b-v1.3.jsonl, model_answer/gpt-3.5-turbo.jsonl]
      mode: single                  # single | pairwise-baseline | pairwise-all
      baseline: null                # pairwise-baseline only (default gpt-3.5-turbo, as FastChat)
      judge_prompts: null           # default: <data>/../judge_prompts.jsonl
      limit: null                   # only the first N questions of each category
      judge_check: null             # N: the label-free judge check on N of the run's judged turns
    judge: {backend: openai, model: gpt-4, base_url: http://127.0.0.1:8000/v1}
    save_path: results/mt_bench

The same keys as the command line's flags (and `--judge-config`'s `judge:` block); relative paths are
relative to the config file. Checked when read, every problem with its key path and the file.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ...backends.options import JudgeOptions
from ...backends.preflight import check_model
from ...core.errors import InputError
from ...core.io import read_structured
from ...core.options import option, parse_options
from ...core.registry import suggest

TOP_KEYS = ("mt_bench", "judge", "save_path")


@dataclass
class MtBenchOptions:
    data: str | None = option(None, "FastChat's data/mt_bench folder (question.jsonl, reference_answer/)",
                              nonempty=True)
    answers: list[str] | None = option(None, "model_answer/<model>.jsonl files; the file name names the model")
    mode: Literal["single", "pairwise-baseline", "pairwise-all"] | None = option(
        None, "single, pairwise-baseline or pairwise-all")
    baseline: str | None = option(None, "pairwise-baseline: the baseline model (default gpt-3.5-turbo)", nonempty=True)
    judge_prompts: str | None = option(None, "judge_prompts.jsonl (default: <data>/../judge_prompts.jsonl)",
                                       nonempty=True)
    limit: int | None = option(None, "only the first N questions of each category", min=1)
    judge_check: int | None = option(None, "the label-free judge check on N of the run's judged turns", min=1)

    def problems(self) -> list[tuple[str, str]]:
        out = []
        if self.answers is not None and not self.answers:
            out.append(("answers", "expected at least one answer file"))
        if self.answers and any(not a.strip() for a in self.answers):
            out.append(("answers", "an empty path in the list"))
        return out


@dataclass
class MtBenchConfig:
    source: Path
    options: MtBenchOptions
    judge: JudgeOptions | None
    save_path: Path | None

    def path(self, value: str | None) -> Path | None:
        """A path of the config, relative to the config file's folder."""
        if value is None:
            return None
        p = Path(value).expanduser()
        return p if p.is_absolute() else self.source.parent / p


def load_config(path: Path) -> MtBenchConfig:
    """Read and check a config file; one InputError lists every problem, each with the file and key path."""
    path = Path(path)
    raw = read_structured(path, "MT-bench config")
    if not isinstance(raw, dict):
        raise InputError(f"{path}: expected a mapping with an mt_bench: block (data, answers, mode, ...), "
                         f"a judge: block and save_path")
    problems = [f'{path}: (top level): unknown key "{k}"{suggest(str(k), list(TOP_KEYS))} (known: '
                f'{", ".join(TOP_KEYS)})' for k in raw if k not in TOP_KEYS]
    if "mt_bench" not in raw:
        problems.append(f"{path}: mt_bench: missing (data, answers, mode, ...)")
    opts, more = parse_options(MtBenchOptions, raw.get("mt_bench"), f"{path}: mt_bench")
    problems += more
    judge = None
    if isinstance(raw.get("judge"), list):
        problems.append(f"{path}: judge: is a panel of {len(raw['judge'])} judges; eval.py mt-bench takes one judge: "
                        "write judge: as one block (backend, model, base_url, ...), one MT-bench run per judge; a "
                        "panel is taken by eval.py run")
    elif "judge" in raw:
        judge, more = parse_options(JudgeOptions, raw["judge"], f"{path}: judge")
        problems += more
    save = raw.get("save_path")
    if save is not None and (not isinstance(save, str) or not save.strip()):
        problems.append(f"{path}: save_path: expected a folder path (a string), got {save!r}")
        save = None
    if problems:
        raise InputError("; ".join(problems))
    if judge is not None:
        check_model(judge, [Path(path).resolve().parent], f"{path}: judge.model")
    cfg = MtBenchConfig(path, opts, judge, None)
    cfg.save_path = cfg.path(save)
    return cfg


def config_dict(data: Path, answers: list[Path], mode: str, baseline: str | None, judge_prompts: Path | None,
                limit: int | None, judge_check: int | None, save_path: Path, judge: dict[str, Any]) -> dict[str, Any]:
    """The effective run, as a manifest records it (the config form and the flags give the same)."""
    return {"mt_bench": {"data": str(data), "answers": [str(a) for a in answers], "mode": mode, "baseline": baseline,
                         "judge_prompts": str(judge_prompts) if judge_prompts else None, "limit": limit,
                         "judge_check": judge_check},
            "judge": judge, "save_path": str(save_path)}
