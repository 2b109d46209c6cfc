"""Save paths for the viewer's tests, made by the real pipeline (`eval.py --config ...` in process):

- `battle_run`: three models (one named with markup, one answering with markup, or on rewriting with
  model_b's answers with one word changed) on the English
  example, Metrics and GPT ratings and battles in both orders against the fake OpenAI-compatible
  judge (tests/fake_openai_server.py), which prefers model_a, except on closed_qa where it prefers
  whichever answer it is shown first (the verdict flips with the order), and which answers markup
  with an unparseable reply holding markup (an invalid verdict with its raw text);
- `trend_runs`: three runs of the same two models, Metrics only (ROUGE on every category), where
  model_b's answers become model_a's (better) and then are cut to a few words (worse);
- `start_view`: `eval.py view` as a subprocess on a free port, its address and token read from
  the line it prints.
"""

from __future__ import annotations

import json
import math
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
EN = REPO / "examples" / "en"
A_RECORDS = json.loads((EN / "answers_model_a.json").read_text(encoding="utf-8"))
B_RECORDS = json.loads((EN / "answers_model_b.json").read_text(encoding="utf-8"))
HOSTILE = [
    "</script><script>window.__pwned = 1; alert(1)</script>",
    '<img src=x onerror="window.__pwned = 2">',
    "<svg onload=\"window.__pwned = 3\"></svg><!-- --> ]]> \u2028 &amp; 'quotes'",
]
HOSTILE_MODEL = '<img src=x onerror="window.__pwned=4">'
HOSTILE_REPLY = "Both answers <b>look</b> fine.</pre><script>window.__pwned = 5</script><img src=x onerror=\"window.__pwned=6\">"
HOSTILE_QUESTION = '<script>window.__pwned = 7</script>'
HOSTILE_TARGET = '<iframe src="javascript:window.__pwned=8"></iframe>'
HOSTILE_FOLDER = "<img src=x onerror=window.__pwned=9>"
A_TEXTS = [r["output"] for r in A_RECORDS if r["output"]]


def _write(path: Path, data: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    return path


def judge(rec) -> Any:
    """The fake judge: battles prefer model_a (flip with the order on closed_qa), markup gets an
    unparseable reply; ratings are high for model_a's answers, low for the others."""
    try:
        from tests.fake_openai_server import Reply
    except ImportError:
        from fake_openai_server import Reply
    text = rec.user_text
    if "[Assistant 1's answer]" in text:
        first = text.split("[Assistant 1's answer]", 1)[1].split("[Assistant 2's answer]", 1)[0]
        if "onerror" in text or "<script>" in first:
            return Reply(content=HOSTILE_REPLY)
        if any(q in text for q in CLOSED_QA_QUESTIONS):
            return Reply(content="8 3\nThe first answer is better.")
        first_is_a = any(a in first for a in A_TEXTS)
        return Reply(content="9 2\nThe first answer is better." if first_is_a else "2 9\nThe second answer is better.")
    good = any(a in text for a in A_TEXTS)
    probs = {"5": 0.7, "4": 0.3} if good else {"2": 0.6, "1": 0.4}
    return Reply(content=max(probs, key=probs.get), top_logprobs=[{k: math.log(v) for k, v in probs.items()}])


CLOSED_QA_QUESTIONS = [r["instruction"] for r in A_RECORDS if r["category"] == "closed_qa"]


def _run(cfg: dict[str, Any], path: Path) -> None:
    from evaluate.cli import main

    _write(path, cfg)
    code = main(["--config", str(path), "--no-charts"])
    assert code in (0, 3), code


def battle_run(tmp: Path, server, folder: str = "battle") -> Path:
    """A real save path: Metrics + GPT ratings + battles of three models, hostile text included."""
    hostile = json.loads(json.dumps(B_RECORDS))
    for i, r in enumerate(hostile):
        if r["category"] in ("classification", "closed_qa"):
            r["output"] = HOSTILE[i % len(HOSTILE)] + " " + r["output"]
        elif r["category"] == "rewriting":  # near-identical to model_b's: one word changed
            r["output"] = r["output"].replace(" the ", " thy ", 1)
    answers = [{"name": "model_a", "path": str(EN / "answers_model_a.json")},
               {"name": "model_b", "path": str(EN / "answers_model_b.json")},
               {"name": HOSTILE_MODEL, "path": str(_write(tmp / "answers_hostile.json", hostile))}]
    server.reply_fn = judge
    cfg = {"language": "en", "save_path": str(tmp / folder), "answers": answers,
           "target_file": str(EN / "targets.json"),
           "category": {"closed_qa": {"GPT": ["correctness"], "Metrics": ["BLEU", "ROUGE"]},
                        "classification": {"GPT": ["correctness"], "Metrics": ["F1 score"]},
                        "open_qa": {"Metrics": ["Distinct"]},
                        "extraction": {"GPT": ["correctness"], "Metrics": ["F1 score"]},
                        "rewriting": {"GPT": ["correctness"], "Metrics": ["ROUGE"]},
                        "generation": {"GPT": ["relevance"], "Metrics": ["ROUGE"]},
                        "summarization": {"GPT": ["correctness"], "Metrics": ["ROUGE"]}},
           "judge": {"backend": "openai", "model": "fake-judge", "base_url": server.url, "api_key_env": "VIEW_KEY",
                     "mode": "generate", "max_retries": 1, "timeout": 5, "both_orders": True}}
    os.environ.setdefault("VIEW_KEY", "sk-view-test")
    _run(cfg, tmp / f"{folder}.json")
    return tmp / folder


def hostile_text_run(tmp: Path, folder: str = HOSTILE_FOLDER) -> Path:
    """Metrics only, in a folder named with markup, with markup in a question and a reference."""
    a = json.loads(json.dumps(A_RECORDS))
    b = json.loads(json.dumps(B_RECORDS))
    targets = json.loads((EN / "targets.json").read_text(encoding="utf-8"))
    for recs in (a, b, targets):
        for r in recs:
            if r["category"] == "rewriting":
                r["instruction"] = HOSTILE_QUESTION + " " + r["instruction"]
    for r in targets:
        if r["category"] == "rewriting":
            r["target"] = HOSTILE_TARGET + " " + r["target"]
    cfg = {"language": "en", "save_path": str(tmp / folder),
           "answers": [{"name": "model_a", "path": str(_write(tmp / "ha.json", a))},
                       {"name": "model_b", "path": str(_write(tmp / "hb.json", b))}],
           "target_file": str(_write(tmp / "ht.json", targets)),
           "category": {"rewriting": {"Metrics": ["ROUGE"]}}}
    _run(cfg, tmp / "hostile_text.json")
    return tmp / folder


def single_run(tmp: Path, folder: str = "solo") -> Path:
    """One model, Metrics only: a run with no pair."""
    cfg = {"language": "en", "save_path": str(tmp / folder), "target_file": str(EN / "targets.json"),
           "answers": [{"name": "model_a", "path": str(EN / "answers_model_a.json")}],
           "category": {"closed_qa": {"Metrics": ["ROUGE"]}, "open_qa": {"Metrics": ["Distinct"]}}}
    _run(cfg, tmp / "solo.json")
    return tmp / folder


def trend_runs(tmp: Path, parent: str = "nightly") -> list[Path]:
    """Three runs of model_a and model_b, Metrics only: model_b as given, then answering as model_a
    does (better), then cut to its first three words (worse)."""
    better = json.loads(json.dumps(B_RECORDS))
    worse = json.loads(json.dumps(B_RECORDS))
    by_id = {str(r["id"]): r["output"] for r in A_RECORDS}
    for r in better:
        r["output"] = by_id[str(r["id"])]
    for r in worse:
        r["output"] = " ".join(by_id[str(r["id"])].split()[:3])
    versions = [EN / "answers_model_b.json", _write(tmp / "b_better.json", better), _write(tmp / "b_worse.json", worse)]
    cats = sorted({r["category"] for r in A_RECORDS})
    out = []
    for i, b_path in enumerate(versions, 1):
        save = tmp / parent / f"night-{i}"
        cfg = {"language": "en", "save_path": str(save), "target_file": str(EN / "targets.json"),
               "answers": [{"name": "model_a", "path": str(EN / "answers_model_a.json")},
                           {"name": "model_b", "path": str(b_path)}],
               "category": {c: {"Metrics": ["ROUGE"]} for c in cats}}
        _run(cfg, tmp / f"trend-{i}.json")
        out.append(save)
        time.sleep(1.1)  # each run its own second: the runs' order is their manifests' times
    return out


@dataclass
class View:
    proc: subprocess.Popen
    base: str
    token: str

    @property
    def url(self) -> str:
        return f"{self.base}/?token={self.token}"

    def get(self, path: str, token: str | None = "", headers: dict[str, str] | None = None) -> tuple[int, bytes, dict]:
        """GET `path` (with the token as a header unless token is None; a given token replaces it)."""
        hdrs = dict(headers or {})
        if token is not None:
            hdrs["X-Token"] = token or self.token
        req = urllib.request.Request(self.base + path, headers=hdrs)
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                return r.status, r.read(), dict(r.headers)
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read(), dict(exc.headers)

    def json(self, path: str) -> Any:
        status, body, _ = self.get(path)
        assert status == 200, (status, body[:500])
        return json.loads(body)

    def post(self, path: str, data: Any, token: str | None = "") -> tuple[int, Any]:
        hdrs = {"Content-Type": "application/json"}
        if token is not None:
            hdrs["X-Token"] = token or self.token
        req = urllib.request.Request(self.base + path, data=json.dumps(data).encode(), headers=hdrs, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read() or b"{}")

    def stop(self, sig: int = signal.SIGINT) -> str:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        return self.proc.stderr.read() if self.proc.stderr else ""


def start_view(*folders: Path, extra: tuple[str, ...] = ()) -> View:
    """`eval.py view FOLDER ... --port 0 --no-browser` in a subprocess; waits for its `view:` line."""
    proc = subprocess.Popen([sys.executable, str(REPO / "eval.py"), "view", *map(str, folders), "--port", "0",
                             "--no-browser", *extra], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    line = proc.stdout.readline()
    m = re.match(r"view: (http://127\.0\.0\.1:\d+)/\?token=([A-Za-z0-9_-]+)$", line.strip())
    if not m:
        proc.kill()
        raise AssertionError(f"no address line: {line!r} {proc.stderr.read()[-2000:]}")
    return View(proc, m.group(1), m.group(2))


def browser_world(tmp: Path) -> dict[str, Any]:
    """What the browser tests open: root/ with the battle run, three nightly runs and a run in a folder
    named with markup (markup in a question and a reference too)."""
    try:
        from tests.fake_openai_server import FakeOpenAIServer
    except ImportError:
        from fake_openai_server import FakeOpenAIServer
    root = tmp / "root"
    root.mkdir()
    with FakeOpenAIServer() as server:
        battle = battle_run(root, server)
    nights = trend_runs(root)
    hostile = hostile_text_run(root)
    return {"root": root, "battle": battle, "nights": nights, "hostile": hostile}
