"""`eval.py view` in Firefox (Debian's firefox-esr, driven over Marionette by tests/marionette.py: Debian
ships no geckodriver and nothing may be downloaded): label items from the keyboard (real key events),
reload, the labels are there; filter; open an item by its link and step with j / k; compare two runs;
the trend across three runs; markup in answers, judge replies, questions, references, model and folder
names stays text."""

from __future__ import annotations

import json
import time
from urllib.parse import quote

import pytest

try:
    from tests import view_fixtures as vf
    from tests.marionette import FIREFOX, Firefox
except ImportError:
    import view_fixtures as vf
    from marionette import FIREFOX, Firefox

pytestmark = pytest.mark.skipif(FIREFOX is None, reason="firefox-esr is not installed (apt-get install firefox-esr)")
ENTER, ESCAPE = "\ue007", "\ue00c"


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    w = vf.browser_world(tmp_path_factory.mktemp("view-firefox"))
    w["view"] = vf.start_view(w["root"])
    yield w
    w["view"].stop()


@pytest.fixture(scope="module")
def ff():
    browser = Firefox()
    yield browser
    browser.close()


def wait(ff, script: str, timeout: float = 30):
    end = time.monotonic() + timeout
    while True:
        value = ff.js(script)
        if value:
            return value
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for: {script}")
        time.sleep(0.05)


def key(ff, k: str) -> None:
    """A real key press (keyDown, keyUp) through WebDriver actions, as a person's keyboard sends it."""
    ff.call("WebDriver:PerformActions", {"actions": [{"type": "key", "id": "keyboard", "actions": [
        {"type": "keyDown", "value": k}, {"type": "keyUp", "value": k}]}]})
    ff.call("WebDriver:ReleaseActions", {})


def rid(world, name: str) -> str:
    return next(r["rid"] for r in world["view"].json("/api/runs")["runs"] if r["name"] == name)


def go(ff, world, frag: str) -> None:
    ff.get("about:blank")
    ff.get(world["view"].url + frag)


def item_shown(ff, iid: str) -> None:
    wait(ff, f"var s = document.getElementById('item'); return s && s.getAttribute('data-id') === {json.dumps(iid)};")


def list_ready(ff, after: str = "0") -> None:
    wait(ff, f"var l = document.getElementById('list'); return l && Number(l.getAttribute('data-ready') || 0) > {after};")


def stamp(ff) -> str:
    return ff.js("return document.getElementById('list').getAttribute('data-ready')")


def inert(ff) -> None:
    assert ff.js("return window.__pwned === undefined")
    with pytest.raises(RuntimeError, match="no such alert"):
        ff.call("WebDriver:GetAlertText", {})
    assert ff.js("return document.querySelectorAll('main script, main img, main iframe, main object, main svg:not(.spark)').length") == 0


def test_label_from_the_keyboard_reload_filter_and_links(ff, world):
    r = rid(world, "nightly/night-1")
    go(ff, world, f"#/run/{quote(r, safe='')}")
    list_ready(ff)
    ids = ff.js("return Array.from(document.querySelectorAll('#list tr[data-id]')).map(t => t.getAttribute('data-id')).slice(0, 3)")
    key(ff, "j")
    key(ff, ENTER)
    item_shown(ff, ids[0])
    for i, (k, verdict) in enumerate((("a", "A"), ("b", "B"), ("t", "tie"))):
        item_shown(ff, ids[i])
        key(ff, k)
        wait(ff, f"return document.getElementById('labelbar').getAttribute('data-saved') === '{i + 1}'")
        assert ff.js("return document.querySelector('#labelbar button.on').getAttribute('data-verdict')") == verdict
        if i < 2:
            key(ff, "j")
    ff.call("WebDriver:Refresh", {})
    item_shown(ff, ids[2])
    assert ff.js("return document.querySelector('#labelbar button.on').getAttribute('data-verdict')") == "tie"
    assert ff.js("return document.querySelector('#labels-panel .label-count').textContent") == "3"
    key(ff, ESCAPE)
    list_ready(ff)
    assert ff.js("return Array.from(document.querySelectorAll('#list tr[data-id]')).slice(0, 3).map(t => t.lastChild.textContent)") == [
        "model_a", "model_b", "tie"]
    # the "not labelled" filter leaves those three out
    s = stamp(ff)
    ff.js("var s = document.getElementById('f-labelled'); s.value = 'no'; s.dispatchEvent(new Event('change'));")
    list_ready(ff, s)
    rest = ff.js("return Array.from(document.querySelectorAll('#list tr[data-id]')).map(t => t.getAttribute('data-id'))")
    assert not set(ids) & set(rest) and rest
    on_disk = [json.loads(x) for x in (world["nights"][0] / "labels.jsonl").read_text().splitlines()]
    assert [d["verdict"] for d in on_disk] == ["A", "B", "tie"]
    inert(ff)


def test_filter_and_open_an_item_by_its_link(ff, world):
    r = rid(world, "battle")
    go(ff, world, f"#/run/{quote(r, safe='')}")
    list_ready(ff)
    s = stamp(ff)
    ff.js("var s = document.getElementById('f-cat'); s.value = 'closed_qa'; s.dispatchEvent(new Event('change'));")
    list_ready(ff, s)
    assert ff.js("return Array.from(document.querySelectorAll('#list tr[data-id]')).map(t => t.children[1].textContent)") == [
        "closed_qa", "closed_qa"]
    link = ff.js("return location.hash").replace(f"#/run/{quote(r, safe='')}", "")
    go(ff, world, f"#/run/{quote(r, safe='')}/item/9{link}")
    item_shown(ff, "9")
    assert ff.js("return document.querySelector('.position').textContent") == "item 2 of 2 the filters keep"
    assert "Carbon dioxide and water." in ff.js("return document.querySelector('.reference').textContent")
    key(ff, "k")
    item_shown(ff, "8")
    key(ff, "j")
    item_shown(ff, "9")
    inert(ff)


def test_compare_two_runs_and_the_trend_across_three(ff, world):
    go(ff, world, "#/")
    wait(ff, "return document.querySelector('#trends table.trend')")
    group = ff.js("return Array.from(document.querySelectorAll('#trends .trend')).find(g => g.textContent.includes('night-3')).textContent")
    assert "▲ better" in group and "▼ worse" in group
    assert "nightly/night-3 worse than nightly/night-2 on Metrics/ROUGE-L for model_b" in group
    for name in ("nightly/night-3", "nightly/night-2"):
        ff.js("var rows = Array.from(document.querySelectorAll('table.runs tbody tr'));"
              "rows.find(r => r.querySelector('a.run-link').textContent === arguments[0]).querySelector('input').click();", name)
    ff.js("document.getElementById('compare-runs').click()")
    wait(ff, "return document.querySelectorAll('table.changes tbody tr').length > 0")
    assert ff.js("return document.querySelector('main h2').textContent") == "A = nightly/night-2 · B = nightly/night-3"
    sizes = ff.js("return Array.from(document.querySelectorAll('table.changes tbody tr')).map(t => Number(t.children[3].textContent))")
    assert sizes == sorted(sizes, reverse=True) and sizes[0] > 0
    steps = ff.js("return Array.from(document.querySelectorAll('table.steps tbody tr')).map(t => t.textContent)")
    assert any(x.startswith("model_bMetrics/ROUGE-L") and "worse" in x for x in steps)
    inert(ff)


def test_markup_stays_text(ff, world):
    r = rid(world, "battle")
    models = world["view"].json(f"/api/run?run={quote(r, safe='')}")["models"]
    h, a = models.index(vf.HOSTILE_MODEL), models.index("model_a")
    go(ff, world, "#/")
    wait(ff, "return document.querySelectorAll('table.runs tbody tr').length >= 5")
    assert vf.HOSTILE_FOLDER in ff.js("return document.body.textContent")
    inert(ff)
    ids = world["view"].json(f"/api/items?run={quote(r, safe='')}&pair={a},{h}&invalid=1")["ids"]
    seen = False
    for iid in ids:
        go(ff, world, f"#/run/{quote(r, safe='')}/item/{iid}?pair={a},{h}&invalid=1")
        item_shown(ff, iid)
        seen = seen or vf.HOSTILE_REPLY in ff.js("return Array.from(document.querySelectorAll('.order pre.raw')).map(p => p.textContent)")
        assert vf.HOSTILE_MODEL in ff.js("return document.querySelector('.answers').textContent")
        inert(ff)
    assert seen
    hr = rid(world, vf.HOSTILE_FOLDER)
    first = world["view"].json(f"/api/items?run={quote(hr, safe='')}")["ids"][0]
    go(ff, world, f"#/run/{quote(hr, safe='')}/item/{first}")
    item_shown(ff, first)
    assert vf.HOSTILE_QUESTION in ff.js("return document.querySelector('.question').textContent")
    assert vf.HOSTILE_TARGET in ff.js("return document.querySelector('.reference').textContent")
    inert(ff)
