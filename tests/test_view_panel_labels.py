"""A run judged by a panel, labelled by a person: `judge-check --labels` and the viewer's labels panel (in
headless Chromium) show the panel's agreement with the labels and each judge's beside it. Two scripted
judges on the real fake OpenAI server: x always prefers model ma, y always the first-shown answer (so
its two orders tie); weights 2 and 1 make the panel's vote x's. The person prefers ma on 9 of 12 items.

The browser part skips when /usr/bin/chromium or /usr/bin/chromedriver is absent (.ci/run installs them)."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from urllib.parse import quote

import pytest
import yaml

from evaluate.cli import main
from evaluate.savepath.labels import append_label

try:
    from tests import view_fixtures as vf
    from tests.fake_openai_server import FakeOpenAIServer, RecordedRequest, Reply
except ImportError:
    import view_fixtures as vf
    from fake_openai_server import FakeOpenAIServer, RecordedRequest, Reply

N = 12
PERSON = ["A"] * 9 + ["B"] * 3  # the person's verdict per item, A = ma


def _first_shown(text: str) -> str:
    return re.search(r"\[Assistant 1's answer\]\n(\w+) says", text).group(1)


def _x(rec: RecordedRequest) -> Reply:
    if "[Assistant 1's answer]" in rec.user_text:
        return Reply(content="8 3" if _first_shown(rec.user_text) == "ma" else "3 8")
    return Reply(content="4")


def _y(rec: RecordedRequest) -> Reply:
    return Reply(content="8 3" if "[Assistant 1's answer]" in rec.user_text else "3")


@pytest.fixture(scope="module")
def labelled_panel_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("panel-labels")
    with FakeOpenAIServer(reply_fn=_x, model="judge-x") as sx, FakeOpenAIServer(reply_fn=_y, model="judge-y") as sy, \
            pytest.MonkeyPatch.context() as mp:
        mp.setenv("PANEL_KEY", "sk-panel-test")
        for m in ("ma", "mb"):
            rows = [{"id": i, "category": "open_qa", "instruction": f"question {i}?", "input": "",
                     "output": f"{m} says {'yes' * (i + 1)}"} for i in range(1, N + 1)]
            (tmp / f"{m}.json").write_text(json.dumps(rows))

        def judge(name: str, server: FakeOpenAIServer) -> dict:
            return {"name": name, "backend": "openai", "model": server.model, "base_url": server.url,
                    "api_key_env": "PANEL_KEY", "mode": "generate", "max_retries": 0, "timeout": 10}

        cfg = {"answers": [{"name": m, "path": str(tmp / f"{m}.json")} for m in ("ma", "mb")],
               "save_path": str(tmp / "runs" / "panel"), "category": {"open_qa": {"GPT": ["relevance"]}},
               "judge": [judge("x", sx), judge("y", sy)], "panel": {"weights": {"x": 2, "y": 1}}}
        (tmp / "panel.yaml").write_text(yaml.safe_dump(cfg))
        assert main(["--config", str(tmp / "panel.yaml"), "--no-charts"]) == 0
    save = tmp / "runs" / "panel"
    for i, verdict in enumerate(PERSON, 1):
        append_label(save, {"id": str(i), "category": "open_qa", "model_a": "ma", "model_b": "mb", "verdict": verdict})
    return tmp / "runs", save


def test_judge_check_labels_measures_the_panel_and_each_judge(labelled_panel_run, capsys):
    _, save = labelled_panel_run
    capsys.readouterr()
    out_file = save.parent / "labels_check.json"
    assert main(["judge-check", "--labels", str(save), "--output", str(out_file)]) == 0
    out = capsys.readouterr().out
    rec = json.loads(out_file.read_text())
    assert rec["judge"] == ["a panel of 2 judges (x: openai judge-x, y: openai judge-y)"]
    assert rec["agreement"]["accuracy"] == 0.75 and rec["agreement"]["n"] == N  # the panel's vote is x's: all ma
    assert rec["judges"]["x"]["accuracy"] == 0.75 and rec["judges"]["y"]["accuracy"] == 0.5  # y: ties only
    assert rec["judges"]["y"]["judge_ties"] == N
    assert "panel (ties half)" in out and re.search(r"^  judge x\s+0\.750", out, re.M) and \
        re.search(r"^  judge y\s+0\.500", out, re.M), out


CHROMIUM, CHROMEDRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")


@pytest.mark.skipif(not CHROMIUM.exists() or not CHROMEDRIVER.exists(),
                    reason="/usr/bin/chromium or /usr/bin/chromedriver is absent (apt-get install chromium chromium-driver)")
def test_the_viewer_shows_each_judge_of_the_panel_against_the_labels(labelled_panel_run):
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (the `test` extra)")
    from selenium.webdriver.chrome.service import Service

    root, _ = labelled_panel_run
    view = vf.start_view(root)
    opts = webdriver.ChromeOptions()
    opts.binary_location = str(CHROMIUM)
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run"):
        opts.add_argument(arg)
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=opts)
    try:
        rid = next(r["rid"] for r in view.json("/api/runs")["runs"] if r["name"] == "panel")
        driver.get(view.url + f"#/run/{quote(rid, safe='')}")
        end = time.monotonic() + 30
        rows = None
        while time.monotonic() < end and not rows:
            rows = driver.execute_script(
                "return Array.from(document.querySelectorAll('#labels-panel table.panel-judges tbody tr'))"
                ".map(function (tr) { return [tr.getAttribute('data-judge'), tr.children[1].textContent, "
                "tr.children[3].textContent]; });")
            time.sleep(0.1)
        assert rows == [["x", "0.750", str(N)], ["y", "0.500", str(N)]], rows
        said = driver.execute_script("return document.querySelector('#labels-panel p.agreement').textContent")
        assert said.startswith("The panel agrees with you on 0.750"), said
    finally:
        driver.quit()
        view.stop()
