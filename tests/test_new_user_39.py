"""What a new user tripped on in the closing lines and the report (issue 39), each tried the way the user
ran it: `python eval.py` in a subprocess on the bundled English example's answers (Metrics, or the fake
OpenAI-compatible judge of tests/fake_openai_server.py where a judge is needed); the exit code, what the
terminal says and what was written.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

try:
    from tests.fake_openai_server import FakeOpenAIServer, Reply
except ImportError:
    from fake_openai_server import FakeOpenAIServer, Reply

REPO = Path(__file__).resolve().parents[1]
EN = REPO / "examples" / "en"


def eval_py(*argv: str, timeout: float = 180, cwd: Path = REPO) -> tuple[int, str, str]:
    proc = subprocess.run([sys.executable, str(REPO / "eval.py"), *argv], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "PYTHONPATH": str(REPO), "NO_COLOR": "1",
                                                "COLUMNS": "80", "EVAL_NO_PROGRESS": "1"})
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    return proc.returncode, proc.stdout, proc.stderr


def write(tmp_path: Path, name: str = "c.json", **cfg) -> Path:
    base = {"save_path": str(tmp_path / "out"), "target_file": str(EN / "targets.json"),
            "answers": [{"name": "base", "path": str(EN / "answers_model_a.json")},
                        {"name": "cand", "path": str(EN / "answers_model_b.json")}],
            "category": {"classification": {"Metrics": ["F1 score"]}}}
    base.update(cfg)
    p = tmp_path / name
    p.write_text(json.dumps(base))
    return p


def judge_block(url: str, **kw) -> dict:
    return {"backend": "openai", "model": "fake-judge", "base_url": url, "max_retries": 1, "timeout": 5,
            "mode": "generate", **kw}


def closing(out: str) -> str:
    return out[out.rindex("mean, all items"):]


# ------------------------------------------------------------------ 1. "no difference"
def test_a_large_gap_on_few_items_is_no_detectable_difference_not_no_difference(tmp_path):
    """F1 1.00 against 0.00 on 3 items: no test at this n can call it, and the verdict column says so
    ("no detectable difference"), never "no difference" (before: "no difference" in every row)."""
    cfg = write(tmp_path, category={"classification": {"Metrics": ["F1 score", "CHRF"]}})
    code, out, err = eval_py("--config", str(cfg), "--no-charts")
    assert code == 0, err[-3000:]
    text = closing(out)
    pair = text.split("base vs cand:")[1]
    row = next(x for x in pair.splitlines() if x.strip().startswith("Metrics/F1"))
    assert row.split()[1] == "1.000" and row.rstrip().endswith("no detectable difference"), row
    assert "no difference" not in out
    assert all(len(x) <= 80 for x in text.splitlines() if not x.startswith(("report:", "manifest:", "results:",
                                                                             "summary:", "compare:"))), text


# ------------------------------------------------------------------ 2. 9 primary comparisons in the terminal, 8 in the report
ANSWERS_A = json.loads((EN / "answers_model_a.json").read_text(encoding="utf-8"))


def base_wins_every_battle(rec) -> Reply:
    """Ratings 2-4 by the prompt's length; every battle won by base's answer."""
    text = rec.user_text
    if "[Assistant 1's answer]" in text:
        first = text.split("[Assistant 1's answer]")[1].split("[End of Assistant 1's answer]")[0].strip()
        return Reply(content="9 2" if any(first == a["output"].strip() for a in ANSWERS_A) else "2 9")
    return Reply(content=str(2 + len(text) % 3))


def test_the_terminal_counts_the_primary_comparisons_the_report_counts(tmp_path):
    """Three primary scores and a battle: the report says "of 3 confirmatory comparisons"; the terminal
    said "of 4 primary comparisons (3 scores and the battle)". Now both count 3, the battle's verdict beside."""
    cats = ["classification", "extraction", "generation", "open_qa", "rewriting"]
    with FakeOpenAIServer(reply_fn=base_wins_every_battle) as s:
        cfg = write(tmp_path, battle=True, judge=judge_block(s.url),
                    category={c: {"GPT": ["relevance"], "Metrics": ["CHRF", "ROUGE"]} for c in cats})
        code, out, err = eval_py("--config", str(cfg), "--no-charts")
    assert code == 0, err[-3000:]
    html = (tmp_path / "out" / "report.html").read_text(encoding="utf-8")
    in_report = int(html.split(" confirmatory comparisons")[0].rsplit("of ", 1)[1])
    head = " ".join(x.strip() for x in closing(out).split("base vs cand:")[1].split("\n  score ")[0].splitlines())
    assert in_report == 3 and f"of {in_report} primary scores;" in head, head
    assert head.endswith("battle: base better"), head


# ------------------------------------------------------------------ 3. a gate that cannot fail
def test_a_gate_that_cannot_fail_at_this_number_of_items_says_it_has_no_power(tmp_path):
    """cand scores 0 on every classification item where base scores 1 (F1), yet with 3 items the exact
    test's smallest p is 0.25: --fail-if-worse could not fail. It passes (exit 0) but says "without
    power" and the items it needs, on the run and on `eval.py summary`, and in --markdown."""
    cfg = write(tmp_path)
    code, out, err = eval_py("--config", str(cfg), "--no-charts", "--fail-if-worse", "cand:base:F1",
                             "--markdown", str(tmp_path / "s.md"))
    assert code == 0, err[-3000:]
    line = next(x for x in out.splitlines() if x.startswith("gate "))
    assert line.startswith("gate passed without power: --fail-if-worse cand:base:F1: "), line
    assert "with 3 paired items" in line and "could not fail; it needs at least 6 items" in line, line
    assert "passed without power" in (tmp_path / "s.md").read_text()
    code, out, _ = eval_py("summary", str(tmp_path / "out"), "--fail-if-worse", "cand:base:F1")
    assert code == 0 and line in out.splitlines()


def test_a_gate_with_the_items_to_fail_keeps_its_plain_line(tmp_path):
    """12 paired items: the gate's row has an interval and could fail; a pass keeps its plain line (the
    no-power words are only for a gate that could not fail)."""
    cats = ["classification", "extraction", "generation", "open_qa"]
    cfg = write(tmp_path, category={c: {"Metrics": ["CHRF"]} for c in cats})
    code, out, err = eval_py("--config", str(cfg), "--no-charts", "--fail-if-worse", "base:cand:CHRF")
    line = next(x for x in out.splitlines() if x.startswith("gate "))
    assert line.startswith("gate passed: --fail-if-worse base:cand:CHRF: base vs cand"), line
    assert "power" not in line


# ------------------------------------------------------------------ 4. --fail-on-untrusted-judge without a check
def test_the_judge_gate_without_a_check_says_how_to_run_one_and_the_way_it_says_works(tmp_path):
    """No check stored: the gate fails naming `--judge-check N` on this command (before: "not checked" and
    only the separate `eval.py judge-check`); the command it names runs the check, and the gate then
    reads a check's verdict, not "not checked"."""
    with FakeOpenAIServer(reply_fn=base_wins_every_battle) as s:
        cfg = write(tmp_path, battle=False, judge=judge_block(s.url),
                    category={"classification": {"GPT": ["relevance"]}})
        code, out, err = eval_py("--config", str(cfg), "--no-charts", "--fail-on-untrusted-judge")
        assert code == 1, err[-3000:]
        line = next(x for x in out.splitlines() if x.startswith("gate FAILED: --fail-on-untrusted-judge"))
        assert "not checked" in line and f"eval.py --config {cfg} --judge-check 20 --fail-on-untrusted-judge" in line
        code, out, err = eval_py("--config", str(cfg), "--no-charts", "--judge-check", "2",
                                 "--fail-on-untrusted-judge")
        line = next(x for x in out.splitlines() if x.startswith("gate ") and "--fail-on-untrusted-judge" in x)
        assert "not checked" not in line and "judge check: " in line, line
        assert code == (0 if line.startswith("gate passed") else 1)


MT_DATA = REPO.parent / "shared" / "data"
MT_BENCH = MT_DATA / "fastchat_mt_bench" / "fastchat" / "llm_judge" / "data" / "mt_bench"
MT_ANSWERS = MT_DATA / "mt_bench" / "model_answer"


def mt_bench(tmp_path: Path, url: str, *extra: str, save: str = "mt", **judge_keys: str) -> tuple[int, str, str]:
    """`eval.py mt-bench` on one question a category of FastChat's two real answer files, single mode."""
    if not (MT_BENCH / "question.jsonl").exists() or not (MT_ANSWERS / "gpt-3.5-turbo.jsonl").exists():
        pytest.skip("../shared/data/fastchat_mt_bench or mt_bench/model_answer is not present")
    judge = tmp_path / "judge.yaml"
    judge.write_text(json.dumps({"judge": {"backend": "openai", "model": "gpt-4", "base_url": url, "max_retries": 0,
                                           **judge_keys}}))
    return eval_py("mt-bench", "--data", str(MT_BENCH), "--answers", str(MT_ANSWERS / "vicuna-13b-v1.3.jsonl"),
                   str(MT_ANSWERS / "gpt-3.5-turbo.jsonl"), "--judge-config", str(judge), "--mode", "single",
                   "--save_path", str(tmp_path / save), "--limit", "1", "--no-charts", *extra)


def test_the_judge_gate_on_a_saved_mt_bench_run_names_its_judge_check_flag(tmp_path):
    """`eval.py summary` of an MT-bench save path with --fail-on-untrusted-judge: MT-bench asks a judge (before:
    exit 2, "this run asks no judge for GPT scores"); no check stored: exit 1 naming mt-bench's --judge-check."""
    with FakeOpenAIServer(reply_fn=lambda rec: Reply(content="Fine.\n\nRating: [[5]]")) as s:
        code, out, err = mt_bench(tmp_path, s.url)
    assert code == 0, err[-3000:]
    code, out, err = eval_py("summary", str(tmp_path / "mt"), "--fail-on-untrusted-judge")
    assert code == 1, err[-3000:]
    line = next(x for x in out.splitlines() if x.startswith("gate FAILED: --fail-on-untrusted-judge"))
    assert "add --judge-check N to the `eval.py mt-bench` command" in line, line


# ------------------------------------------------------------------ 5. --junit / --markdown into a new folder
def test_junit_and_markdown_make_their_folders(tmp_path):
    """`--junit reports/ci/eval.xml --markdown reports/md/eval.md` where reports/ does not exist yet (a fresh
    CI checkout): both written, their folders made (before: exit 2, "the folder ... does not exist"); the
    same from `eval.py summary`."""
    cfg = write(tmp_path)
    junit, md = tmp_path / "reports" / "ci" / "eval.xml", tmp_path / "reports" / "md" / "eval.md"
    code, out, err = eval_py("--config", str(cfg), "--no-charts", "--fail-under", "F1=0.1",
                             "--junit", str(junit), "--markdown", str(md))
    assert code == 1, err[-3000:]  # cand's F1 is 0: the gate fails, the files still say so
    assert "gate FAILED: --fail-under F1=0.1" in junit.read_text() and "**FAILED**" in md.read_text()
    again = tmp_path / "later" / "eval.md"
    code, out, err = eval_py("summary", str(tmp_path / "out"), "--markdown", str(again))
    assert code == 0 and again.read_text().strip(), err[-3000:]


# ------------------------------------------------------------------ 9. an absolute save_path with /../
def test_an_absolute_save_path_with_dotdot_is_printed_and_stored_without_it(tmp_path):
    """save_path: /tmp/.../never/../out (the folder `never` does not exist): the run writes tmp/out, prints
    and stores that path (before: every path printed with "/never/../", and `never/` made on the way)."""
    cfg = write(tmp_path, save_path=f"{tmp_path}/never/../out")
    code, out, err = eval_py("--config", str(cfg), "--no-charts")
    assert code == 0, err[-3000:]
    assert f"report:   {tmp_path}/out/report.html" in out.splitlines()
    assert "/../" not in out + err and not (tmp_path / "never").exists()
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["config"]["save_path"] == str(tmp_path / "out")
    code, out, err = eval_py("--config", str(cfg), "--no-charts", "--save_path", f"{tmp_path}/flag/../out2")
    assert code == 0 and f"report:   {tmp_path}/out2/report.html" in out.splitlines(), err[-3000:]


# ------------------------------------------------------------------ 8. clsed_qa beside closed_qa
def test_a_config_category_close_to_a_covered_one_is_warned_about(tmp_path):
    """`clsed_qa: {Metrics: [BLEU]}` beside `closed_qa: {Metrics: [CHRF]}`: the run goes on (closed_qa's
    records are all scored), but the plan, the closing lines and the manifest say that clsed_qa's BLEU runs
    nowhere, with did-you-mean (before: nothing said). A far name (ColossalAI's unused categories) is quiet."""
    cfg = write(tmp_path, category={"closed_qa": {"Metrics": ["CHRF"]}, "clsed_qa": {"Metrics": ["BLEU"]},
                                    "logical_reasoning": {"Metrics": ["CHRF"]}})
    code, out, err = eval_py("--config", str(cfg), "--no-charts")
    assert code == 0, err[-3000:]
    said = 'warning: category.clsed_qa: no record has category "clsed_qa", so its scores (Metrics: BLEU) run nowhere; ' \
           'did you mean "closed_qa"'
    assert said in err
    assert said in " ".join(x.strip() for x in closing(out).splitlines())
    notes = json.loads((tmp_path / "out" / "manifest.json").read_text())["plan"]["notes"]
    assert [n["text"][:len(said)] for n in notes] == [said]
    assert not any("logical_reasoning" in n["text"] for n in notes)


# ------------------------------------------------------------------ 7. --limit into a save path that holds a fuller run
def _items(save: Path, model: str) -> int:
    return len(json.loads((save / "results" / f"{model}.json").read_text())["items"])


def test_limit_into_a_fuller_save_path_is_refused_without_force(tmp_path):
    """A full run, then `--limit 1` into the same save path: refused before any work, naming the model and
    what would be dropped; the full results stay (before: silently replaced by the 10-item subset).
    `--force` replaces them. Then a config scoring another model beside the limited one (a later full run)
    would mix 10 and 25 items under "mean, all items": refused too, unless --force."""
    cfg = write(tmp_path, category={"classification": {"Metrics": ["F1 score"]}, "closed_qa": {"Metrics": ["CHRF"]}})
    out_dir = tmp_path / "out"
    code, out, err = eval_py("--config", str(cfg), "--no-charts")
    assert code == 0 and _items(out_dir, "base") == 25, err[-3000:]
    manifest = (out_dir / "manifest.json").read_bytes()
    code, out, err = eval_py("--config", str(cfg), "--no-charts", "--limit", "1")
    assert code == 2, err[-3000:]
    line = err.strip().splitlines()[-1]
    assert line.startswith("error: --limit 1: ") and "fuller results of base (5 scored items)" in line, line
    assert "drop 3 of them" in line and "--save_path" in line and "--force" in line
    assert _items(out_dir, "base") == 25 and (out_dir / "manifest.json").read_bytes() == manifest

    code, out, err = eval_py("--config", str(cfg), "--no-charts", "--limit", "1", "--force")
    assert code == 0 and _items(out_dir, "base") == 10, err[-3000:]

    other = write(tmp_path, "other.json", answers=[{"name": "base", "path": str(EN / "answers_model_a.json")},
                                                    {"name": "other", "path": str(EN / "answers_model_b.json")}],
                  category={"classification": {"Metrics": ["F1 score"]}, "closed_qa": {"Metrics": ["CHRF"]}})
    code, out, err = eval_py("--config", str(other), "--no-charts")
    assert code == 2, err[-3000:]
    line = err.strip().splitlines()[-1]
    assert "results of cand from an earlier run (10 items, --limit 1)" in line and "its own 25 items" in line, line
    code, out, err = eval_py("--config", str(other), "--no-charts", "--force")
    assert code == 0, err[-3000:]


def test_limit_into_its_own_save_path_or_a_limited_one_runs(tmp_path):
    """A quick look first and the full run after it into the same save path (README's order) is not refused:
    the full run replaces the subset."""
    cfg = write(tmp_path)
    assert eval_py("--config", str(cfg), "--no-charts", "--limit", "1")[0] == 0
    assert eval_py("--config", str(cfg), "--no-charts", "--limit", "2")[0] == 0
    code, out, err = eval_py("--config", str(cfg), "--no-charts")
    assert code == 0 and _items(tmp_path / "out", "cand") == 25, err[-3000:]


# ------------------------------------------------------------------ 6. the MT-bench report's Run block
def test_the_mt_bench_run_block_has_its_config_hash_and_judge_usage(tmp_path):
    """16 questions' turns judged (32 calls): the manifest and the report's Run block hold the start, the
    config's hash and the judge's usage with its 32 requests and the server's tokens (before: sha256 "–"
    and judge usage "none")."""
    with FakeOpenAIServer(reply_fn=lambda rec: Reply(content="Fine.\n\nRating: [[5]]", usage=(10, 3))) as s:
        code, out, err = mt_bench(tmp_path, s.url)
        calls = s.chat_calls
    assert code == 0, err[-3000:]
    manifest = json.loads((tmp_path / "mt" / "manifest.json").read_text())
    assert calls == 32 and manifest["started"]
    assert re.fullmatch(r"[0-9a-f]{64}", manifest["config_hash"] or ""), manifest["config_hash"]
    usage = manifest["usage"]["MT-bench"]
    assert (usage["requests"], usage["cache_misses"], usage["prompt_tokens"], usage["completion_tokens"]) == \
        (32, 32, 320, 96)
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", (tmp_path / "mt" / "report.html").read_text()))
    run = text[text.index(" Run run "):]
    assert f"sha256 {manifest['config_hash']}" in run and "judge usage MT-bench: requests 32," in run, run[:1500]
    assert f"started / finished {manifest['started']}" in run
    # the same files judged again: every judgment read from the file, no call made
    with FakeOpenAIServer(reply_fn=lambda rec: Reply(content="Fine.\n\nRating: [[5]]")) as s:
        code, out, err = mt_bench(tmp_path, s.url)
        assert code == 0 and s.chat_calls == 0, err[-3000:]


# ------------------------------------------------------------------ 10. the MT-bench dry run and the judge cache
def test_the_mt_bench_dry_run_counts_what_the_judge_cache_holds_as_not_to_send(tmp_path):
    """Two save paths sharing one judge cache (`judge.cache`): after the first run, the second's dry run
    counts its 32 calls "in the cache", 0 to send (before: 32 to send), and the run then sends none."""
    reply = lambda rec: Reply(content="Fine.\n\nRating: [[5]]")  # noqa: E731
    with FakeOpenAIServer(reply_fn=reply) as s:
        code, out, err = mt_bench(tmp_path, s.url, save="a", cache=str(tmp_path / "shared.sqlite"))
        assert code == 0 and s.chat_calls == 32, err[-3000:]
        code, out, err = mt_bench(tmp_path, s.url, "--dry-run", save="b", cache=str(tmp_path / "shared.sqlite"))
        assert code == 0 and s.chat_calls == 32, err[-3000:]
        head, *rows = out.splitlines()[1:]
        assert head.split() == ["prompt", "judge", "calls", "in", "the", "file", "in", "the", "cache", "to", "send"]
        total = next(r for r in rows if r.startswith("total")).split()
        assert total == ["total", "32", "0", "32", "0"], out
        assert not (tmp_path / "b").exists()  # a dry run writes nothing
        code, out, err = mt_bench(tmp_path, s.url, save="b", cache=str(tmp_path / "shared.sqlite"))
        assert code == 0 and s.chat_calls == 32, err[-3000:]  # what the dry run said: nothing sent
        # a cache that does not hold them: all to send, and no cache file is made by the dry run
        code, out, err = mt_bench(tmp_path, s.url, "--dry-run", save="c", cache=str(tmp_path / "other.sqlite"))
        total = next(r for r in out.splitlines() if r.startswith("total")).split()
        assert code == 0 and total == ["total", "32", "0", "0", "32"] and not (tmp_path / "other.sqlite").exists()
