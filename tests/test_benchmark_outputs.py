"""`eval.py alpaca-eval` and `eval.py arena-hard` leave the project's own outputs beside the benchmark's
files: results, battles in the project's schema with the benchmark's own numbers, summary.csv,
report.html and `eval.py summary`, all saying what the command's table said, and the judge check the
terminal quotes is the one the report's judge panel shows. Run against the fake OpenAI-compatible
server on a few items of the shared benchmark files (skipped when they are absent)."""

from __future__ import annotations

import csv
import html
import json
import re
import shutil
from pathlib import Path

import pytest

from evaluate.commands import alpaca_eval as ae_cmd
from evaluate.commands import arena_hard as ah_cmd
from evaluate.commands.summary import main as summary_main

try:
    from tests import test_alpaca_eval_judge as tae
    from tests import test_arena_hard as tah
    from tests.fake_openai_server import FakeOpenAIServer, Reply, fake_openai  # noqa: F401
except ImportError:  # tests/ itself on sys.path
    import test_alpaca_eval_judge as tae  # type: ignore[no-redef]
    import test_arena_hard as tah  # type: ignore[no-redef]
    from fake_openai_server import FakeOpenAIServer, Reply, fake_openai  # type: ignore[no-redef]  # noqa: F401

REPO = Path(__file__).resolve().parents[1]
AE_LIMIT, AH_LIMIT = 10, 12
CHROMIUM, CHROMEDRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")


@pytest.fixture
def ae_data() -> Path:
    if not (tae.CONFIG / "configs.yaml").exists() or not (tae.OUTPUTS / f"{tae.BASELINE}.json").exists():
        pytest.skip("../shared/data/alpaca_eval is not present beside this checkout")
    return tae.DATA


@pytest.fixture
def ah_data(monkeypatch: pytest.MonkeyPatch) -> Path:
    if not (tah.BENCH / "question.jsonl").exists() or not tah.PROMPT.exists():
        pytest.skip("../shared/data/arena_hard is not present beside this checkout")
    monkeypatch.setenv(tah.ENV, "sk-test-arena")
    monkeypatch.setenv("EVAL_NO_PROGRESS", "1")
    return tah.DATA


def load(path: Path):
    return json.loads(path.read_text(encoding="utf-8"))


def report_text(path: Path) -> str:
    """The report's visible text, roughly: tags dropped, entities decoded, spaces squeezed."""
    body = path.read_text(encoding="utf-8").split("<main>", 1)[1].split("</main>", 1)[0]
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", body)))


def benchmark_rows(battle: dict) -> dict[str, dict]:
    return {r["label"]: r for r in battle["benchmark"]["rows"]}


def store_check(save: Path, name: str, model: str, trustworthy: bool, text: str, created: str) -> None:
    rec = {"schema": "llm-eval-judge-check/1", "key": name, "trustworthy": trustworthy, "verdict_text": text,
           "created": created, "judge": {"battle": {"judge": {"backend": "openai", "model": model}}}}
    (save / "judge_checks").mkdir(parents=True, exist_ok=True)
    (save / "judge_checks" / f"{name}.json").write_text(json.dumps(rec))


def stored_check_shows_in_report(save: Path, judge: str, rerun, capsys) -> None:
    """A check of this judge (failed) and a newer one of another judge (passed, in judge_check.json):
    the terminal quotes this judge's, and so must the report, with its scope."""
    mine = "NOT trustworthy: with labels (hhh.jsonl, 40 pairs): agreement 0.425"
    store_check(save, "mine", judge, False, mine, "2026-11-20T00:00:00+00:00")
    store_check(save, "other", "another-judge", True, "trustworthy: with labels: agreement 0.9",
                "2026-11-24T00:00:00+00:00")
    shutil.copy(save / "judge_checks" / "other.json", save / "judge_check.json")
    assert rerun() == 0
    printed = " ".join(capsys.readouterr().out.split())
    assert "not this benchmark's prompt): " + mine in printed
    text = report_text(save / "report.html")
    judge_panel = text.split(" Judge Judge check: ", 1)[1].split(" Per category ", 1)[0]
    assert judge_panel.startswith("NOT trustworthy — with labels (hhh.jsonl, 40 pairs): agreement 0.425")
    assert "judge_checks/mine.json: the project's battle and rating prompts with this judge, not this " \
           "benchmark's prompt" in judge_panel
    assert "agreement 0.9" not in text
    assert "judge check failed: with labels (hhh.jsonl, 40 pairs)" in text  # the warning at the top
    manifest = load(save / "manifest.json")
    assert manifest["judge_check"]["verdict"] == mine and manifest["judge_check"]["checked"] is True


# ------------------------------------------------------------------------------------------ AlpacaEval
def run_alpaca(fake, tmp_path: Path, out: Path) -> int:
    cfg = tae.judge_config(tmp_path, fake)
    files = [tae.OUTPUTS / f"{m}.json" for m in tae.MODELS]
    return tae.run(files, tae.OUTPUTS / f"{tae.BASELINE}.json", cfg, out, "--limit", str(AE_LIMIT))


def test_alpaca_eval_run_leaves_results_battles_and_report(ae_data, fake_openai, tmp_path, capsys) -> None:
    fake_openai.reply_fn = tae.hashed_reply
    out = tmp_path / "out"
    assert run_alpaca(fake_openai, tmp_path, out) == 0
    printed = capsys.readouterr().out
    table = {line.split()[0]: line.split() for line in printed.splitlines() if line.split()[:1] and
             line.split()[0] in tae.MODELS}
    assert set(table) == set(tae.MODELS)
    assert f"  report: {out / 'report.html'}" in printed.splitlines()
    text = report_text(out / "report.html")
    summary = {(r["model"], r["category"]): r for r in csv.DictReader(open(out / "summary.csv"))}
    for m in tae.MODELS:
        _, win, _, lc, _, discrete, *_ = table[m]
        annotations = load(out / m / tae.ANNOTATOR / "annotations.json")
        battle = load(out / "battles" / f"{m}__vs__{tae.BASELINE}.json")
        rows = benchmark_rows(battle)
        # the battle file's benchmark numbers are the table's
        assert f"{rows['win rate (%)']['value']:.2f}" == win
        assert f"{rows['length-controlled win rate (%)']['value']:.2f}" == lc
        assert f"{rows['discrete win rate (%)']['value']:.2f}" == discrete
        assert "fitted over the 2 models judged here" in rows["length-controlled win rate (%)"]["note"]
        # ... and the report's, in the pair's battle section
        section = text.split(f"AlpacaEval 2: {m} against {tae.BASELINE}", 1)[1].split("per category", 1)[0]
        for label, value in (("win rate (%)", win), ("length-controlled win rate (%)", lc),
                             ("discrete win rate (%)", discrete)):
            assert f" {label} {value} " in section
        # one order per instruction, from the model's side; the verdict is the side the preference favours
        assert battle["summary"]["items"] == AE_LIMIT and battle["summary"]["both_orders"] is False
        for item, ann in zip(battle["items"], annotations):
            (o,) = item["orders"]
            assert o["order"] == ("AB" if ann["is_switched_outputs"] else "BA")
            p = ann["preference"]
            assert item["verdict"] == ("A" if p > 1.5 else "B" if p < 1.5 else "tie")
            assert o["weighted_scores"] == pytest.approx([p - 1, 2 - p], abs=1e-4)
        assert battle["summary"]["win_rate"] * 100 == pytest.approx(float(discrete), abs=0.006)
        # results: AlpacaEval/preference, whose mean x100 is the win rate
        res = load(out / "results" / f"{m}.json")
        assert [it["instruction"] for it in res["items"]] == [a["instruction"] for a in annotations]
        assert float(summary[(m, "(all)")]["mean"]) * 100 == pytest.approx(float(win), abs=0.006)
        assert res["signatures"]["AlpacaEval/preference"]["judge"]["model"] == "fake-gpt4"
    base = load(out / "results" / f"{tae.BASELINE}.json")
    assert {it["scores"]["AlpacaEval/preference"] for it in base["items"]} == {0.5}
    assert float(summary[(tae.BASELINE, "(all)")]["mean"]) == 0.5
    manifest = load(out / "manifest.json")
    assert manifest["benchmark"] == "alpaca_eval" and manifest["status"] == "ok"
    assert manifest["usage"]["AlpacaEval"]["requests"] == 2 * AE_LIMIT
    assert "not checked" in text.split(" Judge check: ", 1)[1][:200] and "fake-gpt4" in text.split(" Judge check: ", 1)[1][:200]

    assert summary_main([str(out), "--width", "80"]) == 0
    said = " ".join(capsys.readouterr().out.split())
    for m in tae.MODELS:
        assert f"AlpacaEval 2, {m}: win rate (%) {table[m][1]}; length-controlled win rate (%) {table[m][3]}" in said

    calls = fake_openai.chat_calls
    stored_check_shows_in_report(out, "fake-gpt4", lambda: run_alpaca(fake_openai, tmp_path, out), capsys)
    assert fake_openai.chat_calls == calls  # the re-run came from the cache


def test_alpaca_eval_invalid_reply_is_invalid_in_results_and_battle(ae_data, fake_openai, tmp_path, capsys) -> None:
    ref, mod, _ = tae.synthetic(tmp_path)
    fake_openai.reply_fn = tae.model_first_reply
    out = tmp_path / "out"
    assert tae.run([mod], ref, tae.judge_config(tmp_path, fake_openai), out) == 0
    capsys.readouterr()
    res = {it["instruction"]: it for it in load(out / "results" / "mine.json")["items"]}
    bad = next(k for k in res if k.endswith("unreadable"))
    assert "AlpacaEval/preference" not in res[bad]["scores"]
    assert "among the top" in res[bad]["invalid"]["AlpacaEval/preference"]["reason"]
    battle = load(out / "battles" / "mine__vs__base.json")
    assert battle["summary"]["invalid"] == 1
    same = next(it for it in battle["items"] if res[next(k for k in res if k == "Say hi")]["id"] == it["id"])
    assert same["verdict"] == "tie" and "identical outputs" in same["orders"][0]["reason"]


# ------------------------------------------------------------------------------------------ Arena-Hard
FIRST_WINS = ("A>>B", "A>B", "B<A", "B<<A")  # the answer shown first (assistant A) is better
ROW = re.compile(r"^(\S+)\s+(-|\d+\.\d)\s+\((\S+), (\S+)\)\s+(-|\d+\.\d)\s+\((\S+), (\S+)\)\s+(\d+)\s+(\d+)\s+(\d+)$")


def run_arena(fake, tmp_path: Path, out: Path) -> int:
    return tah.run(tah.judge_config(tmp_path, fake), out, "--limit", str(AH_LIMIT))


def test_arena_hard_run_leaves_battles_and_report(ah_data, fake_openai, tmp_path, capsys) -> None:
    fake_openai.reply_fn = tah.hashed_reply
    out = tmp_path / "out"
    assert run_arena(fake_openai, tmp_path, out) == 0
    printed = capsys.readouterr().out
    table = {m.group(1): m.groups() for m in map(ROW.match, printed.splitlines()) if m}
    assert set(table) == {tah.BASELINE, *tah.MODELS}
    assert printed.splitlines()[-1].endswith(f", {out / 'report.html'}")
    text = report_text(out / "report.html")
    for m in tah.MODELS:
        _, score, lo, hi, sc, sc_lo, sc_hi, tokens, n, inv = table[m]
        battle = load(out / "battles" / f"{m}__vs__{tah.BASELINE}.json")
        rows = benchmark_rows(battle)
        s, st = rows["score (%)"], rows["style-controlled score (%)"]
        assert [f"{x:.1f}" for x in (s["value"], *s["interval"])] == [score, lo, hi]
        assert [f"{x:.1f}" for x in (st["value"], *st["interval"])] == [sc, sc_lo, sc_hi]
        assert s["level"] == st["level"] == 0.9
        assert rows["questions scored"]["value"] == int(n)
        section = text.split(f"Arena-Hard: {m} against {tah.BASELINE}", 1)[1].split("per category", 1)[0]
        assert f" score (%) {score} 90% [{lo}, {hi}] " in section
        assert f" style-controlled score (%) {sc} 90% [{sc_lo}, {sc_hi}] " in section
        assert "Token lengths: o200k_base tokens" in section or "words and punctuation" in section
        # two games per question as the two orders, the judge's five-level label kept
        judged = [json.loads(x) for x in (out / "model_judgment" / "fake-judge" / f"{m}.jsonl").read_text().splitlines()]
        assert [it["id"] for it in battle["items"]] == [r["uid"] for r in judged]
        for item, rec in zip(battle["items"], judged):
            orders = {o["order"]: o for o in item["orders"]}
            for game, order in zip(rec["games"], ("BA", "AB")):
                o = orders[order]
                assert o["label"] == game["score"]
                if game["score"] is None:
                    assert o["verdict"] == "invalid" and o["raw"] == game["judgment"]["answer"]
                    continue
                label = game["score"].replace(" ", "")
                first = 1.0 if label in FIRST_WINS else 0.5 if label in ("A=B", "B=A") else 0.0
                model = first if order == "AB" else 1 - first
                assert o["verdict"] == ("A" if model > 0.5 else "B" if model < 0.5 else "tie")
        assert battle["summary"]["invalid"] == int(inv)
        assert battle["summary"]["items"] == int(n) + int(inv)
    assert load(out / "results" / f"{tah.BASELINE}.json")["items"]
    manifest = load(out / "manifest.json")
    assert manifest["benchmark"] == "arena_hard" and manifest["usage"]["Arena-Hard"]["requests"] == 4 * AH_LIMIT
    assert summary_main([str(out), "--width", "80"]) == 0
    said = " ".join(capsys.readouterr().out.split())
    m = tah.MODELS[0]
    assert f"Arena-Hard, {m}: score (%) {table[m][1]} (90% [{table[m][2]}, {table[m][3]}])" in said

    stored_check_shows_in_report(out, "fake-judge", lambda: run_arena(fake_openai, tmp_path, out), capsys)


# ------------------------------------------------------------------------------------------ in a browser
def test_both_reports_in_headless_chromium(ae_data, ah_data, fake_openai, tmp_path, capsys) -> None:
    if not CHROMIUM.exists() or not CHROMEDRIVER.exists():
        pytest.skip("/usr/bin/chromium or /usr/bin/chromedriver is absent (apt-get install chromium chromium-driver)")
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (the `test` extra)")
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.support.ui import WebDriverWait

    fake_openai.reply_fn = tae.hashed_reply
    assert run_alpaca(fake_openai, tmp_path, tmp_path / "ae") == 0
    fake_openai.reply_fn = tah.hashed_reply
    assert run_arena(fake_openai, tmp_path, tmp_path / "ah") == 0
    capsys.readouterr()
    shots = [tmp_path / "screenshots"]
    try:
        (REPO / "results" / "screenshots").mkdir(parents=True, exist_ok=True)
        shots.append(REPO / "results" / "screenshots")
    except OSError:
        pass
    opts = webdriver.ChromeOptions()
    opts.binary_location = str(CHROMIUM)
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,1400"):
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=opts)
    try:
        for name, want in (("ae", "length-controlled win rate (%)"), ("ah", "style-controlled score (%)")):
            url = (tmp_path / name / "report.html").resolve().as_uri()
            driver.get(url)
            WebDriverWait(driver, 10).until(lambda d: d.execute_script(
                "return document.body.getAttribute('data-browser-ready') === '1'"))
            assert [e for e in driver.get_log("browser") if e["level"] in ("SEVERE", "ERROR")] == []
            tables = driver.find_elements("css selector", "table.benchmark")
            assert tables and all(t.is_displayed() for t in tables)
            assert want in tables[0].text
            resources = driver.execute_script("return performance.getEntriesByType('resource').map(e => e.name)")
            assert all(r.startswith("data:") for r in resources), resources
            for d in shots:
                d.mkdir(parents=True, exist_ok=True)
                driver.save_screenshot(str(d / f"report_benchmark_{name}.png"))
            driver.find_element("css selector", 'nav a[href="#judge"]').click()
            assert "not checked" in driver.find_element("id", "judge").text
    finally:
        driver.quit()


# ------------------------------------------------------------------------------------------ leaderboard
def judgments(path: Path, model: str, baseline: str | None, n: int = 12) -> None:
    labels = ["A>B", "B>A", "A=B", "B>>A", "A>>B", "B>A"]
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as f:
        for i in range(n):
            rec = {"uid": f"q{i}", "category": "c", "judge": "j", "model": model,
                   "games": [{"score": labels[i % 6]}, {"score": labels[(i + 1) % 6]}]}
            if baseline is not None:
                rec["baseline"] = baseline
            f.write(json.dumps(rec) + "\n")


def test_leaderboard_arena_hard_baseline_is_explicit_and_the_check_is_quoted(tmp_path, capsys) -> None:
    from evaluate.commands.leaderboard import main as leaderboard

    bench = tmp_path / "bench"
    judgments(bench / "model_judgment" / "j" / "m.jsonl", "m", "base-1")
    assert leaderboard(["--arena-hard", str(bench)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "baseline base-1 (50 by definition)" in out and "judge check" not in out
    # a second baseline: the files no longer say which one, and a name they do not hold is refused
    judgments(bench / "model_judgment" / "j" / "m2.jsonl", "m2", "base-2")
    for extra, want in (([], "several baselines (base-1, base-2); name one with --baseline"),
                        (["--baseline", "nope"], "no judgment against baseline 'nope' (their baseline field "
                                                 "names base-1, base-2)")):
        assert leaderboard(["--arena-hard", str(bench), *extra]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and want in err and str(bench / "model_judgment" / "j") in err
        assert "Traceback" not in err
    assert leaderboard(["--arena-hard", str(bench), "--baseline", "base-2"]) == 0
    out = capsys.readouterr().out
    assert {ln.split()[0] for ln in out.splitlines()[2:] if ln.startswith(("m", "base"))} == {"m2", "base-2"}
    assert "baseline base-2 (50 by definition)" in " ".join(out.split())
    # a judge check of that judge, stored in the folder (the save path of eval.py arena-hard), is quoted
    store_check(bench, "k", "j", True, "trustworthy: with labels (hhh.jsonl, 40 pairs): agreement 0.81", "2026-11-25")
    assert leaderboard(["--arena-hard", str(bench), "--judge", "j", "--baseline", "base-1"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "judge check (k.json, the project's battle and rating prompts with this judge, not this benchmark's " \
           "prompt): trustworthy: with labels (hhh.jsonl, 40 pairs): agreement 0.81" in out
