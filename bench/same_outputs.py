"""Does a change keep every output? Runs the bundled configs that run offline and fast, a sharded run and
its merge, `summary`, `report`, `compare`, `meta-eval`, `judge-check` and MT-bench, and hashes what each
command printed and every file it wrote, once the run ids, times, durations and paths are masked.

    .venv/bin/python bench/same_outputs.py --record before.json      # on the checkout before the change
    .venv/bin/python bench/same_outputs.py --against before.json     # after it: the files that differ, exit 1
    .venv/bin/python bench/same_outputs.py --before /old/checkout    # both checkouts here, with their timings

What runs: `example_en --only Metrics` (with --junit, --markdown and gates), `example_cn`, `example_rules`,
`example_chat --only Metrics`, `example_openai` against the test fake OpenAI server (tests/fake_openai_server.py,
in this process on a fixed port, its replies a function of the request), the same with a panel of two judges,
`eval.py generate` of the bundled targets (and of MT-bench's questions), Arena-Hard (three questions, two
models) on ../shared/data, the openai config sharded 1/2 and 2/2 and merged, `compare` of the merged run against the whole one, the closing lines and report of a save path,
`meta-eval` (ROUGE, Length) and MT-bench (single mode, two questions a category) on ../shared/data when
present, and the label-free judge check on the fake server. The local Qwen judge is never asked.

The checkout is copied to one place (PLACE; its source files only) before it runs, so the paths a config
resolves to, and so the config's hash, are the same for every checkout. PNG charts and SQLite files are
compared by name only (matplotlib writes its version and time into a PNG; a cache's pages are not
ordered). Masked: run ids, ISO times, `N s`/`N ms` durations, sizes (`0.7 MB`: a SQLite file's), and in JSON
every key that holds a time or a duration (TIMING_KEYS); stderr is compared as a sorted set of lines (the
progress lines come in the order the units finish). About 3 minutes on two busy cores.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RUN_ID = re.compile(r"\d{8}T\d{6}Z-(?:[a-z]+-)?[0-9a-f]{6}")
ISO = re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:?\d{2})?")
SECONDS = re.compile(r"\b\d+(?:\.\d+)? ?(?:s|ms|seconds|min)\b")
SIZE = re.compile(r"\b\d+(?:\.\d+)? ?(?:B|kB|KB|MB|GB)\b")  # a SQLite cache's size on disk varies
RATE = re.compile(r"\b\d+(?:\.\d+)? ?(?:it|items|requests|req)/s\b")
TIMING_KEYS = re.compile(r"(time|tstamp|^bytes$|seconds|duration|elapsed|started|finished|created|_at$|_s$|_ms$|per_second|"
                         r"throughput|latency|wall)", re.I)
BY_NAME = (".png", ".sqlite", ".db", ".sqlite3")
PLACE = Path(tempfile.gettempdir()) / "same-outputs"  # one place for every run: a config's hash holds its paths
PORT = 38517  # the fake server's port: the judge's base_url reaches the config's hash
DATA = "../shared/data"  # from the copied checkout


# ---------------------------------------------------------------- a judge decided by the request alone
def judge_reply(request):
    msgs = request.body.get("messages", [])
    text = "\x00".join(str(m.get("content")) for m in msgs)
    h = int(hashlib.sha256(text.encode()).hexdigest(), 16)
    if "[[rating]]" in text:
        return f"The answer is reasonable.\n\nRating: [[{h % 10 + 1}]]"
    if "[Assistant 1's answer]" in text or "Assistant 1" in text:
        return ("6 5", "5 6", "5 5")[h % 3] + "\nclose"
    if "[[A>>B]]" in text or "[[A>B]]" in text:  # Arena-Hard's judge prompt: its verdict labels
        return "My final verdict is " + ("[[A>B]]", "[[B>A]]", "[[A=B]]", "[[A>>B]]", "[[B>>A]]")[h % 5] + "."
    if '"score' in text or "JSON" in text:
        return json.dumps({"score": h % 5 + 1})
    return str(h % 5 + 1)


def fake_server():
    sys.path.insert(0, str(REPO / "tests"))
    from fake_openai_server import FakeOpenAIServer, _Handler  # noqa: PLC0415
    from http.server import ThreadingHTTPServer  # noqa: PLC0415
    import threading  # noqa: PLC0415

    server = FakeOpenAIServer(reply_fn=judge_reply)

    class Handler(_Handler):
        fake = server

    class Server(ThreadingHTTPServer):
        daemon_threads = True
        allow_reuse_address = True
        request_queue_size = 256

    server._httpd = Server(("127.0.0.1", PORT), Handler)
    server._thread = threading.Thread(target=server._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    server._thread.start()
    return server


# ---------------------------------------------------------------- what runs
def _openai_config(root: Path, out: Path) -> Path:
    import yaml  # noqa: PLC0415

    cfg = yaml.safe_load((root / "configs" / "example_openai.yaml").read_text(encoding="utf-8"))
    cfg["judge"].update(base_url=f"http://127.0.0.1:{PORT}/v1", model="fake-judge", mode="generate",
                        max_retries=0, concurrency=4)
    cfg["judge"].pop("api_key_env", None)
    cfg["save_path"] = str(out / "openai")
    for entry in cfg["answers"]:
        entry["path"] = str((root / "configs" / entry["path"]).resolve())
    cfg["target_file"] = str((root / "configs" / cfg["target_file"]).resolve())
    path = out / "openai.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False), encoding="utf-8")
    panel = dict(cfg, save_path=str(out / "panel"))
    one = {k: v for k, v in cfg["judge"].items()}
    panel["judge"] = [{**one, "name": "left"}, {**one, "name": "right", "model": "fake-judge-2"}]
    (out / "panel.yaml").write_text(yaml.safe_dump(panel, sort_keys=False), encoding="utf-8")
    (out / "model.yaml").write_text(f"model:\n  backend: openai\n  model: fake-model\n  base_url: "
                                    f"http://127.0.0.1:{PORT}/v1\n  max_retries: 0\n", encoding="utf-8")
    judge = out / "judge.yaml"
    judge.write_text(f"judge:\n  backend: openai\n  model: gpt-4\n  base_url: http://127.0.0.1:{PORT}/v1\n"
                     "  concurrency: 4\n  max_retries: 0\n", encoding="utf-8")
    return path


def steps(root: Path, out: Path) -> list[tuple[str, list[str]]]:
    """(name, eval.py's argv) in order; those needing ../shared/data only when it is there."""
    cfg = _openai_config(root, out)
    o = str(out)
    got = [
        ("en", ["--config", "configs/example_en.yaml", "--only", "Metrics", "--save_path", f"{o}/en",
                "--junit", f"{o}/en.xml", "--markdown", f"{o}/en.md", "--fail-under", "closed_qa:BLEU-4=0.01",
                "--fail-if-worse", "model_b:model_a:ROUGE-L"]),
        ("cn", ["--config", "configs/example_cn.yaml", "--save_path", f"{o}/cn", "--no-charts"]),
        ("rules", ["--config", "configs/example_rules.yaml", "--save_path", f"{o}/rules", "--junit", f"{o}/rules.xml",
                   "--markdown", f"{o}/rules.md", "--no-charts"]),
        ("chat", ["--config", "configs/example_chat.yaml", "--only", "Metrics", "--save_path", f"{o}/chat",
                  "--no-charts"]),
        ("openai", ["--config", str(cfg), "--fail-under-win-rate", "model_a:model_b=0.6", "--junit",
                    f"{o}/openai.xml", "--markdown", f"{o}/openai.md"]),
        ("shard1", ["--config", str(cfg), "--save_path", f"{o}/sharded", "--shard", "1/2", "--no-charts"]),
        ("shard2", ["--config", str(cfg), "--save_path", f"{o}/sharded", "--shard", "2/2", "--no-charts"]),
        ("merge", ["merge", f"{o}/merged", f"{o}/sharded/shard-1-of-2", f"{o}/sharded/shard-2-of-2"]),
        ("compare", ["compare", f"{o}/openai", f"{o}/merged", "--all", "--out", f"{o}/compare.json",
                     "--report", f"{o}/compare.html"]),
        ("summary", ["summary", f"{o}/openai", "--width", "100"]),
        ("report", ["report", f"{o}/en"]),
        ("judge-check", ["judge-check", "--config", str(cfg), "--limit", "2", "--output", f"{o}/judgecheck.json"]),
        ("panel", ["--config", f"{o}/panel.yaml", "--no-charts"]),
        ("generate", ["generate", "--questions", "examples/en/targets.json", "--model-config", f"{o}/model.yaml",
                      "--out", f"{o}/generated/answers.json", "--limit", "6"]),
    ]
    if (root / DATA / "metaeval" / "summeval.jsonl").exists():
        got.append(("meta-eval", ["meta-eval", "--data", f"{DATA}/metaeval/summeval.jsonl", "--evaluator", "ROUGE",
                                  "Length", "--limit", "120", "--output", f"{o}/metaeval.json"]))
    bench = root / DATA / "fastchat_mt_bench" / "fastchat" / "llm_judge" / "data" / "mt_bench"
    answers = root / DATA / "mt_bench" / "model_answer"
    if (bench / "question.jsonl").exists():
        got.append(("generate-mt", ["generate", "--questions", str(bench / "question.jsonl"), "--model-config",
                                    f"{o}/model.yaml", "--out", f"{o}/generated/mt.jsonl", "--limit", "3"]))
    arena = root / DATA / "arena_hard" / "arena-hard-v0.1"
    if (arena / "question.jsonl").exists() and (arena / "model_answer" / "gpt-4-0613.jsonl").exists():
        got.append(("arena-hard", ["arena-hard", "--bench", str(arena), "--judge-config", str(out / "judge.yaml"),
                                   "--model", "gpt-4-0613", "--model", "gpt-3.5-turbo-0125", "--limit", "3",
                                   "--save_path", f"{o}/arena_hard"]))
    if (bench / "question.jsonl").exists() and (answers / "gpt-3.5-turbo.jsonl").exists():
        got.append(("mt-bench", ["mt-bench", "--data", str(bench), "--answers", str(answers / "vicuna-13b-v1.3.jsonl"),
                                 str(answers / "gpt-3.5-turbo.jsonl"), "--judge-config", str(out / "judge.yaml"),
                                 "--mode", "single", "--save_path", f"{o}/mt_bench", "--limit", "2"]))
    return got


# ---------------------------------------------------------------- masking and hashing
def mask(text: str, root: Path, out: Path) -> str:
    for path, name in ((out, "<OUT>"), (root, "<REPO>"), (root.parent, "<PLACE>")):
        text = text.replace(str(path.resolve()), name).replace(str(path), name)
    text = RUN_ID.sub("<RUN_ID>", text)
    text = ISO.sub("<TIME>", text)
    text = RATE.sub("<RATE>", text)
    text = SIZE.sub("<SIZE>", text)
    return SECONDS.sub("<SECONDS>", text)


def _drop_timings(obj):
    if isinstance(obj, dict):
        return {k: ("<TIMING>" if TIMING_KEYS.search(k) and not isinstance(v, (dict, list)) else _drop_timings(v))
                for k, v in obj.items()}
    if isinstance(obj, list):
        return [_drop_timings(v) for v in obj]
    return obj


def normalised(path: Path, root: Path, out: Path) -> str:
    text = path.read_text(encoding="utf-8", errors="replace")
    if path.suffix in (".json", ".jsonl"):
        try:
            rows = [json.loads(line) for line in text.splitlines() if line.strip()] if path.suffix == ".jsonl" \
                else [json.loads(text)]
            text = "\n".join(json.dumps(_drop_timings(r), indent=1, ensure_ascii=False) for r in rows)
        except json.JSONDecodeError:
            pass
    return mask(text, root, out)


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def run_all(checkout: Path, quiet: bool = False) -> tuple[dict[str, str], dict[str, str], dict[str, float]]:
    """Copy `checkout` to PLACE, run every step there: (key -> sha256, key -> masked text, step -> seconds).
    One instance at a time on a machine (PLACE and PORT are fixed): a second waits for the first."""
    lock = open(Path(tempfile.gettempdir()) / "same-outputs.lock", "w")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        print("  waiting for another bench/same_outputs.py run on this machine", flush=True)
        fcntl.flock(lock, fcntl.LOCK_EX)
    try:
        return _run_all(checkout, quiet)
    finally:
        lock.close()


def _run_all(checkout: Path, quiet: bool) -> tuple[dict[str, str], dict[str, str], dict[str, float]]:
    shutil.rmtree(PLACE, ignore_errors=True)
    root = PLACE / "checkout"
    shutil.copytree(checkout, root, ignore=shutil.ignore_patterns(".git", ".venv*", ".cache", "results",
                                                                  "__pycache__", ".pytest_cache"))
    if (checkout.parent / "shared").exists():
        (PLACE / "shared").symlink_to((checkout.parent / "shared").resolve())
    out = PLACE / "out"
    out.mkdir()
    env = {**os.environ, "NO_COLOR": "1", "EVAL_NO_PROGRESS": "1", "PYTHONPATH": str(root), "OPENAI_API_KEY": "sk-fake",
           "EVAL_CACHE_DIR": os.environ.get("EVAL_CACHE_DIR", str(Path(tempfile.gettempdir()) / "same-outputs-cache"))}
    texts: dict[str, str] = {}
    times: dict[str, float] = {}
    server = fake_server()
    try:
        for name, argv in steps(root, out):
            t0 = time.perf_counter()
            proc = subprocess.run([sys.executable, "eval.py", *argv], cwd=root, capture_output=True, text=True,
                                  env=env, timeout=600)
            times[name] = time.perf_counter() - t0
            if not quiet:
                print(f"  {name:<12} exit {proc.returncode}  {times[name]:6.1f} s", flush=True)
            texts[f"{name}: exit"] = str(proc.returncode)
            texts[f"{name}: stdout"] = mask(proc.stdout, root, out)
            # stderr's progress lines come in the order units finish (side by side for an HTTP judge): sorted
            texts[f"{name}: stderr"] = "\n".join(sorted(mask(proc.stderr, root, out).splitlines()))
        for p in sorted(out.rglob("*")):
            if not p.is_file():
                continue
            rel = RUN_ID.sub("<RUN_ID>", p.relative_to(out).as_posix())
            texts[f"file {rel}"] = "(by name)" if p.suffix in BY_NAME else normalised(p, root, out)
    finally:
        server._httpd.shutdown()
        server._httpd.server_close()
        shutil.rmtree(PLACE, ignore_errors=True)
    return {k: sha(v) for k, v in texts.items()}, texts, times


def differences(before: dict[str, str], after: dict[str, str]) -> list[str]:
    return sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--record", type=Path, help="write the manifest (output -> sha256, and the masked texts) here")
    mode.add_argument("--against", type=Path, help="compare this checkout's outputs with a recorded manifest")
    mode.add_argument("--before", type=Path, help="run that checkout, then this one, and compare")
    ap.add_argument("--checkout", type=Path, default=REPO, help="the checkout to run (default: this one)")
    args = ap.parse_args()
    if args.before:
        print(f"before: {args.before}")
        b_sha, b_text, b_times = run_all(args.before.resolve())
        recorded = {"sha256": b_sha, "texts": b_text, "times": b_times}
    elif args.against:
        recorded = json.loads(args.against.read_text(encoding="utf-8"))
    print(f"checkout: {args.checkout}")
    t0 = time.perf_counter()
    shas, texts, times = run_all(args.checkout.resolve())
    print(f"{len(shas)} outputs in {time.perf_counter() - t0:.0f} s")
    if args.record:
        args.record.write_text(json.dumps({"sha256": shas, "texts": texts, "times": times}, indent=1,
                                          ensure_ascii=False), encoding="utf-8")
        print(f"recorded: {args.record}")
        return 0
    differ = differences(recorded["sha256"], shas)
    for key in differ:
        print(f"DIFFERS: {key}")
        for line in _first_difference(recorded.get("texts", {}).get(key), texts.get(key)):
            print(f"    {line}")
    print(f"{len(shas)} outputs compared, {len(differ)} differ")
    return 1 if differ else 0


def _first_difference(a: str | None, b: str | None) -> list[str]:
    if a is None or b is None:
        return ["only " + ("after" if a is None else "before")]
    la, lb = a.splitlines(), b.splitlines()
    for i, (x, y) in enumerate(zip(la, lb)):
        if x != y:
            return [f"line {i + 1} before: {x[:200]}", f"line {i + 1} after:  {y[:200]}"]
    return [f"{len(la)} vs {len(lb)} lines"]


if __name__ == "__main__":
    raise SystemExit(main())
