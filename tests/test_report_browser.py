"""The report in headless Chromium (selenium): no console error, no request, filters work, phone width.

Skips when /usr/bin/chromium or /usr/bin/chromedriver is absent (CI installs them with apt-get).
Chromedriver is given explicitly, so Selenium Manager never downloads anything.
Screenshots go to the test's tmp folder and, when writable, to results/screenshots/ (not in git).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

try:
    from tests import report_fixtures as rf
except ImportError:
    import report_fixtures as rf

CHROMIUM, CHROMEDRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")
REPO = Path(__file__).resolve().parents[1]

pytestmark = [
    pytest.mark.skipif(not CHROMIUM.exists(), reason="/usr/bin/chromium is absent (apt-get install chromium)"),
    pytest.mark.skipif(not CHROMEDRIVER.exists(),
                       reason="/usr/bin/chromedriver is absent (apt-get install chromium-driver)"),
]
webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (the `test` extra)")


def make_driver(width: int, height: int):
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = str(CHROMIUM)
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--disable-extensions", "--no-first-run", f"--window-size={width},{height}"):
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=opts)
    driver.set_window_size(width, height)
    return driver


def shots_dirs(tmp: Path) -> list[Path]:
    out = [tmp / "screenshots"]
    extra = REPO / "results" / "screenshots"
    try:
        extra.mkdir(parents=True, exist_ok=True)
        probe = extra / ".probe"
        probe.write_text("")
        probe.unlink()
        out.append(extra)
    except OSError:
        pass
    for d in out:
        d.mkdir(parents=True, exist_ok=True)
    return out


def shot(driver, name: str, dirs: list[Path]) -> Path:
    first = dirs[0] / name
    driver.save_screenshot(str(first))
    for d in dirs[1:]:
        shutil.copy(first, d / name)
    return first


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> Path:
    save = rf.built_save(tmp_path_factory.mktemp("browser"), key="sk-browser")
    from evaluate.report import write_report

    return write_report(save)


def requests_made(driver) -> list[str]:
    urls = []
    for entry in driver.get_log("performance"):
        msg = json.loads(entry["message"])["message"]
        if msg.get("method") == "Network.requestWillBeSent":
            urls.append(msg["params"]["request"]["url"])
    return urls


def wait_ready(driver):
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(driver, 10).until(lambda d: d.execute_script(
        "return document.body && document.body.getAttribute('data-browser-ready') === '1'"))


def select(driver, element_id: str, text: str) -> None:
    from selenium.webdriver.support.ui import Select

    Select(driver.find_element("id", element_id)).select_by_visible_text(text)


def test_desktop(report, tmp_path):
    dirs = shots_dirs(tmp_path)
    driver = make_driver(1280, 1000)
    try:
        url = report.resolve().as_uri()
        driver.get(url)
        wait_ready(driver)
        errors = [e for e in driver.get_log("browser") if e["level"] in ("SEVERE", "ERROR")]
        assert errors == []
        urls = requests_made(driver)
        assert urls and all(u == url or u.startswith("data:") for u in urls), urls
        resources = driver.execute_script("return performance.getEntriesByType('resource').map(e => e.name)")
        assert all(r.startswith("data:") for r in resources), resources
        assert driver.execute_script("return window.__pwned === undefined")
        assert driver.find_elements("css selector", "table.headline")
        assert "model_a higher by" in driver.find_element("id", "headline").text
        shot(driver, "report_desktop_top.png", dirs)

        assert not driver.find_element("id", "f-cat").is_displayed()  # the browser starts folded
        driver.find_element("css selector", 'nav a[href="#browser"]').click()
        count = driver.find_element("id", "b-count")
        all_text = count.text
        select(driver, "f-cat", "classification")
        assert count.text != all_text and count.text.startswith("3 of")
        cats = {e.text.split(" · ")[1] for e in driver.find_elements("css selector", "#b-list .item .hd")}
        assert cats == {"classification"}

        select(driver, "f-m2", "model_c")  # the hostile answers: shown as text, never as markup
        heads = [e.text for e in driver.find_elements("css selector", "#b-list h5.m2")]
        assert heads and set(heads) == {"model_c"}
        answers = " ".join(e.text for e in driver.find_elements("css selector", "#b-list .side .txt"))
        assert "</script><script>" in answers or "onerror" in answers
        assert not driver.find_elements("css selector", "#b-list img, #b-list script")
        assert driver.execute_script("return window.__pwned === undefined")
        # the battle with model_c: both orders' raw replies are there to read
        driver.execute_script("document.querySelectorAll('#b-list details.battle').forEach(d => d.open = true)")
        battle_text = driver.find_element("id", "b-list").text
        assert "Order model_a first" in battle_text and "Order model_c first" in battle_text

        select(driver, "f-cat", "all")
        box = driver.find_element("id", "f-text")
        box.send_keys("lightning")
        from selenium.webdriver.support.ui import WebDriverWait

        WebDriverWait(driver, 5).until(lambda d: count.text.startswith("1 of"))
        box.clear()
        box.send_keys(" ")  # an input event with an empty query: every item again
        WebDriverWait(driver, 5).until(lambda d: count.text.startswith("8 of 8 items"))  # the scored categories' 8
        select(driver, "f-m2", "model_b")
        select(driver, "f-sort", "largest disagreement first")
        first = driver.find_element("css selector", "#b-list .item .hd").text
        assert first.split(" · ")[1] in ("classification", "closed_qa")  # where the two models' scores differ most
        select(driver, "f-sort", "file order")
        select(driver, "f-m2", "model_c")
        select(driver, "f-cat", "classification")
        driver.find_element("id", "f-invalid").click()
        assert count.text.startswith("1 of")  # the classification item whose battle reply did not parse
        driver.execute_script("document.getElementById('browser').scrollIntoView()")
        shot(driver, "report_desktop_items.png", dirs)
        assert [e for e in driver.get_log("browser") if e["level"] in ("SEVERE", "ERROR")] == []
        assert all(u == url or u.startswith("data:") for u in requests_made(driver))
    finally:
        driver.quit()


def test_phone_width(report, tmp_path):
    dirs = shots_dirs(tmp_path)
    driver = make_driver(390, 844)
    try:
        driver.get(report.resolve().as_uri())
        wait_ready(driver)
        # nothing wider than the screen except inside the tables' own scroll boxes
        over = driver.execute_script("return document.documentElement.scrollWidth - window.innerWidth")
        assert over <= 1, over
        shot(driver, "report_phone_top.png", dirs)
        driver.execute_script("document.getElementById('items').open = true")
        driver.execute_script("document.getElementById('browser').scrollIntoView()")
        shot(driver, "report_phone_items.png", dirs)
        # answers sit one above the other at this width
        boxes = driver.execute_script(
            "var s = document.querySelector('#b-list .side'); return [].map.call(s.children, c => c.getBoundingClientRect().top)")
        assert boxes[1] > boxes[0]
        assert [e for e in driver.get_log("browser") if e["level"] in ("SEVERE", "ERROR")] == []
    finally:
        driver.quit()


def test_compressed_item_data_loads_the_same_browser(report, tmp_path, monkeypatch):
    """Large runs embed the item data gzip + base64 (a third of the size); the page inflates it with
    DecompressionStream and shows the same items, still with no request and no console error."""
    import evaluate.report.page as page
    from evaluate.report import write_report

    monkeypatch.setattr(page, "COMPRESS_ABOVE", 0)
    packed = write_report(report.parent, out=tmp_path / "packed.html")
    html = packed.read_text(encoding="utf-8")
    assert 'id="report-data-gz"' in html and 'id="report-data"' not in html
    driver = make_driver(1280, 1000)
    try:
        counts = []
        for page_file in (report, packed):
            driver.get(page_file.resolve().as_uri())
            wait_ready(driver)
            assert [e for e in driver.get_log("browser") if e["level"] in ("SEVERE", "ERROR")] == []
            counts.append(driver.find_element("id", "b-count").get_attribute("textContent"))  # folded: not .text
            assert driver.execute_script("return window.__pwned === undefined")
        assert counts[0] == counts[1] and counts[0]
    finally:
        driver.quit()


def test_a_25_item_report_fits_a_few_screens_and_states_its_family(report, tmp_path):
    """The report of 25 items x 3 models: a few screens with details folded; the headline says its
    family and levels, the one ranking states its level once; the fixed report bugs stay fixed."""
    dirs = shots_dirs(tmp_path)
    driver = make_driver(1280, 1000)
    try:
        driver.get(report.resolve().as_uri())
        wait_ready(driver)
        height = driver.execute_script("return document.documentElement.scrollHeight")
        assert height <= 6 * 1000, height  # was 22,700 px before the categories were folded
        text = driver.find_element("tag name", "body").text
        assert "For each pair of models, the primary scores over all items form one family" in text
        assert "simultaneous 95% interval (each at 0.975)" in text and "Holm" not in text
        assert "Ranking (Bradley-Terry, 95% intervals)" in text and text.count("90%") == 0
        assert "[object Object]" not in text and "SAGE critiques" not in text
        cats = [o.get_attribute("textContent") for o in driver.find_elements("css selector", "#f-cat option")]
        assert set(cats) - {"all"} <= {"closed_qa", "classification", "open_qa"}  # scored categories only
        ticks = driver.find_elements("css selector", "svg.forest text.ax")
        assert len(ticks) >= 5  # the shared axis is labelled
        driver.set_window_size(1280, height + 200)
        shot(driver, "report_desktop_full.png", dirs)
        assert [e for e in driver.get_log("browser") if e["level"] in ("SEVERE", "ERROR")] == []
    finally:
        driver.quit()
