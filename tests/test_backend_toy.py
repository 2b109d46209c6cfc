"""A new backend kind is one file and one registration: a toy kind written here (its capabilities, a
key of its own, a check of its block and how it opens, all in one module) and registered as an
installed package registers one (an entry point of the group `llm_eval.backends`, as a family's is of
`llm_eval.families`), with no edit to the project. Through `eval.py` as a user runs it: its block is
validated like every `judge:` block (its own key's bounds, did-you-mean on its name, its key refused
on another kind, its own check), it rates and battles, and the run asks its capabilities (no
log-probabilities: mode auto parses replies; no weights on this machine: its model name is not looked
for as a folder).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]

TOY = '''"""A toy backend kind: rates every answer `toy_score`, and in a battle scores the longer answer higher."""

from __future__ import annotations

import re
from dataclasses import dataclass

from evaluate.backends.base import Backend, Completion, JudgeRequest
from evaluate.backends.kinds import Capabilities, Kind
from evaluate.core.options import option


@dataclass
class ToyOptions:
    toy_score: int = option(4, "the rating the toy gives every answer", min=1, max=5)


class ToyBackend(Backend):
    kind = "toy"

    def __init__(self, opts):
        super().__init__(opts.model)
        self.score = opts.toy_score

    def complete(self, request: JudgeRequest) -> Completion:
        user = request.messages[-1][1]
        shown = re.findall(r"\\[Assistant (\\d)'s answer\\]\\n(.*?)\\n\\[End of Assistant \\1's answer\\]", user, re.S)
        if len(shown) == 2:  # a battle: the longer answer wins
            a, b = (len(text) for _, text in shown)
            text = "7 3" if a > b else "3 7" if b > a else "5 5"
        else:
            text = str(self.score)
        return Completion(text=text, prompt_tokens=len(user) // 4, completion_tokens=1, finish_reason="stop")


def _problems(opts):
    return [("model", "the toy answers as toy-1 only")] if opts.model != "toy-1" else []


KIND = Kind("toy", "a toy that rates every answer the same", Capabilities(in_process=True),
            open=lambda opts, api_key, server_log: ToyBackend(opts), identity=ToyBackend,
            options=ToyOptions, problems=_problems)
'''

ENTRY_POINTS = "[llm_eval.backends]\ntoy = toy_backend:KIND\n"
N = 3  # items per model


@pytest.fixture(scope="module")
def plugin(tmp_path_factory) -> Path:
    """A folder on PYTHONPATH holding the toy's module and the metadata an installed package has."""
    root = tmp_path_factory.mktemp("toy_plugin")
    (root / "toy_backend.py").write_text(TOY, encoding="utf-8")
    info = root / "toy_backend-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-backend\nVersion: 0.1\n", encoding="utf-8")
    (info / "entry_points.txt").write_text(ENTRY_POINTS, encoding="utf-8")
    return root


def _config(tmp: Path, judge: dict) -> Path:
    answers = []
    for m, extra in (("ma", ""), ("mb", " with more words in it")):
        rows = [{"id": i, "category": "open_qa", "instruction": f"question {i}?", "input": "",
                 "output": f"answer of {m} to {i}{extra}", "target": f"reference {i}"} for i in range(1, N + 1)]
        (tmp / f"{m}.json").write_text(json.dumps(rows), encoding="utf-8")
        answers.append({"name": m, "path": str(tmp / f"{m}.json")})
    cfg = {"answers": answers, "save_path": str(tmp / "out"), "category": {"open_qa": {"GPT": ["correctness"]}},
           "judge": judge}
    path = tmp / "toy.yaml"
    path.write_text(yaml.safe_dump(cfg), encoding="utf-8")
    return path


def _eval(plugin: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(plugin), str(REPO)]), "EVAL_NO_PROGRESS": "1",
           "NO_COLOR": "1"}
    return subprocess.run([sys.executable, str(REPO / "eval.py"), *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=600)


def test_a_toy_kind_rates_and_battles_through_eval_py(plugin, tmp_path):
    cfg = _config(tmp_path, {"backend": "toy", "model": "toy-1", "toy_score": 2, "max_tokens": 8})
    done = _eval(plugin, "--config", str(cfg), "--no-charts", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    out = tmp_path / "out"
    for m in ("ma", "mb"):
        res = json.loads((out / "results" / f"{m}.json").read_text())
        assert [it["scores"]["GPT/correctness"] for it in res["items"]] == [2.0] * N  # its own key, read
        sig = res["signatures"]["GPT/correctness"]
        assert sig["judge"] == {"backend": "toy", "model": "toy-1"} and sig["mode"] == "generate"  # no logprobs
    battle = next(json.loads(p.read_text()) for p in (out / "battles").glob("*.json"))
    assert [it["verdict"] for it in battle["items"]] == ["B"] * N  # mb's longer answers, in both orders
    assert battle["summary"]["losses"] == N
    block = json.loads((out / "manifest.json").read_text())["config"]["judge"]
    assert block["backend"] == "toy" and block["toy_score"] == 2
    assert not {"base_url", "api_key_env", "lookahead", "tensor_parallel_size", "batch"} & set(block)  # not its keys


@pytest.mark.parametrize("judge, message", [
    ({"backend": "toy", "model": "toy-1", "toy_score": 9}, "judge.toy_score: expected an integer from 1 to 5, got 9"),
    ({"backend": "tyo", "model": "toy-1"}, 'judge.backend: expected "local" or "openai" or "vllm" or "toy", '
                                           'got "tyo"; did you mean "toy"?'),
    ({"backend": "openai", "model": "m", "base_url": "http://127.0.0.1:1/v1", "toy_score": 3},
     "judge.toy_score: read by backend toy only; this block's backend is openai"),
    ({"backend": "toy", "model": "toy-2"}, "judge.model: the toy answers as toy-1 only"),
    ({"backend": "toy", "model": "toy-1", "toy_scor": 3}, 'did you mean "toy_score"'),
])
def test_the_toy_block_is_validated_like_every_block(plugin, tmp_path, judge, message):
    done = _eval(plugin, "--config", str(_config(tmp_path, judge)), "--dry-run", cwd=tmp_path)
    assert done.returncode == 2 and message in done.stderr, done.stderr[-3000:]
    assert "Traceback" not in done.stderr


def test_without_its_registration_the_kind_is_unknown(tmp_path):
    """The entry point is what makes it known: the same config without the plugin on the path is refused."""
    done = _eval(tmp_path, "--config", str(_config(tmp_path, {"backend": "toy", "model": "toy-1"})), "--dry-run",
                 cwd=tmp_path)
    assert done.returncode == 2 and 'judge.backend: expected "local" or "openai" or "vllm", got "toy"' in done.stderr


def test_a_kind_registered_after_the_block_was_built_is_refused():
    from evaluate.backends.kinds import Capabilities, Kind, register
    from evaluate.backends.options import JudgeOptions  # noqa: F401  (the block is built)

    late = Kind("late", "too late", Capabilities(), open=lambda *a: None, identity=lambda o: None)
    with pytest.raises(RuntimeError, match="entry point of the group llm_eval.backends"):
        register(late)
