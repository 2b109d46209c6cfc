"""Every option block is checked when the config loads, against its typed dataclass: unknown keys
with did-you-mean, wrong types and values out of range, each with its key path, exit 2, before
any model loads (the examples of issue 12, and more of each kind)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import pytest

from evaluate.cli import main
from evaluate.core.options import option, parse_options

EN = Path(__file__).resolve().parents[1] / "examples" / "en"


def _dry_run(tmp_path: Path, capsys, **blocks) -> tuple[int, str]:
    cfg = {"answers": [{"name": "a", "path": str(EN / "answers_model_a.json")}], "save_path": str(tmp_path / "o"),
           "category": {"closed_qa": {"Metrics": ["BLEU"]}}, **blocks}
    path = tmp_path / "c.json"
    path.write_text(json.dumps(cfg))
    code = main(["--config", str(path), "--dry-run"])
    return code, capsys.readouterr().err


@pytest.mark.parametrize("blocks, messages", [
    ({"repeval": {"method": "pcaa", "kk": 3, "k": "twenty"}},
     ['repeval.method: expected "pca" or "mean" or "svm", got "pcaa"; did you mean "pca"?',
      'repeval: unknown key "kk"; did you mean "k"?', 'repeval.k: expected an integer >= 2, got a string "twenty"']),
    ({"repeval": {"pairs": ["a.jsonl"]}}, ['repeval.pairs: expected a mapping of a string, got a list']),
    ({"repeval": {"layer": "middle", "seed": 1.5}},
     ["repeval.layer: expected an integer or a list of an integer or null", "repeval.seed: expected an integer"]),
    ({"sageval": {"max_retries": -4}}, ["sageval.max_retries: expected a non-negative integer, got -4"]),
    ({"sageval": {"use_logprobs": "yes", "max_tokens": 3}},
     ["sageval.use_logprobs: expected true or false or null", "sageval.max_tokens: expected an integer >= 16, got 3"]),
    ({"unieval": {"evaluator": "t6"}}, ['unieval.evaluator: expected "t5" or "judge", got "t6"; did you mean "t5"?']),
    ({"unieval": {"evalutor": "judge"}}, ['unieval: unknown key "evalutor"; did you mean "evaluator"?']),
    ({"metric_options": {"ROUGE": {"multi_reff": "max"}}}, ["metric_options.ROUGE: ", "multi_reff"]),
    ({"metric_options": {"BLUE": {}}}, ['metric_options: unknown metric "BLUE"; did you mean "BLEU"?']),
    ({"metric_options": {"CHRF": {"word_order": 7}}}, ["metric_options.CHRF.word_order: must be 0"]),
    ({"metric_options": {"BERTScore": {"num_layers": "six"}}},
     ["metric_options.BERTScore.num_layers: expected a positive integer", "got 'six'"]),
    ({"metric_options": {"ROUGE": ["max"]}}, ["metric_options.ROUGE: expected a mapping of options"]),
    ({"judge": {"price": "cheap"}}, ['judge.price: expected a mapping of a number or null, got a string "cheap"']),
    ({"judge": {"price": {"prompt": 1, "output": 2}}}, ["judge.price: expected {prompt: $ per 1M tokens"]),
    ({"judge": {"timeout": 0}}, ["judge.timeout: expected a number > 0 or null, got 0"]),
    ({"judge": {"timeout": -5}}, ["judge.timeout: expected a number > 0 or null, got -5"]),
    ({"judge": {"temperature": -1}}, ["judge.temperature: expected a number from 0 to 2, got -1"]),
    ({"judge": {"max_tokens": 0}}, ["judge.max_tokens: expected a positive integer, got 0"]),
    ({"judge": {"model": ""}}, ["judge.model: expected a non-empty string"]),
    ({"judge": {"concurrency": True}}, ["judge.concurrency: expected a positive integer or null, got a boolean true"]),
    ({"judge": {"base_url": "not a url"}}, ["judge.base_url: expected an http:// or https:// URL"]),
    ({"judge": {"mode": "logprob"}}, ['judge.mode: expected "auto" or "logprobs" or "generate", got "logprob"']),
])
def test_bad_option_blocks_are_refused_at_load_with_their_key_path(tmp_path, capsys, blocks, messages):
    code, err = _dry_run(tmp_path, capsys, **blocks)
    assert code == 2, err
    assert "Traceback" not in err
    for m in messages:
        assert m in err, (m, err)


def test_good_blocks_pass_and_the_dry_run_shows_the_resolved_options(tmp_path, capsys):
    cfg = {"answers": [{"name": "a", "path": str(EN / "answers_model_a.json")}], "save_path": str(tmp_path / "o"),
           "target_file": str(EN / "targets.json"),
           "category": {"summarization": {"RepEval": ["fluency"], "Metrics": ["ROUGE"]}},
           "repeval": {"k": 8, "method": "mean"}, "metric_options": {"ROUGE": {"multi_ref": "mean"}},
           "judge": {"timeout": 300, "price": {"prompt": 0.15, "completion": 0.6}}}
    path = tmp_path / "c.json"
    path.write_text(json.dumps(cfg))
    assert main(["--config", str(path), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert 'options RepEval: model="SmolLM2-135M-Instruct", k=8, method="mean"' in out


def test_a_key_shaped_api_key_env_is_refused_without_echoing_it(tmp_path, capsys):
    key = "sk-proj-" + "A1b2C3d4" * 5
    code, err = _dry_run(tmp_path, capsys, judge={"api_key_env": key})
    assert code == 2 and "looks like an API key" in err and key not in err and key[:12] not in err


@dataclass
class _Opts:
    flag: bool = option(False, "a flag")
    n: int | None = option(None, "a count", min=1)
    names: list[str] = option([], "some names")
    mode: Literal["a", "b"] = option("a", "a choice")
    ratio: float = option(0.5, "a share", min=0, max=1)


def test_parse_options_types_and_bounds():
    obj, problems = parse_options(_Opts, {"flag": True, "n": 3, "names": ["x"], "mode": "b", "ratio": 1}, "x")
    assert problems == [] and obj == _Opts(True, 3, ["x"], "b", 1)
    _, problems = parse_options(_Opts, {"flag": 1, "n": 0, "names": ["x", 2], "ratio": float("nan")}, "x")
    assert problems == ["x.flag: expected true or false, got an integer 1",
                        "x.n: expected a positive integer or null, got 0",
                        "x.names: expected a list of a string, got a list [\"x\", 2]",
                        "x.ratio: expected a number from 0 to 1, got NaN"]
    _, problems = parse_options(_Opts, ["not", "a", "mapping"], "x")
    assert problems[0].startswith("x: expected a mapping of options (flag, n, names, mode, ratio)")
    assert parse_options(_Opts, None, "x") == (_Opts(), [])
    assert _Opts().names is not _Opts().names  # a fresh default list each time
