"""lm-evaluation-harness `--log_samples` output (`samples_<task>_<date>.jsonl`) as answer records
and Harness scores.

lm-eval writes one JSON line per document and filter: `doc_id`, `doc` (the dataset row), `target`,
`arguments` (the requests sent: `gen_args_<k>` with the prompt `arg_0` and, for log-likelihood
requests, the continuation `arg_1`), `resps` (the model's raw responses), `filtered_resps` (after the
task's filters), `filter`, `metrics` (the metric names) and each metric's value under its own name.
Beside it, `results_<date>.json` (same date) names the model, lm-eval's version and the task's
version; it is read where present.

Each document is one record: its id is `doc_id`, its category the task, its instruction the prompt
(`arguments.gen_args_0.arg_0`), its output the filtered response (a multiple-choice request: the
continuation with the highest log-likelihood), its target the `target` (a choice index: that
choice's text). Scores are the per-document metric values; with several filters, one score per
metric and filter (`<metric>:<filter>`). A metric whose per-document value is not a number (lm-eval's
corpus-level BLEU and chrF keep `[reference, prediction]` per document) is no per-item score: it is
left out and the plan says so. A line without `doc_id` is refused.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

from ..core.errors import InputError
from ..core.io import parse_jsonl, read_text
from ..core.records import Record
from .base import HARNESS_KEY, HarnessFile, HarnessScores, score_value

NAME = re.compile(r"^samples_(?P<task>.+)_(?P<date>\d{4}-\d{2}-\d{2}T[\d.\-]+)\.jsonl$")


def looks_like(path: Path, head: str) -> bool:
    """A `samples_*.jsonl` file whose first line is an lm-eval sample."""
    first = head.lstrip().split("\n", 1)[0]
    return path.suffix.lower() == ".jsonl" and '"doc_id"' in first and ('"resps"' in first or '"doc"' in first)


def _results_beside(path: Path) -> tuple[dict[str, Any], Path | None]:
    """The `results_<date>.json` lm-eval wrote beside the samples file (empty when absent or unreadable)."""
    m = NAME.match(path.name)
    if not m:
        return {}, None
    beside = path.with_name(f"results_{m.group('date')}.json")
    try:
        data = json.loads(beside.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}, None
    return (data, beside) if isinstance(data, dict) else ({}, None)


def read(path: Path) -> HarnessFile:
    """The samples file at `path` as one model's records (InputError naming the file and the line)."""
    rows = parse_jsonl(read_text(path, "answer"), path, "; expected lm-eval's --log_samples JSON Lines")
    if not rows:
        raise InputError(f"{path}: no samples; expected lm-eval's --log_samples output, one JSON object per line")
    m = NAME.match(path.name)
    results, beside = _results_beside(path)
    task = m.group("task") if m else path.stem
    filters = list(dict.fromkeys(str(obj.get("filter", "none")) for _, obj in rows if isinstance(obj, dict)))
    by_doc: dict[str, list[tuple[int, dict[str, Any]]]] = {}
    for n, obj in rows:
        if not isinstance(obj, dict):
            raise InputError(f"{path}: line {n}: expected an object (an lm-eval sample), got {type(obj).__name__}")
        if "doc_id" not in obj or obj["doc_id"] is None or isinstance(obj["doc_id"], bool):
            raise InputError(f"{path}: line {n}: no doc_id; expected every sample to carry lm-eval's doc_id, so "
                             "that two models' samples pair by document")
        by_doc.setdefault(str(obj["doc_id"]), []).append((n, obj))
    notes: list[str] = []
    skipped: set[str] = set()
    records = [_record(path, doc, lines, task, filters, skipped) for doc, lines in by_doc.items()]
    if skipped:
        notes.append(f"not per-item scores (corpus-level in lm-eval), left out: {', '.join(sorted(skipped))}")
    version = str(results.get("lm_eval_version") or "unknown")
    model = str(results.get("model_name") or "").strip() or path.parent.name or path.stem
    metrics = sorted({k for r in records for k in (*r.extra[HARNESS_KEY].scores, *r.extra[HARNESS_KEY].invalid)})
    task_version = (results.get("versions") or {}).get(task)
    scorers = {k: {"filter": k.split(":", 1)[1] if ":" in k else filters[0],
                   **({"task_version": task_version} if task_version is not None else {})} for k in metrics}
    if beside is None:
        notes.append("no results_*.json beside it: lm-eval's version is unknown")
    return HarnessFile(path=path, format="lm-eval", harness="lm-eval", version=version, task=task,
                       models={model: records}, scorers=scorers, notes=notes)


def _choice(obj: dict[str, Any], index: Any) -> str | None:
    """The continuation text of request `index` (a multiple-choice task's choice)."""
    args = (obj.get("arguments") or {}).get(f"gen_args_{index}")
    cont = args.get("arg_1") if isinstance(args, dict) else None
    return cont.strip() if isinstance(cont, str) else None


def _output(obj: dict[str, Any]) -> str:
    """The filtered response; for log-likelihood requests, the continuation the model scored highest."""
    got = obj.get("filtered_resps")
    if isinstance(got, list) and got:
        first = got[0]
        if isinstance(first, str):
            return first
        if isinstance(first, list) and first and isinstance(first[0], str):
            return first[0]
        lls = [g[0] if isinstance(g, list) and g else g for g in got]
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in lls):
            best = max(range(len(lls)), key=lambda k: lls[k])
            return _choice(obj, best) if len(lls) > 1 and _choice(obj, best) is not None else json.dumps(got)
    resps = obj.get("resps")
    return json.dumps(resps, ensure_ascii=False) if resps is not None else ""


def _target(obj: dict[str, Any]) -> tuple[str, ...]:
    t = obj.get("target")
    if isinstance(t, int) and not isinstance(t, bool) and _choice(obj, t) is not None:
        return (_choice(obj, t),)  # type: ignore[return-value]
    if isinstance(t, list):
        return tuple(str(v) for v in t if str(v).strip())
    return (str(t),) if t is not None and str(t).strip() else ()


def _record(path: Path, doc: str, lines: list[tuple[int, dict[str, Any]]], task: str, filters: list[str],
            skipped: set[str]) -> Record:
    n, first = lines[0]
    prompt = (first.get("arguments") or {}).get("gen_args_0", {})
    prompt = prompt.get("arg_0") if isinstance(prompt, dict) else None
    fingerprint = first.get("doc_hash") or hashlib.sha256(
        json.dumps(first.get("doc"), sort_keys=True, ensure_ascii=False, default=str).encode()).hexdigest()
    hs = HarnessScores(sample=doc, fingerprint=str(fingerprint))
    for n, obj in lines:
        filt = str(obj.get("filter", "none"))
        for metric in obj.get("metrics") or []:
            name = str(metric) if len(filters) == 1 else f"{metric}:{filt}"
            if metric not in obj:
                hs.invalid[name] = (f"lm-eval's {metric}: no value on line {n}", "")
                continue
            value = obj[metric]
            if isinstance(value, (list, dict)):
                skipped.add(str(metric))
                continue
            number, why = score_value(value)
            if number is None:
                hs.invalid[name] = (f"lm-eval's {metric}: {why}", json.dumps(value, default=str))
            else:
                hs.scores[name] = number
            hs.details[name] = {"filter": filt, "filtered_response": obj.get("filtered_resps"),
                                "response": obj.get("resps")}  # what the model wrote, before the filter
    return Record(id=doc, category=task, instruction=prompt if isinstance(prompt, str) else json.dumps(first.get("doc")),
                  output=_output(first), targets=_target(first),
                  extra={HARNESS_KEY: hs})
