"""A catalogue of bad inputs, each run through `eval.py` as a subprocess: the documented exit code
(2 for bad input), no traceback, and a message that names the file, key path or record id.

Every case starts from a small valid setup in tmp_path (a config, two answer files, a target
file) and breaks one thing. `--dry-run` is used wherever the check must happen before any work;
cases that must fail before scoring run without it and assert that nothing was written.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import pytest

REPO = Path(__file__).resolve().parents[1]
KEY = "sk-proj-CATALOGUE-SECRET-9876543210"


def records(n: int = 2, category: str = "closed_qa", **over: Any) -> list[dict[str, Any]]:
    return [{"id": i, "category": category, "instruction": f"Question {i}?", "input": "",
             "output": f"answer {i} words here", "target": f"reference {i} words", **over} for i in range(n)]


def base_config(tmp: Path) -> dict[str, Any]:
    return {"language": "en", "save_path": str(tmp / "out"),
            "category": {"closed_qa": {"Metrics": ["BLEU"]}},
            "answers": [{"name": "model_a", "path": str(tmp / "a.json")},
                        {"name": "model_b", "path": str(tmp / "b.json")}]}


@dataclass
class Case:
    id: str
    needles: tuple[str, ...]  # each must appear in stderr ("{tmp}" is replaced by the case's folder)
    config: Callable[[dict], Any] | None = None  # mutate (or replace) the base config
    files: dict[str, Any] = field(default_factory=dict)  # name -> text, bytes or JSON value (written in tmp)
    argv: tuple[str, ...] = ("--dry-run",)  # after --config (the config is left out when argv starts with "-")
    code: int = 2
    ext: str = ".json"
    no_config: bool = False
    raw_config: str | bytes | None = None  # the config file's content as written
    forbid: tuple[str, ...] = (KEY,)
    nothing_written: bool = False  # the save_path must not exist afterwards


def put(d: dict, path: str, value: Any) -> dict:
    keys = path.split(".")
    cur = d
    for k in keys[:-1]:
        cur = cur.setdefault(k, {})
    cur[keys[-1]] = value
    return d


def judge(**kw: Any) -> Callable[[dict], dict]:
    return lambda c: put(put(c, "category.closed_qa.GPT", ["relevance"]), "judge",
                         {"backend": "openai", "base_url": "http://127.0.0.1:9/v1", **kw})


BOMB = "a: &a [x,x,x,x,x,x,x,x,x]\n" + "".join(
    f"{c}: &{c} [{', '.join(['*' + p] * 9)}]\n" for p, c in zip("abcdefgh", "bcdefghi"))

CASES = [
    # --- config file: encoding, syntax, shape
    Case("config-latin1", ("c.json", "not UTF-8", "line 1"), raw_config='{"language": "caf\xe9"}'.encode("latin-1")),
    Case("config-utf16", ("c.json", "UTF-16"), raw_config='{"language": "en"}'.encode("utf-16")),
    Case("config-bad-json", ("c.json", "not valid JSON", "line"), raw_config='{"language": "en",}'),
    Case("config-bad-yaml", ("c.yaml", "not valid YAML"), raw_config="category: [unclosed\n", ext=".yaml"),
    Case("config-list", ("c.json", "expected a mapping at the top level"), raw_config="[1, 2]"),
    Case("config-empty-yaml", ("c.yaml", "expected a mapping"), raw_config="", ext=".yaml"),
    Case("config-missing", ("nope.yaml", "not found"), argv=("--config", "{tmp}/nope.yaml", "--dry-run"), no_config=True),
    Case("config-folder", ("folder",), argv=("--config", "{tmp}", "--dry-run"), no_config=True),
    Case("dup-key-json-top", ('"save_path" is given twice', "line 2 and line 3"),
         raw_config='{"answers": [],\n "save_path": "x",\n "save_path": "y"}'),
    Case("dup-key-json-category", ("category.closed_qa", '"Metrics" is given twice', "line 3 and line 4"),
         raw_config='{"category": {\n "closed_qa": {\n  "Metrics": ["BLEU"],\n  "Metrics": ["ROUGE"]}}}'),
    Case("dup-key-yaml-top", ('"language" is given twice', "line 1 and line 2"), ext=".yaml",
         raw_config="language: en\nlanguage: cn\n"),
    Case("dup-key-yaml-category", ("category", '"closed_qa" is given twice', "line 2 and line 4"), ext=".yaml",
         raw_config="category:\n  closed_qa:\n    Metrics: [BLEU]\n  closed_qa:\n    Metrics: [ROUGE]\n"),
    Case("dup-key-yaml-judge", ("judge", '"timeout" is given twice', "line 2 and line 3"), ext=".yaml",
         raw_config="judge:\n  timeout: 10\n  timeout: 20\n"),
    Case("yaml-alias-bomb", ("c.yaml", "alias"), ext=".yaml", raw_config=BOMB),
    Case("unknown-top-key", ('unknown key "categroy"', 'did you mean "category"'), config=lambda c: put(c, "categroy", {})),
    # issue 47: a new user's two mistakes in one message, not the second after the first is fixed
    Case("top-key-and-metric-typos", ("2 problems", 'unknown key "target_flie"', 'did you mean "target_file"',
                                      'category.closed_qa.Metrics[0]: unknown metric "BLUE"', 'did you mean "BLEU"'),
         config=lambda c: put(put(c, "target_flie", "t.json"), "category.closed_qa.Metrics", ["BLUE"])),
    Case("language", ("language", '"en" or "cn"'), config=lambda c: put(c, "language", "fr")),
    Case("category-list", ("category: expected a mapping",), config=lambda c: put(c, "category", ["closed_qa"])),
    Case("metrics-string", ("category.closed_qa.Metrics", "a list"), config=lambda c: put(c, "category.closed_qa.Metrics", "BLEU")),
    Case("metric-typo", ("category.closed_qa.Metrics", '"BLUE"', 'did you mean "BLEU"'),
         config=lambda c: put(c, "category.closed_qa.Metrics", ["BLUE"])),
    Case("metric-twice", ("category.closed_qa.Metrics[1]", "listed twice"),
         config=lambda c: put(c, "category.closed_qa.Metrics", ["BLEU", "BLEU"])),
    Case("family-typo", ("category.closed_qa", '"Metric"', "did you mean"), config=lambda c: put(c, "category.closed_qa.Metric", ["BLEU"])),
    Case("save-path-number", ("save_path", "a path string"), config=lambda c: put(c, "save_path", 5)),
    Case("answers-mapping", ("answers", "a list"), config=lambda c: put(c, "answers", {"a": "x"})),
    Case("answer-no-path", ("answers[0].path",), config=lambda c: put(c, "answers", [{"name": "x"}])),
    Case("answer-unknown-key", ("answers[0]", 'unknown key "pth"'), config=lambda c: put(c, "answers", [{"name": "x", "pth": "y"}])),
    Case("limit-zero", ("limit", "positive integer"), config=lambda c: put(c, "limit", 0)),
    Case("limit-string", ("limit", "positive integer"), config=lambda c: put(c, "limit", "ten")),
    Case("battle-string", ("battle", "true or false"), config=lambda c: put(c, "battle", "yes")),
    Case("gpt-with-reference-int", ("gpt_with_reference",), config=lambda c: put(c, "gpt_with_reference", 1)),
    Case("max-invalid-share", ("max_invalid_share",), config=lambda c: put(c, "max_invalid_share", 2)),
    Case("prompts-unknown-kind", ("prompts", 'unknown key "rating"'), config=lambda c: put(c, "prompts", {"rating": "x.json"})),
    # --- judge block: refused at load with its key path
    Case("judge-list", ("judge", "a mapping"), config=lambda c: put(c, "judge", ["openai"])),
    Case("judge-timeout-0", ("judge.timeout", "> 0"), config=judge(timeout=0)),
    Case("judge-timeout-neg", ("judge.timeout",), config=judge(timeout=-5)),
    Case("judge-temperature", ("judge.temperature",), config=judge(temperature=-1)),
    Case("judge-max-tokens", ("judge.max_tokens",), config=judge(max_tokens=0)),
    Case("judge-model-empty", ("judge.model", "non-empty"), config=judge(model="  ")),
    Case("judge-price-string", ("judge.price",), config=judge(price="cheap")),
    Case("judge-price-negative", ("judge.price",), config=judge(price={"prompt": -1, "completion": 1})),
    Case("judge-price-keys", ("judge.price", "prompt"), config=judge(price={"input": 1})),
    Case("judge-base-url-not-url", ("judge.base_url", "http://"), config=judge(base_url="not a url")),
    Case("judge-base-url-ftp", ("judge.base_url",), config=judge(base_url="ftp://host/v1")),
    Case("judge-backend-typo", ("judge.backend", '"openia"', 'did you mean "openai"'), config=judge(backend="openia")),
    Case("judge-concurrency", ("judge.concurrency",), config=judge(concurrency=0)),
    Case("judge-retries", ("judge.max_retries",), config=judge(max_retries=-1)),
    Case("judge-mode", ("judge.mode", '"logprob"'), config=judge(mode="logprob")),
    Case("judge-key-in-config", ("judge", "environment variable"), config=judge(api_key=KEY)),
    Case("judge-key-in-api-key-env", ("judge.api_key_env", "looks like an API key"), config=judge(api_key_env=KEY)),
    Case("judge-unknown-key", ('judge: unknown key "temprature"', 'did you mean "temperature"'), config=judge(temprature=0)),
    Case("judge-openai-no-url-no-key", ("judge", "no judge.base_url", "OPENAI_API_KEY"),
         config=lambda c: put(put(c, "category.closed_qa.GPT", ["relevance"]), "judge", {"backend": "openai"})),
    # --- metric options and family blocks
    Case("metric-options-typo", ("metric_options.ROUGE", "multi_reff"), config=lambda c: put(c, "metric_options", {"ROUGE": {"multi_reff": "max"}})),
    Case("metric-options-unknown-metric", ("metric_options", "BLUE"), config=lambda c: put(c, "metric_options", {"BLUE": {}})),
    Case("metric-options-not-mapping", ("metric_options",), config=lambda c: put(c, "metric_options", ["ROUGE"])),
    Case("metric-options-bad-value", ("metric_options.ROUGE", "multi_ref"), config=lambda c: put(c, "metric_options", {"ROUGE": {"multi_ref": "median"}})),
    Case("repeval-pairs-list", ("repeval.pairs",), config=lambda c: put(c, "repeval", {"pairs": ["a.jsonl"]})),
    Case("repeval-unknown-key", ("repeval", 'unknown key "kk"'), config=lambda c: put(c, "repeval", {"kk": 3})),
    Case("repeval-not-mapping", ("repeval",), config=lambda c: put(c, "repeval", "fast")),
    Case("sageval-unknown-key", ("sageval", "unknown key"), config=lambda c: put(c, "sageval", {"agentz": 1})),
    Case("unieval-no-checkpoint", ("UniEval", "path_for_UniEval"),
         config=lambda c: put(c, "category.closed_qa.UniEval", ["summarization-fluency"])),
    Case("unieval-typo", ("category.closed_qa.UniEval", "summarization-fluncy"),
         config=lambda c: put(put(c, "category.closed_qa.UniEval", ["summarization-fluncy"]), "path_for_UniEval",
                              {"summarization": "/nonexistent"})),
    Case("path-for-unieval-list", ("path_for_UniEval",), config=lambda c: put(c, "path_for_UniEval", ["x"])),
    # --- answer and target files
    Case("answers-latin1", ("a.json", "not UTF-8"), files={"a.json": json.dumps(records(), ensure_ascii=False).replace(
        "answer 0", "caf\xe9").encode("latin-1")}),
    Case("answers-utf16", ("a.json", "UTF-16"), files={"a.json": json.dumps(records()).encode("utf-16")}),
    Case("answers-not-list", ("a.json",), files={"a.json": {"id": 1}}),
    Case("answers-bad-jsonl", ("a.jsonl", "line 2"), files={"a.jsonl": json.dumps(records()[0]) + "\n{oops\n"},
         config=lambda c: put(c, "answers", [{"name": "model_a", "path": c["answers"][0]["path"].replace(".json", ".jsonl")}])),
    Case("answers-missing-output", ("a.json", "output"), files={"a.json": [{k: v for k, v in r.items() if k != "output"} for r in records()]}),
    Case("answers-duplicate-id", ("a.json", "1"), files={"a.json": records() + [records()[1]]}),
    Case("answers-id-list", ("a.json", "id"), files={"a.json": [{**records()[0], "id": [1]}]}),
    Case("answers-output-number", ("a.json", "output"), files={"a.json": [{**records()[0], "output": 5}]}),
    Case("answers-ids-differ", ("b.json",), files={"b.json": records(3)}),
    Case("answers-file-missing", ("a.json", "not found"), files={"a.json": None}),
    Case("answers-empty-list", ("no answer files",), config=lambda c: put(c, "answers", [])),
    Case("target-missing", ("targets.json",), config=lambda c: put(c, "target_file", "targets.json")),
    # --- prompt files
    Case("prompt-missing", ("nope.json", "not found"), config=lambda c: put(put(c, "category.closed_qa.GPT", ["relevance"]),
                                                                             "prompts", {"evaluation": "nope.json"})),
    Case("prompt-not-json", ("p.json", "not valid JSON"), files={"p.json": "{bad"},
         config=lambda c: put(put(c, "category.closed_qa.GPT", ["relevance"]), "prompts", {"evaluation": "p.json"})),
    Case("prompt-utf16", ("p.json", "UTF-16"), files={"p.json": (REPO / "prompts" / "evaluation_prompt_en.json").read_text(
        encoding="utf-8").encode("utf-16")},
         config=lambda c: put(put(c, "category.closed_qa.GPT", ["relevance"]), "prompts", {"evaluation": "p.json"})),
    Case("prompt-with-bom-accepted", ("dry run",), code=0, files={"p.json": b"\xef\xbb\xbf" + (
        REPO / "prompts" / "evaluation_prompt_en.json").read_bytes()},
         config=lambda c: put(put(c, "category.closed_qa.GPT", ["relevance"]), "prompts", {"evaluation": "p.json"})),
    # --- flags: checked before any work (no --dry-run: nothing may be written)
    Case("fail-under-no-equals", ('--fail-under "BLEU-4"', "no \"=\""), argv=("--fail-under", "BLEU-4"), nothing_written=True),
    Case("fail-under-nan", ('--fail-under "F1=nan"', "finite"), argv=("--fail-under", "F1=nan"), nothing_written=True),
    Case("fail-under-inf", ("finite",), argv=("--fail-under", "F1=inf"), nothing_written=True),
    Case("fail-under-not-number", ('"high" is not a number',), argv=("--fail-under", "F1=high"), nothing_written=True),
    Case("fail-under-empty-metric", ("empty metric",), argv=("--fail-under", "=0.5"), nothing_written=True),
    Case("fail-under-empty-category", ("empty category",), argv=("--fail-under", ":BLEU-4=0.5"), nothing_written=True),
    Case("limit-flag-zero", ("--limit", "positive"), argv=("--limit", "0")),
    Case("only-typo", ("--only", '"Metricz"', "did you mean"), argv=("--only", "Metricz", "--dry-run")),
    Case("openai-key-abbrev", ("unrecognized arguments",), argv=("--openai", KEY, "--dry-run")),
    Case("openai-key-abbrev2", ("unrecognized arguments",), argv=("--openai_k", KEY, "--dry-run")),
    Case("flag-abbrev-dry", ("unrecognized arguments", "--dry"), argv=("--dry",)),
    Case("names-collide", ('"m 1"', '"m_1"', "results/m_1.json"), argv=("--model_name_list", "m 1", "m_1", "--dry-run")),
    Case("names-same", ('"x"', "the same"), argv=("--model_name_list", "x", "x", "--dry-run")),
    Case("names-count", ("--model_name_list has 1 names",), argv=("--model_name_list", "x", "--dry-run")),
    Case("no-config", ("nothing to do",), argv=("--dry-run",), no_config=True),
    # --- save_path
    Case("save-path-file", ("save_path", "is a file"), files={"out": "x"}),
    Case("save-path-parent-file", ("save_path", "is a file"), files={"f": "x"}, config=lambda c: put(c, "save_path", "f/out")),
    Case("save-path-results-file", ("results", "is a file"), files={"out/results": "x"}),
    Case("save-path-symlink-loop", ("save_path",), files={"loop": "SYMLINK-LOOP"}, config=lambda c: put(c, "save_path", "loop/out")),
    # --- meta-eval
    Case("meta-data-folder", ("folder",), no_config=True, argv=("meta-eval", "--data", "{tmp}", "--evaluator", "BLEU")),
    Case("meta-row-array", ("m.jsonl", "line 2", "JSON object"), no_config=True,
         files={"m.jsonl": '{"output": "a", "human": {"x": 1}}\n[1, 2]\n'}, argv=("meta-eval", "--data", "{tmp}/m.jsonl", "--evaluator", "BLEU")),
    Case("meta-limit-0", ("--limit", "positive"), no_config=True, argv=("meta-eval", "--data", "x.jsonl", "--evaluator", "BLEU", "--limit", "0")),
    Case("meta-sample-neg", ("--sample", "positive"), no_config=True, argv=("meta-eval", "--data", "x.jsonl", "--evaluator", "BLEU", "--sample", "-1")),
    Case("meta-pair-no-b", ("m.jsonl", "line 2", "response_b"), no_config=True,
         files={"m.jsonl": '{"id": 1, "response_a": "x", "response_b": "y", "label": "a"}\n{"id": 2, "response_a": "x", "label": "b"}\n'},
         argv=("meta-eval", "--data", "{tmp}/m.jsonl", "--evaluator", "Length")),
    Case("meta-pair-bad-label", ("m.jsonl", "line 1", "label", "'A'"), no_config=True,
         files={"m.jsonl": '{"id": 1, "response_a": "x", "response_b": "y", "label": "A"}\n'},
         argv=("meta-eval", "--data", "{tmp}/m.jsonl", "--evaluator", "Length")),
    Case("meta-output-folder", ("--output", "is a folder"), no_config=True,
         files={"m.jsonl": '{"output": "a", "human": {"x": 1}, "references": ["a"]}\n'},
         argv=("meta-eval", "--data", "{tmp}/m.jsonl", "--evaluator", "BLEU", "--output", "{tmp}")),
    Case("meta-data-latin1", ("m.jsonl", "not UTF-8"), no_config=True, files={"m.jsonl": '{"output": "caf\xe9"}\n'.encode("latin-1")},
         argv=("meta-eval", "--data", "{tmp}/m.jsonl", "--evaluator", "BLEU")),
    Case("meta-evaluator-family", ("--evaluator", "Nope"), no_config=True,
         files={"m.jsonl": '{"output": "a", "human": {"x": 1}}\n'}, argv=("meta-eval", "--data", "{tmp}/m.jsonl", "--evaluator", "Nope:x")),
]


def _write(path: Path, content: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if content == "SYMLINK-LOOP":
        os.symlink(path, path)
    elif isinstance(content, bytes):
        path.write_bytes(content)
    elif isinstance(content, str):
        path.write_text(content, encoding="utf-8")
    else:
        path.write_text(json.dumps(content), encoding="utf-8")


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input(case: Case, tmp_path: Path) -> None:
    files = {"a.json": records(), "b.json": records(), **case.files}
    for name, content in files.items():
        if content is not None:
            _write(tmp_path / name, content)
    cfg_path = tmp_path / f"c{case.ext}"
    if case.raw_config is not None:
        _write(cfg_path, case.raw_config)
    else:
        cfg = base_config(tmp_path)
        cfg = case.config(cfg) if case.config else cfg
        _write(cfg_path, cfg)
    argv = [a.replace("{tmp}", str(tmp_path)) for a in case.argv]
    if not case.no_config:
        argv = ["--config", str(cfg_path), *argv]
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL")}
    proc = subprocess.run([sys.executable, str(REPO / "eval.py"), *argv], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120, env=env)
    out = proc.stdout + proc.stderr
    assert proc.returncode == case.code, out[-2000:]
    assert "Traceback" not in out, out[-3000:]
    for needle in case.needles:
        assert needle.replace("{tmp}", str(tmp_path)) in (proc.stdout if case.code == 0 else proc.stderr), \
            f"{needle!r} not in:\n{out[-2000:]}"
    for bad in case.forbid:
        assert bad not in out
    if case.nothing_written:
        assert not (tmp_path / "out").exists(), "a flag error must stop the run before anything is written"


def test_catalogue_is_big_enough() -> None:
    assert len(CASES) >= 60 and len({c.id for c in CASES}) == len(CASES)
