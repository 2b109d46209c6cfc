"""The exit-code contract for unattended CI runs, each case through `python eval.py` as a subprocess:
the exit code, the last line on stderr (why), no traceback, and what the fake judge was paid
(its request count). 0 all good; 1 a gate failed; 2 bad input, nothing paid; 3 the judge or
scoring failed (wins over 1)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

try:
    from tests.fake_openai_server import FakeOpenAIServer, Reply
except ImportError:
    from fake_openai_server import FakeOpenAIServer, Reply

REPO = Path(__file__).resolve().parents[1]
EN = REPO / "examples" / "en"
ANSWERS_A = json.loads((EN / "answers_model_a.json").read_text(encoding="utf-8"))
ANSWERS_B = json.loads((EN / "answers_model_b.json").read_text(encoding="utf-8"))
HEADS_A = [r["output"][:60] for r in ANSWERS_A if len(r["output"]) >= 20]
HEADS_B = [r["output"][:60] for r in ANSWERS_B if len(r["output"]) >= 20]
CATEGORIES = sorted({r["category"] for r in ANSWERS_A})


def eval_py(*argv: str, env: dict[str, str] | None = None, timeout: float = 120) -> tuple[int, str, str, float]:
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "eval.py", *argv], cwd=REPO, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "NO_COLOR": "1", **(env or {})})
    took = time.monotonic() - t0
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    return proc.returncode, proc.stdout, proc.stderr, took


def last_line(err: str) -> str:
    return err.strip().splitlines()[-1]


def dead_url() -> str:
    """A local port nothing listens on (bound, then closed)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return f"http://127.0.0.1:{port}/v1"


def write(tmp_path: Path, name: str = "c.json", **cfg) -> Path:
    base = {"save_path": str(tmp_path / "out"), "battle": False, "target_file": str(EN / "targets.json"),
            "answers": [{"name": "model_a", "path": str(EN / "answers_model_a.json")}],
            "category": {"classification": {"Metrics": ["F1 score"]}}}
    base.update(cfg)
    p = tmp_path / name
    p.write_text(json.dumps(base))
    return p


def judge_block(url, **kw):
    return {"backend": "openai", "model": "fake-judge", "base_url": url, "mode": "generate", "max_retries": 1,
            "timeout": 5, **kw}


def both_models():
    return [{"name": "model_a", "path": str(EN / "answers_model_a.json")},
            {"name": "model_b", "path": str(EN / "answers_model_b.json")}]


def manifest(tmp_path: Path, sub: str = "out") -> dict:
    return json.loads((tmp_path / sub / "manifest.json").read_text(encoding="utf-8"))


@pytest.fixture
def server():
    with FakeOpenAIServer() as s:
        yield s


# ---------------------------------------------------------------------- 1. the judge is not there
def test_dead_judge_is_exit_3_within_seconds_and_the_run_writes_what_it_has(tmp_path):
    url = dead_url()
    cfg = write(tmp_path, judge=judge_block(url, max_retries=5, timeout=30),
                category={"classification": {"GPT": ["correctness"], "Metrics": ["F1 score"]}})
    code, out, err, took = eval_py("--config", str(cfg))
    assert code == 3, err[-2000:]
    line = last_line(err)
    assert line.startswith(f"exit 3: judge unreachable: {url}") and "connection refused" in line, line
    assert took < 20, f"{took:.1f}s to notice a dead judge"
    m = manifest(tmp_path)
    assert m["status"] == "failed" and "judge unreachable" in m["errors"][-1]["error"]
    assert "status: failed" in out


def test_dry_run_probe(tmp_path, server):
    cfg = write(tmp_path, judge=judge_block(dead_url()), category={"classification": {"GPT": ["correctness"]}})
    code, out, err, _ = eval_py("--config", str(cfg), "--dry-run", "--probe")
    assert code == 3 and last_line(err).startswith("exit 3: judge unreachable: http://127.0.0.1:")
    assert not (tmp_path / "out").exists()
    cfg = write(tmp_path, judge=judge_block(server.url), category={"classification": {"GPT": ["correctness"]}})
    code, out, err, _ = eval_py("--config", str(cfg), "--dry-run", "--probe")
    assert code == 0, err[-2000:]
    assert f"judge {server.url}: ok" in out
    assert server.chat_calls == 0  # the model is listed by GET /models: the probe paid nothing


def test_one_dead_replica_of_three_the_run_finishes_on_the_others(tmp_path):
    with FakeOpenAIServer(reply_fn=lambda r: Reply(content="4")) as s1, \
            FakeOpenAIServer(reply_fn=lambda r: Reply(content="4")) as s2:
        cfg = write(tmp_path, judge=judge_block([s1.url, dead_url(), s2.url]),
                    category={"classification": {"GPT": ["correctness"]}})
        code, out, err, took = eval_py("--config", str(cfg))
        assert code == 0, err[-2000:]
        assert s1.chat_calls + s2.chat_calls == 3  # each item paid once, on a live replica
    assert manifest(tmp_path)["invalid"]["GPT"] == {"valid": 3, "invalid": 0}


# ---------------------------------------------------------------------- 2. replicas
def test_a_list_of_replicas_runs_whole(tmp_path):
    with FakeOpenAIServer(reply_fn=lambda r: Reply(content="4")) as s1, \
            FakeOpenAIServer(reply_fn=lambda r: Reply(content="3")) as s2:
        cfg = write(tmp_path, judge=judge_block([s1.url, s2.url], concurrency=2),
                    category={c: {"GPT": ["correctness"]} for c in ("classification", "open_qa", "closed_qa")})
        code, out, err, _ = eval_py("--config", str(cfg))
        assert code == 0, err[-2000:]
        assert s1.chat_calls > 0 and s2.chat_calls > 0 and s1.chat_calls + s2.chat_calls == 8
    m = manifest(tmp_path)
    assert m["config"]["judge"]["base_url"] == [s1.url, s2.url] and m["status"] == "ok"


# ---------------------------------------------------------------------- 3. invalid verdicts, bad text
def test_every_battle_invalid_is_exit_3(tmp_path):
    def reply(rec):
        return Reply(content="banana" if "[Assistant 1's answer]" in rec.user_text else "4")

    with FakeOpenAIServer(reply_fn=reply) as s:
        cfg = write(tmp_path, battle=True, answers=both_models(), judge=judge_block(s.url, both_orders=False),
                    category={"classification": {"GPT": ["correctness"]}, "open_qa": {"GPT": ["correctness"]}})
        code, out, err, _ = eval_py("--config", str(cfg))
    assert code == 3, (code, err[-3000:])
    m = manifest(tmp_path)
    assert m["invalid"]["GPT"] == {"valid": 12, "invalid": 0}
    assert m["invalid"]["GPT battles"] == {"valid": 0, "invalid": 6}
    assert m["invalid_total"] == {"valid": 12, "invalid": 6}
    assert m["status"] != "ok" and "status: finished with errors" in out
    line = last_line(err)
    assert line.startswith("exit 3: GPT battles: 6 of 6 scores invalid") and "two scores" in line, line


def test_a_lone_surrogate_is_refused_at_load_naming_file_and_record(tmp_path):
    rows = [dict(r) for r in ANSWERS_A]
    rows[4]["output"] += "\ud800"
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(rows))  # ensure_ascii: the file holds the escape "\ud800"
    cfg = write(tmp_path, answers=[{"name": "m", "path": str(bad)}])
    for extra in ((), ("--dry-run",)):
        code, out, err, _ = eval_py("--config", str(cfg), *extra)
        assert code == 2
        line = last_line(err)
        assert line.startswith("error: ") and str(bad) in line and f"record {rows[4].get('id', 5)}" in line, line
        assert "surrogate" in line
    assert not (tmp_path / "out").exists()


# ---------------------------------------------------------------------- 4. gates
def _answer_of_a(text: str) -> bool:
    """Whether `text` (a judge prompt) holds model_a's answer to its question (found by the instruction)."""
    for a, b in zip(ANSWERS_A, ANSWERS_B):
        if a["instruction"] in text:
            return a["output"] in text and not (b["output"] and b["output"] in text and len(b["output"]) > len(a["output"]))
    raise AssertionError("a prompt without a known question")


def rating_by_model(rec):
    """5 for model_a's answer, 1 for model_b's; every battle won by model_a: model_b is worse on every item."""
    text = rec.user_text
    if "[Assistant 1's answer]" in text:
        first = text.split("[Assistant 1's answer]")[1].split("[End of Assistant 1's answer]")[0].strip()
        a_first = any(first == a["output"].strip() for a in ANSWERS_A)
        return Reply(content="9 2" if a_first else "2 9")
    return Reply(content="5" if _answer_of_a(text) else "1")


def test_gate_names_are_checked_in_dry_run_before_anything_is_paid(tmp_path, server):
    cfg = write(tmp_path, answers=both_models(), judge=judge_block(server.url),
                category={"classification": {"GPT": ["correctness"], "Metrics": ["F1 score"]}})
    for flag, spec, want in (("--fail-under", "F2=0.5", 'no score "F2"'),
                             ("--fail-under", "model_c:classification:F1=0.5", 'no model "model_c"'),
                             ("--fail-under", "model_a:clasification:F1=0.5", 'did you mean "classification"'),
                             ("--fail-under", "model_a:F1=0.5", '"model_a" is a model, not a category; write "model_a::F1=0.5"'),
                             ("--fail-under-win-rate", "model_b:model_a=0.4", "no battles")):
        code, out, err, _ = eval_py("--config", str(cfg), "--dry-run", flag, spec)
        assert code == 2 and want in last_line(err), (spec, err[-1500:])
    assert server.chat_calls == 0 and not (tmp_path / "out").exists()


def _gate_lines(out: str) -> list[str]:
    return [x for x in out.splitlines() if x.startswith(("gate passed: ", "gate FAILED: "))]


def test_per_model_relative_and_judge_gates(tmp_path):
    """Each gate prints one line on stdout, pass or fail, in the user's own model names (`base`,
    `cand`: never "model_a"), naming the gate; `status:` agrees with the exit code; `eval.py summary
    SAVE` with the same gates prints the same lines and exits the same way, paying nothing."""
    cats = CATEGORIES[:6]
    n = sum(r["category"] in cats for r in ANSWERS_A)
    models = [{"name": "base", "path": str(EN / "answers_model_a.json")},
              {"name": "cand", "path": str(EN / "answers_model_b.json")}]
    with FakeOpenAIServer(reply_fn=rating_by_model) as s:
        cfg = write(tmp_path, answers=models, battle=True, judge=judge_block(s.url, both_orders=False),
                    category={c: {"GPT": ["relevance"]} for c in cats})
        passing = ("--fail-under", "base::relevance=3", "--fail-if-worse", "base:cand:relevance",
                   "--fail-under-win-rate", "base:cand=0.45")
        code, out, err, _ = eval_py("--config", str(cfg), "--no-charts", *passing)
        assert code == 0, err[-2000:]
        paid = s.chat_calls
        assert paid == 2 * n + n  # ratings of both models, one battle order per item
        lines = _gate_lines(out)
        mean = {m: json.loads((tmp_path / "out" / "results" / f"{m}.json").read_text())["aggregates"]["overall"]
                ["GPT/relevance"]["mean"] for m in ("base", "cand")}
        assert mean["base"] == 5 and mean["cand"] < 2
        assert lines == ["gate passed: --fail-under base::relevance=3: base: GPT/relevance = 5.0000 >= 3",
                         "gate passed: --fail-if-worse base:cand:relevance: base vs cand on (all):GPT/relevance: "
                         f"better, mean 5.0000 vs {mean['cand']:.4f} (confirmatory)",
                         f"gate passed: --fail-under-win-rate base:cand=0.45: base vs cand: win rate 1.000 >= 0.45 "
                         f"(base {n} wins, 0 ties, 0 losses against cand, 0 invalid)"], out[-1500:]
        assert out.strip().splitlines()[-1] == "status: ok"
        failing = ("--fail-under", "cand::relevance=3", "--fail-if-worse", "cand:base:relevance",
                   "--fail-under-win-rate", "cand:base=0.45", "--fail-on-untrusted-judge")
        code, out, err, _ = eval_py("--config", str(cfg), "--no-charts", *failing)
        assert code == 1
        failed = _gate_lines(out)
        assert len(failed) == 4 and all(x.startswith("gate FAILED: ") for x in failed), out[-2000:]
        assert failed[0] == f"gate FAILED: --fail-under cand::relevance=3: cand: GPT/relevance = {mean['cand']:.4f} < 3"
        assert failed[1].startswith("gate FAILED: --fail-if-worse cand:base:relevance: cand worse than base on "
                                    f"(all):GPT/relevance: mean {mean['cand']:.4f} vs 5.0000, confirmatory")
        assert failed[2] == (f"gate FAILED: --fail-under-win-rate cand:base=0.45: cand vs base: win rate 0.000 < 0.45 "
                             f"(cand 0 wins, 0 ties, {n} losses against base, 0 invalid)")
        assert failed[3].startswith("gate FAILED: --fail-on-untrusted-judge: judge check: not checked")
        assert "model_a" not in out and "model_b" not in out
        assert out.strip().splitlines()[-1] == "status: gate failed"
        why = last_line(err)
        assert why.startswith("exit 1: 4 of 4 gates failed: --fail-under cand::relevance=3 (cand: GPT/relevance = "
                              f"{mean['cand']:.4f} < 3); --fail-if-worse cand:base:relevance (cand worse than base"), why
        # the saved run, gated again: the same lines, status and exit code; no judge request
        save = str(tmp_path / "out")
        for flags, want_code, want_lines in ((failing, 1, failed), (passing, 0, None)):
            code2, out2, err2, _ = eval_py("summary", save, *flags)
            assert code2 == want_code, err2[-1500:]
            assert _gate_lines(out2) == (want_lines or lines)
            assert out2.strip().splitlines()[-1] == ("status: gate failed" if want_code else "status: ok")
            if want_code:
                assert last_line(err2) == why
        code, out, err, _ = eval_py("--config", str(cfg), "--no-charts", "--fail-under", "*:relevance=3")
        failed = _gate_lines(out)
        assert code == 1 and len(failed) == 1 and failed[0].startswith("gate FAILED: --fail-under *:relevance=3: cand: ")
        by_cat = json.loads((tmp_path / "out" / "results" / "cand.json").read_text())["aggregates"]["by_category"]
        low = sum(b["GPT/relevance"]["mean"] < 3 for b in by_cat.values())
        assert low > 3 and f"; and {low - 3} more" in failed[0]  # one line for the gate, three categories named
        assert s.chat_calls == paid  # every later run answered from the cache, the summaries asked nothing


def test_a_failed_judge_wins_over_a_failed_gate(tmp_path):
    with FakeOpenAIServer(reply_fn=lambda r: Reply(content="no idea")) as s:
        cfg = write(tmp_path, judge=judge_block(s.url),
                    category={"classification": {"GPT": ["correctness"], "Metrics": ["F1 score"]}})
        code, out, err, _ = eval_py("--config", str(cfg), "--fail-under", "F1=1.01")
    assert code == 3
    assert "gate FAILED: --fail-under F1=1.01: model_a: Metrics/F1" in out
    assert out.strip().splitlines()[-1] == "status: finished with errors"
    assert last_line(err).startswith("exit 3: GPT: 3 of 3 scores invalid")


# ---------------------------------------------------------------------- 5. one save path, one run's models
def test_models_from_an_earlier_run_are_named_and_not_gated(tmp_path):
    both = write(tmp_path, answers=both_models())
    assert eval_py("--config", str(both))[0] == 0
    one = write(tmp_path, "one.json")
    code, out, err, _ = eval_py("--config", str(one), "--fail-under", "F1=1.01")
    assert code == 1
    assert "model_b: results from an earlier run" in err
    assert "model_a: Metrics/F1" in last_line(err) and "model_b" not in last_line(err)
    assert set(manifest(tmp_path)["from_earlier_runs"]) == {"model_b"}
    code2, out2, err2, _ = eval_py("summary", str(tmp_path / "out"), "--fail-under", "F1=1.01")
    assert (code2, last_line(err2)) == (1, last_line(err))  # the saved run gates this run's models only
    code, out, err, _ = eval_py("--config", str(one), "--fail-under", "model_b::F1=0.1")
    assert code == 2 and 'no model "model_b"' in last_line(err)


def test_merge_takes_the_save_path_of_the_shards_and_refuses_other_data(tmp_path):
    cfg = write(tmp_path, answers=both_models(), category={c: {"Metrics": ["F1 score"]} for c in CATEGORIES[:4]})
    for i in (1, 2):
        code, out, err, _ = eval_py("--config", str(cfg), "--shard", f"{i}/2", "--no-charts")
        assert code == 0, err[-1500:]
    code, out, err, _ = eval_py("merge", str(tmp_path / "merged"), str(tmp_path / "out"), "--no-charts")
    assert code == 0, err[-1500:]
    merged = json.loads((tmp_path / "merged" / "results" / "model_a.json").read_text())
    assert len(merged["items"]) == len(ANSWERS_A)
    # shard 2 again, from an answer file with one output changed
    changed = [dict(r) for r in ANSWERS_B]
    changed[0]["output"] = "something else"
    other = tmp_path / "b2.json"
    other.write_text(json.dumps(changed))
    cfg2 = write(tmp_path, "c2.json", save_path=str(tmp_path / "out2"),
                 answers=[both_models()[0], {"name": "model_b", "path": str(other)}],
                 category={c: {"Metrics": ["F1 score"]} for c in CATEGORIES[:4]})
    assert eval_py("--config", str(cfg2), "--shard", "2/2", "--no-charts")[0] == 0
    shards = [str(tmp_path / "out" / "shard-1-of-2"), str(tmp_path / "out2" / "shard-2-of-2")]
    code, out, err, _ = eval_py("merge", str(tmp_path / "m2"), *shards, "--no-charts")
    assert code == 2 and "the answer file of model_b differs" in last_line(err)
    code, out, err, _ = eval_py("merge", str(tmp_path / "m3"), *shards, "--force", "--no-charts")
    assert code == 0


# ---------------------------------------------------------------------- 6. one cache for many runs
def test_a_judge_cache_shared_across_save_paths(tmp_path):
    with FakeOpenAIServer(reply_fn=lambda r: Reply(content="4")) as s:
        cache = tmp_path / "cache"
        cache.mkdir()
        env = {"EVAL_JUDGE_CACHE": str(cache)}
        for i in (1, 2):
            cfg = write(tmp_path, save_path=str(tmp_path / f"out{i}"), judge=judge_block(s.url),
                        category={"classification": {"GPT": ["correctness"]}})
            code, out, err, _ = eval_py("--config", str(cfg), env=env)
            assert code == 0, err[-1500:]
            assert s.chat_calls == 3  # the second save path paid nothing
        assert (cache / "judge_cache.sqlite").is_file() and not (tmp_path / "out2" / "judge_cache.sqlite").exists()
        assert "judge cache: " + str(cache / "judge_cache.sqlite") + "\n  3 entries" in out  # the path on its own line
        assert "this run 3 hits, 0 misses (100% hits)" in out



# ---------------------------------------------------------------------- the parts, in process
def test_gate_syntax():
    from evaluate.core.errors import InputError
    from evaluate.ci.gates import parse_fail_under, parse_fail_if_worse, parse_win_rate

    cases = {"BLEU-4=0.2": ("", "", "BLEU-4", 0.2), "closed_qa:GPT/correctness=3.5": ("", "closed_qa", "GPT/correctness", 3.5),
             "m:closed_qa:F1=1": ("m", "closed_qa", "F1", 1.0), "m::F1=0.5": ("m", "", "F1", 0.5),
             "*:F1=0.5": ("", "*", "F1", 0.5), "m:*:F1=0.5": ("m", "*", "F1", 0.5), "*::F1=0.5": ("", "", "F1", 0.5)}
    for spec, want in cases.items():
        g = parse_fail_under(spec)
        assert (g.model, g.category, g.score, g.value) == want, spec
    for bad in ("a:b:c:d=1", ":F1=1", "m:c:=1", "F1=", "F1"):
        with pytest.raises(InputError):
            parse_fail_under(bad)
    w = parse_fail_if_worse("b:a:GPT/relevance")
    assert (w.candidate, w.baseline, w.category, w.score) == ("b", "a", "(all)", "GPT/relevance")
    assert parse_fail_if_worse("b:a:closed_qa:F1").category == "closed_qa"
    assert parse_win_rate("b:a=0.45").value == 0.45
    for bad in ("b:b:F1",):
        with pytest.raises(InputError):
            parse_fail_if_worse(bad)
    for bad in ("b:a=1.5", "b=0.4", "b:a"):
        with pytest.raises(InputError):
            parse_win_rate(bad)


def test_relative_gates_read_comparison_rows_and_battles():
    from evaluate.ci.gates import parse_fail_if_worse, parse_win_rate, win_rate_failures, worse_failures

    comp = {"model_a": "a", "model_b": "b", "rows": [
        {"category": "(all)", "score": "GPT/relevance", "mean_a": 4.0, "mean_b": 2.0, "better": "a",
         "verdict": "A better", "role": "confirmatory", "p_adj": 0.002, "interval": [1.5, 2.5], "level": 0.975,
         "m": 2, "simultaneous": True},
        {"category": "(all)", "score": "Metrics/F1", "mean_a": 0.5, "mean_b": 0.6, "better": None,
         "verdict": "no detectable difference", "role": "confirmatory", "p_adj": 0.8, "interval": [-0.3, 0.1],
         "level": 0.975, "m": 2, "simultaneous": True}]}
    got = worse_failures([comp], [parse_fail_if_worse("b:a:relevance")])[0]
    assert got == ("b worse than a on (all):GPT/relevance: mean 2.0000 vs 4.0000, confirmatory, p_adj = 0.002, "
                   "simultaneous 95% interval of the difference 1.500 to 2.500")
    assert worse_failures([comp], [parse_fail_if_worse("a:b:relevance"), parse_fail_if_worse("b:a:F1")]) == []
    # the battle file holds model_a's win rate; the candidate may be either side: 7 wins, 2 ties, 1 loss of a
    battles = {"a__vs__b": {"summary": {"model_a": "a", "model_b": "b", "wins": 7, "ties": 2, "losses": 1,
                                        "invalid": 0, "win_rate": 0.8}}}
    assert win_rate_failures(battles, [parse_win_rate("a:b=0.8")]) == []
    got = win_rate_failures(battles, [parse_win_rate("b:a=0.25")])
    assert len(got) == 1 and got[0].startswith("b vs a: win rate 0.200 < 0.25")


def test_merge_names_what_differs():
    from evaluate.pipeline.merge import differences

    def m(model="judge-1", sha="aa", limit=None, url="http://x/v1"):
        return {"models": [{"name": "a", "sha256": sha}],
                "config": {"save_path": "s", "limit": limit, "judge": {"model": model, "base_url": url}}}

    dirs = [Path("one"), Path("two")]
    assert differences(dirs, [m(), m(url="http://y/v1")]) == []  # another replica is the same judge
    assert differences(dirs, [m(), m(model="judge-2")]) == ["the judge differs (model: one vs two)"]
    assert differences(dirs, [m(), m(limit=5)]) == ["the config differs (limit: one vs two)"]
    assert differences(dirs, [m(), m(sha="bb")])[0].startswith("the answer file of a differs")


def test_judge_cache_location(tmp_path, monkeypatch):
    from types import SimpleNamespace

    from evaluate.backends.cache_path import judge_cache_path

    def cfg(cache):
        return SimpleNamespace(judge=SimpleNamespace(cache=cache), save_path=tmp_path / "save",
                               resolve=lambda v: tmp_path / v)

    monkeypatch.delenv("EVAL_JUDGE_CACHE", raising=False)
    assert judge_cache_path(cfg(True)) == tmp_path / "save" / "judge_cache.sqlite"
    assert judge_cache_path(cfg(False)) is None
    assert judge_cache_path(cfg("shared/")) == tmp_path / "shared" / "judge_cache.sqlite"
    assert judge_cache_path(cfg("c.sqlite")) == tmp_path / "c.sqlite"
    (tmp_path / "dir").mkdir()
    monkeypatch.setenv("EVAL_JUDGE_CACHE", str(tmp_path / "dir"))
    assert judge_cache_path(cfg(True)) == tmp_path / "dir" / "judge_cache.sqlite"
    assert judge_cache_path(cfg("c.sqlite")) == tmp_path / "c.sqlite"  # the config wins over the environment
    assert judge_cache_path(cfg(False)) is None


def test_a_metric_option_of_the_wrong_type_names_its_key_path(tmp_path):
    """metric_options.BERTScore.num_layers: "six" was `invalid literal for int()` without the key path."""
    cfg = write(tmp_path, category={"classification": {"Metrics": ["BERTScore"]}},
                metric_options={"BERTScore": {"num_layers": "six"}})
    for extra in ((), ("--dry-run",)):
        code, _, err, _ = eval_py("--config", str(cfg), *extra)
        assert code == 2, err[-1500:]
        line = last_line(err)
        assert str(cfg) in line and "metric_options.BERTScore.num_layers" in line and "'six'" in line, line
    assert not (tmp_path / "out" / "results").exists()
