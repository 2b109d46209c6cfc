"""What the benchmark commands (`eval.py alpaca-eval`, `eval.py arena-hard`) share when they leave the
project's own outputs beside the benchmark's files: the run's manifest, the judge check that belongs
to the run's judge, and the `benchmark` block of a battle file.

A battle file may carry a block with the benchmark's own numbers, which the project's battle summary
cannot express (AlpacaEval's probability-weighted and length-controlled win rates, Arena-Hard's score
and style-controlled score with their 90% intervals)::

    "benchmark": {"name": "Arena-Hard", "model": "m", "baseline": "b", "note": "...",
                  "rows": [{"label", "value", "interval", "level", "digits", "note"}, ...]}

Every number is the model's (never flipped when the pair is read the other way round); `digits` is
how many decimals the benchmark's own table prints, so the report shows the same figures. The report
renders the rows in the battle's section; `eval.py summary` prints them.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from ..backends.cache import VOLATILE_FIELDS
from .tables import JUDGE_CHECK_SCOPE, stored_judge_check
from ..core.clock import utc_now
from ..core.secrets import scrub_argv
from ..savepath import manifest as savepath_manifest
from ..pipeline.config import scrubbed_judge
from ..pipeline.outputs import write_outputs
from ..pipeline.savedir import SaveDir


def judge_signature(signature: dict[str, Any]) -> dict[str, Any]:
    """The backend's signature without what never changes a reply (server URL, concurrency, timeouts)."""
    return {k: v for k, v in signature.items() if k not in VOLATILE_FIELDS}


def row(label: str, value: Any, *, interval: list[float] | None = None, level: float | None = None,
        digits: int = 2, note: str = "") -> dict[str, Any]:
    """One number of a benchmark block."""
    return {"label": label, "value": value, "interval": interval, "level": level, "digits": digits, "note": note}


def block(name: str, model: str, baseline: str, rows: list[dict[str, Any]], note: str = "") -> dict[str, Any]:
    return {"name": name, "model": model, "baseline": baseline, "rows": rows, "note": note}


def judge_check(save_path: Path, judge: dict[str, Any]) -> dict[str, Any]:
    """The stored check of this judge (matched as the terminal matches it: backend, model, weights),
    in the manifest's short form; `scope` says that it checked the judge with the project's prompts."""
    found = stored_judge_check(save_path, judge)
    if found is None:
        return {"checked": False, "trustworthy": None, "scope": JUDGE_CHECK_SCOPE,
                "verdict": f"no check of judge {judge.get('model')} stored in {Path(save_path) / 'judge_checks'}; "
                           "`eval.py judge-check --config CFG` with this judge and this save_path stores one"}
    rec, path = found
    return {"checked": True, "trustworthy": rec.get("trustworthy"), "verdict": rec.get("verdict_text"),
            "created": rec.get("created"), "key": rec.get("key"), "file": str(Path("judge_checks") / path.name),
            "scope": JUDGE_CHECK_SCOPE}


def new_run_id() -> str:
    return savepath_manifest.new_run_id()


def write_run(save: SaveDir, *, benchmark: str, family: str, run_id: str, started: str, judge_opts: Any,
              judge: dict[str, Any], usage: dict[str, Any] | None, models: list[dict[str, Any]],
              errors: list[dict[str, Any]], extra: dict[str, Any] | None = None, charts: bool = True,
              ) -> dict[str, Any]:
    """The manifest of a benchmark run, the judge check stamped on its scores and battles, then every
    output through write_outputs (results, battles, summary.csv, comparisons, charts, report.html,
    manifest). Returns the manifest as written (`outputs_files` names the files, `errors` what failed)."""
    check = judge_check(save.path, judge)
    manifest: dict[str, Any] = {
        "run_id": run_id, "status": "finished with errors" if errors else "ok", "benchmark": benchmark,
        "config": {"judge": scrubbed_judge(judge_opts)}, "argv": scrub_argv(sys.argv),
        "versions": savepath_manifest.versions(), "started": started,
        "finished": utc_now(),
        "models": models, "usage": {family: usage} if usage else {}, "errors": list(errors),
        "judge_check": check, **(extra or {}),
    }
    save.include_earlier()
    save.stamp(f"{family}/", "judge_check", {k: check.get(k) for k in ("trustworthy", "verdict", "scope")})
    write_outputs(save, manifest, run_id=run_id, charts=charts)
    for e in manifest["errors"][len(errors):]:  # a view that could not be written (the report, a chart)
        print(f"warning: {e.get('error')}", file=sys.stderr)
    return manifest
