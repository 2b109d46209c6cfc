"""The backend kinds are a registry with declared capabilities (evaluate/backends/registry.py), and
no module outside evaluate/backends/ compares a kind's name: it asks a capability instead, so a new
kind is an entry in the registry and no edit elsewhere. The rule is checked on every module (its
syntax tree: `==`, `!=`, `in`, `not in`, `match ... case`, and dispatch tables keyed by kind names),
and shown to catch planted violations.

The package's own imports form no circle, type hints included (each kind one module below the options).

Also: the `judge:` keys grouped (transport, engine, judging) behind the same YAML keys, a judge block
in the manifest that reads as before the grouping, each kind's capabilities, the check that refuses a
key of another kind, and a cache written before the registry still answering.
"""

from __future__ import annotations

import ast
import dataclasses
import graphlib
import json
from pathlib import Path

import pytest

from evaluate.backends import registry
from evaluate.backends.options import EngineOptions, JudgeOptions, JudgingOptions, TransportOptions, shown_options
from evaluate.core.options import parse_options

REPO = Path(__file__).resolve().parents[1]
ROOTS = ("evaluate", "unieval", "repeval", "sageval")
BACKENDS = REPO / "evaluate" / "backends"


def _names_in(node: ast.AST, kinds: set[str]) -> list[str]:
    """Kind names written as string constants in `node` (a constant, or a tuple/list/set of them)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in kinds:
        return [node.value]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [n for e in node.elts for n in _names_in(e, kinds)]
    return []


def kind_comparisons(source: str, kinds: set[str], where: str = "<source>") -> list[str]:
    """Every place in `source` that compares something with a backend kind's name."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            names = [n for operand in (node.left, *node.comparators) for n in _names_in(operand, kinds)]
            if names:
                out.append(f"{where}:{node.lineno}: compares with the backend kind(s) {names}")
        elif isinstance(node, ast.match_case):
            names = [n for sub in ast.walk(node.pattern) if isinstance(sub, ast.MatchValue)
                     for n in _names_in(sub.value, kinds)]
            if names:
                out.append(f"{where}:{node.pattern.lineno}: matches the backend kind(s) {names}")
        elif isinstance(node, ast.Dict):
            keyed = [n for k in node.keys if k is not None for n in _names_in(k, kinds)]
            if len(keyed) >= 2:  # a table of what to do per kind
                out.append(f"{where}:{node.lineno}: a table keyed by backend kinds {keyed}")
    return out


def violations() -> list[str]:
    kinds = set(registry.names())
    out = []
    for root in ROOTS:
        for path in sorted((REPO / root).rglob("*.py")):
            if BACKENDS in path.parents:
                continue
            out += kind_comparisons(path.read_text(encoding="utf-8"), kinds, str(path.relative_to(REPO)))
    return out


def test_no_module_outside_the_backends_compares_a_kind_name():
    assert {"local", "openai", "vllm"} <= set(registry.names())
    assert violations() == []


@pytest.mark.parametrize("planted", [
    'if opts.backend == "openai":\n    pass\n',
    'ok = cfg.judge.backend != "local"\n',
    'ok = "vllm" == backend.kind\n',
    'ok = judge.backend in ("local", "vllm")\n',
    'ok = judge.backend not in ["openai"]\n',
    'match opts.backend:\n    case "vllm":\n        pass\n',
    'match opts.backend:\n    case "x" | "local":\n        pass\n',
    'make = {"local": f, "openai": g}[opts.backend]\n',
])
def test_the_rule_catches_a_planted_comparison(planted):
    found = kind_comparisons(planted, set(registry.names()))
    assert len(found) == 1, found


def test_the_rule_leaves_capabilities_and_other_strings_alone():
    clean = ('if capabilities(opts).http and opts.mode == "auto":\n    pass\n'
             'cfg.judge.backend = "openai"  # naming a kind is not comparing with one\n'
             'ok = scope in ("global", "module")\n'
             'labels = {"local": 1, "other": 2}\n')
    assert kind_comparisons(clean, set(registry.names())) == []


# ------------------------------------------------------------------ no circle inside the package

def package_imports(sources: dict[str, str]) -> dict[str, set[str]]:
    """Each module of evaluate/backends/ (name -> source) -> the modules of the package it imports: at the
    top, inside a function or under `if TYPE_CHECKING:` alike (a circle of type hints is one a reader
    follows too). `from . import x` imports the package (`__init__`) and x."""
    graph: dict[str, set[str]] = {}
    for name, source in sources.items():
        deps: set[str] = set()
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                deps.update([node.module.split(".")[0]] if node.module else ["__init__", *(a.name for a in node.names)])
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("evaluate.backends."):
                deps.add(node.module.split(".")[2])
            elif isinstance(node, ast.Import):
                deps.update(a.name.split(".")[2] for a in node.names if a.name.startswith("evaluate.backends."))
        graph[name] = (deps & set(sources)) - {name}
    return graph


def circle(graph: dict[str, set[str]]) -> list[str]:
    """One import circle of `graph`, or []."""
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as exc:
        return list(exc.args[1])
    return []


def test_the_backends_package_imports_in_no_circle():
    """A kind is declared in one module that builds on kinds.py alone; options.py builds the block from the
    registered kinds; nothing below imports back up, not even for a type hint (tests/test_layers.py leaves
    those out). Before, kinds.py took JudgeOptions from options.py, which took the capabilities from kinds.py."""
    sources = {p.stem: p.read_text(encoding="utf-8") for p in sorted(BACKENDS.glob("*.py"))}
    graph = package_imports(sources)
    assert {"kinds", "options", "registry"} <= graph.keys() and "kinds" in graph["options"] | graph["registry"]
    assert circle(graph) == []
    planted = {**sources, "kinds": sources["kinds"] + "\nif TYPE_CHECKING:\n    from .options import JudgeOptions\n"}
    assert set(circle(package_imports(planted))) >= {"kinds", "options"}


# ------------------------------------------------------------------ the registry

def test_each_kind_declares_what_it_can_do():
    local, openai, vllm = (registry.capabilities(k) for k in ("local", "openai", "vllm"))
    assert local.in_process and local.hidden_states and local.parallel_decoding and not local.http
    assert openai.http and openai.user_server and openai.batch_jobs and not openai.starts_server
    assert vllm.http and vllm.starts_server and not vllm.user_server and not vllm.batch_jobs
    assert all(c.logprobs for c in (local, openai, vllm))
    assert local.loads_weights and vllm.loads_weights and not openai.loads_weights  # a served name is not a path
    # a batching server gets more requests in flight and a longer attempt than a server of yours
    assert vllm.default_concurrency > openai.default_concurrency == 8
    assert vllm.default_timeout > openai.default_timeout == 120.0
    # asked of options, of a backend and of a name alike
    assert registry.capabilities(JudgeOptions(backend="vllm")) is vllm
    from evaluate.backends.openai_compat import OpenAICompatBackend

    b = OpenAICompatBackend("m", base_url="http://127.0.0.1:1/v1", api_key="EMPTY")
    assert registry.capabilities(b) is openai
    b.close()


def test_an_unknown_kind_is_refused_with_the_closest_name():
    _, problems = parse_options(JudgeOptions, {"backend": "vlm"}, "judge")
    assert problems == ['judge.backend: expected "local" or "openai" or "vllm", got "vlm"; did you mean "vllm"?']


def test_the_concurrency_and_timeout_defaults_come_from_the_kind():
    assert (JudgeOptions().concurrency, JudgeOptions().timeout) == (8, 120.0)
    assert (JudgeOptions(backend="openai").concurrency, JudgeOptions(backend="openai").timeout) == (8, 120.0)
    assert (JudgeOptions(backend="vllm").concurrency, JudgeOptions(backend="vllm").timeout) == (32, 600.0)
    assert JudgeOptions(backend="vllm", concurrency=3).concurrency == 3


# ------------------------------------------------------------------ grouped options, same keys

def test_the_keys_are_grouped_and_each_group_is_a_dataclass():
    groups = {g: {f.name for f in dataclasses.fields(c)}
              for g, c in (("transport", TransportOptions), ("engine", EngineOptions), ("judging", JudgingOptions))}
    flat = {f.name for f in dataclasses.fields(JudgeOptions)}
    assert set().union(*groups.values()) == flat and sum(map(len, groups.values())) == len(flat)
    assert {"backend", "model", "base_url", "concurrency", "timeout", "cache", "batch"} <= groups["transport"]
    assert {"dtype", "lookahead", "local_sequences", "tensor_parallel_size", "vllm_args"} <= groups["engine"]
    assert groups["judging"] == {"temperature", "mode", "both_orders", "max_tokens", "explain"}
    opts = JudgeOptions(backend="vllm", dtype="bfloat16", mode="logprobs")
    assert opts.group("engine").dtype == "bfloat16" and opts.group("judging").mode == "logprobs"
    assert JudgeOptions.group_of("max_model_len") == "engine"


# the judge block a manifest held before the keys were grouped, for the default judge (written by
# the version before this change: every key in this order with these values)
BEFORE = {"backend": "local", "model": "Qwen2.5-Coder-1.5B-Instruct", "base_url": None, "endpoints": None,
          "endpoint_failures": 5, "endpoint_cooldown": 30.0, "api_key_env": "OPENAI_API_KEY", "concurrency": 8,
          "timeout": 120.0, "max_retries": 8, "temperature": 0.0, "cache": True, "mode": "auto", "both_orders": True,
          "price": None, "dtype": "auto", "device": "auto", "max_tokens": 512, "explain": True, "batch": False, "batch_poll": 60.0,
          "lookahead": 3, "local_batch_size": 1, "local_sequences": 8, "local_batch_tokens": 16384,
          "local_matmul": "auto", "local_pack_weights": "auto"}


def test_an_existing_judge_block_loads_and_is_written_as_before():
    from evaluate.pipeline.config import scrubbed_judge

    for backend in ("local", "openai"):
        raw = {"backend": backend, "model": "m", "concurrency": 4, "dtype": "float32", "base_url": "http://u:p@h/v1"}
        opts, problems = parse_options(JudgeOptions, raw, "judge")
        assert problems == []
        block = scrubbed_judge(opts)
        want = {**BEFORE, **raw, "base_url": "http://h/v1"}
        assert list(block) == list(BEFORE) and block == want  # same keys, same order, no engine key of vllm
    assert json.dumps(scrubbed_judge(JudgeOptions())) == json.dumps(BEFORE)


def test_a_vllm_block_has_its_engine_keys_and_refuses_another_kinds():
    opts = JudgeOptions(backend="vllm", model="m", tensor_parallel_size=2, vllm_args=["--max-num-seqs", "4"])
    block = opts.as_block()
    assert block["tensor_parallel_size"] == 2 and block["vllm_args"] == ["--max-num-seqs", "4"]
    assert not {"base_url", "api_key_env", "lookahead", "local_sequences", "batch"} & set(block)  # keys it never reads
    assert list(block)[:4] == ["backend", "model", "concurrency", "timeout"]
    _, problems = parse_options(JudgeOptions, {"backend": "local", "gpu_memory_utilization": 0.5}, "judge")
    assert problems == ["judge.gpu_memory_utilization: read by backend vllm only; this block's backend is local"]
    _, problems = parse_options(JudgeOptions, {"backend": "openai", "base_url": "http://h/v1",
                                               "tensor_paralel_size": 2}, "judge")
    assert problems and 'did you mean "tensor_parallel_size"' in problems[0]
    _, problems = parse_options(JudgeOptions, {"backend": "vllm", "base_url": "http://h/v1"}, "judge")
    assert problems and problems[0].startswith("judge.base_url: backend vllm starts its own server")
    _, problems = parse_options(JudgeOptions, {"backend": "vllm", "vllm_args": ["--port", "9"]}, "judge")
    assert problems == ["judge.vllm_args[0]: --port is set by the tool (the model, its served name, 127.0.0.1 "
                        "and a free port)"]
    _, problems = parse_options(JudgeOptions, {"backend": "vllm", "vllm_args": ["--max-model-len=512"]}, "judge")
    assert problems == ["judge.vllm_args[0]: --max-model-len is the key max_model_len of this block: set it there (the "
                        "tool reads it: the signature, the CPU defaults, replies cut to fit)"]
    _, problems = parse_options(JudgeOptions, {"backend": "vllm", "batch": True}, "judge")
    assert any(p.startswith("judge.batch: batch jobs need") for p in problems)


def test_the_report_shows_the_keys_each_kind_reads():
    vllm = shown_options({**JudgeOptions(backend="vllm").as_block()})
    assert "tensor_parallel_size" in vllm and "concurrency" in vllm and "dtype" in vllm
    assert not {"base_url", "api_key_env", "lookahead", "local_sequences", "batch"} & set(vllm)
    local = shown_options(JudgeOptions(backend="local").as_block())
    assert "lookahead" in local and not {"concurrency", "timeout", "tensor_parallel_size"} & set(local)


def test_a_model_block_takes_the_engine_keys_too():
    from evaluate.generation.options import parse_model_block

    opts = parse_model_block({"backend": "local", "model": "SmolLM2-135M-Instruct"}, "model")
    assert opts.concurrency is None and opts.judge_options().concurrency == 8
    with pytest.raises(Exception, match=r"model\.max_model_len: read by backend vllm only"):
        parse_model_block({"backend": "local", "model": "SmolLM2-135M-Instruct", "max_model_len": 512}, "model")


def test_a_cache_written_before_the_registry_still_answers(tmp_path):
    """The cache key of an openai and a local judge is what it was: a row stored under the key the
    previous version computed (its signature written out here) is a hit."""
    from evaluate.backends.base import Completion, JudgeRequest
    from evaluate.backends.cache import CachedBackend, cache_key, judge_blob

    opts = JudgeOptions(backend="openai", model="judge-m", base_url="http://127.0.0.1:1/v1")
    req = JudgeRequest.chat(None, "hello", max_tokens=3)
    old_sig = {"backend": "openai", "model": "judge-m", "base_url": "http://127.0.0.1:1/v1"}  # before the registry
    cache = CachedBackend(registry.identity(opts), tmp_path / "c.sqlite")
    assert cache.key(req) == cache_key(judge_blob(old_sig), req)
    cache.store_many([(cache.key(req), req, Completion(text="hi", completion_tokens=1))])
    got = cache.complete(req)
    assert got.cached and got.text == "hi"
    cache.close()
