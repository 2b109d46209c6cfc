"""Where the memory of a local-judge run goes: the README's own config (`judge: {backend: local, model:
Qwen2.5-Coder-1.5B-Instruct}`, so `explain: true`, `max_tokens: 512`) on the bundled English answers.

    .venv/bin/python bench/judge_memory.py [--limit 1] [--set local_pack_weights=never ...]

The run is `eval.py --config my.yaml --limit N` in a fresh process (in-process, `evaluate.cli.main`),
with a thread beside it that samples /proc/self/status every 0.2 s (VmRSS, split into RssAnon, the
process's own memory, and RssFile, pages of files it maps) and notes the phases as they happen: torch
imported, the model loaded (`evaluate.models.load`), the float32 weights packed for oneDNN
(`backends/onednn.py`), the end. It prints, per phase, the RSS when it began and its peak, and the
sizes of what holds memory at the end: the weights, oneDNN's packed copy, the judge's KV caches.
`--set KEY=VALUE` changes a key of the judge block (e.g. local_pack_weights=never, or
model=SmolLM2-135M-Instruct), `--env KEY=VALUE` sets a variable in the child (e.g. EVAL_MALLOC_TUNE=0),
`--code DIR` runs another checkout's code (the version before a change) on the same config.

It also times the model's load (the call of `load_causal_lm`, with VmHWM right after it) and the
judging (the local backend's `complete_many_indexed` calls: completion tokens per second of their
wall time), and keeps every reply (text, token count, top log-probabilities) by its request:
`--replies FILE` writes them as JSON, `--compare FILE` says how many differ from an earlier run's
(a loader change must leave greedy replies bit for bit the same).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import multiprocessing as mp
import os
import re
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def status() -> dict[str, int]:
    """VmRSS, RssAnon, RssFile, VmHWM of this process in bytes."""
    out = {}
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "RssAnon", "RssFile", "VmHWM"):
                out[key] = int(value.split()[0]) * 1024
    return out


def readme_config(folder: Path, changes: dict[str, object], limit: int) -> Path:
    """The README's `my.yaml` (its first YAML block opening with `answers:`) beside copies of the bundled
    English answers under the names it uses; `changes` set keys of its judge block."""
    import yaml

    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = next(b for b in re.findall(r"```yaml\n(.*?)```", text, re.S) if b.startswith("answers:"))
    cfg = yaml.safe_load(block)
    (folder / "answers").mkdir()
    for src, dst in (("answers_model_a.json", "base.json"), ("answers_model_b.json", "cand.json"),
                     ("targets.json", "targets.json")):
        shutil.copy(ROOT / "examples" / "en" / src, folder / "answers" / dst)
    cfg["judge"].update(changes)
    cfg["save_path"] = str(folder / "run")
    cfg["limit"] = limit
    path = folder / "my.yaml"
    path.write_text(yaml.safe_dump(cfg), encoding="utf-8")
    return path


def child(config: str, queue: "mp.Queue", code: str | None, env: dict[str, str]) -> None:
    if code:
        sys.path.insert(0, code)
    os.environ.update(env)
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    os.environ.setdefault("EVAL_PROGRESS_SECONDS", "30")
    samples: list[tuple[float, str, dict[str, int]]] = []
    phase = ["start"]
    done = threading.Event()
    t0 = time.monotonic()

    def watch() -> None:
        while not done.is_set():
            mods = sys.modules
            if phase[-1] == "start" and "torch" in mods:
                phase.append("torch imported")
            load = mods.get("evaluate.models.load")
            loaded = list(getattr(load, "_LOADED", {}).values()) if load else []
            if loaded and phase[-1] == "torch imported":
                phase.append("model loaded")
            onednn = mods.get("evaluate.backends.onednn")
            if loaded and onednn and phase[-1] == "model loaded":
                head = loaded[0][0].get_output_embeddings()
                if onednn.packed_copy(head) is not None:
                    phase.append("weights packed")
            samples.append((time.monotonic() - t0, phase[-1], status()))
            done.wait(0.2)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    timing = instrument()
    from evaluate.cli import main

    code = main(["--config", config, "--no-charts"])
    done.set()
    thread.join()
    samples.append((time.monotonic() - t0, "end", status()))
    sizes = {}
    from evaluate.backends import onednn
    from evaluate.models.load import _LOADED

    for model, _, info in _LOADED.values():
        sizes["weights"] = sum(p.numel() * p.element_size() for p in model.parameters())
        packed = [onednn.packed_copy(m) for m in [*onednn.routed_linears(model.base_model),
                                                  model.get_output_embeddings()]]
        sizes["packed copy"] = sum(t.numel() * t.element_size() if hasattr(t, "numel") else 0
                                   for t in packed if t is not None)
        sizes["dtype"] = info.dtype
    queue.put({"code": code, "samples": samples, "sizes": sizes, **timing})


def instrument() -> dict:
    """Wrap the local backend's loading and judging to time them and keep every reply (see the module
    doc); returns the dict they fill."""
    from evaluate.backends import local

    timing: dict = {"load_s": None, "hwm_after_load": None, "judge_s": 0.0, "tokens": 0, "replies": {}}
    load = local.load_causal_lm

    def timed_load(*args, **kwargs):
        t = time.monotonic()
        out = load(*args, **kwargs)
        if timing["load_s"] is None:
            timing["load_s"] = time.monotonic() - t
            timing["hwm_after_load"] = status()["VmHWM"]
        return out

    local.load_causal_lm = timed_load
    many = local.LocalBackend.complete_many_indexed

    def timed_many(self, requests, on_result):
        self.load()  # the load is timed on its own
        t = time.monotonic()

        def keep(i, comp):
            key = hashlib.sha256(json.dumps(requests[i].as_dict(), sort_keys=True).encode()).hexdigest()[:16]
            timing["replies"][key] = [comp.text, comp.completion_tokens, comp.top_logprobs, comp.error]
            timing["tokens"] += comp.completion_tokens or 0
            on_result(i, comp)

        try:
            return many(self, requests, keep)
        finally:
            timing["judge_s"] += time.monotonic() - t

    local.LocalBackend.complete_many_indexed = timed_many
    return timing


def gb(n: float) -> str:
    return f"{n / 1e9:.2f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--limit", type=int, default=1, help="records per category (the README's 3 categories)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a judge key to change")
    ap.add_argument("--env", action="append", default=[], metavar="KEY=VALUE", help="a variable for the run")
    ap.add_argument("--code", help="a checkout whose evaluate/ package runs (default: this one)")
    ap.add_argument("--replies", help="write every reply (by request) to this JSON file")
    ap.add_argument("--compare", help="a --replies file of an earlier run: say how many replies differ")
    args = ap.parse_args()
    changes = {}
    for kv in args.set:
        key, _, value = kv.partition("=")
        changes[key] = json.loads(value) if value[:1] in "0123456789[{tf" else value
    with tempfile.TemporaryDirectory() as tmp:
        config = readme_config(Path(tmp), changes, args.limit)
        ctx = mp.get_context("spawn")
        queue = ctx.Queue()
        env = dict(kv.partition("=")[::2] for kv in args.env)
        proc = ctx.Process(target=child, args=(str(config), queue, args.code, env))
        proc.start()
        got = queue.get()
        proc.join()
    samples = got["samples"]
    print(f"judge block: README's, changed: {changes or 'nothing'}; --limit {args.limit}; env {args.env or '-'}; "
          f"code {args.code or 'this checkout'}; exit {got['code']}; {samples[-1][0]:.0f} s")
    print("| phase | from (s) | RSS at start (GB) | peak RSS (GB) | anon / file at peak (GB) |")
    print("|---|---:|---:|---:|---|")
    order = list(dict.fromkeys(p for _, p, _ in samples))
    for name in order:
        rows = [(t, s) for t, p, s in samples if p == name]
        peak = max(rows, key=lambda r: r[1]["VmRSS"])[1]
        print(f"| {name} | {rows[0][0]:.0f} | {gb(rows[0][1]['VmRSS'])} | {gb(peak['VmRSS'])} | "
              f"{gb(peak['RssAnon'])} / {gb(peak['RssFile'])} |")
    print(f"highest RSS of the process (VmHWM): {gb(samples[-1][2]['VmHWM'])} GB")
    sizes = got["sizes"]
    if sizes:
        print(f"at the end: weights {gb(sizes['weights'])} GB ({sizes['dtype']}), oneDNN packed copy "
              f"{gb(sizes['packed copy'])} GB")
    if got["load_s"] is not None:
        print(f"load: {got['load_s']:.1f} s, VmHWM right after it {gb(got['hwm_after_load'])} GB")
    rate = got["tokens"] / got["judge_s"] if got["judge_s"] else 0.0
    print(f"judging: {len(got['replies'])} replies, {got['tokens']} completion tokens in {got['judge_s']:.1f} s "
          f"({rate:.2f} tokens/s)")
    if args.replies:
        Path(args.replies).write_text(json.dumps(got["replies"], indent=1, sort_keys=True), encoding="utf-8")
    if args.compare:
        before = json.loads(Path(args.compare).read_text(encoding="utf-8"))
        keys = sorted(set(before) | set(got["replies"]))
        differ = [k for k in keys if before.get(k) != got["replies"].get(k)]
        print(f"replies compared with {args.compare}: {len(keys)}, {len(differ)} differ"
              + (f" ({', '.join(differ[:5])})" if differ else ""))


if __name__ == "__main__":
    main()
