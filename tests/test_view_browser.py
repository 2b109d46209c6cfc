"""`eval.py view` in headless Chromium (selenium; Debian's chromium and chromium-driver, given
explicitly so nothing is downloaded): label items from the keyboard, reload, the labels are there;
filter; open an item by its link and step with j / k; compare two runs; the trend across three runs;
markup in answers, judge replies, questions, references, model and folder names stays text (no
script runs: the flag a payload would set stays unset, no alert opens).

Skips when /usr/bin/chromium or /usr/bin/chromedriver is absent (.ci/run installs them)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from urllib.parse import quote, unquote

import pytest

try:
    from tests import view_fixtures as vf
except ImportError:
    import view_fixtures as vf

CHROMIUM, CHROMEDRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")
pytestmark = [
    pytest.mark.skipif(not CHROMIUM.exists(), reason="/usr/bin/chromium is absent (apt-get install chromium)"),
    pytest.mark.skipif(not CHROMEDRIVER.exists(), reason="/usr/bin/chromedriver is absent (apt-get install chromium-driver)"),
]
webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (the `test` extra)")


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    w = vf.browser_world(tmp_path_factory.mktemp("view-chromium"))
    w["view"] = vf.start_view(w["root"])
    yield w
    w["view"].stop()


def open_chromium():
    """Headless Chromium through Debian's chromedriver (the browser tests' one way to open it)."""
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = str(CHROMIUM)
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-extensions",
                "--no-first-run", "--window-size=1280,1000"):
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=opts)


@pytest.fixture(scope="module")
def driver():
    d = open_chromium()
    yield d
    d.quit()


def wait(driver, script: str, timeout: float = 20):
    end = time.monotonic() + timeout
    while True:
        value = driver.execute_script(script)
        if value:
            return value
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for: {script}")
        time.sleep(0.05)


def key(driver, k: str) -> None:
    from selenium.webdriver.common.action_chains import ActionChains

    ActionChains(driver).send_keys(k).perform()


def rid(world, name: str) -> str:
    return next(r["rid"] for r in world["view"].json("/api/runs")["runs"] if r["name"] == name)


def open_hash(driver, world, frag: str) -> None:
    driver.get(world["view"].url + frag)


def list_ready(driver, after: str = "0") -> None:
    wait(driver, f"var l = document.getElementById('list'); return l && Number(l.getAttribute('data-ready') || 0) > {after};")


def inert(driver) -> None:
    """No payload ran: its flag unset, no alert, no element a payload would have made, no console error."""
    from selenium.common.exceptions import NoAlertPresentException

    assert driver.execute_script("return window.__pwned === undefined")
    with pytest.raises(NoAlertPresentException):
        driver.switch_to.alert.text  # noqa: B018
    assert driver.execute_script(
        "return document.querySelectorAll('main script, main img, main iframe, main object, main svg:not(.spark)').length") == 0
    errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    assert errors == [], errors


def test_label_items_from_the_keyboard_reload_and_they_are_there(driver, world):
    r = rid(world, "nightly/night-1")
    open_hash(driver, world, f"#/run/{quote(r, safe='')}")
    list_ready(driver)
    first_ids = driver.execute_script("return Array.from(document.querySelectorAll('#list tr[data-id]')).map(t => t.getAttribute('data-id')).slice(0, 3)")
    key(driver, "j")
    key(driver, "\ue007")  # Enter: the selected row opens
    wait(driver, f"var s = document.getElementById('item'); return s && s.getAttribute('data-id') === {json.dumps(first_ids[0])};")
    said = {}
    for i, (k, verdict) in enumerate((("a", "A"), ("b", "B"), ("t", "tie"))):
        wait(driver, f"var s = document.getElementById('item'); return s && s.getAttribute('data-id') === {json.dumps(first_ids[i])};")
        key(driver, k)
        wait(driver, "return document.getElementById('labelbar').getAttribute('data-saved') !== null")
        said[first_ids[i]] = verdict
        assert driver.execute_script("return document.querySelector('#labelbar button.on').getAttribute('data-verdict')") == verdict
        assert driver.execute_script("return document.querySelector('#labels-panel .label-count').textContent") == str(i + 1)
        if i < 2:
            key(driver, "j")
    driver.refresh()
    wait(driver, f"var s = document.getElementById('item'); return s && s.getAttribute('data-id') === {json.dumps(first_ids[2])};")
    assert driver.execute_script("return document.querySelector('#labelbar button.on').getAttribute('data-verdict')") == "tie"
    key(driver, "\ue00c")  # Escape: back to the list
    list_ready(driver)
    shown = driver.execute_script("return Array.from(document.querySelectorAll('#list tr[data-id]')).slice(0, 3).map(t => t.lastChild.textContent)")
    assert shown == ["model_a", "model_b", "tie"]
    on_disk = [json.loads(line) for line in (world["nights"][0] / "labels.jsonl").read_text().splitlines()]
    assert {d["id"]: d["verdict"] for d in on_disk} == said
    assert all(d["model_a"] == "model_a" and d["model_b"] == "model_b" and d["category"] for d in on_disk)
    inert(driver)
    with open(world["nights"][0] / "labels.jsonl", "a", encoding="utf-8") as fh:  # a hand edit gone wrong
        fh.write('{"id": "1", "verdict": "maybe"}\n')
    driver.refresh()
    list_ready(driver)
    panel = driver.execute_script("return document.getElementById('labels-panel').textContent")
    assert f"{world['nights'][0] / 'labels.jsonl'} line 4: not a label" in panel and "skipped" in panel
    assert driver.execute_script("return document.querySelector('#labels-panel .label-count').textContent") == "3"


def test_filter_and_search(driver, world):
    r = rid(world, "battle")
    models = world["view"].json(f"/api/run?run={quote(r, safe='')}")["models"]
    open_hash(driver, world, f"#/run/{quote(r, safe='')}?pair={models.index('model_a')},{models.index('model_b')}")
    list_ready(driver)
    total = driver.execute_script("return document.querySelectorAll('#list tr[data-id]').length")
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    stamp = driver.execute_script("return document.getElementById('list').getAttribute('data-ready')")
    Select(driver.find_element(By.ID, "f-cat")).select_by_visible_text("closed_qa")
    list_ready(driver, stamp)
    cats = driver.execute_script("return Array.from(document.querySelectorAll('#list tr[data-id]')).map(t => t.children[1].textContent)")
    assert cats == ["closed_qa", "closed_qa"] and total > 2
    assert "cat=closed_qa" in driver.current_url  # the filters are in the address
    stamp = driver.execute_script("return document.getElementById('list').getAttribute('data-ready')")
    Select(driver.find_element(By.ID, "f-cat")).select_by_visible_text("every category")
    list_ready(driver, stamp)
    stamp = driver.execute_script("return document.getElementById('list').getAttribute('data-ready')")
    driver.find_element(By.ID, "f-flipped").click()
    list_ready(driver, stamp)
    flips = driver.execute_script("return Array.from(document.querySelectorAll('#list tr[data-id]')).map(t => t.textContent)")
    assert len(flips) == 2 and all("⇄ flips" in t for t in flips)
    driver.find_element(By.ID, "f-flipped").click()
    stamp = driver.execute_script("return document.getElementById('list').getAttribute('data-ready')")
    box = driver.find_element(By.ID, "f-q")
    box.send_keys("photosynthesis")
    list_ready(driver, stamp)
    wait(driver, "return document.querySelectorAll('#list tr[data-id]').length === 1")
    assert driver.execute_script("return document.querySelector('#list tr[data-id]').getAttribute('data-id')") == "9"
    inert(driver)


def test_open_an_item_by_its_link_and_step_with_j_and_k(driver, world):
    r = rid(world, "battle")
    models = world["view"].json(f"/api/run?run={quote(r, safe='')}")["models"]
    pair = f"{models.index(vf.HOSTILE_MODEL)},{models.index('model_b')}"
    link = f"#/run/{quote(r, safe='')}/item/9?pair={pair}&cat=closed_qa"
    driver.get("about:blank")
    open_hash(driver, world, link)
    wait(driver, "var s = document.getElementById('item'); return s && s.getAttribute('data-id') === '9';")
    text = driver.execute_script("return document.getElementById('item').textContent")
    assert "photosynthesis" in text and "Carbon dioxide and water." in text
    assert driver.execute_script("return document.querySelector('.position').textContent") == "item 2 of 2 the filters keep"
    assert driver.execute_script("return document.querySelectorAll('.order pre.raw').length") == 2  # both orders' replies
    assert "flips with the order" in driver.execute_script("return document.querySelector('.judge .verdict').textContent")
    permalink = driver.execute_script("return document.querySelector('a.permalink').getAttribute('href')")
    assert unquote(permalink) == unquote(link)
    key(driver, "k")
    wait(driver, "var s = document.getElementById('item'); return s && s.getAttribute('data-id') === '8';")
    key(driver, "j")
    wait(driver, "var s = document.getElementById('item'); return s && s.getAttribute('data-id') === '9';")
    inert(driver)


def test_compare_two_runs(driver, world):
    open_hash(driver, world, "#/")
    wait(driver, "return document.querySelectorAll('table.runs tbody tr').length >= 5")
    for name in ("nightly/night-2", "nightly/night-1"):
        driver.execute_script(
            "var rows = Array.from(document.querySelectorAll('table.runs tbody tr'));"
            "rows.find(r => r.querySelector('a.run-link').textContent === arguments[0]).querySelector('input').click();", name)
    driver.execute_script("document.getElementById('compare-runs').click()")
    wait(driver, "return document.querySelectorAll('table.changes tbody tr').length > 0")
    heading = driver.execute_script("return document.querySelector('main h2').textContent")
    assert heading == "A = nightly/night-1 · B = nightly/night-2"  # the older run is A
    sizes = driver.execute_script("return Array.from(document.querySelectorAll('table.changes tbody tr')).map(t => Number(t.children[3].textContent))")
    assert len(sizes) > 10 and sizes == sorted(sizes, reverse=True)
    steps = driver.execute_script("return Array.from(document.querySelectorAll('table.steps tbody tr')).map(t => t.textContent)")
    assert any(s.startswith("model_bMetrics/ROUGE-L") and "better" in s for s in steps)
    inert(driver)


def test_the_trend_across_three_runs(driver, world):
    open_hash(driver, world, "#/")
    wait(driver, "return document.querySelector('#trends table.trend')")
    group = driver.execute_script(
        "return Array.from(document.querySelectorAll('#trends .trend')).find(g => g.textContent.includes('night-3')).textContent")
    assert "model_a, model_b: 3 runs" in group
    assert "▲ better" in group and "▼ worse" in group
    assert "nightly/night-3 worse than nightly/night-2 on Metrics/ROUGE-L for model_b" in group
    assert driver.execute_script("return document.querySelectorAll('#trends svg.spark circle.worse').length") >= 1
    inert(driver)


def test_markup_stays_text_everywhere(driver, world):
    r = rid(world, "battle")
    models = world["view"].json(f"/api/run?run={quote(r, safe='')}")["models"]
    h, a = models.index(vf.HOSTILE_MODEL), models.index("model_a")
    open_hash(driver, world, "#/")
    wait(driver, "return document.querySelectorAll('table.runs tbody tr').length >= 5")
    body = driver.execute_script("return document.body.textContent")
    assert vf.HOSTILE_FOLDER in body and vf.HOSTILE_MODEL in body
    inert(driver)
    open_hash(driver, world, f"#/run/{quote(r, safe='')}?pair={min(h, a)},{max(h, a)}&invalid=1")
    list_ready(driver)
    assert vf.HOSTILE_MODEL in driver.execute_script("return document.getElementById('headline').textContent")
    inert(driver)
    ids = driver.execute_script("return Array.from(document.querySelectorAll('#list tr[data-id]')).map(t => t.getAttribute('data-id'))")
    assert ids
    seen_reply = False
    for iid in ids:
        open_hash(driver, world, f"#/run/{quote(r, safe='')}/item/{iid}?pair={a},{h}&invalid=1")
        wait(driver, f"var s = document.getElementById('item'); return s && s.getAttribute('data-id') === {json.dumps(iid)};")
        raws = driver.execute_script("return Array.from(document.querySelectorAll('.order pre.raw')).map(p => p.textContent)")
        seen_reply = seen_reply or vf.HOSTILE_REPLY in raws
        answers = driver.execute_script("return document.querySelector('.answers').textContent")
        assert any(x in answers for x in vf.HOSTILE)
        inert(driver)
    assert seen_reply
    hr = rid(world, vf.HOSTILE_FOLDER)
    open_hash(driver, world, f"#/run/{quote(hr, safe='')}")
    list_ready(driver)
    first = driver.execute_script("return document.querySelector('#list tr[data-id]').getAttribute('data-id')")
    open_hash(driver, world, f"#/run/{quote(hr, safe='')}/item/{first}")
    wait(driver, "return document.querySelector('.question')")
    assert vf.HOSTILE_QUESTION in driver.execute_script("return document.querySelector('.question').textContent")
    assert vf.HOSTILE_TARGET in driver.execute_script("return document.querySelector('.reference').textContent")
    assert vf.HOSTILE_FOLDER in driver.execute_script("return document.getElementById('crumb').textContent")
    inert(driver)


def test_a_label_the_viewer_did_not_take_is_tried_again_and_never_dropped_in_silence(driver, world):
    """The page tries a label again after a dropped connection and a 503 (a busy viewer) and says so;
    when the viewer never takes it, the bar says NOT saved (issue 47: labels lost without a word)."""
    r = rid(world, "nightly/night-2")
    labels = world["nights"][1] / "labels.jsonl"
    open_hash(driver, world, f"#/run/{quote(r, safe='')}/item/3")
    wait(driver, "var s = document.getElementById('item'); return s && document.getElementById('labelbar');")
    driver.execute_script("""
      window.__said = []; window.__posts = 0; window.__mode = 'flaky';
      var real = window.fetch;
      window.fetch = function (url, opts) {
        if (opts && opts.method === 'POST') {
          window.__posts += 1;
          if (window.__mode === 'down' || window.__posts === 1) return Promise.reject(new TypeError('Failed to fetch'));
          if (window.__posts === 2) return Promise.resolve(new Response('{"error": "busy"}', {status: 503}));
        }
        return real.apply(this, arguments);
      };
      var state = document.querySelector('#labelbar .label-state');
      new MutationObserver(function () { window.__said.push(state.textContent); })
        .observe(state, {childList: true, characterData: true, subtree: true});
    """)
    key(driver, "a")
    wait(driver, "return document.getElementById('labelbar').getAttribute('data-saved') !== null")
    said = driver.execute_script("return window.__said")
    assert any("trying again (1 of 5)" in s for s in said) and any("trying again (2 of 5)" in s for s in said), said
    assert driver.execute_script("return window.__posts") == 3
    kept = [json.loads(x) for x in labels.read_text().splitlines()]
    assert [(d["id"], d["verdict"]) for d in kept] == [("3", "A")]

    driver.execute_script("window.__mode = 'down';")
    key(driver, "b")
    wait(driver, "return document.getElementById('labelbar').getAttribute('data-unsaved') === 'B'", timeout=30)
    state = driver.execute_script("return document.querySelector('#labelbar .label-state').textContent")
    assert state.startswith("NOT saved: the viewer did not answer") and "label it again" in state
    assert len(labels.read_text().splitlines()) == 1  # nothing written, and the person was told
