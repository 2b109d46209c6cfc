"""`eval.py view` as a server, through HTTP on 127.0.0.1 (no browser): the runs and their trends, a run's
items and filters, an item, two runs compared, labels; and what a server owes: the token (403 and
nothing written without it), nothing outside the given folders (`..`, encoded `..`, links leading out),
JSON served as JSON under a Content-Security-Policy, the Host checked, two tabs losing no label, a
killed server leaving no half-written line, a malformed labels line named and skipped. Every run is
made by the real pipeline (tests/view_fixtures.py)."""

from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from urllib.parse import quote

import pytest

from evaluate.savepath.labels import read_labels

try:
    from tests import view_fixtures as vf
    from tests.fake_openai_server import FakeOpenAIServer
except ImportError:
    import view_fixtures as vf
    from fake_openai_server import FakeOpenAIServer

REPO = Path(__file__).resolve().parents[1]
SECRET = "TOP-SECRET-OUTSIDE-THE-FOLDERS"


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """root/ with a battle run, three nightly runs, a run in a folder named with markup, a link to a
    save path outside root, and a run whose result file is a link leading out; outside/ beside it."""
    tmp = tmp_path_factory.mktemp("view")
    root = tmp / "root"
    root.mkdir()
    with FakeOpenAIServer() as server:
        battle = vf.battle_run(root, server)
    vf.trend_runs(root)
    vf.single_run(root)
    outside = tmp / "outside"
    (outside / "results").mkdir(parents=True)
    (outside / "results" / "model_a.json").write_text(json.dumps({"model": "model_a", "items": [
        {"id": "1", "category": SECRET, "instruction": SECRET, "output": SECRET, "scores": {"Metrics/X": 1.0}}]}))
    (outside / "secret.txt").write_text(SECRET)
    (root / "evil").symlink_to(outside, target_is_directory=True)
    linked = root / "linked"
    (linked / "results").mkdir(parents=True)
    (linked / "results" / "model_a.json").symlink_to(outside / "results" / "model_a.json")
    view = vf.start_view(root)
    yield {"root": root, "battle": battle, "outside": outside, "view": view}
    view.stop()


def rid_of(view, name: str) -> str:
    runs = view.json("/api/runs")["runs"]
    return next(r["rid"] for r in runs if r["name"] == name)


def raw_get(view, path: str, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    """A GET whose path is sent byte for byte (no client-side normalising of `..`)."""
    host, port = view.base.rsplit("//", 1)[1].split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    conn.putrequest("GET", path, skip_host=True, skip_accept_encoding=True)
    headers = {"Host": f"127.0.0.1:{port}", "X-Token": view.token, **(headers or {})}
    for k, v in headers.items():
        conn.putheader(k, v)
    conn.endheaders()
    r = conn.getresponse()
    body = r.read()
    conn.close()
    return r.status, body


# ---------------------------------------------------------------------------------------------- runs
def test_runs_newest_first_from_their_manifests(world):
    view = world["view"]
    d = view.json("/api/runs")
    names = [r["name"] for r in d["runs"]]
    assert {"battle", "nightly/night-1", "nightly/night-2", "nightly/night-3", "linked"} <= set(names)
    assert "evil" not in names and not any("evil" in r["rid"] for r in d["runs"])  # a link leading out: not listed
    timed = [r["finished"] for r in d["runs"] if r["finished"]]
    assert timed == sorted(timed, reverse=True)
    battle = next(r for r in d["runs"] if r["name"] == "battle")
    assert set(battle["models"]) == {"model_a", "model_b", vf.HOSTILE_MODEL}
    assert battle["items"] == 25 and "closed_qa" in battle["categories"] and battle["judge"] == "openai fake-judge"
    assert battle["trust"]["trustworthy"] is None and battle["trust"]["verdict"].startswith("not checked")
    linked = next(r for r in d["runs"] if r["name"] == "linked")
    assert any("links leading out" in p for p in linked["problems"])
    assert SECRET not in json.dumps(d)


def test_a_run_is_read_only_when_opened(world, monkeypatch):
    """The list of runs reads manifests, never the result files; a run is read when opened, then cached."""
    from evaluate.view import data
    from evaluate.view.catalog import Catalog

    loads = []
    real = data.load_run
    monkeypatch.setattr(data, "load_run", lambda p: loads.append(p) or real(p))
    reads = []
    real_results = data.read.read_results
    monkeypatch.setattr(data.read, "read_results", lambda p: reads.append(p) or real_results(p))
    cat = Catalog([world["root"]])
    headers = cat.scan()
    assert len(headers) >= 5 and loads == []
    assert reads == []  # every run here has a manifest; the one with a link leading out is not read at all
    rid = cat.rid(world["battle"])
    cat.view(rid)
    cat.view(rid)
    assert loads == [world["battle"]]


# ---------------------------------------------------------------------------------------------- token
def test_every_request_needs_the_token_and_a_write_without_it_writes_nothing(world):
    view = world["view"]
    rid = rid_of(view, "battle")
    labels = world["battle"] / "labels.jsonl"
    before = labels.read_bytes() if labels.exists() else b""
    for token in (None, "wrong-token", ""):
        status, body, _ = view.get("/api/runs", token=token if token != "" else None)
        assert status == 403, status
    status, _, _ = view.get(f"/api/runs?token={view.token}", token=None)
    assert status == 200  # a GET may carry it in the address
    payload = {"run": rid, "id": "9", "pair": [0, 1], "verdict": "A", "note": "no token"}
    for token in (None, "wrong-token"):
        status, body = view.post("/api/labels", payload, token=token)
        assert status == 403 and "token" in body["error"]
    status, _ = view.post(f"/api/labels?token={view.token}", payload, token=None)  # a write: never from the address
    assert status == 403
    assert (labels.read_bytes() if labels.exists() else b"") == before
    status, body = view.post("/api/labels", payload)
    assert status == 200 and body["label"]["verdict"] == "A"
    assert labels.read_bytes().startswith(before) and labels.read_bytes().count(b"\n") == before.count(b"\n") + 1


def test_the_host_is_checked(world):
    view = world["view"]
    port = view.base.rsplit(":", 1)[1]
    status, _ = raw_get(view, "/api/runs", {"Host": f"attacker.example:{port}"})
    assert status == 403
    status, _ = raw_get(view, "/api/runs")
    assert status == 200


# ---------------------------------------------------------------------------------------------- traversal
@pytest.mark.parametrize("run", [
    "0:../outside", "0:nightly/../../outside", "0:%2e%2e/outside", "0:..%2foutside", "0:/etc", "0:" + "../" * 12 + "etc",
    "0:evil", "0:linked", "1:.", "x:.", "0:battle/../../outside",
])
def test_no_run_outside_the_folders(world, run):
    view = world["view"]
    for path in (f"/api/run?run={quote(run, safe='')}", f"/api/run?run={run}",
                 f"/api/items?run={quote(run, safe='')}", f"/api/file?run={quote(run, safe='')}&path=secret.txt"):
        status, body = raw_get(view, path)
        assert status in (403, 404), (path, status)
        assert SECRET.encode() not in body


@pytest.mark.parametrize("path", [
    "../outside/secret.txt", "../../outside/secret.txt", "%2e%2e/%2e%2e/outside/secret.txt",
    "..%2f..%2foutside%2fsecret.txt", "results/../../outside/secret.txt", "/etc/passwd",
    str(Path("/etc/passwd")), "results/../../../../../../etc/passwd",
])
def test_no_file_outside_the_run(world, path):
    view = world["view"]
    rid = quote(rid_of(view, "battle"), safe="")
    for p in (quote(path, safe=""), path):
        status, body = raw_get(view, f"/api/file?run={rid}&path={p}")
        assert status in (403, 404), (p, status)
        assert SECRET.encode() not in body and b"root:" not in body


def test_raw_paths_and_links(world):
    view = world["view"]
    for path in ("/static/../../etc/passwd", "/static/%2e%2e/%2e%2e/etc/passwd", "/static/..%2f..%2fetc%2fpasswd",
                 "/../../../etc/passwd", "/%2e%2e/%2e%2e/etc/passwd", "/api/../static/app.js", "/static/app.js/../x"):
        status, body = raw_get(view, path)
        assert status == 404, (path, status)
        assert b"root:" not in body
    # the run itself serves its own files, sandboxed
    rid = quote(rid_of(view, "battle"), safe="")
    (world["battle"] / "leak.json").symlink_to(world["outside"] / "secret.txt")
    try:
        status, body = raw_get(view, f"/api/file?run={rid}&path=leak.json")
        assert status == 403 and SECRET.encode() not in body  # a run holding a link leading out is not served
    finally:
        (world["battle"] / "leak.json").unlink()
    status, body, headers = view.get(f"/api/file?run={rid}&path=report.html")
    assert status == 200 and body.startswith(b"<!DOCTYPE html>")
    assert headers["Content-Security-Policy"].startswith("sandbox allow-scripts;")


def test_served_as_what_it_is(world):
    view = world["view"]
    status, body, headers = view.get("/", token=None)
    assert status == 200 and headers["Content-Type"] == "text/html; charset=utf-8"
    assert b"<script src=\"/static/app.js\"" in body and body.count(b"<script") == 1  # no inline script
    assert "default-src 'self'" in headers["Content-Security-Policy"]
    assert "script-src 'self'" in headers["Content-Security-Policy"]
    rid = quote(rid_of(view, "battle"), safe="")
    status, body, headers = view.get(f"/api/item?run={rid}&id=5&pair=0,2")
    assert headers["Content-Type"] == "application/json; charset=utf-8"
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert "default-src 'self'" in headers["Content-Security-Policy"]
    assert vf.HOSTILE_MODEL in json.loads(body)["models"][0]["name"] + json.loads(body)["models"][2]["name"]
    for name in ("/static/app.js", "/static/app.css"):
        status, body, headers = view.get(name, token=None)
        assert status == 200 and headers["X-Content-Type-Options"] == "nosniff"
    js = (REPO / "evaluate" / "view" / "static" / "app.js").read_text()
    assert "innerHTML" not in js and "outerHTML" not in js and "insertAdjacentHTML" not in js
    assert "document.write" not in js and "eval(" not in js


# ---------------------------------------------------------------------------------------------- a run
def run_info(view, name: str) -> tuple[str, dict]:
    rid = rid_of(view, name)
    return rid, view.json(f"/api/run?run={quote(rid, safe='')}")


def items(view, rid: str, **q) -> dict:
    qs = "&".join(f"{k}={quote(str(v), safe='')}" for k, v in q.items())
    return view.json(f"/api/items?run={quote(rid, safe='')}&limit=500&{qs}")


def test_a_run_its_headline_and_its_filters(world):
    view = world["view"]
    rid, info = run_info(view, "battle")
    models = info["models"]
    a, b = models.index("model_a"), models.index("model_b")
    pair = f"{a},{b}"
    assert any(p["comparison"] and p["comparison"]["confirmatory"] for p in info["headline"]["pairs"])
    assert any(p["battle"] for p in info["headline"]["pairs"])
    every = items(view, rid, pair=pair)
    assert every["total"] == info["items"] and len(every["ids"]) == every["total"]
    closed = items(view, rid, pair=pair, cat="closed_qa")
    assert closed["total"] == 2 and {r["c"] for r in closed["rows"]} == {"closed_qa"}
    flips = items(view, rid, pair=pair, flipped="1")  # the fake judge takes the first answer on closed_qa
    assert {r["c"] for r in flips["rows"]} == {"closed_qa"} and flips["total"] == 2 and all(r["f"] for r in flips["rows"])
    hostile = models.index(vf.HOSTILE_MODEL)
    inv = items(view, rid, pair=f"{a},{hostile}", invalid="1")
    assert inv["total"] >= 1 and all(r["x"] for r in inv["rows"])
    dis = items(view, rid, pair=pair, disagree="1")
    assert dis["total"] == sum(r["d"] for r in every["rows"]) and all(r["d"] for r in dis["rows"])
    ranged = items(view, rid, pair=pair, score="Metrics/F1", model=a, lo=0.99, hi=1)
    assert ranged["total"] >= 1 and all(r["s"][a] >= 0.99 for r in ranged["rows"])
    found = items(view, rid, pair=pair, q="PHOTOSYNTHESIS")
    assert found["total"] == 1 and found["rows"][0]["id"] == "9"
    assert items(view, rid, pair=pair, q="no such text anywhere 12345")["total"] == 0
    page = view.json(f"/api/items?run={quote(rid, safe='')}&pair={pair}&offset=3&limit=2")
    assert [r["id"] for r in page["rows"]] == every["ids"][3:5]


def test_an_item_whole(world):
    view = world["view"]
    rid, info = run_info(view, "battle")
    models = info["models"]
    a, b, h = models.index("model_a"), models.index("model_b"), models.index(vf.HOSTILE_MODEL)
    d = view.json(f"/api/item?run={quote(rid, safe='')}&id=9&pair={h},{b}")
    assert d["question"].startswith("According to the text") and d["targets"] == ["Carbon dioxide and water."]
    assert d["battle"]["flipped"] and len(d["battle"]["orders"]) == 2
    firsts = {o["first"] for o in d["battle"]["orders"]}
    assert firsts == {vf.HOSTILE_MODEL, "model_b"}
    for o in d["battle"]["orders"]:  # each order's winner is the answer shown first
        assert (o["verdict"] == "A") == (o["first"] == vf.HOSTILE_MODEL)
        assert o["raw"].startswith("8 3")
    # on rewriting, the third model's answers are model_b's with one word changed: near-identical, marked
    rewriting = [i for i in items(view, rid, cat="rewriting")["ids"]]
    diffs = [view.json(f"/api/item?run={quote(rid, safe='')}&id={i}&pair={h},{b}")["diff"] for i in rewriting]
    changed = [x for x in diffs if x and not x["identical"]]
    assert changed and all("".join(t for same, t in x["a"] if not same) == "thy" for x in changed)
    assert all("".join(t for same, t in x["b"] if not same) == "the" for x in changed)
    assert "GPT/correctness" in d["keys"] and "Metrics/BLEU-4" in d["keys"]
    with_invalid = items(view, rid, pair=f"{a},{h}", invalid="1")["ids"]
    shown = [view.json(f"/api/item?run={quote(rid, safe='')}&id={i}&pair={a},{h}") for i in with_invalid]
    bad = [x for x in shown if x["battle"] and x["battle"]["verdict"] == "invalid"]
    orders = [o for x in bad for o in x["battle"]["orders"] if o["verdict"] == "invalid"]
    assert bad and orders and all(o["raw"] == vf.HOSTILE_REPLY and o["reason"] for o in orders)
    status, _, _ = view.get(f"/api/item?run={quote(rid, safe='')}&id=nope")
    assert status == 404
    status, _, _ = view.get(f"/api/item?run={quote(rid, safe='')}&id=9&pair=0,9")
    assert status == 400


def test_a_run_of_one_model(world):
    view = world["view"]
    rid, info = run_info(view, "solo")
    assert info["models"] == ["model_a"] and info["items"] == 5 and info["headline"]["pairs"] == []
    listed = items(view, rid)
    assert listed["total"] == 5 and all(r["v"] is None and not r["f"] and not r["d"] for r in listed["rows"])
    d = view.json(f"/api/item?run={quote(rid, safe='')}&id={listed['ids'][0]}")
    assert d["battle"] is None and d["diff"] is None and d["judge"] is None
    assert view.json(f"/api/labels?run={quote(rid, safe='')}")["battles"] is False


# ---------------------------------------------------------------------------------------------- runs over time
def test_trend_across_three_runs_with_the_paired_verdicts(world):
    view = world["view"]
    groups = view.json("/api/trends")["groups"]
    g = next(g for g in groups if [r["name"] for r in g["runs"]] == ["nightly/night-1", "nightly/night-2",
                                                                     "nightly/night-3"])
    s = next(s for s in g["series"] if s["model"] == "model_b" and s["score"] == "Metrics/ROUGE-L")
    assert [st["word"] for st in s["steps"]] == ["better", "worse"]
    assert s["values"][1] > s["values"][0] and s["values"][2] < s["values"][1]
    assert s["steps"][1]["text"].startswith("nightly/night-3 worse than nightly/night-2 on Metrics/ROUGE-L for model_b")
    same = next(s for s in g["series"] if s["model"] == "model_a" and s["score"] == "Metrics/ROUGE-L")
    assert [st["word"] for st in same["steps"]] == ["no detectable difference"] * 2


def test_two_runs_item_by_item_largest_change_first(world):
    view = world["view"]
    r1, r2 = rid_of(view, "nightly/night-1"), rid_of(view, "nightly/night-2")
    d = view.json(f"/api/compare?a={quote(r1, safe='')}&b={quote(r2, safe='')}&limit=500")
    assert d["total"] == len(d["rows"]) > 10
    changes = [r["change"] for r in d["rows"]]
    assert changes == sorted(changes, reverse=True) and changes[0] > 0
    assert all(s["model"] == "model_b" for r in d["rows"] for s in r["scores"])  # only model_b's answers changed
    top = d["rows"][0]["scores"][0]
    assert top["d"] == pytest.approx(top["b"] - top["a"])
    assert any(st["model"] == "model_b" and st["word"] == "better" for st in d["steps"])


# ---------------------------------------------------------------------------------------------- labels
def test_a_malformed_labels_line_is_named_and_skipped_and_a_cut_one_too(world):
    view = world["view"]
    save = world["root"] / "nightly" / "night-1"
    rid = rid_of(view, "nightly/night-1")
    ok = {"run": rid, "id": "1", "pair": [0, 1], "verdict": "B"}
    assert view.post("/api/labels", ok)[0] == 200
    with open(save / "labels.jsonl", "ab") as fh:
        fh.write(b'{"id": "2", "verdict": "sideways"}\n')
        fh.write(b"not json at all\n")
        fh.write(b'{"id": "3", "category": "chat", "model_a": "model_a", "model_b": "mod')  # a cut write
    summary = view.json(f"/api/labels?run={quote(rid, safe='')}")
    assert summary["count"] == 1
    lines = "\n".join(summary["problems"])
    assert f"{save / 'labels.jsonl'} line 2: not a label" in lines and '"verdict"' in lines
    assert "line 3: not JSON" in lines and "line 4: cut short" in lines
    assert view.post("/api/labels", {**ok, "id": "2"})[0] == 200  # appended on a line of its own
    found = read_labels(save)
    assert [lab.id for lab in found.labels] == ["1", "2"] and len(found.problems) == 3
    assert "line 5" not in "\n".join(found.problems)


def test_two_tabs_labelling_at_once_lose_no_label(world):
    view = world["view"]
    rid, info = run_info(view, "nightly/night-2")
    ids = items(view, rid)["ids"]
    save = world["root"] / "nightly" / "night-2"
    before = len(read_labels(save).labels)
    errors = []

    def tab(k: int) -> None:
        for i in range(30):
            status, _ = view.post("/api/labels", {"run": rid, "id": ids[i % len(ids)], "pair": [0, 1],
                                                  "verdict": ["A", "B", "tie"][(i + k) % 3], "note": f"tab {k} #{i}"})
            if status != 200:
                errors.append(status)

    tabs = [threading.Thread(target=tab, args=(k,)) for k in range(3)]
    for t in tabs:
        t.start()
    for t in tabs:
        t.join()
    found = read_labels(save)
    assert errors == [] and found.problems == []
    assert len(found.labels) == before + 90
    assert {lab.note for lab in found.labels[before:]} == {f"tab {k} #{i}" for k in range(3) for i in range(30)}


def test_a_killed_server_leaves_no_half_written_line(world):
    save = world["root"] / "nightly" / "night-3"
    view = vf.start_view(world["root"])
    rid = rid_of(view, "nightly/night-3")
    ids = items(view, rid)["ids"]
    before = len(read_labels(save).labels)
    acked = [0]
    stop = threading.Event()

    def label() -> None:
        i = 0
        while not stop.is_set():
            try:
                status, _ = view.post("/api/labels", {"run": rid, "id": ids[i % len(ids)], "pair": [0, 1],
                                                      "verdict": "A", "note": "x" * 1500})
            except OSError:
                return
            if status == 200:
                acked[0] += 1
            i += 1

    t = threading.Thread(target=label)
    t.start()
    deadline = time.monotonic() + 30
    while acked[0] < 25 and time.monotonic() < deadline:
        time.sleep(0.01)
    view.proc.send_signal(signal.SIGKILL)
    view.proc.wait(10)
    stop.set()
    t.join(10)
    found = read_labels(save)
    assert found.problems == []  # every line whole
    assert acked[0] >= 25 and acked[0] <= len(found.labels) - before <= acked[0] + 1
    assert (save / "labels.jsonl").read_bytes().endswith(b"\n")


# ---------------------------------------------------------------------------------------------- the command
def eval_py(*argv: str, timeout: float = 60) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "eval.py", *argv], cwd=REPO, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    return proc


def test_bad_input_is_exit_2(world, tmp_path):
    proc = eval_py("view", str(tmp_path / "nowhere"), "--no-browser", "--port", "0")
    assert proc.returncode == 2 and "nowhere: no such folder" in proc.stderr
    proc = eval_py("view", str(tmp_path), "--no-browser", "--port", "70000")
    assert proc.returncode == 2 and "--port 70000" in proc.stderr
    port = world["view"].base.rsplit(":", 1)[1]
    proc = eval_py("view", str(tmp_path), "--no-browser", "--port", port)
    assert proc.returncode == 2 and f"--port {port}" in proc.stderr and "--port 0" in proc.stderr


def test_another_host_is_said_aloud(tmp_path):
    (tmp_path / "results").mkdir()
    proc = subprocess.Popen([sys.executable, "eval.py", "view", str(tmp_path), "--port", "0", "--no-browser",
                             "--host", "0.0.0.0"], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        line = proc.stdout.readline()
        assert line.startswith("view: http://0.0.0.0:")
    finally:
        proc.send_signal(signal.SIGINT)
        err = proc.communicate(timeout=15)[1]
    assert "warning: --host 0.0.0.0" in err and proc.returncode == 0
