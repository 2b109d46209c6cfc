"""Inspect AI eval logs (`.eval` and `.json`) as answer records and Harness scores.

Read with Inspect's own reader (`inspect_ai.log.read_eval_log`) where `inspect-ai` is installed,
else from the documented format: a `.json` log is one object (`version`, `status`, `eval`, `results`,
`samples`); an `.eval` log is a zip archive with `header.json` (the same object without samples) and
one `samples/<id>_epoch_<n>.json` per sample and epoch. Both ways give the same dicts below.

Each sample and epoch is one record: its id is the sample's id (with `_epoch_<n>` where the log has
several epochs, as Inspect names the sample files), its category the task, its instruction the
input (a chat input as its messages' text), its output the model's completion, its targets the
sample's target; its scores are the scorers' values (a dict value gives one score per key,
`<scorer>.<key>`). A log whose status is not "success" is refused (its samples are not all there:
`inspect eval-retry` completes it), and so is a sample without an id.
"""

from __future__ import annotations

import hashlib
import json
import zipfile
from pathlib import Path
from typing import Any

from ..core.errors import InputError
from ..core.records import Record
from .base import HARNESS_KEY, HarnessFile, HarnessScores, score_value, text_of

SAMPLE_FIELDS = {"id", "epoch", "input", "target", "output", "scores", "error", "metadata"}


def read(path: Path) -> HarnessFile:
    """The log at `path` as one model's records (InputError naming the file and the sample)."""
    log = _load(path)
    status = log.get("status")
    ev = log.get("eval") or {}
    if status != "success":
        err = (log.get("error") or {}).get("message") if isinstance(log.get("error"), dict) else None
        raise InputError(f"{path}: the Inspect log's status is {status!r}{f' ({err})' if err else ''}; expected "
                         "\"success\": an unfinished or failed eval lacks samples (complete it with `inspect "
                         "eval-retry`, then read the new log)")
    samples = log.get("samples")
    if not isinstance(samples, list) or not samples:
        raise InputError(f"{path}: the Inspect log holds no samples; expected the samples of a finished eval "
                         "(was it run with --no-log-samples?)")
    task = str(ev.get("task") or "").strip() or path.stem
    model = str(ev.get("model") or "").strip() or path.stem
    version = str((ev.get("packages") or {}).get("inspect_ai") or "unknown")
    scorers = _scorers(log)
    epochs = max(int(s.get("epoch") or 1) for s in samples if isinstance(s, dict)) if samples else 1
    records = [_record(path, i, s, task, epochs > 1) for i, s in enumerate(samples)]
    return HarnessFile(path=path, format="inspect", harness="inspect_ai", version=version, task=task,
                       models={model: records}, epochs=epochs, scorers=scorers)


def looks_like(path: Path, head: str) -> bool:
    """An `.eval` file, or a `.json` file whose first keys are an Inspect log's."""
    if path.suffix.lower() == ".eval":
        return True
    return path.suffix.lower() == ".json" and head.lstrip().startswith("{") and '"eval"' in head and \
        ('"status"' in head or '"version"' in head) and '"evalId"' not in head


def _load(path: Path) -> dict[str, Any]:
    """The log as a dict: Inspect's reader where installed, else the documented format."""
    try:
        from inspect_ai.log import read_eval_log
    except ImportError:
        return _load_documented(path)
    try:
        log = read_eval_log(str(path))
    except FileNotFoundError:
        raise InputError(f"{path}: answer file not found") from None
    except Exception as exc:  # Inspect's reader raises what the zip, JSON or pydantic layer raises
        raise InputError(_invalid(path, exc) if callable(getattr(exc, "errors", None)) else _unreadable(path, exc)) \
            from None
    out = log.model_dump(mode="json", exclude_none=True, include={"version", "status", "eval", "results", "error"})
    out["samples"] = [s.model_dump(mode="json", exclude_none=True, include=SAMPLE_FIELDS) for s in log.samples or []]
    return out


def _load_documented(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise InputError(f"{path}: answer file not found")
    try:
        if path.suffix.lower() != ".eval":
            return json.loads(path.read_text(encoding="utf-8"))
        with zipfile.ZipFile(path) as z:
            names = z.namelist()
            if "header.json" not in names:
                raise InputError(f"{path}: the .eval archive has no header.json; expected a finished Inspect log "
                                 "(an eval still running, or interrupted, writes it last)")
            log = json.loads(z.read("header.json"))
            log["samples"] = [json.loads(z.read(n)) for n in names if n.startswith("samples/") and n.endswith(".json")]
            return log
    except InputError:
        raise
    except Exception as exc:
        raise InputError(_unreadable(path, exc)) from None


def _unreadable(path: Path, exc: Exception) -> str:
    what = ("a complete zip archive (header.json and samples/)" if path.suffix.lower() == ".eval"
            else "one JSON object (version, status, eval, results, samples)")
    return (f"{path}: cannot be read as an Inspect log ({type(exc).__name__}: {str(exc)[:200]}); expected {what}: "
            "is the file truncated, or still being written?")


def _invalid(path: Path, exc: Any) -> str:
    """Inspect's validation errors (pydantic's) in words: which sample, which field, what is wrong."""
    parts = []
    for err in exc.errors()[:3]:
        loc = list(err.get("loc") or ())
        where = ""
        if len(loc) >= 2 and loc[0] == "samples" and isinstance(loc[1], int):
            where, loc = f"sample {loc[1] + 1}: ", loc[2:]
        field = ".".join(map(str, loc)) or "(the log)"
        what = f"no {field}" if err.get("type") == "missing" else f"{field}: {err.get('msg')}"
        parts.append(where + what)
    return (f"{path}: not a valid Inspect log ({'; '.join(parts)}); expected every sample to carry the id, epoch, "
            "input and scores Inspect writes, so that two models' logs pair by sample")


def _scorers(log: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Score name -> the scorer's options, from the eval's scorer list (older logs: the results' scores)."""
    out: dict[str, dict[str, Any]] = {}
    for sc in (log.get("eval") or {}).get("scorers") or []:
        if isinstance(sc, dict) and sc.get("name"):
            out[str(sc["name"])] = dict(sc.get("options") or {})
    for sc in (log.get("results") or {}).get("scores") or []:
        if isinstance(sc, dict) and sc.get("name") and str(sc["name"]) not in out:
            out[str(sc["name"])] = dict(sc.get("params") or {})
    return out


def _input_text(value: Any) -> str:
    """A sample's input as text: a string as it is; chat messages as their text, each after its role
    where there are several (the judge and the viewer read it as the question)."""
    if isinstance(value, str):
        return value
    if not isinstance(value, list):
        return text_of(value)
    msgs = [(m.get("role", ""), text_of(m.get("content"))) for m in value if isinstance(m, dict)]
    if len(msgs) == 1:
        return msgs[0][1]
    return "\n\n".join(f"{role}: {text}" for role, text in msgs)


def _targets(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,) if value.strip() else ()
    if isinstance(value, list):
        return tuple(str(v) for v in value if str(v).strip())
    return ()


def _completion(output: Any) -> str:
    if not isinstance(output, dict):
        return ""
    if isinstance(output.get("completion"), str) and output["completion"]:
        return output["completion"]
    for choice in output.get("choices") or []:
        msg = choice.get("message") if isinstance(choice, dict) else None
        if isinstance(msg, dict):
            return text_of(msg.get("content"))
    return ""


def _record(path: Path, i: int, sample: Any, task: str, several_epochs: bool) -> Record:
    if not isinstance(sample, dict):
        raise InputError(f"{path}: sample {i + 1}: expected an object, got {type(sample).__name__}")
    sid = sample.get("id")
    if sid is None or isinstance(sid, bool) or str(sid).strip() == "":
        raise InputError(f"{path}: sample {i + 1} (epoch {sample.get('epoch', '?')}): no id; expected every "
                         "sample to carry the id Inspect gives it, so that two models' logs pair by sample")
    sid = str(sid)
    epoch = int(sample.get("epoch") or 1)
    rid = f"{sid}_epoch_{epoch}" if several_epochs else sid
    question = _input_text(sample.get("input"))
    hs = HarnessScores(sample=sid, epoch=epoch if several_epochs else None,
                       fingerprint=hashlib.sha256(question.encode("utf-8", "replace")).hexdigest())
    error = sample.get("error")
    scores = sample.get("scores") or {}
    if error and not scores:
        why = error.get("message") if isinstance(error, dict) else str(error)
        hs.invalid["*"] = (f"the sample failed in Inspect: {str(why)[:300]}", str(why))
    for name, sc in scores.items():
        value = sc.get("value") if isinstance(sc, dict) else sc
        detail = {k: sc[k] for k in ("answer", "explanation") if isinstance(sc, dict) and sc.get(k) is not None}
        parts = value.items() if isinstance(value, dict) else [(None, value)]
        for key, v in parts:
            sname = str(name) if key is None else f"{name}.{key}"
            number, why = score_value(v)
            if number is None:
                hs.invalid[sname] = (f"Inspect's {sname}: {why}", json.dumps(v, ensure_ascii=False, default=str))
            else:
                hs.scores[sname] = number
            if detail:
                hs.details[sname] = {**detail, "value": v}
    return Record(id=rid, category=task, instruction=question, output=_completion(sample.get("output")),
                  targets=_targets(sample.get("target")), extra={HARNESS_KEY: hs})
