"""promptfoo's `promptfoo eval --output results.json` as answer records and Harness scores.

The file (promptfoo's output format, `results.version` 2 or 3) holds `results.results`: one entry per
test, prompt and provider, each with `testIdx`, `promptIdx`, `provider` (`id`, `label`), `prompt`
(`raw`: the rendered prompt), `vars` (the test's variables), `response.output`, `error` and
`gradingResult` (`pass`, `score`, `namedScores`, `componentResults`: each assertion's result);
`metadata.promptfooVersion` names the version and `config.description` the eval.

Each provider is one model (named by its label, else its id; a provider given several prompts is one
model per prompt: `<provider> [<prompt label>]`), so one file of several providers compares them.
Each test is one record: its id the test's index (`testIdx`), its category the eval's description,
its instruction the rendered prompt, its output the provider's output (an object as its JSON). Its
scores: `pass` (the test passed: every assertion; a pass/fail outcome), `score` (promptfoo's
weighted assertion score) and each named metric (`namedScores`, the assertions' `metric:`). A test
whose provider returned an error has no output: its scores are invalid with the error as the
reason, never a fail averaged in. A file with no output at all is refused, and so is a test given
twice to one provider (`--repeat`: compare one repeat per file).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from ..core.errors import InputError
from ..core.io import read_text
from ..core.records import Record
from .base import HARNESS_KEY, HarnessFile, HarnessScores, score_value

SCORES = ("pass", "score")


def looks_like(path: Path, head: str) -> bool:
    """A `.json` file whose first keys are promptfoo's output (evalId, or results with a version)."""
    h = head.lstrip()
    return path.suffix.lower() == ".json" and h.startswith("{") and ('"evalId"' in head or (
        '"results"' in head and '"promptfooVersion"' in head))


def read(path: Path) -> HarnessFile:
    """The results file at `path` as one model per provider (and prompt)."""
    try:
        data = json.loads(read_text(path, "answer"))
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno}); expected promptfoo's "
                         "`promptfoo eval --output results.json` file") from None
    body = data.get("results") if isinstance(data, dict) else None
    rows = body.get("results") if isinstance(body, dict) else None
    if not isinstance(rows, list):
        raise InputError(f"{path}: no results.results list; expected promptfoo's `promptfoo eval --output "
                         "results.json` file (results.version 2 or 3)")
    version = body.get("version")
    if version not in (2, 3):
        raise InputError(f"{path}: promptfoo output version {version!r}; this reader knows versions 2 and 3 "
                         "(write the file with promptfoo 0.50 or later)")
    if not any(isinstance(r, dict) and _output(r) is not None for r in rows):
        raise InputError(f"{path}: no test has an output ({len(rows)} results, "
                         f"{sum(1 for r in rows if isinstance(r, dict) and r.get('error'))} with an error); expected "
                         "each provider's output under results.results[].response.output: did every call fail?")
    prompts: dict[str, set[int]] = {}  # provider -> the prompts it was given
    for r in rows:
        if isinstance(r, dict):
            prompts.setdefault(_model(r, False), set()).add(int(r.get("promptIdx") or 0))
    config = data.get("config") if isinstance(data.get("config"), dict) else {}
    task = str(config.get("description") or "").strip() or "promptfoo"
    models: dict[str, list[Record]] = {}
    seen: dict[tuple[str, str], int] = {}
    for i, r in enumerate(rows):
        where = f"{path}: results.results[{i}]"
        if not isinstance(r, dict):
            raise InputError(f"{where}: expected an object (one test's result), got {type(r).__name__}")
        if r.get("testIdx") is None or isinstance(r.get("testIdx"), bool):
            raise InputError(f"{where}: no testIdx; expected every result to carry promptfoo's test index, so that "
                             "providers (and files) pair by test")
        model = _model(r, len(prompts.get(_model(r, False), ())) > 1)
        rec = _record(r, task)
        if (model, rec.id) in seen:
            raise InputError(f"{where}: test {rec.id} given twice to {model} (results.results[{seen[model, rec.id]}] "
                             "too); expected one result per test and provider: was the eval run with --repeat? "
                             "Compare one repeat per file")
        seen[model, rec.id] = i
        models.setdefault(model, []).append(rec)
    for recs in models.values():
        recs.sort(key=lambda rec: int(rec.id))
    meta = data.get("metadata") if isinstance(data.get("metadata"), dict) else {}
    named = sorted({k for recs in models.values() for rec in recs for k in rec.extra[HARNESS_KEY].scores}
                   - set(SCORES))
    scorers = {"pass": {"outcome": "every assertion passed"}, "score": {"outcome": "the weighted assertion score"},
               **{k: {"outcome": "a named assertion metric"} for k in named}}
    return HarnessFile(path=path, format="promptfoo", harness="promptfoo",
                       version=str(meta.get("promptfooVersion") or "unknown"), task=task, models=models,
                       scorers=scorers)


def _model(r: dict[str, Any], several_prompts: bool) -> str:
    prov = r.get("provider")
    if isinstance(prov, dict):
        name = str(prov.get("label") or prov.get("id") or "provider")
    else:
        name = str(prov or "provider")
    if several_prompts:
        prompt = r.get("prompt") if isinstance(r.get("prompt"), dict) else {}
        label = str(prompt.get("label") or f"prompt {int(r.get('promptIdx') or 0) + 1}")
        name = f"{name} [{label[:60]}]"
    return name


def _output(r: dict[str, Any]) -> str | None:
    resp = r.get("response")
    out = resp.get("output") if isinstance(resp, dict) else None
    if out is None:
        return None
    return out if isinstance(out, str) else json.dumps(out, ensure_ascii=False)


def _record(r: dict[str, Any], task: str) -> Record:
    test = str(int(r["testIdx"]))
    vars_ = r.get("vars") if isinstance(r.get("vars"), dict) else {}
    fingerprint = hashlib.sha256(json.dumps(vars_, sort_keys=True, ensure_ascii=False, default=str).encode()).hexdigest()
    hs = HarnessScores(sample=test, fingerprint=fingerprint)
    output = _output(r)
    grading = r.get("gradingResult")
    if output is None:
        why = str(r.get("error") or "no output")
        hs.invalid["*"] = (f"the provider returned no output: {why[:300]}", why)
    elif isinstance(grading, dict):
        for name, value in (("pass", grading.get("pass")), ("score", grading.get("score")),
                            *sorted((grading.get("namedScores") or {}).items())):
            number, why = score_value(value)
            if number is None:
                hs.invalid[str(name)] = (f"promptfoo's {name}: {why}", json.dumps(value, default=str))
            else:
                hs.scores[str(name)] = number
        hs.details["pass"] = {"reason": grading.get("reason"),
                              "assertions": [{"type": (c.get("assertion") or {}).get("type"), "pass": c.get("pass"),
                                              "score": c.get("score"), "reason": c.get("reason")}
                                             for c in grading.get("componentResults") or [] if isinstance(c, dict)]}
    prompt = r.get("prompt") if isinstance(r.get("prompt"), dict) else {}
    return Record(id=test, category=task, instruction=str(prompt.get("raw") or ""), output=output or "",
                  extra={HARNESS_KEY: hs})
