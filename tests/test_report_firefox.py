"""The report in Firefox (Debian's firefox-esr, driven over Marionette): the item browser fills from
plain and from compressed data, a filter changes what is shown, hostile answers stay text."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

try:
    from tests import report_fixtures as rf
    from tests.marionette import FIREFOX, Firefox
except ImportError:
    import report_fixtures as rf
    from marionette import FIREFOX, Firefox

pytestmark = pytest.mark.skipif(FIREFOX is None, reason="firefox-esr is not installed (apt-get install firefox-esr)")


@pytest.fixture(scope="module")
def pages(tmp_path_factory) -> list[Path]:
    import evaluate.report.page as page
    from evaluate.report import write_report

    save = rf.built_save(tmp_path_factory.mktemp("firefox"), key="sk-firefox")
    plain = write_report(save)
    old = page.COMPRESS_ABOVE
    page.COMPRESS_ABOVE = 0
    try:
        packed = write_report(save, out=save / "packed.html")
    finally:
        page.COMPRESS_ABOVE = old
    return [plain, packed]


def _ready(ff: Firefox) -> str:
    for _ in range(100):
        if ff.js("return document.body && document.body.getAttribute('data-browser-ready')") == "1":
            return ff.js("return document.getElementById('b-count').textContent")
        time.sleep(0.1)
    raise AssertionError("the item browser never became ready")


def test_report_works_in_firefox(pages):
    ff = Firefox()
    try:
        counts = []
        for page in pages:
            ff.get(page.resolve().as_uri())
            counts.append(_ready(ff))
            assert ff.js("return window.__pwned === undefined")
            assert ff.js("return document.querySelectorAll('#b-list img, #b-list script').length") == 0
            assert ff.js("return document.querySelectorAll('table.headline').length") > 0
            assert ff.js("return performance.getEntriesByType('resource').filter(e => !e.name.startsWith('data:')).length") == 0
            before = ff.js("return document.getElementById('b-count').textContent")
            ff.js("var s = document.getElementById('f-cat');"
                  "s.value = Array.from(s.options).find(o => o.text === 'classification').value;"
                  "s.dispatchEvent(new Event('change'));")
            after = ff.js("return document.getElementById('b-count').textContent")
            assert after != before and after.startswith("3 of")
        assert counts[0] == counts[1] and counts[0]
    finally:
        ff.close()
