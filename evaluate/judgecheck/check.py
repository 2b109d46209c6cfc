"""Run the judge check of a config's judge and prompts, store it and print its report."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Callable

from ..core.errors import InputError
from ..core.io import atomic_write_json
from .store import judge_identity, save_check
from ..savepath.layout import judge_check_file
from .labelled import labelled_check
from .report import format_report
from .sanity import sanity_check


def has_gpt_work(cfg: Any) -> bool:
    """Whether the config lists GPT metrics for any category (what the label-free check judges)."""
    return any((entry or {}).get("GPT") for entry in cfg.categories.values())


def check_config(cfg: Any, judges: Any, *, data: Path | None = None, limit: int | None = None, seed: int = 0,
                 log: Callable[[str], None] = lambda s: print(s, file=sys.stderr),
                 output: Path | None = None) -> dict[str, Any]:
    """Run the check of `cfg`'s judge and prompts through `judges` (a JudgePool: a run that checks its
    judge first shares its loaded models and caches), store it, print the report; returns the record."""
    judge, prompts, key = judge_identity(cfg, judges)
    labelled = sanity = None
    if data is not None:
        if not data.exists():
            raise InputError(f"--data {data}: no such file")
        labelled = labelled_check(cfg, judges, data, limit=limit, seed=seed, log=log)
    else:
        sanity = sanity_check(cfg, judges, limit=limit, seed=seed, log=log)
    record, path = save_check(cfg.save_path, key, judge, prompts, labelled, sanity)
    print(format_report(record, labelled, sanity), flush=True)
    log(f"judge check: {path} (and {judge_check_file(cfg.save_path)})")
    if output is not None:
        atomic_write_json(output, record)
    return record


