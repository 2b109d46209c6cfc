"""A new user's first hour (issue 30): each place a user tripped, through `python eval.py` as a
subprocess the way the user ran it: the exit code, what the terminal says, what was written."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

try:
    from tests.fake_openai_server import FakeOpenAIServer, RecordedRequest, Reply
except ImportError:
    from fake_openai_server import FakeOpenAIServer, RecordedRequest, Reply

REPO = Path(__file__).resolve().parents[1]
EN = REPO / "examples" / "en"


def eval_py(*argv: str, timeout: float = 180, cwd: Path = REPO) -> tuple[int, str, str]:
    proc = subprocess.run([sys.executable, str(REPO / "eval.py"), *argv], cwd=cwd, capture_output=True,
                          text=True, timeout=timeout, env={**os.environ, "NO_COLOR": "1", "COLUMNS": "80"})
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert "RuntimeWarning" not in proc.stderr, proc.stderr[-3000:]
    return proc.returncode, proc.stdout, proc.stderr


def write(tmp_path: Path, **cfg) -> Path:
    base = {"save_path": str(tmp_path / "out"), "target_file": str(EN / "targets.json"),
            "answers": [{"name": "base", "path": str(EN / "answers_model_a.json")},
                        {"name": "cand", "path": str(EN / "answers_model_b.json")}],
            "category": {"classification": {"Metrics": ["F1 score"]}}}
    base.update(cfg)
    p = tmp_path / "c.json"
    p.write_text(json.dumps(base))
    return p


def judge_block(url: str, **kw) -> dict:
    return {"backend": "openai", "model": "fake-judge", "base_url": url, "max_retries": 1, "timeout": 5, **kw}


@pytest.fixture
def server():
    with FakeOpenAIServer() as s:
        yield s


# ------------------------------------------------------------------ 1. mode: auto without logprobs
def test_mode_auto_falls_back_to_a_parsed_reply_when_the_server_sends_no_logprobs(tmp_path, server):
    server.reply_fn = lambda rec: Reply(content="4", top_logprobs=None)  # a server that never sends logprobs
    cfg = write(tmp_path, battle=False, judge=judge_block(server.url),  # mode: auto is the default
                category={"classification": {"GPT": ["correctness"]}, "open_qa": {"GPT": ["correctness"]}})
    code, out, err = eval_py("--config", str(cfg))
    assert code == 0, err[-3000:]
    said = [line for line in (out + err).splitlines() if "no log-probabilities" in line]
    assert len(said) == 1, said  # said once, for both categories
    assert "mode: generate" in said[0]
    res = json.loads((tmp_path / "out" / "results" / "base.json").read_text())
    agg = res["aggregates"]["overall"]["GPT/correctness"]
    assert agg["n"] == 6 and agg["mean"] == 4.0 and res["signatures"]["GPT/correctness"]["mode"] == "generate"


def test_mode_logprobs_without_logprobs_names_mode_generate(tmp_path, server):
    server.reply_fn = lambda rec: Reply(content="4", top_logprobs=None)
    cfg = write(tmp_path, battle=False, judge=judge_block(server.url, mode="logprobs"),
                category={"classification": {"GPT": ["correctness"]}})
    code, out, err = eval_py("--config", str(cfg))
    assert code == 3
    assert "mode: generate" in out + err


# ------------------------------------------------------------------ 2. a config category matching no record
def test_config_category_with_no_record_is_exit_2_with_did_you_mean(tmp_path):
    cfg = write(tmp_path, category={"classification": {"Metrics": ["F1 score"]},
                                    "clased_qa": {"Metrics": ["BLEU"]}})
    code, out, err = eval_py("--config", str(cfg))
    assert code == 2, err
    assert 'category.clased_qa' in err and 'did you mean "closed_qa"' in err
    assert not (tmp_path / "out").exists()


def test_records_no_config_entry_covers_are_named_in_the_closing_lines(tmp_path):
    cfg = write(tmp_path)
    code, out, err = eval_py("--config", str(cfg))
    assert code == 0, err
    closing = out[out.rindex("mean, all items"):]
    line = next(x for x in closing.splitlines() if x.startswith("not scored"))
    assert "22 records per model" in line and "closed_qa (2)" in closing and "open_qa (3)" in closing, closing


# ------------------------------------------------------------------ 6. unknown commands
@pytest.mark.parametrize("word,hint", [("sumary", 'did you mean "summary"'), ("comapre", 'did you mean "compare"?'),
                                       ("generat", "")])
def test_unknown_command_is_an_error_with_did_you_mean(word, hint):
    code, out, err = eval_py(word, "--help")
    assert code == 2 and out == ""
    assert f'unknown command "{word}"' in err and hint in err


def test_help_into_a_closed_pipe_ends_quietly():
    r, w = os.pipe()
    os.close(r)  # the reader has gone, as after `eval.py help | head -5`
    try:
        proc = subprocess.run([sys.executable, "eval.py", "help"], cwd=REPO, stdout=w, stderr=subprocess.PIPE,
                              text=True, timeout=60)
    finally:
        os.close(w)
    assert proc.returncode == 0 and proc.stderr == ""


# ------------------------------------------------------------------ issue 32: tool calls in a conversation
def test_conversation_with_tool_calls_is_refused_saying_what_to_do(tmp_path):
    record = {"id": "t1", "category": "chat", "messages": [
        {"role": "user", "content": "What is the weather in Paris?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": "{\"city\": \"Paris\"}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "18 C, sunny"},
        {"role": "assistant", "content": "It is 18 C and sunny in Paris."}]}
    path = tmp_path / "tools.jsonl"
    path.write_text(json.dumps(record) + "\n")
    cfg = write(tmp_path, answers=[{"name": "m", "path": str(path)}], target_file=None,
                category={"chat": {"Metrics": ["Distinct"]}})
    code, out, err = eval_py("--config", str(cfg), "--dry-run")
    assert code == 2
    assert "tools.jsonl" in err and "t1" in err and "tool" in err and "not supported" in err
    assert "got nothing" not in err


# ------------------------------------------------------------------ 3. the headline
ANSWERS_A = json.loads((EN / "answers_model_a.json").read_text(encoding="utf-8"))


def base_wins_every_battle(rec: RecordedRequest) -> Reply:
    """Ratings 2-4 by the prompt's length (no difference to find); every battle won by base's answer."""
    text = rec.user_text
    if "[Assistant 1's answer]" in text:
        first = text.split("[Assistant 1's answer]")[1].split("[End of Assistant 1's answer]")[0].strip()
        return Reply(content="9 2" if any(first == a["output"].strip() for a in ANSWERS_A) else "2 9")
    return Reply(content=str(2 + len(text) % 3))


def test_headline_names_the_battle_and_says_what_each_row_could_detect(tmp_path):
    cats = ["classification", "extraction", "generation", "open_qa", "rewriting"]  # 15 items
    with FakeOpenAIServer(reply_fn=base_wins_every_battle) as s:
        cfg = write(tmp_path, battle=True, judge=judge_block(s.url, mode="generate"),
                    category={c: {"GPT": ["relevance"], "Metrics": ["CHRF"]} for c in cats})
        code, out, err = eval_py("--config", str(cfg), "--no-charts")
    assert code == 0, err[-3000:]
    closing = out[out.rindex("mean, all items"):]
    head = " ".join(x.strip() for x in closing.split("base vs cand:")[1].split("\n  score ")[0].splitlines())
    # two primary scores (CHRF: base's answers are the good ones; GPT/relevance: no difference) and the
    # battle, which base wins 15 of 15
    # (issue 39: the scores counted as the report counts them, the battle's verdict beside)
    assert "base better on 1" in head and "of 2 primary scores; battle: base better" in head, head
    detect = " ".join(x.strip() for x in closing.split("what the items could detect")[1].split("battle:")[0].splitlines())
    assert "GPT/relevance ≥ " in detect and "CHRF" not in detect, detect
    assert "battle: win rate of base 1.00" in closing


def test_all_invalid_scores_say_no_valid_scores(tmp_path):
    with FakeOpenAIServer(reply_fn=lambda rec: Reply(content="no idea")) as s:
        cfg = write(tmp_path, battle=False, judge=judge_block(s.url, mode="generate"),
                    category={"classification": {"GPT": ["correctness"]}})
        code, out, err = eval_py("--config", str(cfg), "--no-charts")
    assert code == 3
    closing = out[out.rindex("mean, all items"):]
    assert "no valid scores" in closing and "no detectable difference" not in closing, closing


# ------------------------------------------------------------------ 11. warnings that reach the terminal
def base_wins_but_3_and_7(rec: RecordedRequest) -> Reply:
    text = rec.user_text
    if "[Assistant 1's answer]" not in text:
        return Reply(content="3")
    one = text.split("[Assistant 1's answer]")[1].split("[End of Assistant 1's answer]")[0]
    base_first = "y" in one  # base's answers are words "y", cand's "x"
    base_wins = "Question 3?" not in text and "Question 7?" not in text
    return Reply(content="9 2" if base_first == base_wins else "2 9")


def test_a_battle_separated_by_length_prints_no_overflow_warning(tmp_path):
    """Base loses only its two shortest answers against long ones: outcomes that length separates: the length-controlled fit's coefficients grow
    large in some bootstrap resamples, where exp overflowed (RuntimeWarning on the terminal)."""
    lengths = [(557, 456), (1846, 1543), (1510, 2697), (94, 2788), (2782, 811), (2160, 207), (937, 1489),
               (57, 2525), (282, 1877), (2276, 209)]
    for name, side in (("base", 0), ("cand", 1)):
        recs = [{"id": i, "category": "open_qa", "instruction": f"Question {i}?",
                 "output": " ".join([("x" if side else "y")] * pair[side])} for i, pair in enumerate(lengths)]
        (tmp_path / f"{name}.json").write_text(json.dumps(recs))
    with FakeOpenAIServer(reply_fn=base_wins_but_3_and_7) as s:
        cfg = write(tmp_path, battle=True, judge=judge_block(s.url, mode="generate"), target_file=None,
                    answers=[{"name": n, "path": str(tmp_path / f"{n}.json")} for n in ("base", "cand")],
                    category={"open_qa": {"GPT": ["relevance"]}})
        code, out, err = eval_py("--config", str(cfg), "--no-charts")  # eval_py: no RuntimeWarning
    assert code == 0, err[-2000:]
    assert "battle: win rate of base 0.80" in out, out


# ------------------------------------------------------------------ 5. the judge check's trivial rules
def test_judge_check_flags_a_judge_that_does_not_beat_always_the_first(tmp_path):
    """32 of 40 labels are 'a' and the right answer is the longer one in half: 'always the first' scores
    .80, 'pick the longer answer' .50; a judge right on 7 in 10 pairs (.70, CI above .5) beat the length
    rule and was called trustworthy, though always picking response_a does better."""
    rows = []
    for i in range(40):
        right, wrong = f"The answer is {2 + i}.", f"The answer is {3 + i}."
        if i % 2:
            right += " I checked it twice."
        else:
            wrong += " I checked it twice."
        label = "a" if i % 5 else "b"
        a, b = (right, wrong) if label == "a" else (wrong, right)
        rows.append({"id": f"p{i}", "instruction": f"What is 2+{i}?", "input": "", "response_a": a,
                     "response_b": b, "label": label})
    rows.append({"id": "t", "instruction": "What is 2+2?", "input": "", "response_a": "4", "response_b": "four",
                 "label": "tie"})
    data = tmp_path / "pairs.jsonl"
    data.write_text("\n".join(json.dumps(r) for r in rows) + "\n")

    def judge(rec: RecordedRequest) -> Reply:
        text = rec.user_text
        q = int(text.split("What is 2+")[1].split("?")[0])
        first = text.split("[Assistant 1's answer]")[1].split("[End of Assistant 1's answer]")[0]
        first_right = f"is {2 + q}." in first
        return Reply(content="9 2" if first_right == (q % 10 < 7) else "2 9")

    with FakeOpenAIServer(reply_fn=judge) as s:
        cfg = write(tmp_path, judge=judge_block(s.url, mode="generate", cache=False),
                    category={"closed_qa": {"GPT": ["correctness"]}})
        code, out, err = eval_py("judge-check", "--config", str(cfg), "--data", str(data))
    assert code == 0, err[-2000:]
    rec = json.loads((tmp_path / "out" / "judge_check.json").read_text())
    lab = rec["labelled"]
    assert lab["agreement"]["accuracy"] == pytest.approx(0.7)
    acc = {name: b["accuracy"] for name, b in lab["baselines"].items()}
    assert acc == {"longer": 0.5, "shorter": 0.5, "first": 0.8, "second": 0.2, "tie": 0.5}
    assert lab["best_trivial_rule"] == "first" and rec["trustworthy"] is False
    assert "does not beat the best trivial rule, 'always the first (response_a)'" in rec["verdict_text"]
    assert "NOT TRUSTWORTHY" in out and "always the second (response_b)" in out and "(best rule)" in out


# ------------------------------------------------------------------ 12. paths, counts, settings as written
def test_paths_are_printed_normalised_and_the_plan_counts_what_the_run_scores(tmp_path):
    (tmp_path / "cfg").mkdir()
    cfg = write(tmp_path, save_path="../results/my", category={"closed_qa": {"Metrics": ["BLEU", "ROUGE", "CHRF"]},
                                                               "classification": {"Metrics": ["F1 score"]}})
    cfg = cfg.rename(tmp_path / "cfg" / "c.json")
    code, out, err = eval_py("--config", str(cfg), "--no-charts")
    assert code == 0, err[-2000:]
    assert "/../" not in out + err
    assert f"report:   {tmp_path / 'results' / 'my' / 'report.html'}" in out
    # BLEU is BLEU-1..4, ROUGE four scores, CHRF one: 9 per closed_qa item (2), F1 one per classification item (3)
    planned = next(x for x in (out + err).splitlines() if x.startswith("work Metrics:"))
    assert "scores=42" in planned, planned  # 2 models x (2 x 9 + 3 x 1)
    assert "scored Metrics: 42 scores, 0 invalid" in out + err


def test_the_report_shows_judge_settings_as_written_not_python_reprs(tmp_path, server):
    server.reply_fn = lambda rec: Reply(content="4")
    cfg = write(tmp_path, battle=False, judge=judge_block(server.url, mode="generate",
                                                          price={"prompt": 0.15, "completion": 0.6}),
                category={"classification": {"GPT": ["correctness"]}})
    code, out, err = eval_py("--config", str(cfg), "--no-charts")
    assert code == 0, err[-2000:]
    page = (tmp_path / "out" / "report.html").read_text(encoding="utf-8")
    panel = page[page.index("<table class=\"kv\">"):]
    panel = panel[:panel.index("Signatures")] if "Signatures" in panel else panel
    assert "prompt: 0.15, completion: 0.6" in panel
    assert "{&#39;" not in page and "{'" not in page and ">True<" not in page and ">None<" not in page
    assert ">true<" in page  # both_orders, as the config writes it


# ------------------------------------------------------------------ 8, 10. eval.py compare
def two_runs(tmp_path: Path) -> tuple[Path, Path]:
    """Yesterday's and today's runs of two models (today's answers swapped): base and cand in each."""
    out = []
    for name, files in (("yesterday", ("answers_model_b.json", "answers_model_a.json")),
                        ("today", ("answers_model_a.json", "answers_model_b.json"))):
        cfg = write(tmp_path, save_path=str(tmp_path / name),
                    answers=[{"name": "base", "path": str(EN / files[0])}, {"name": "cand", "path": str(EN / files[1])}],
                    category={c: {"Metrics": ["BLEU", "ROUGE", "CHRF"]} for c in ("closed_qa", "open_qa", "rewriting",
                                                                                "extraction", "classification")})
        code, _, err = eval_py("--config", str(cfg), "--no-charts")
        assert code == 0, err[-2000:]
        out.append(tmp_path / name)
    return out[0], out[1]


def test_compare_fits_80_columns_by_wrapping_never_cutting_a_name(tmp_path):
    a, b = two_runs(tmp_path)
    code, out, err = eval_py("compare", str(a), str(b))
    assert code == 0, err[-2000:]
    lines = out.splitlines()
    assert all(len(x) <= 80 for x in lines if str(tmp_path) not in x), [x for x in lines if len(x) > 80]
    assert "…" not in out
    for name in ("Metrics/ROUGE-Lsum", "Metrics/BLEU-4", "Metrics/CHRF"):
        assert name in out


def test_compare_report_shows_each_model_across_the_runs_and_nothing_empty(tmp_path):
    a, b = two_runs(tmp_path)
    page_path = tmp_path / "cmp.html"
    code, out, err = eval_py("compare", str(a), str(b), "--report", str(page_path))
    assert code == 0, err[-2000:]
    page = page_path.read_text(encoding="utf-8")
    assert "No paired comparison file" not in page and "no manifest" not in page
    headline = page[page.index('id="headline"'):page.index("<h2>Judge</h2>")]
    pairs = re.findall(r"<h3>(\w:\w+) <span class=\"muted\">vs</span> (\w:\w+)</h3>", headline)
    assert pairs and all(x[2:] == y[2:] for x, y in pairs), pairs  # never A:base vs B:cand
    assert ("A:base", "B:base") in pairs and ("A:cand", "B:cand") in pairs


# ------------------------------------------------------------------ 9. chart titles on narrow charts
def test_chart_titles_are_not_clipped_on_a_narrow_chart(tmp_path):
    from matplotlib import image

    cfg = write(tmp_path, category={"closed_qa": {"Metrics": ["CHRF"]}, "open_qa": {"Metrics": ["CHRF"]}})
    code, out, err = eval_py("--config", str(cfg))
    assert code == 0, err[-2000:]
    for png in ("closed_qa.png", "open_qa.png"):  # 2 and 3 items: the longer 'no error bars' note
        pixels = image.imread(tmp_path / "out" / "charts" / "Metrics" / png)
        top = pixels[: pixels.shape[0] // 5, :, :3]  # the title's rows
        edges = np.concatenate([top[:, :3], top[:, -3:]], axis=1)
        assert edges.min() > 0.9, f"{png}: the title runs into the figure's edge"
        assert top.min() < 0.5  # there is a title
