"""The HTML report and the closing summary, on a real save path (pipeline + fake judge server)."""

from __future__ import annotations

import json
import re
import shutil
from html.parser import HTMLParser
from pathlib import Path

import pytest

from evaluate.cli import main as eval_main
from evaluate.report import closing_summary, write_report
from evaluate.commands.report import main as report_main

try:
    from tests import report_fixtures as rf
    from tests.fake_openai_server import FakeOpenAIServer
except ImportError:
    import report_fixtures as rf
    from fake_openai_server import FakeOpenAIServer

ANSI = re.compile(r"\x1b\[[0-9;]*m")


@pytest.fixture(scope="module")
def save(tmp_path_factory) -> Path:
    """Three models, Metrics + GPT ratings + battles + ranking, a comparisons file, length control."""
    path = rf.built_save(tmp_path_factory.mktemp("report"))
    return path


@pytest.fixture(scope="module")
def page(save) -> str:
    return write_report(save).read_text(encoding="utf-8")


class Collect(HTMLParser):
    def __init__(self):
        super().__init__()
        self.refs: list[tuple[str, str, str]] = []
        self.scripts: list[tuple[dict, str]] = []
        self._script: dict | None = None
        self._buf: list[str] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        for name in ("src", "href", "action", "data", "poster", "srcset", "xlink:href"):
            if a.get(name):
                self.refs.append((tag, name, a[name]))
        if tag == "script":
            self._script, self._buf = a, []

    def handle_data(self, data):
        if self._script is not None:
            self._buf.append(data)

    def handle_endtag(self, tag):
        if tag == "script" and self._script is not None:
            self.scripts.append((self._script, "".join(self._buf)))
            self._script = None


def parse(html: str) -> Collect:
    c = Collect()
    c.feed(html)
    return c


def test_one_file_no_outside_references(save, page):
    c = parse(page)
    for tag, attr, value in c.refs:
        assert value.startswith(("data:", "#")), (tag, attr, value[:80])
    assert not re.search(r"""(?:src|href)\s*=\s*["']?\s*(?:https?:)?//""", page, re.IGNORECASE)
    assert "@import" not in page and "url(" not in page.split("<script", 1)[0]
    assert {tag for tag, attr, v in c.refs if v.startswith("data:image/png")} == {"img"}
    assert "default-src 'none'" in page  # the browser itself refuses any request
    assert not any(s.get("src") for s, _ in c.scripts)


def test_embedded_json_round_trips_and_hostile_text_stays_text(save, page):
    c = parse(page)
    blocks = [body for attrs, body in c.scripts if attrs.get("type") == "application/json"]
    assert len(blocks) == 1 and len(c.scripts) == 2  # the data and the page's own script, nothing injected
    data = json.loads(blocks[0])
    results = {m: json.loads((save / "results" / f"{m}.json").read_text()) for m in data["models"]}
    assert data["models"] == ["model_a", "model_b", "model_c"]
    for item in data["items"]:
        for mi, m in enumerate(data["models"]):
            src = next(i for i in results[m]["items"] if str(i["id"]) == item["id"])
            assert item["o"][mi] == src["output"]
            assert item["q"] == src["instruction"]
            for k, v in src["scores"].items():
                if v is not None:
                    assert item["s"][mi][str(data["keys"].index(k))] == pytest.approx(v, abs=1e-4)
    outputs = [o for it in data["items"] for o in it["o"] if o]
    for hostile in rf.HOSTILE:
        assert any(hostile in o for o in outputs)  # kept exactly, as data
    raw_block = page.split('id="report-data">', 1)[1].split("</script>", 1)[0]
    assert "<" not in raw_block  # every '<' escaped: no text can close the block
    assert "onerror" not in page.replace(raw_block, "")  # hostile text appears nowhere but the data
    # battle raw replies (an unparseable one holds '</script>') are in the data too
    raws = [o[3] for b in data["battles"] for it in b["items"].values() for o in it[3:] if o]
    assert any("</script>" in r for r in raws)


def test_headline_judge_and_run_sections(save, page):
    assert "model_a higher by 3.100" in page
    assert "simultaneous 95% interval (each at 0.975) 2.600 to 3.500" in page  # the confirmatory row's level
    assert "no detectable difference" in page and "too few pairs for any test" in page
    assert "too small to detect" not in page and "Holm" not in page
    assert "For each pair of models, the primary scores over all items form one family" in page
    assert "Bonferroni within the pair&#39;s 2 primary scores" in page
    assert "exploratory rows whose unadjusted 95% interval excludes 0" in page
    assert "length-controlled" in page and "0.710" in page  # the battle file's "controlled" key
    assert "Judge check:" in page and "not checked" in page
    assert "Ranking (Bradley-Terry" in page
    assert "fake-judge" in page
    m = json.loads((save / "manifest.json").read_text())
    assert m["config_hash"] in page and m["run_id"] in page
    assert page.count('class="forest"') >= 3  # (all), closed_qa, classification, open_qa rows


def test_untrustworthy_judge_is_warned(save, tmp_path):
    copy = tmp_path / "s"
    shutil.copytree(save, copy)
    (copy / "judge_check.json").write_text(json.dumps({
        "judge": {"model": "fake-judge"}, "trustworthy": False,
        "verdict_text": "agrees with humans on 51% of labelled pairs (chance: 50%)", "labelled": None, "sanity": None}))
    html = write_report(copy).read_text()
    assert 'id="judge-warning"' in html and "51% of labelled pairs" in html and "NOT trustworthy" in html
    text = closing_summary(copy, width=80, color=False)
    assert "judge warning: judge check failed" in text
    # a stored verdict that starts with its own "NOT trustworthy: " is not said twice in the Judge section
    (copy / "judge_check.json").write_text(json.dumps({
        "judge": {"model": "fake-judge"}, "trustworthy": False,
        "verdict_text": "NOT trustworthy: battle near chance on sanity pairs", "labelled": None, "sanity": None}))
    html = write_report(copy).read_text()
    assert "NOT trustworthy</strong> — battle near chance on sanity pairs" in html
    assert "— NOT trustworthy: battle" not in html


def test_metrics_only_save_path_without_optional_files(tmp_path, save):
    copy = tmp_path / "m"
    (copy / "results").mkdir(parents=True)
    res = json.loads((save / "results" / "model_a.json").read_text())
    (copy / "results" / "model_a.json").write_text(json.dumps(res))
    html = write_report(copy).read_text()
    assert "No judge was used" not in html  # GPT signatures are in the result file
    assert "One model" in html


def test_cli_without_results_exits_2_naming_the_path(tmp_path, capsys):
    empty = tmp_path / "not-a-run"
    empty.mkdir()
    assert report_main([str(empty)]) == 2
    err = capsys.readouterr().err
    assert str(empty) in err and "Traceback" not in err and "results/" in err
    assert eval_main(["report", str(tmp_path / "missing")]) == 2
    assert str(tmp_path / "missing") in capsys.readouterr().err


def test_cli_writes_out(save, tmp_path, capsys):
    out = tmp_path / "x" / "r.html"
    assert eval_main(["report", str(save), "--out", str(out)]) == 0
    assert out.is_file() and str(out) in capsys.readouterr().out


def _not_a_path(line: str) -> bool:
    """Lines that are a label and a file path are never cut; every other line must fit."""
    return not line.rstrip().endswith((".html", ".json", ".csv", ".sqlite", "/results", "/battles",
                                       "/comparisons", "/charts"))


def test_closing_summary_fits_80_columns_plain(save, capsys):
    write_report(save)
    text = closing_summary(save, width=80)  # pytest's stdout is not a tty: plain text
    assert not ANSI.search(text)
    lines = text.splitlines()
    assert all(len(line) <= 80 for line in lines if _not_a_path(line)), [x for x in lines if len(x) > 80]
    assert lines[0].split()[:3] == ["mean,", "all", "items"] and "model_c" in lines[0]
    # the hand-made comparison of model_a and model_b: the verdict names whom it favours, with difference,
    # interval and adjusted p, and the battle says whose win rate it is, with the length-controlled one beside it
    row = next(x for x in lines if x.strip().startswith("GPT/correctness") and "3.100" in x)
    assert row.split()[1:] == ["3.100", "[2.600,", "3.500]", "0.004", "model_a", "better"]
    # the headline counts the primary scores as the report does; the battle (won 1.00, its interval above
    # 0.5) is named beside them (issue 39: counted among the primary comparisons, the terminal said one more)
    head = " ".join(x.strip() for x in text.split("model_a vs model_b:")[1].split("\n  score ")[0].splitlines())
    assert head.startswith("model_a better on 1, model_b better on 0") and head.endswith("; battle: model_a better"), \
        head
    assert any("battle: win rate of model_a 1.00" in x and "length-controlled 0.71 [0.55," in x for x in lines)
    assert any("leads (exploratory" in x for x in lines)
    # three models: the ranking with its level stated once, raw and style-controlled side by side
    at = next(i for i, x in enumerate(lines) if x.startswith("ranking (Bradley-Terry"))
    assert "raw" in lines[at + 1] and "style-ctl" in lines[at + 1]
    assert "too few questions: 5 < 10" in lines[at] and "clearly first" not in text.replace("is clearly first", "")
    assert any(x.startswith("judge: ") and "cache hits" in x and "$" in x for x in lines)
    assert any(x.startswith("invalid scores: ") and "GPT battles" in x for x in lines)
    report_line = next(i for i, line in enumerate(lines) if line.startswith("report:"))
    assert all(not line.startswith(("manifest:", "results:")) for line in lines[:report_line])  # the report first
    narrow = closing_summary(save, width=60)
    assert all(len(line) <= 60 for line in narrow.splitlines() if _not_a_path(line)), narrow
    colored = closing_summary(save, width=80, color=True)
    assert ANSI.search(colored)
    only = closing_summary(save, width=80, scores=["ROUGE-L"]).splitlines()
    assert [x.split()[0] for x in only[1:2]] == ["Metrics/ROUGE-L"] and not any("GPT/correctness" in x for x in only)
    with pytest.raises(Exception, match='did you mean "Metrics/ROUGE-L"'):
        closing_summary(save, scores=["Metrics/ROUGE-X"])


def test_two_models_summary_has_battle_line(tmp_path):
    with FakeOpenAIServer() as server:
        mp = pytest.MonkeyPatch()
        mp.setenv("REPORT_KEY", "k")
        try:
            save = rf.run_pipeline(tmp_path, server, models=2)
        finally:
            mp.undo()
    text = closing_summary(save, width=80, color=False)
    assert "battle: win rate of model_a 1.00" in text  # model_a wins every battle in the fake judge
    assert "ranking" not in text  # two models: the pair's verdicts say it all


def test_flags_are_lists_for_every_model_and_judge_panel_shows_its_backend_options(save):
    from evaluate.savepath import read_run_log
    from evaluate.report.page import browser_data, judge_options_shown

    data = read_run_log(save)
    first = next(it for it in data.results[0]["items"] if it.get("scores"))
    first["flags"] = ["empty_output"]  # one model flags an item, the others do not
    items = browser_data(data)["items"]
    flagged = next(it for it in items if it["id"] == str(first["id"]))
    assert flagged["f"][0] == ["empty_output"] and all(f == [] for f in flagged["f"][1:])  # never {} ("[object Object]")
    http = judge_options_shown({"backend": "openai", "model": "m", "base_url": "http://x/v1", "dtype": "auto",
                                "lookahead": 3, "batch": False, "batch_poll": 60})
    assert http == {"backend": "openai", "model": "m", "base_url": "http://x/v1", "batch": False}
    local = judge_options_shown({"backend": "local", "model": "m", "base_url": None, "dtype": "auto", "timeout": 9})
    assert local == {"backend": "local", "model": "m", "dtype": "auto"}


def test_the_item_browser_leaves_out_records_nothing_evaluated(save):
    """Records of a category the config skips (no score, no invalid score, no battle) are not items to browse:
    they are counted instead, and their category is not offered in the filter."""
    from evaluate.savepath import read_run_log
    from evaluate.report.page import browser_data

    data = read_run_log(save)
    every = {str(it["id"]) for r in data.results for it in r["items"]}
    evaluated = {str(it["id"]) for r in data.results for it in r["items"] if it.get("scores") or it.get("invalid")}
    evaluated |= {str(it["id"]) for bt in data.battles for it in bt.get("items", [])}
    unscored = every - evaluated
    skipped_cats = {it["category"] for r in data.results for it in r["items"] if str(it["id"]) in unscored}
    got = browser_data(data)
    shown = {it["id"] for it in got["items"]}
    assert unscored, "the fixture has a category without any score"
    assert shown == every - unscored and got["unscored"] == len(unscored)
    assert not {got["cats"][c] for c in got["scored_cats"]} & skipped_cats
