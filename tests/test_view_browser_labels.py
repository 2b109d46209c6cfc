"""Issue 44 in headless Chromium (selenium; Debian's chromium and chromium-driver): *Label next* from the
keyboard alone (n, then a / b / t, then n ...) labels the items the save path's queue hands out, and the
labels panel's label-corrected estimate follows every label without a reload; a reload keeps it; two
annotators (the name typed in the page, remembered by the browser) labelling the same items give an
inter-annotator kappa in the panel, the one Cohen's kappa gives on their stored labels.

Skips when /usr/bin/chromium or /usr/bin/chromedriver is absent (.ci/run installs them)."""

from __future__ import annotations

import json
from urllib.parse import quote, unquote

import pytest

from evaluate.judgecheck.corrected import corrected
from evaluate.savepath.labels import read_labels

try:
    from tests import view_fixtures as vf
    from tests.fake_openai_server import FakeOpenAIServer
    from tests.test_view_browser import CHROMEDRIVER, CHROMIUM, key, open_chromium, wait
except ImportError:
    import view_fixtures as vf
    from fake_openai_server import FakeOpenAIServer
    from test_view_browser import CHROMEDRIVER, CHROMIUM, key, open_chromium, wait

pytestmark = [
    pytest.mark.skipif(not CHROMIUM.exists(), reason="/usr/bin/chromium is absent (apt-get install chromium)"),
    pytest.mark.skipif(not CHROMEDRIVER.exists(), reason="/usr/bin/chromedriver is absent (apt-get install chromium-driver)"),
]
webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (the `test` extra)")

ANN = ["A", "B", "A", "tie", "A", "B"]  # the verdicts the first annotator gives, in the queue's order
BOB = ["A", "B", "B", "tie", "A", "A"]  # the second annotator's, on the same items


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("view-label-next") / "root"
    root.mkdir()
    with FakeOpenAIServer() as server:
        save = vf.battle_run(root, server)
    view = vf.start_view(root)
    yield {"root": root, "save": save, "view": view, "rid": view.json("/api/runs")["runs"][0]["rid"]}
    view.stop()


@pytest.fixture(scope="module")
def driver():
    d = open_chromium()
    yield d
    d.quit()


def set_name(driver, name: str) -> None:
    from selenium.webdriver.common.by import By

    box = driver.find_element(By.ID, "annotator")
    box.clear()
    box.send_keys(name + "\ue007")  # Enter: remembered, and the keys go back to the page
    wait(driver, "return document.activeElement === document.body || document.activeElement === null")


def panel(driver) -> dict:
    """What the labels panel shows of each pair: labels used, and the label-corrected row's estimate."""
    return driver.execute_script("""
      var out = {};
      document.querySelectorAll('#corrected .corrected-pair').forEach(function (p) {
        out[p.getAttribute('data-pair')] = {used: Number(p.getAttribute('data-labels-used')),
          est: p.querySelector('tr[data-row=label_corrected] .est').textContent,
          iv: p.querySelector('tr[data-row=label_corrected] .iv').textContent,
          only: p.querySelector('tr[data-row=labels_only] .est').textContent,
          judge: p.querySelector('tr[data-row=judge_only] .est').textContent};
      });
      return out;""")


def fmt(x) -> str:
    """The page's number format for a value below 10 (app.js `fmt`)."""
    return "–" if x is None else f"{x:.3f}"


def label_next_by_keys(driver, verdicts: list[str], world, used) -> list[tuple[str, str]]:
    """n, then a / b / t, for each verdict: the items (id, pair in the address) the queue handed out; after
    each label the panel shows the corrected estimate the save path gives now, over `used(i)` labelled
    items (an item labelled by two people counts once, with their mean label)."""
    seen = []
    for i, verdict in enumerate(verdicts):
        before = driver.execute_script("return location.hash")
        key(driver, "n")
        wait(driver, "var s = document.getElementById('item'); var b = document.getElementById('labelbar');"
                     f"return location.hash !== {json.dumps(before)} && location.hash.indexOf('from=queue') > 0 && s && b"
                     " && s.getAttribute('data-id') === decodeURIComponent(location.hash.split('/item/')[1].split('?')[0])"
                     " && b.getAttribute('data-saved') === null && document.querySelector('#corrected[data-ready]');")
        h = unquote(driver.execute_script("return location.hash"))
        seen.append((h.split("/item/")[1].split("?")[0], h))
        key(driver, {"A": "a", "B": "b", "tie": "t"}[verdict])
        wait(driver, "return document.getElementById('labelbar').getAttribute('data-saved') !== null")
        truth = corrected(world["save"])
        shown = panel(driver)
        for p in truth["pairs"]:
            name = f"{p['model_a']} vs {p['model_b']}"
            assert shown[name]["used"] == p["labels_used"]
            assert shown[name]["est"] == fmt(p["label_corrected"]["estimate"]), (name, shown[name], p)
            assert shown[name]["judge"] == fmt(p["judge_only"]["estimate"])
        assert sum(p["labels_used"] for p in truth["pairs"]) == used(i)
    return seen


def test_label_next_from_the_keyboard_updates_the_corrected_estimate_and_a_reload_keeps_it(driver, world):
    rid = world["rid"]
    driver.get(world["view"].url + f"#/run/{quote(rid, safe='')}")
    wait(driver, "return document.querySelector('#corrected[data-ready]') && document.getElementById('list')")
    set_name(driver, "ann")
    start = panel(driver)
    assert start and all(p["used"] == 0 for p in start.values())
    seen = label_next_by_keys(driver, ANN, world, lambda i: i + 1)  # every label on the queue counts
    assert len({h for _, h in seen}) == len(ANN)  # a new item (or pair) each time
    stored = read_labels(world["save"]).labels
    assert [lab.annotator for lab in stored] == ["ann"] * len(ANN)
    assert [lab.queue.draw for lab in stored] == list(range(len(ANN)))  # the queue's draws, in order
    assert [lab.verdict for lab in stored] == ANN
    after = panel(driver)
    assert after != start
    moved = [name for name in after if after[name]["used"]]
    assert moved and all(after[n]["est"] != "–" and after[n]["iv"].startswith("[") for n in moved)
    driver.refresh()
    wait(driver, "return document.querySelector('#corrected[data-ready]') && document.getElementById('item')")
    assert panel(driver) == after
    assert driver.execute_script("return document.getElementById('annotator').value") == "ann"  # remembered


def test_two_annotators_labelling_the_same_items_give_an_inter_annotator_kappa(driver, world):
    from sklearn.metrics import cohen_kappa_score

    rid = world["rid"]
    driver.get(world["view"].url + f"#/run/{quote(rid, safe='')}")
    wait(driver, "return document.querySelector('#corrected[data-ready]')")
    assert driver.execute_script("return document.getElementById('annotator').value") == "ann"
    assert driver.execute_script("return document.querySelectorAll('#corrected table.annotator-kappa tr[data-annotators]').length") == 0
    set_name(driver, "bob")
    label_next_by_keys(driver, BOB, world, lambda i: len(ANN))  # the same items again: their mean label
    labels = read_labels(world["save"]).labels
    by = {who: {(lab.id, lab.category, lab.model_a, lab.model_b): lab.verdict for lab in labels if lab.annotator == who}
          for who in ("ann", "bob")}
    assert by["ann"].keys() == by["bob"].keys() and len(by["ann"]) == len(ANN)  # the same items, the same pairs
    units = sorted(by["ann"])
    want = cohen_kappa_score([by["ann"][u] for u in units], [by["bob"][u] for u in units])
    row = driver.execute_script("""
      var r = document.querySelector('#corrected table.annotator-kappa tr[data-annotators]');
      return r && [r.getAttribute('data-annotators'), r.children[2].textContent, r.querySelector('.kappa-value').textContent];""")
    assert row == ["ann|bob", str(len(ANN)), fmt(want)]
    assert 0 < want < 1  # they agree on 4 of 6: a kappa between chance and full agreement
    judged = driver.execute_script(
        "return Array.from(document.querySelectorAll('#corrected table.annotator-judge tr[data-annotator]')).map(r => r.getAttribute('data-annotator'))")
    assert judged == ["ann", "bob"]
    # two labels of an item now count as its mean: the corrected estimate the panel shows is still the save path's
    truth = corrected(world["save"])
    shown = panel(driver)
    for p in truth["pairs"]:
        assert shown[f"{p['model_a']} vs {p['model_b']}"]["est"] == fmt(p["label_corrected"]["estimate"])


def test_a_score_from_the_keys_is_a_rating_label_and_the_panel_shows_its_corrected_mean(driver, world):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    rid = world["rid"]
    driver.get(world["view"].url + f"#/run/{quote(rid, safe='')}")
    wait(driver, "return document.querySelector('#corrected[data-ready]') && document.getElementById('queue-kind')")
    metric = next(o.get_attribute("value") for o in Select(driver.find_element(By.ID, "queue-kind")).options
                  if o.get_attribute("value").startswith("rating:GPT/"))
    Select(driver.find_element(By.ID, "queue-kind")).select_by_value(metric)
    key(driver, "n")
    wait(driver, "return document.getElementById('ratingbar') && location.hash.indexOf('rate=') > 0"
                 " && document.querySelector('#corrected[data-ready]')")
    model = driver.execute_script("var s = document.getElementById('rate-model'); return s.options[s.selectedIndex].text")
    assert driver.execute_script("return document.getElementById('rate-metric').value") == metric[len("rating:"):]
    assert driver.execute_script(  # the metric's 1-5 scale, one button a score
        "return Array.from(document.querySelectorAll('#ratingbar .rate-btn')).map(b => b.textContent).join(',')") == "1,2,3,4,5"
    key(driver, "4")
    wait(driver, "return document.getElementById('ratingbar').getAttribute('data-saved') !== null")
    stored = read_labels(world["save"]).ratings
    assert [(r.model, r.metric, r.score, r.annotator) for r in stored] == [(model, metric.split("/", 1)[1], 4.0, "bob")]
    assert stored[0].queue is not None and stored[0].queue.kind == "rating"
    assert driver.execute_script("return document.querySelector('#ratingbar .rate-btn.on').textContent") == "4"
    truth = next(r for r in corrected(world["save"])["ratings"] if r.get("model") == model and "difference" not in r)
    row = driver.execute_script(
        "var r = document.querySelector('#corrected table.corrected-ratings tr[data-rating=' + JSON.stringify(arguments[0]) + ']');"
        "return r && [r.querySelector('.est').textContent, r.children[5].textContent];", f"{truth['metric']}: {model}")
    assert row == [fmt(truth["label_corrected"]["estimate"]), "1"]
    key(driver, "9")  # off the 1-5 scale: no label
    assert len(read_labels(world["save"]).ratings) == 1
