"""What a new user met in `eval.py view` (issue 47), over HTTP and in headless Chromium: the English and
Chinese examples share their models' names and categories, and the trend put their runs in one group whose
table was empty; each sparkline was drawn on its own row's range (3.477 -> 3.480 as steep as 0.833 ->
1.000); on the compare page the key line said a / b label models while A and B there are runs; a judge
that failed its check read "Judge check: NOT trustworthy — NOT trustworthy: ...".

Skips the browser part when /usr/bin/chromium or /usr/bin/chromedriver is absent (.ci/run installs them)."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from urllib.parse import quote

import pytest

try:
    from tests import view_fixtures as vf
    from tests.fake_openai_server import FakeOpenAIServer, RecordedRequest, Reply
except ImportError:
    import view_fixtures as vf
    from fake_openai_server import FakeOpenAIServer, RecordedRequest, Reply

CN = vf.REPO / "examples" / "cn"
CHROMIUM, CHROMEDRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")


def chinese_runs(root: Path) -> list[Path]:
    """Two runs of the Chinese example: the same model names and categories as the English nightly runs."""
    cats = sorted({r["category"] for r in json.loads((CN / "targets.json").read_text(encoding="utf-8"))})
    out = []
    for i in (1, 2):
        save = root / "cn" / f"cn-{i}"
        vf._run({"language": "cn", "save_path": str(save), "target_file": str(CN / "targets.json"),
                 "answers": [{"name": "model_a", "path": str(CN / "answers_model_a.json")},
                             {"name": "model_b", "path": str(CN / "answers_model_b.json")}],
                 "category": {c: {"Metrics": ["ROUGE"]} for c in cats}}, root / f"cn-{i}.json")
        out.append(save)
        time.sleep(1.1)
    return out


def untrusted_run(root: Path) -> Path:
    """A judged run whose judge then fails its check on labelled pairs (it prefers the first answer shown)."""
    rows = [{"id": f"p{i}", "instruction": f"What is 2+{i}?", "input": "", "response_a": f"It is {2 + i}.",
             "response_b": f"It is {3 + i}.", "label": "a" if i % 2 else "b"} for i in range(12)]
    data = root.parent / "pairs.jsonl"
    data.write_text("\n".join(json.dumps(r) for r in rows) + "\n")

    def judge(rec: RecordedRequest) -> Reply:
        return Reply(content="9 2" if "[Assistant 1's answer]" in rec.user_text else "4")

    save = root / "judged"
    cfg = {"language": "en", "save_path": str(save), "target_file": str(vf.EN / "targets.json"),
           "answers": [{"name": "model_a", "path": str(vf.EN / "answers_model_a.json")},
                       {"name": "model_b", "path": str(vf.EN / "answers_model_b.json")}],
           "category": {"closed_qa": {"GPT": ["correctness"]}},
           "judge": {"backend": "openai", "model": "fake-judge", "mode": "generate", "max_retries": 1, "timeout": 5}}
    from evaluate.cli import main

    with FakeOpenAIServer(reply_fn=judge) as s:
        cfg["judge"]["base_url"] = s.url
        path = vf._write(root.parent / "judged.json", cfg)
        assert main(["--config", str(path), "--no-charts"]) in (0, 3)
        assert main(["judge-check", "--config", str(path), "--data", str(data)]) == 0
    assert json.loads((save / "judge_check.json").read_text())["trustworthy"] is False
    return save


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("view-47") / "root"
    root.mkdir()
    w = {"root": root, "nights": vf.trend_runs(root), "cn": chinese_runs(root), "judged": untrusted_run(root)}
    w["view"] = vf.start_view(root)
    yield w
    w["view"].stop()


def test_the_trend_groups_runs_scored_alike_not_models_named_alike(world):
    groups = world["view"].json("/api/trends")["groups"]
    by_runs = {tuple(r["name"] for r in g["runs"]): g for g in groups}
    assert set(by_runs) == {("nightly/night-1", "nightly/night-2", "nightly/night-3"), ("cn/cn-1", "cn/cn-2")}, by_runs
    for g in by_runs.values():
        assert g["series"] and not g["errors"], g
        assert g["models"] == ["model_a", "model_b"]
    assert by_runs[("cn/cn-1", "cn/cn-2")]["language"] == "cn"
    rouge = [s for g in groups for s in g["series"] if s["score"] == "Metrics/ROUGE-L"]
    assert rouge and all(s["scale"] == [0.0, 1.0] and s["scale_from"] == "the score's scale" for s in rouge)


browser = pytest.mark.skipif(not (CHROMIUM.exists() and CHROMEDRIVER.exists()), reason="no /usr/bin/chromium and chromedriver")


@pytest.fixture(scope="module")
def driver():
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (the `test` extra)")
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = str(CHROMIUM)
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,1000"):
        opts.add_argument(arg)
    d = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=opts)
    yield d
    d.quit()


def wait(driver, script: str, timeout: float = 30):
    end = time.monotonic() + timeout
    while not (value := driver.execute_script(script)):
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for: {script}")
        time.sleep(0.05)
    return value


@browser
def test_each_sparkline_is_drawn_on_its_scores_scale(driver, world):
    """The y of every point is its value on the score's scale (0-1 for ROUGE-L: 30 - 24 v in the 36-high
    box), the same for every row of that score; a row drawn on its own range put its lowest point at 30 and
    its highest at 6 whatever the values."""
    driver.get(world["view"].url + "#/")
    wait(driver, "return document.querySelectorAll('#trends table.trend').length >= 2")
    rows = driver.execute_script("""
        return Array.from(document.querySelectorAll('#trends table.trend tbody tr')).map(function (tr) {
          var svg = tr.querySelector('svg.spark'), line = svg.querySelector('polyline');
          return {score: tr.children[1].textContent, scale: svg.getAttribute('data-scale'),
                  ys: line ? line.getAttribute('points').split(' ').map(function (p) { return Number(p.split(',')[1]); }) : [],
                  values: Array.from(tr.children).slice(3).map(function (td) { return td.firstChild.textContent; })};
        });""")
    rouge = [r for r in rows if r["score"] == "Metrics/ROUGE-L"]
    assert len(rouge) >= 4 and all(r["scale"] == "0 1" for r in rouge), rows
    for r in rouge:
        values = [float(v) for v in r["values"] if re.fullmatch(r"[\d.]+", v)]
        assert len(values) == len(r["ys"]) >= 2
        for v, y in zip(values, r["ys"]):
            assert abs(y - (30 - 24 * v)) <= 0.05 + 24 * 0.0005, (r, v, y)  # shown to 3 decimals
    flat = [r for r in rouge if max(r["ys"]) - min(r["ys"]) < 1]
    assert flat, "model_a's ROUGE-L does not change across the nights: its line is flat, not stretched"


@browser
def test_the_compare_pages_keys_say_a_and_b_are_runs(driver, world):
    runs = world["view"].json("/api/runs")["runs"]
    rid = {r["name"]: r["rid"] for r in runs}
    driver.get(world["view"].url + f"#/compare/{quote(rid['nightly/night-1'], safe='')}/{quote(rid['nightly/night-2'], safe='')}")
    wait(driver, "return document.querySelectorAll('table.changes').length")
    hint = driver.execute_script("return document.querySelector('header .keys').textContent")
    assert "A and B are the two runs" in hint and "label it" not in hint, hint
    driver.get(world["view"].url + f"#/run/{quote(rid['nightly/night-1'], safe='')}")
    wait(driver, "return document.getElementById('list')")
    assert "label it" in driver.execute_script("return document.querySelector('header .keys').textContent")


@browser
def test_a_failed_judge_check_is_said_once(driver, world):
    rid = next(r["rid"] for r in world["view"].json("/api/runs")["runs"] if r["name"] == "judged")
    verdict = world["view"].json(f"/api/run?run={quote(rid, safe='')}")["headline"]["judge_check"]["verdict"]
    assert verdict and not verdict.startswith(("NOT trustworthy", "trustworthy")), verdict
    driver.get(world["view"].url + f"#/run/{quote(rid, safe='')}")
    line = wait(driver, "var p = Array.from(document.querySelectorAll('main p')).find(p => p.textContent.startsWith('Judge check:'));"
                        "return p && p.textContent;")
    assert line.count("NOT trustworthy") == 1 and line.startswith("Judge check: NOT trustworthy — "), line
