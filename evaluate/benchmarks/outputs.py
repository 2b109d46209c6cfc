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

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

from ..backends.cache import VOLATILE_FIELDS
from ..core.clock import utc_now
from ..pipeline.config import scrubbed_judge
from ..pipeline.outputs import write_outputs
from ..pipeline.savedir import SaveDir
from ..savepath import layout
from ..savepath.log import RunLog
from ..savepath.manifest import new_manifest
from .tables import JUDGE_CHECK_SCOPE, stored_judge_check


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
                "verdict": f"no check of judge {judge.get('model')} stored in {layout.judge_checks_dir(save_path)}; "
                           "`eval.py judge-check --config CFG` with this judge and this save_path stores one"}
    rec, path = found
    return {"checked": True, "trustworthy": rec.get("trustworthy"), "verdict": rec.get("verdict_text"),
            "created": rec.get("created"), "key": rec.get("key"),
            "file": str(layout.judge_check_file(Path(""), path.stem)), "scope": JUDGE_CHECK_SCOPE}


def write_run(save: SaveDir, *, benchmark: str, family: str, judge_opts: Any, judge: dict[str, Any],
              usage: dict[str, Any] | None, errors: list[dict[str, Any]], charts: bool = True) -> RunLog:
    """The manifest of a benchmark run (the one builder: `save.header`'s `models`, block, and `config` /
    `judge_check` when the benchmark gives its own, else the judge block and the stored check of this
    judge), the judge check stamped on its scores and battles, then every output through write_outputs
    (results, battles, summary.csv, comparisons, charts, report.html, manifest). Returns the run's log
    (its manifest's `outputs_files` names the files, `errors` what failed)."""
    fields = dict(save.header)
    models = fields.pop("models", [])
    config = fields.pop("config", None) or {"judge": scrubbed_judge(judge_opts)}
    check = fields.pop("judge_check", None) or judge_check(save.path, judge)
    # the effective config's hash, as a run's (issue 39: an MT-bench report's Run block said "sha256 –")
    config_hash = fields.pop("config_hash", None) or hashlib.sha256(
        json.dumps(config, sort_keys=True, ensure_ascii=False, default=str).encode()).hexdigest()
    manifest = new_manifest(run_id=save.run_id, status="finished with errors" if errors else "ok",
                            first={"benchmark": benchmark}, config=config, config_hash=config_hash,
                            started=save.started,
                            finished=utc_now(), models=models, errors=errors,
                            usage={family: usage} if usage else {}, judge_check=check, **fields)
    save.include_earlier()
    said = ("trustworthy", "verdict", "scope" if "scope" in check else "key")  # the stored check's, or the run's own
    save.stamp(f"{family}/", "judge_check", {k: check.get(k) for k in said})
    log = write_outputs(save, manifest, run_id=save.run_id, charts=charts) or RunLog(path=save.path)
    for e in manifest["errors"][len(errors):]:  # a view that could not be written (the report, a chart)
        print(f"warning: {e.get('error')}", file=sys.stderr)
    log.manifest = json.loads(json.dumps(manifest, default=str))  # as written: its files, every error
    return log
