"""FastChat's layout of a benchmark run, which MT-bench and Arena-Hard both keep in the save path:
`model_answer/<model>.jsonl` (the answers, generated ones too) and `model_judgment/` (the judge's verdicts,
each benchmark in its own shape: see its `files.py`)."""

from __future__ import annotations

from pathlib import Path

from ..savepath.layout import BENCHMARK_RUN_FOLDERS, generated_answer_file

ANSWERS = "model_answer"
JUDGMENTS = "model_judgment"
# what `--save_path` must be able to hold (a folder that exists as a file is refused before any work)
FOLDERS = (JUDGMENTS, ANSWERS, *BENCHMARK_RUN_FOLDERS)


def model_answer_dir(root: Path) -> Path:
    """`model_answer/`: one `<model>.jsonl` per model (generated ones too)."""
    return Path(root) / ANSWERS


def model_answer_file(root: Path, model: str) -> Path:
    return generated_answer_file(model_answer_dir(root), model, "jsonl")


def model_judgment_dir(root: Path) -> Path:
    return Path(root) / JUDGMENTS
