"""MT-bench from FastChat's files: the judge gets FastChat's exact messages, replies are read as FastChat
reads them, the judgment files give show_result.py's numbers, bad conversations cost nothing, and a
re-run pays nothing.

The expected prompts are rendered here from FastChat's documented semantics (run_judge_single /
run_judge_pair: the kwargs they build, `template.format(**kwargs)`, the system prompt as its own
message), independently of evaluate/benchmarks; the expected tables come from a small reader of the
judgment files written here after show_result.py.
"""

from __future__ import annotations

import ast
import hashlib
import json
import re
from collections import Counter
from pathlib import Path

import pytest

from evaluate.benchmarks.mt_bench import files
from evaluate.benchmarks.mt_bench.judge import parse_rating, parse_verdict
from evaluate.commands.mt_bench import main

try:
    from tests.fake_openai_server import FakeOpenAIServer, Reply, fake_openai  # noqa: F401
except ImportError:  # tests/ itself on sys.path
    from fake_openai_server import FakeOpenAIServer, Reply, fake_openai  # noqa: F401

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
FC = DATA / "fastchat_mt_bench" / "fastchat" / "llm_judge" / "data"
BENCH = FC / "mt_bench"
ANSWERS = DATA / "mt_bench" / "model_answer"
MODELS = ["vicuna-13b-v1.3", "gpt-3.5-turbo"]
REF_CATS = {"math", "reasoning", "coding"}
LIMIT = 2  # questions per category


@pytest.fixture
def data() -> Path:
    if not (BENCH / "question.jsonl").exists() or not (ANSWERS / "gpt-3.5-turbo.jsonl").exists():
        pytest.skip("../shared/data/fastchat_mt_bench or mt_bench/model_answer is not present")
    return BENCH


def jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


# ---------------------------------------------------------------- a deterministic judge
def reply_for(system: str, user: str) -> str:
    """A reply decided by the request alone: ratings in FastChat's two forms, verdicts, and some
    replies nothing can be read from."""
    h = int(hashlib.sha256(f"{system}\x00{user}".encode()).hexdigest(), 16)
    if "[[rating]]" in system + user:
        kind = h % 9
        if kind == 0:
            return "I would rather not rate this answer."
        if kind == 1:
            return f"Decent. Rating: [{h % 10 + 1}]"  # only FastChat's backup regex reads it
        if kind == 2:
            return f"Good effort.\n\nRating: [[{h % 10}.5]]"
        return f"The answer is reasonable.\n\nRating: [[{h % 10 + 1}]]"
    if h % 7 == 0:
        return "Both assistants did something; I cannot pick."
    return f"After comparing them: [[{'ABC'[h % 3]}]]"


def judge_reply(request) -> str:
    msgs = request.body["messages"]
    system = msgs[0]["content"] if msgs[0]["role"] == "system" else ""
    return reply_for(system, msgs[-1]["content"])


def fc_rating(text: str):
    """FastChat's run_judge_single reading of a [[rating]] reply (-1: none)."""
    m = re.search(r"\[\[(\d+\.?\d*)\]\]", text) or re.search(r"\[(\d+\.?\d*)\]", text)
    return ast.literal_eval(m.groups()[0]) if m else -1


def fc_winner(text: str) -> str:
    for tag, w in (("[[A]]", "A"), ("[[B]]", "B"), ("[[C]]", "tie")):
        if tag in text:
            return w
    return "error"


# ---------------------------------------------------------------- FastChat's prompts, rendered here
def selected_questions(bench: Path) -> list[dict]:
    seen: Counter = Counter()
    out = []
    for q in jsonl(bench / "question.jsonl"):
        seen[q["category"]] += 1
        if seen[q["category"]] <= LIMIT:
            out.append(q)
    return out


def expected_messages(bench: Path, mode: str, pairs: list[tuple[str, str]] | None = None) -> Counter:
    """(prompt name, system, user) of every judge call FastChat's gen_judgment.py would make."""
    prompts = {p["name"]: p for p in jsonl(bench.parent / "judge_prompts.jsonl")}
    answers = {m: {a["question_id"]: a for a in jsonl(ANSWERS / f"{m}.jsonl")} for m in MODELS}
    refs = {r["question_id"]: r for r in jsonl(bench / "reference_answer" / "gpt-4.jsonl")}
    out: Counter = Counter()
    for q in selected_questions(bench):
        math = q["category"] in REF_CATS
        for multi in (False, True):
            kwargs = {}
            if math:
                kwargs["ref_answer_1"] = refs[q["question_id"]]["choices"][0]["turns"][0]
                if multi:
                    kwargs["ref_answer_2"] = refs[q["question_id"]]["choices"][0]["turns"][1]
            if mode == "single":
                name = ("single-math-v1" if math else "single-v1") + ("-multi-turn" if multi else "")
                tmpl = prompts[name]
                for m in MODELS:
                    a = answers[m][q["question_id"]]["choices"][0]["turns"]
                    if multi:
                        user = tmpl["prompt_template"].format(question_1=q["turns"][0], question_2=q["turns"][1],
                                                              answer_1=a[0], answer_2=a[1], **kwargs)
                    else:
                        user = tmpl["prompt_template"].format(question=q["turns"][0], answer=a[0], **kwargs)
                    out[(name, tmpl["system_prompt"], user)] += 1
            else:
                name = ("pair-math-v1" if math else "pair-v2") + ("-multi-turn" if multi else "")
                tmpl = prompts[name]
                for m1, m2 in pairs or []:
                    for a_m, b_m in ((m1, m2), (m2, m1)):  # game 1, then game 2 with the order swapped
                        a = answers[a_m][q["question_id"]]["choices"][0]["turns"]
                        b = answers[b_m][q["question_id"]]["choices"][0]["turns"]
                        if multi:
                            user = tmpl["prompt_template"].format(
                                question_1=q["turns"][0], question_2=q["turns"][1], answer_a_1=a[0],
                                answer_b_1=b[0], answer_a_2=a[1], answer_b_2=b[1], **kwargs)
                        else:
                            user = tmpl["prompt_template"].format(question=q["turns"][0], answer_a=a[0],
                                                                  answer_b=b[0], **kwargs)
                        out[(name, tmpl["system_prompt"], user)] += 1
    return out


def received(server: FakeOpenAIServer, bench: Path) -> Counter:
    systems = {p["system_prompt"]: p["name"] for p in jsonl(bench.parent / "judge_prompts.jsonl")}
    out: Counter = Counter()
    for r in server.chat_requests():
        body = r.body
        msgs = body["messages"]
        assert [m["role"] for m in msgs] == ["system", "user"]
        assert body["temperature"] == 0 and body["max_tokens"] == 2048
        # single-v1 and single-math-v1 share a system prompt: tell them apart by the template
        name = systems[msgs[0]["content"]]
        if name in ("single-v1", "single-math-v1"):
            name = "single-math-v1" if "[The Start of Reference Answer]" in msgs[1]["content"] else "single-v1"
        out[(name, msgs[0]["content"], msgs[1]["content"])] += 1
    return out


# ---------------------------------------------------------------- show_result.py, read here
def show_single(path: Path) -> dict[str, dict[str, float]]:
    rows = [r for r in jsonl(path) if r["score"] != -1]
    out: dict[str, dict[str, float]] = {}
    for label, keep in (("turn_1", lambda r: r["turn"] == 1), ("turn_2", lambda r: r["turn"] == 2),
                        ("average", lambda r: True)):
        sums: dict[str, list[float]] = {}
        for r in rows:
            if keep(r):
                sums.setdefault(r["model"], []).append(r["score"])
        out[label] = {m: sum(v) / len(v) for m, v in sums.items()}
    return out


def show_pairwise(path: Path, baseline: str | None) -> dict[str, tuple[int, int, int, float]]:
    tally: dict[str, list[int]] = {}
    for r in jsonl(path):
        if "error" in (r["g1_winner"], r["g2_winner"]):
            continue
        if baseline is not None and baseline not in (r["model_1"], r["model_2"]):
            continue
        if r["g1_winner"] == "tie" or r["g1_winner"] != r["g2_winner"]:
            results = [(r["model_1"], 2), (r["model_2"], 2)]
        elif r["g1_winner"] == "model_1":
            results = [(r["model_1"], 0), (r["model_2"], 1)]
        else:
            results = [(r["model_2"], 0), (r["model_1"], 1)]
        for m, k in results:
            tally.setdefault(m, [0, 0, 0])[k] += 1
    return {m: (w, l, t, (w + 0.5 * t) / (w + l + t)) for m, (w, l, t) in tally.items() if m != baseline}


# ---------------------------------------------------------------- running the command
def narrow(printed: str, tmp_path: Path) -> bool:
    """Every line fits 80 columns, save the closing lines' file paths (printed whole, to be copied)."""
    wide = [line for line in printed.splitlines() if str(tmp_path) not in line and len(line) > 80]
    assert not wide, wide
    return True


def judge_config(tmp_path: Path, server: FakeOpenAIServer) -> Path:
    cfg = tmp_path / "judge.yaml"
    cfg.write_text(f"judge:\n  backend: openai\n  model: gpt-4\n  base_url: {server.url}\n  concurrency: 4\n"
                   "  max_retries: 0\n")
    return cfg


def run(bench: Path, cfg: Path, out: Path, mode: str, *extra: str, answers: list[Path] | None = None) -> int:
    answers = answers or [ANSWERS / f"{m}.jsonl" for m in MODELS]
    return main(["--data", str(bench), "--answers", *map(str, answers), "--judge-config", str(cfg), "--mode", mode,
                 "--save_path", str(out), "--limit", str(LIMIT), *extra])


def test_single_mode_prompts_scores_and_tables(data, fake_openai, tmp_path, capsys) -> None:
    fake_openai.reply_fn = judge_reply
    out = tmp_path / "out"
    assert run(data, judge_config(tmp_path, fake_openai), out, "single") == 0
    printed = capsys.readouterr().out
    assert narrow(printed, tmp_path)

    want = expected_messages(data, "single")
    got = received(fake_openai, data)
    # byte for byte, every prompt kind; identical requests (two models with the same answer) are sent once
    assert set(got) == set(want) and set(got.values()) == {1}
    assert {name for name, _, _ in got} == {"single-v1", "single-v1-multi-turn", "single-math-v1",
                                            "single-math-v1-multi-turn"}
    assert sum(want.values()) == 8 * LIMIT * 2 * 2

    path = out / "model_judgment" / "gpt-4_single.jsonl"
    rows = jsonl(path)
    assert len(rows) == sum(want.values())
    systems = {p["name"]: p["system_prompt"] for p in jsonl(data.parent / "judge_prompts.jsonl")}
    for r in rows:  # each row: the reply to its own prompt, read as FastChat reads it
        assert r["judge"][0] == "gpt-4" and r["turn"] in (1, 2)
        assert r["judgment"] == reply_for(systems[r["judge"][1]], r["user_prompt"])
        assert r["score"] == fc_rating(r["judgment"])
    invalid = [r for r in rows if r["score"] == -1]
    assert invalid and any(isinstance(r["score"], float) for r in rows)
    assert any(re.search(r"\[\[", r["judgment"]) is None and r["score"] != -1 for r in rows)  # backup regex

    summary = json.loads((out / "mt_bench_summary.json").read_text())
    table = show_single(path)
    for label in ("turn_1", "turn_2", "average"):
        mine = {d["model"]: d["score"] for d in summary["fastchat"]["single"][label]}
        again = {d["model"]: d["score"] for d in files.single_table(r for _, r in files.read_rows(path, "single"))[label]}
        assert mine == pytest.approx(table[label]) and again == pytest.approx(table[label])
    # the run's own stats: per-turn n and means leave the invalid ones out (a rating outside 1-10 too,
    # which FastChat's file keeps as it reads it), intervals hold the mean
    out_of_scale = [r for r in rows if r["score"] != -1 and not 1 <= r["score"] <= 10]
    assert out_of_scale  # the judge's [[0.5]]
    invalid = [*invalid, *out_of_scale]
    for m in MODELS:
        e = summary["stats"]["models"][m]
        for turn in (1, 2):
            valid = [r["score"] for r in rows if r["model"] == m and r["turn"] == turn and 1 <= r["score"] <= 10]
            assert e[f"turn_{turn}"]["n"] == len(valid)
            assert e[f"turn_{turn}"]["mean"] == pytest.approx(sum(valid) / len(valid))
            lo, hi = e[f"turn_{turn}"]["ci"]
            assert lo <= e[f"turn_{turn}"]["mean"] <= hi
        assert e["invalid"] == sum(1 for r in invalid if r["model"] == m)
        assert set(e["categories"]) == {q["category"] for q in selected_questions(data)}
    assert len(summary["invalid"]) == len(invalid)
    assert {i["judgment"] for i in summary["invalid"]} == {r["judgment"] for r in invalid}
    # paired comparisons are the save path's own, per category and per turn (not Holm over a table here)
    assert "paired" not in summary["stats"]
    comp = json.loads((out / "comparisons" / "gpt-3.5-turbo__vs__vicuna-13b-v1.3.json").read_text())
    rows = {(r["category"], r["score"]) for r in comp["rows"]}
    cats = {q["category"] for q in selected_questions(data)} | {"(all)"}
    keys = {"MT-bench/score", "MT-bench/score@turn1", "MT-bench/score@turn2"}
    assert {c for c, _ in rows} == cats and {k for _, k in rows} == keys


@pytest.mark.parametrize("mode", ["pairwise-baseline", "pairwise-all"])
def test_pairwise_prompts_both_orders_and_tables(data, fake_openai, tmp_path, capsys, mode) -> None:
    fake_openai.reply_fn = judge_reply
    out = tmp_path / "out"
    extra = ["--baseline", "gpt-3.5-turbo"] if mode == "pairwise-baseline" else []
    assert run(data, judge_config(tmp_path, fake_openai), out, mode, *extra) == 0
    assert narrow(capsys.readouterr().out, tmp_path)
    pairs = [("vicuna-13b-v1.3", "gpt-3.5-turbo")]
    want = expected_messages(data, "pairwise", pairs)
    got = received(fake_openai, data)
    assert set(got) == set(want) and set(got.values()) == {1}
    assert len(jsonl(out / "model_judgment" / "gpt-4_pair.jsonl")) * 2 == sum(want.values())
    assert {name for name, _, _ in want} == {"pair-v2", "pair-v2-multi-turn", "pair-math-v1",
                                             "pair-math-v1-multi-turn"}

    path = out / "model_judgment" / "gpt-4_pair.jsonl"
    rows = jsonl(path)
    systems = {p["name"]: p["system_prompt"] for p in jsonl(data.parent / "judge_prompts.jsonl")}
    for r in rows:
        assert (r["model_1"], r["model_2"]) == pairs[0]
        g1 = fc_winner(reply_for(systems[r["judge"][1]], r["g1_user_prompt"]))
        g2 = fc_winner(reply_for(systems[r["judge"][1]], r["g2_user_prompt"]))
        assert r["g1_winner"] == {"A": "model_1", "B": "model_2"}.get(g1, g1)
        assert r["g2_winner"] == {"A": "model_2", "B": "model_1"}.get(g2, g2)
    assert any("error" in (r["g1_winner"], r["g2_winner"]) for r in rows)
    assert any(r["g1_winner"] != r["g2_winner"] and "error" not in (r["g1_winner"], r["g2_winner"]) for r in rows)

    baseline = "gpt-3.5-turbo" if mode == "pairwise-baseline" else None
    expected = show_pairwise(path, baseline)
    summary = json.loads((out / "mt_bench_summary.json").read_text())
    for table in (summary["fastchat"]["pairwise"],
                  files.pairwise_table((r for _, r in files.read_rows(path, "pair")), baseline)):
        assert {d["model"]: (d["win"], d["loss"], d["tie"], pytest.approx(d["win_rate_adjusted"])) for d in table} \
            == {m: (w, l, t, pytest.approx(a)) for m, (w, l, t, a) in expected.items()}
    w, l, t, _ = expected["vicuna-13b-v1.3"]
    e = summary["stats"]["models"]["vicuna-13b-v1.3"]
    assert (e["win"], e["loss"], e["tie"]) == (w, l, t)
    assert e["invalid"] == sum(1 for r in rows if "error" in (r["g1_winner"], r["g2_winner"]))
    assert e["ci"][0] <= e["win_rate_adjusted"] <= e["ci"][1]


def test_all_pairs_of_three_models(data, fake_openai, tmp_path, capsys) -> None:
    """pairwise-all judges (models[i], models[j]) for i < j in the order given, and show_result.py's
    table lists every model."""
    fake_openai.reply_fn = judge_reply
    third = tmp_path / "model-c.jsonl"
    third.write_text("".join(json.dumps({**r, "choices": [{"index": 0, "turns": [t + " (c)" for t in
                                                                                  r["choices"][0]["turns"]]}]}) + "\n"
                             for r in jsonl(ANSWERS / "vicuna-13b-v1.3.jsonl")))
    answers = [ANSWERS / "gpt-3.5-turbo.jsonl", third, ANSWERS / "vicuna-13b-v1.3.jsonl"]
    out = tmp_path / "out"
    assert run(data, judge_config(tmp_path, fake_openai), out, "pairwise-all", answers=answers) == 0
    assert narrow(capsys.readouterr().out, tmp_path)
    path = out / "model_judgment" / "gpt-4_pair.jsonl"
    rows = jsonl(path)
    assert Counter((r["model_1"], r["model_2"]) for r in rows) == {
        ("gpt-3.5-turbo", "model-c"): 16 * 2, ("gpt-3.5-turbo", "vicuna-13b-v1.3"): 16 * 2,
        ("model-c", "vicuna-13b-v1.3"): 16 * 2}
    expected = show_pairwise(path, None)
    summary = json.loads((out / "mt_bench_summary.json").read_text())
    got = {d["model"]: (d["win"], d["loss"], d["tie"]) for d in summary["fastchat"]["pairwise"]}
    assert got == {m: v[:3] for m, v in expected.items()} and len(got) == 3
    assert len(summary["stats"]["pairs"]) == 3
    ranking = json.loads((out / "battles" / "ranking.json").read_text())  # the project's ranking of the three
    assert len(list((out / "battles").glob("*__vs__*.json"))) == 3 and "model-c" in json.dumps(ranking)


def test_show_result_tie_rules_hand_computed() -> None:
    """A: wins, both orders agree; the first game a tie; the orders disagree; an error drops the row."""
    rows = [{"model_1": "a", "model_2": "b", "g1_winner": "model_1", "g2_winner": "model_1"},
            {"model_1": "a", "model_2": "b", "g1_winner": "model_2", "g2_winner": "model_2"},
            {"model_1": "b", "model_2": "a", "g1_winner": "model_1", "g2_winner": "model_1"},
            {"model_1": "a", "model_2": "b", "g1_winner": "tie", "g2_winner": "model_1"},
            {"model_1": "a", "model_2": "b", "g1_winner": "model_1", "g2_winner": "tie"},
            {"model_1": "a", "model_2": "b", "g1_winner": "model_1", "g2_winner": "model_2"},
            {"model_1": "a", "model_2": "b", "g1_winner": "error", "g2_winner": "model_1"},
            {"model_1": "a", "model_2": "c", "g1_winner": "model_1", "g2_winner": "model_1"}]
    table = {d["model"]: d for d in files.pairwise_table(rows, "b")}
    assert set(table) == {"a"}  # the baseline is not listed, and a-c does not involve it
    a = table["a"]
    assert (a["win"], a["loss"], a["tie"]) == (1, 2, 3)
    assert a["win_rate_adjusted"] == pytest.approx((1 + 1.5) / 6)
    every = {d["model"]: (d["win"], d["loss"], d["tie"]) for d in files.pairwise_table(rows, None)}
    assert every == {"a": (2, 2, 3), "b": (2, 1, 3), "c": (0, 1, 0)}
    single = files.single_table([{"model": "a", "score": 8, "turn": 1}, {"model": "a", "score": -1, "turn": 1},
                                 {"model": "a", "score": 5, "turn": 2}])
    assert single["turn_1"][0]["score"] == 8 and single["average"][0]["score"] == 6.5


def test_reply_parsing_follows_fastchat() -> None:
    assert parse_rating("Rating: [[7]]")[0] == 7
    assert parse_rating("Rating: [[7.5]] and later [[2]]")[0] == 7.5  # the first match
    assert parse_rating("Rating: [6]")[0] == 6  # the backup regex
    assert parse_rating("[[07]]")[0] is None  # ast.literal_eval refuses it
    assert parse_rating("Rating: 7/10")[0] is None
    assert parse_verdict("not [[A]] but [[B]]", "[[A]]")[0] == "A"  # FastChat checks A first
    assert parse_verdict("[[C]]", "[[A]]")[0] == "tie"
    assert parse_verdict("[A]", "[[A]]")[0] is None
    assert parse_verdict("[[8, 8.05]]", "[[rating_a,rating_b]]")[0] == "tie"
    assert parse_verdict("[9,3]", "[[rating_a,rating_b]]")[0] == "A"


# ---------------------------------------------------------------- bad input costs nothing
def _bad_answers(tmp_path: Path, edit) -> Path:
    rows = jsonl(ANSWERS / "vicuna-13b-v1.3.jsonl")
    rows = edit(rows)
    path = tmp_path / "vicuna-13b-v1.3.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _turns(rows, i, turns):
    rows[i]["choices"][0]["turns"] = turns
    return rows


@pytest.mark.parametrize("edit, expected", [
    (lambda r: _turns(r, 4, r[4]["choices"][0]["turns"][:1]), r"line 5: question_id 85: turn 2: missing"),
    (lambda r: _turns(r, 2, r[2]["choices"][0]["turns"] + ["more"]),
     r"line 3: question_id 83: turn 3: more assistant turns \(3\) than user turns \(2\)"),
    (lambda r: _turns(r, 0, ["   ", r[0]["choices"][0]["turns"][1]]), r"line 1: question_id 81: turn 1: the turn is empty"),
    (lambda r: r + [{**r[0], "question_id": 999}], r"line 81: question_id 999: an answer to a question"),
    (lambda r: r[:10] + r[11:], r"has no answer to question_id 91"),
])
def test_bad_conversations_exit_2_before_any_call(data, fake_openai, tmp_path, capsys, edit, expected) -> None:
    bad = _bad_answers(tmp_path, edit)
    code = run(data, judge_config(tmp_path, fake_openai), tmp_path / "out", "single",
               answers=[bad, ANSWERS / "gpt-3.5-turbo.jsonl"])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert len(err.splitlines()) == 1 and err.startswith("error: ") and str(bad) in err
    assert re.search(expected, err), err
    assert fake_openai.chat_calls == 0
    assert not (tmp_path / "out").exists()


def test_unknown_judge_prompt_exit_2(data, fake_openai, tmp_path, capsys) -> None:
    prompts = [p for p in jsonl(data.parent / "judge_prompts.jsonl") if p["name"] != "pair-math-v1"]
    path = tmp_path / "judge_prompts.jsonl"
    path.write_text("".join(json.dumps(p) + "\n" for p in prompts))
    code = run(data, judge_config(tmp_path, fake_openai), tmp_path / "out", "pairwise-all", "--judge-prompts", str(path))
    err = capsys.readouterr().err
    assert code == 2 and "no judge prompt named 'pair-math-v1'" in err and str(path) in err
    assert fake_openai.chat_calls == 0


def test_dry_run_counts_and_contacts_nothing(data, fake_openai, tmp_path, capsys) -> None:
    code = run(data, judge_config(tmp_path, fake_openai), tmp_path / "out", "pairwise-all", "--dry-run")
    out = capsys.readouterr().out
    assert code == 0 and fake_openai.chat_calls == 0 and not (tmp_path / "out").exists()
    per = {line.split()[0]: int(line.split()[1]) for line in out.splitlines()[2:]}
    n_ref, n_gen = 3 * LIMIT, 5 * LIMIT  # 1 pair, 2 orders
    assert per == {"pair-v2": 2 * n_gen, "pair-math-v1": 2 * n_ref, "pair-v2-multi-turn": 2 * n_gen,
                   "pair-math-v1-multi-turn": 2 * n_ref, "total": 4 * (n_gen + n_ref)}


# ---------------------------------------------------------------- re-runs pay nothing
def test_rerun_sends_nothing_and_pairs_match_in_either_order(data, fake_openai, tmp_path) -> None:
    fake_openai.reply_fn = judge_reply
    cfg, out = judge_config(tmp_path, fake_openai), tmp_path / "out"
    assert run(data, cfg, out, "single") == 0
    first = fake_openai.chat_calls
    path = out / "model_judgment" / "gpt-4_single.jsonl"
    lines = path.read_text().splitlines()
    before = json.loads((out / "mt_bench_summary.json").read_text())

    assert run(data, cfg, out, "single") == 0  # the judgment file holds every match
    assert fake_openai.chat_calls == first and path.read_text().splitlines() == lines
    again = json.loads((out / "mt_bench_summary.json").read_text())
    assert again["counts"]["reused"] == again["counts"]["matches"] and again["fastchat"] == before["fastchat"]
    assert again["stats"] == before["stats"]

    path.unlink()  # the cache answers every call
    assert run(data, cfg, out, "single") == 0
    assert fake_openai.chat_calls == first and len(path.read_text().splitlines()) == len(lines)

    assert run(data, cfg, out, "pairwise-baseline", "--baseline", "gpt-3.5-turbo") == 0
    paid = fake_openai.chat_calls
    reverse = [ANSWERS / "gpt-3.5-turbo.jsonl", ANSWERS / "vicuna-13b-v1.3.jsonl"]
    assert run(data, cfg, out, "pairwise-all", answers=reverse) == 0  # the same pairs, the other way round
    assert fake_openai.chat_calls == paid
    # the rows read back the other way round are turned to the battle's own sides
    one = json.loads((out / "battles" / "vicuna-13b-v1.3__vs__gpt-3.5-turbo.json").read_text())
    other = json.loads((out / "battles" / "gpt-3.5-turbo__vs__vicuna-13b-v1.3.json").read_text())
    assert (other["fastchat"]["win"], other["fastchat"]["loss"]) == (one["fastchat"]["loss"], one["fastchat"]["win"])
    assert one["fastchat"]["win"] != one["fastchat"]["loss"]
    flip = {"A": "B", "B": "A", "tie": "tie", "invalid": "invalid"}
    assert [flip[it["verdict"]] for it in one["items"]] == [it["verdict"] for it in other["items"]]


def test_judge_failures_exit_3_and_are_not_written(data, fake_openai, tmp_path) -> None:
    fake_openai.reply_fn = lambda r: "no verdict at all"
    out = tmp_path / "out"
    assert run(data, judge_config(tmp_path, fake_openai), out, "single") == 3  # every reply unreadable
    rows = jsonl(out / "model_judgment" / "gpt-4_single.jsonl")
    assert rows and all(r["score"] == -1 for r in rows)

    fake_openai.reply_fn = lambda r: Reply.client_error(400)
    out2 = tmp_path / "out2"
    assert run(data, judge_config(tmp_path, fake_openai), out2, "single") == 3
    assert not (out2 / "model_judgment" / "gpt-4_single.jsonl").exists()
    summary = json.loads((out2 / "mt_bench_summary.json").read_text())
    assert summary["counts"]["failed"] == summary["counts"]["matches"]


def test_no_bootstrap_interval_below_ten_questions():
    """As everywhere in the project: a mean of fewer than 10 questions gets no 95% interval, and the table
    says how many questions the mean is of instead."""
    from evaluate.benchmarks.mt_bench.stats import _mean_ci
    from evaluate.benchmarks.mt_bench.text import _ci

    few, many = _mean_ci([5.0, 7.0, 9.0]), _mean_ci([float(x % 10 + 1) for x in range(12)])
    assert few["ci"] is None and _ci(few) == "7.00 (n=3)"
    assert many["ci"] is not None and many["ci"][0] < many["mean"] < many["ci"][1]
