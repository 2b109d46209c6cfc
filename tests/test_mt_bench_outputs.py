"""An MT-bench run's own outputs, on a few questions of FastChat's two real answer files against the fake
judge: results whose per-turn and overall means are show_result.py's (read here from the judgment file),
battles in the project's schema whose counts are show_result.py's, comparisons, report.html and
`eval.py summary`; the judge check on the run's own turns (a judge that reads the answers passes, a
random one is near chance); the config form writes what the flags write; a bad config exits 2 naming
the key.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest

from evaluate.cli import main as cli

try:
    from tests.fake_openai_server import FakeOpenAIServer, fake_openai  # noqa: F401
    from tests.test_mt_bench import ANSWERS, BENCH, MODELS, jsonl, judge_reply, narrow, selected_questions, \
        show_pairwise, show_single
except ImportError:  # tests/ itself on sys.path
    from fake_openai_server import FakeOpenAIServer, fake_openai  # noqa: F401
    from test_mt_bench import ANSWERS, BENCH, MODELS, jsonl, judge_reply, narrow, selected_questions, \
        show_pairwise, show_single

LIMIT = 2


@pytest.fixture
def data() -> Path:
    if not (BENCH / "question.jsonl").exists() or not (ANSWERS / "gpt-3.5-turbo.jsonl").exists():
        pytest.skip("../shared/data/fastchat_mt_bench or mt_bench/model_answer is not present")
    return BENCH


def _h(text: str) -> int:
    return int(hashlib.sha256(text.encode()).hexdigest(), 16)


def always_rates(request) -> str:
    """Every reply readable: a rating 1-10 decided by the request alone."""
    return f"Fine.\n\nRating: [[{_h(request.body['messages'][-1]['content']) % 10 + 1}]]"


def random_judge(request) -> str:
    """Ratings and verdicts decided by a hash of the request: blind to what the answers say and to their length."""
    h = _h(request.body["messages"][-1]["content"])
    if "[[rating]]" in request.body["messages"][0]["content"] + request.body["messages"][-1]["content"]:
        return f"Rating: [[{h % 10 + 1}]]"
    return f"[[{'ABC'[h % 3]}]]"


class ReadingJudge:
    """A judge that reads the answers: it knows each question's real answers (both answer files) and
    counts how many of them the conversation shown holds intact; more is better."""

    B_START = re.compile(r"\[The Start of Assistant B's Answer\]|<\|The Start of Assistant B's Conversation")

    def __init__(self) -> None:
        questions = jsonl(BENCH / "question.jsonl")
        self.by_question: dict[str, set[str]] = {}
        for m in MODELS:
            for a in jsonl(ANSWERS / f"{m}.jsonl"):
                q = next(x for x in questions if x["question_id"] == a["question_id"])
                self.by_question.setdefault(q["turns"][0], set()).update(
                    t.strip() for t in a["choices"][0]["turns"] if len(t.strip()) > 30)

    def _count(self, answers: set[str], text: str) -> int:
        return sum(1 for t in answers if t in text)

    def __call__(self, request) -> str:
        user = request.body["messages"][-1]["content"]
        answers = next((v for q, v in self.by_question.items() if q in user), set())
        split = self.B_START.search(user)
        if split is None:
            return f"Rating: [[{min(10, 2 + 3 * self._count(answers, user))}]]"
        a, b = self._count(answers, user[:split.start()]), self._count(answers, user[split.start():])
        return "[[A]]" if a > b else "[[B]]" if b > a else "[[C]]"


def judge_config(tmp_path: Path, server: FakeOpenAIServer) -> Path:
    cfg = tmp_path / "judge.yaml"
    cfg.write_text(f"judge:\n  backend: openai\n  model: gpt-4\n  base_url: {server.url}\n  concurrency: 4\n"
                   "  max_retries: 0\n")
    return cfg


def run(cfg: Path, out: Path, mode: str, *extra: str, answers: list[Path] | None = None) -> int:
    answers = answers or [ANSWERS / f"{m}.jsonl" for m in MODELS]
    return cli(["mt-bench", "--data", str(BENCH), "--answers", *map(str, answers), "--judge-config", str(cfg),
                "--mode", mode, "--save_path", str(out), "--limit", str(LIMIT), *extra])


def results(out: Path) -> dict[str, dict]:
    return {json.loads(p.read_text())["model"]: json.loads(p.read_text()) for p in (out / "results").glob("*.json")}


def file_scores(path: Path) -> dict[tuple[str, str, int], float]:
    """(model, question_id, turn) -> score of FastChat's judgment file, -1 included."""
    return {(r["model"], str(r["question_id"]), r["turn"]): r["score"] for r in jsonl(path)}


# ---------------------------------------------------------------- single-answer grading
def test_single_results_are_show_result_numbers(data, fake_openai, tmp_path, capsys) -> None:
    fake_openai.reply_fn = always_rates
    out = tmp_path / "out"
    assert run(judge_config(tmp_path, fake_openai), out, "single", "--no-charts") == 0
    printed = capsys.readouterr().out
    path = out / "model_judgment" / "gpt-4_single.jsonl"
    table, scores = show_single(path), file_scores(path)
    assert all(v != -1 for v in scores.values())
    res = results(out)
    assert set(res) == set(MODELS)
    questions = {str(q["question_id"]): q for q in selected_questions(data)}
    prompts_sha = hashlib.sha256((data.parent / "judge_prompts.jsonl").read_bytes()).hexdigest()
    for m in MODELS:
        r = res[m]
        overall = r["aggregates"]["overall"]
        assert overall["MT-bench/score@turn1"]["mean"] == pytest.approx(table["turn_1"][m])
        assert overall["MT-bench/score@turn2"]["mean"] == pytest.approx(table["turn_2"][m])
        assert overall["MT-bench/score"]["mean"] == pytest.approx(table["average"][m])
        answers = {str(a["question_id"]): a["choices"][0]["turns"] for a in jsonl(ANSWERS / f"{m}.jsonl")}
        assert [it["id"] for it in r["items"]] == list(questions)
        for it in r["items"]:
            q = questions[it["id"]]
            assert it["category"] == q["category"]
            assert [t["user"] for t in it["turns"]] == q["turns"]
            assert [t["assistant"] for t in it["turns"]] == answers[it["id"]]
            assert bool(it["turns"][0]["references"]) == (q["category"] in ("math", "reasoning", "coding"))
            for k in (1, 2):
                assert it["scores"][f"MT-bench/score@turn{k}"] == scores[(m, it["id"], k)]
            assert it["scores"]["MT-bench/score"] == pytest.approx((scores[(m, it["id"], 1)]
                                                                   + scores[(m, it["id"], 2)]) / 2)
        sig = r["signatures"]["MT-bench/score@turn2"]
        assert sig["judge"]["model"] == "gpt-4" and sig["judge_prompts"]["sha256"] == prompts_sha
        assert sig["scale"] == [1, 10] and "single-v1-multi-turn" in sig["prompt"]
        assert r["signatures"]["MT-bench/score"]["judge_check"]["trustworthy"] is None  # not checked

    # the project's files, and `eval.py summary` reading them back
    for f in ("report.html", "summary.csv", "manifest.json", "mt_bench_summary.json"):
        assert (out / f).is_file(), f
    comp = json.loads((out / "comparisons" / "gpt-3.5-turbo__vs__vicuna-13b-v1.3.json").read_text())
    row = next(x for x in comp["rows"] if x["category"] == "(all)" and x["score"] == "MT-bench/score")
    assert row["n"] == len(questions) and row["mean_a"] == pytest.approx(table["average"]["gpt-3.5-turbo"])
    csv_rows = (out / "summary.csv").read_text().splitlines()
    mine = next(line for line in csv_rows if line.startswith("vicuna-13b-v1.3,(all),MT-bench,score,"))
    assert float(mine.split(",")[4]) == pytest.approx(table["average"]["vicuna-13b-v1.3"], abs=1e-5)
    assert "report:" in printed and "MT-bench/score" in printed
    assert cli(["summary", str(out), "--width", "100"]) == 0
    summary = capsys.readouterr().out
    line = next(x for x in summary.splitlines() if x.startswith("MT-bench/score "))  # the mean over all items
    for m in MODELS:
        assert f"{table['average'][m]:.3f}" in line
    assert str(out / "report.html") in summary

    # a re-run reads FastChat's file back: nothing sent, the same results
    calls, before = fake_openai.chat_calls, results(out)
    assert run(judge_config(tmp_path, fake_openai), out, "single", "--no-charts") == 0
    assert fake_openai.chat_calls == calls
    again = results(out)
    for m in MODELS:
        assert again[m]["items"] == before[m]["items"] and again[m]["aggregates"] == before[m]["aggregates"]
        assert len(again[m]["runs"]) == 2


def test_single_invalid_turn_is_invalid_never_averaged(data, fake_openai, tmp_path) -> None:
    fake_openai.reply_fn = judge_reply  # some replies hold no rating (FastChat's -1)
    out = tmp_path / "out"
    assert run(judge_config(tmp_path, fake_openai), out, "single") == 0
    assert {p.stem for p in (out / "charts" / "MT-bench").glob("*.png")} >= {"overview", "math", "writing"}
    path = out / "model_judgment" / "gpt-4_single.jsonl"
    table, scores = show_single(path), file_scores(path)
    raw = {(r["model"], str(r["question_id"]), r["turn"]): r["judgment"] for r in jsonl(path)}
    bad = [k for k, v in scores.items() if not 1 <= v <= 10]  # -1, and the judge's [[0.5]] outside the scale
    assert bad and any(scores[k] != -1 for k in bad)
    res = results(out)
    for m in MODELS:
        overall = res[m]["aggregates"]["overall"]
        for k in (1, 2):  # show_result.py's turn columns leave -1 out; the results leave out-of-scale out too
            kept = [v for (mm, _, kk), v in scores.items() if mm == m and kk == k and 1 <= v <= 10]
            assert overall[f"MT-bench/score@turn{k}"]["mean"] == pytest.approx(sum(kept) / len(kept))
            assert overall[f"MT-bench/score@turn{k}"]["invalid"] == sum(1 for x in bad if x[0] == m and x[2] == k)
        whole = [(scores[(m, q, 1)] + scores[(m, q, 2)]) / 2 for (mm, q, k) in scores
                 if mm == m and k == 1 and (m, q, 1) not in bad and (m, q, 2) not in bad]
        assert overall["MT-bench/score"]["mean"] == pytest.approx(sum(whole) / len(whole))
        for it in res[m]["items"]:
            for k in (1, 2):
                if (m, it["id"], k) in bad:
                    inv = it["invalid"][f"MT-bench/score@turn{k}"]
                    assert inv["raw"] == raw[(m, it["id"], k)] and "rating" in inv["reason"]
                    assert f"MT-bench/score@turn{k}" not in it["scores"]
            first_bad = next((k for k in (1, 2) if (m, it["id"], k) in bad), None)
            if first_bad:
                assert it["invalid"]["MT-bench/score"]["reason"].startswith(f"turn {first_bad}: ")
                assert "MT-bench/score" not in it["scores"]


# ---------------------------------------------------------------- pairwise
def test_pairwise_battles_are_show_result_counts(data, fake_openai, tmp_path, capsys) -> None:
    fake_openai.reply_fn = judge_reply
    out = tmp_path / "out"
    assert run(judge_config(tmp_path, fake_openai), out, "pairwise-baseline", "--baseline", "gpt-3.5-turbo",
               "--no-charts") == 0
    path = out / "model_judgment" / "gpt-4_pair.jsonl"
    w, l, t, adj = show_pairwise(path, "gpt-3.5-turbo")["vicuna-13b-v1.3"]
    battle = json.loads((out / "battles" / "vicuna-13b-v1.3__vs__gpt-3.5-turbo.json").read_text())
    fc = battle["fastchat"]
    assert (fc["win"], fc["loss"], fc["tie"]) == (w, l, t) and fc["win_rate_adjusted"] == pytest.approx(adj)
    by_turn = battle["summary"]["by_turn"]
    assert sum(by_turn[k]["wins"] for k in by_turn) == w and sum(by_turn[k]["ties"] for k in by_turn) == t
    rows = {(str(r["question_id"]), r["turn"]): r for r in jsonl(path)}
    to_side = {"model_1": "A", "model_2": "B", "tie": "tie", "error": "invalid"}  # model_1 is vicuna here
    for it in battle["items"]:
        assert [x["turn"] for x in it["turns"]] == [1, 2]
        for x in it["turns"]:
            r = rows[(it["id"], x["turn"])]
            assert r["model_1"] == "vicuna-13b-v1.3"
            orders = {o["order"]: o for o in x["orders"]}
            assert orders["AB"]["verdict"] == to_side[r["g1_winner"]] and orders["AB"]["raw"] == r["g1_judgment"]
            assert orders["BA"]["verdict"] == to_side[r["g2_winner"]] and orders["BA"]["raw"] == r["g2_judgment"]
        wins = sum(x["verdict"] == "A" for x in it["turns"]) - sum(x["verdict"] == "B" for x in it["turns"])
        expected = ("invalid" if any(x["verdict"] == "invalid" for x in it["turns"]) else
                    "A" if wins > 0 else "B" if wins < 0 else "tie")
        assert it["verdict"] == expected
    assert battle["signature"]["judge"]["model"] == "gpt-4" and "pair-v2" in battle["signature"]["prompt"]
    res = results(out)
    assert set(res) == set(MODELS) and all(it["turns"] for r in res.values() for it in r["items"])
    assert (out / "report.html").is_file()
    page = (out / "report.html").read_text()
    assert "vicuna-13b-v1.3" in page and "gpt-3.5-turbo" in page
    capsys.readouterr()
    assert cli(["summary", str(out), "--width", "400"]) == 0
    assert f"battles:  {out / 'battles'}" in capsys.readouterr().out

    # single mode into the same save path: the scores join the conversations, the battle stays
    fake_openai.reply_fn = always_rates
    assert run(judge_config(tmp_path, fake_openai), out, "single", "--no-charts") == 0
    res = results(out)
    assert all("MT-bench/score" in r["aggregates"]["overall"] for r in res.values())
    assert (out / "battles" / "vicuna-13b-v1.3__vs__gpt-3.5-turbo.json").is_file()


# ---------------------------------------------------------------- the judge check on the run's turns
def test_judge_check_passes_a_reading_judge(data, fake_openai, tmp_path, capsys) -> None:
    fake_openai.reply_fn = ReadingJudge()
    out = tmp_path / "out"
    assert run(judge_config(tmp_path, fake_openai), out, "single", "--judge-check", "12", "--no-charts") == 0
    printed = capsys.readouterr().out
    check = json.loads((out / "judge_check.json").read_text())
    sanity = check["sanity"]
    assert check["trustworthy"] is True and sanity["parts"] == ["rating"]
    assert sanity["turns_checked"] == 12 and len(sanity["categories"]) == 8  # spread over every category
    pooled = sanity["pooled"]["rating"]
    assert pooled["preference"] >= 0.9 and pooled["ci95"][0] > 0.5 and pooled["mean_drop"] > 0
    assert {x["turn"] for x in sanity["items"]} == {1, 2}
    assert "TRUSTWORTHY: without labels" in printed
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["judge_check"]["checked"] and manifest["judge_check"]["trustworthy"] is True
    sig = results(out)["vicuna-13b-v1.3"]["signatures"]["MT-bench/score"]
    assert sig["judge_check"]["key"] == check["key"]
    assert "trustworthy</strong>" in (out / "report.html").read_text()

    # a later run with the same judge and prompts shows the stored check without paying for it again
    calls = fake_openai.chat_calls
    assert run(judge_config(tmp_path, fake_openai), out, "single", "--no-charts") == 0
    assert fake_openai.chat_calls == calls
    assert json.loads((out / "manifest.json").read_text())["judge_check"]["key"] == check["key"]


def test_judge_check_pairwise_reading_judge_passes(data, fake_openai, tmp_path, capsys) -> None:
    fake_openai.reply_fn = ReadingJudge()
    out = tmp_path / "out"
    assert run(judge_config(tmp_path, fake_openai), out, "pairwise-all", "--judge-check", "8", "--no-charts") == 0
    sanity = json.loads((out / "judge_check.json").read_text())["sanity"]
    assert sanity["parts"] == ["battle"] and sanity["pooled"]["battle"]["preference"] >= 0.9
    # both orders: the intact answer is shown first in one game and second in the other
    assert all(len(x["orders"]) == 2 for x in sanity["items"])
    # kappa over the games: the winning position against the intact answer's, as scikit-learn computes it
    from sklearn.metrics import cohen_kappa_score

    shown = {("intact first", "model_1"): "A", ("intact first", "model_2"): "B", ("corrupted first", "model_1"): "B",
             ("corrupted first", "model_2"): "A"}
    said = [("tie" if w == "tie" else shown[(g, w)]) for x in sanity["items"] for g, w, _ in x["orders"] if w]
    truth = [("A" if g == "intact first" else "B") for x in sanity["items"] for g, w, _ in x["orders"] if w]
    assert sanity["pooled"]["battle"]["kappa"] == pytest.approx(cohen_kappa_score(said, truth), abs=1e-4)
    assert sanity["pooled"]["battle"]["kappa"] > 0.8 and sanity["pooled"]["battle"]["kappa_games"] == len(said)


def test_judge_check_flags_a_random_judge(data, fake_openai, tmp_path, capsys) -> None:
    fake_openai.reply_fn = random_judge
    out = tmp_path / "out"
    assert run(judge_config(tmp_path, fake_openai), out, "single", "--judge-check", "16", "--no-charts") == 0
    printed = capsys.readouterr().out
    check = json.loads((out / "judge_check.json").read_text())
    pooled = check["sanity"]["pooled"]["rating"]
    assert check["trustworthy"] is False and pooled["near_chance"] and pooled["n"] >= 40
    assert "near chance" in check["verdict_text"] and "NOT TRUSTWORTHY" in printed
    assert "judge warning: judge check failed" in printed  # the closing lines
    assert narrow(printed, tmp_path)
    assert "NOT trustworthy</strong>" in (out / "report.html").read_text()


# ---------------------------------------------------------------- the config form
def _config(tmp_path: Path, server: FakeOpenAIServer, mode: str = "single", extra: str = "") -> Path:
    answers = "".join(f"\n    - {ANSWERS / (m + '.jsonl')}" for m in MODELS)
    cfg = tmp_path / "mt.yaml"
    cfg.write_text(f"mt_bench:\n  data: {BENCH}\n  answers:{answers}\n  mode: {mode}\n  limit: {LIMIT}\n{extra}"
                   f"judge:\n  backend: openai\n  model: gpt-4\n  base_url: {server.url}\n  concurrency: 4\n"
                   f"  max_retries: 0\nsave_path: out_cfg\n")
    return cfg


def _comparable(out: Path) -> dict[str, object]:
    """What a run writes, without what names the run itself (run ids, times, argv)."""
    got: dict[str, object] = {}
    for p in sorted(out.rglob("*.json")) + sorted(out.rglob("*.jsonl")) + [out / "summary.csv"]:
        rel = p.relative_to(out).as_posix()
        if rel.startswith(("runs/", "manifest", "judge_check")) or rel == "mt_bench_summary.json":
            continue
        if p.suffix == ".jsonl":
            got[rel] = [{k: v for k, v in r.items() if k != "tstamp"} for r in jsonl(p)]
        elif p.suffix == ".json":
            d = json.loads(p.read_text())
            got[rel] = {k: v for k, v in d.items() if k != "runs"} if isinstance(d, dict) else d
        else:
            got[rel] = p.read_text()
    return got


def test_config_form_writes_what_the_flags_write(data, fake_openai, tmp_path) -> None:
    fake_openai.reply_fn = always_rates
    out = tmp_path / "out_flags"
    assert run(judge_config(tmp_path, fake_openai), out, "single", "--no-charts") == 0
    cfg = _config(tmp_path, fake_openai)
    assert cli(["mt-bench", "--config", str(cfg), "--no-charts"]) == 0
    flags, conf = _comparable(out), _comparable(tmp_path / "out_cfg")  # save_path: relative to the config file
    assert set(flags) == set(conf) and "results/vicuna-13b-v1.3.json" in flags
    assert flags == conf
    m1 = json.loads((out / "manifest.json").read_text())["config"]
    m2 = json.loads((tmp_path / "out_cfg" / "manifest.json").read_text())["config"]
    assert m1["mt_bench"] == m2["mt_bench"]


def test_config_dry_run_is_free(data, fake_openai, tmp_path, capsys) -> None:
    cfg = _config(tmp_path, fake_openai, "pairwise-all", "  judge_check: 5\n")
    assert cli(["mt-bench", "--config", str(cfg), "--dry-run"]) == 0
    assert fake_openai.chat_calls == 0 and not (tmp_path / "out_cfg").exists()
    printed = capsys.readouterr().out
    total = int(next(x for x in printed.splitlines() if x.startswith("total")).split()[1])
    assert total == 2 * 2 * 8 * LIMIT  # both orders, both turns, 8 categories
    assert "judge check: at most 40 more calls" in printed  # 5 turns x 4 corruptions x 2 orders


@pytest.mark.parametrize("edit, expected", [
    (lambda t: t.replace("  mode: single", "  moode: single"), r'mt_bench: unknown key "moode"; did you mean "mode"'),
    (lambda t: t.replace("save_path:", "save_pth:"), r'\(top level\): unknown key "save_pth"; did you mean "save_path"'),
    (lambda t: t.replace(f"  limit: {LIMIT}", "  limit: two"), r"mt_bench\.limit: expected"),
    (lambda t: t.replace(f"  limit: {LIMIT}", "  limit: 0"), r"mt_bench\.limit: expected a positive integer or null, got 0"),
    (lambda t: t.replace("  mode: single", "  mode: pairwise"), r"mt_bench\.mode: expected .*pairwise-all"),
    (lambda t: t.replace("  concurrency: 4", "  concurency: 4"), r'judge: unknown key "concurency"'),
    (lambda t: re.sub(r"  data: .*\n", "", t), r"missing: --data \(or mt_bench\.data in "),
])
def test_bad_config_exits_2_naming_the_key(data, fake_openai, tmp_path, capsys, edit, expected) -> None:
    cfg = _config(tmp_path, fake_openai)
    cfg.write_text(edit(cfg.read_text()))
    assert cli(["mt-bench", "--config", str(cfg)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("error: ") and "Traceback" not in err
    assert re.search(expected, err), err
    assert str(cfg) in err or "--data" in err
    assert fake_openai.chat_calls == 0 and not (tmp_path / "out_cfg").exists()


def test_a_run_given_an_mt_bench_config_says_which_command_reads_it(tmp_path, capsys):
    from evaluate.cli import main as cli

    cfg = tmp_path / "mt.yaml"
    cfg.write_text("mt_bench: {data: x, answers: [y], mode: single}\njudge: {backend: openai, model: gpt-4, "
                   "base_url: 'http://127.0.0.1:9/v1'}\nsave_path: out\n", encoding="utf-8")
    assert cli(["--config", str(cfg)]) == 2
    err = capsys.readouterr().err
    assert str(cfg) in err and '"mt_bench" is a benchmark block' in err and "eval.py mt-bench --config FILE" in err
