"""The judge check (issue 13), against the fake OpenAI-compatible server: scripted judges that are
right, biased to length, biased to position, or random; corruptions on constructed text; the
stored check found again by a later run."""

import hashlib
import json
import math
import random
import re
from pathlib import Path

import pytest

from evaluate.cli import main
from evaluate.judgecheck import CORRUPTIONS, corrupt, near_chance, split_sentences

try:
    from tests.fake_openai_server import Reply, fake_openai  # noqa: F401
except ImportError:
    from fake_openai_server import Reply, fake_openai  # noqa: F401

REPO = Path(__file__).resolve().parents[1]
EN = REPO / "examples" / "en"
TARGETS = [(r["instruction"], r.get("input", ""), r["target"] if isinstance(r["target"], list) else [r["target"]])
           for r in json.loads((EN / "targets.json").read_text())]
A1, A2 = "[Assistant 1's answer]", "[Assistant 2's answer]"


def config(tmp_path, server, **extra):
    cfg = {"language": "en", "save_path": str(tmp_path / "out"),
           "category": {"closed_qa": {"GPT": ["correctness"]}, "summarization": {"GPT": ["relevance"]},
                        "brainstorming": {"GPT": ["relevance"]}},
           "answers": [{"name": "model_a", "path": str(EN / "answers_model_a.json")},
                       {"name": "model_b", "path": str(EN / "answers_model_b.json")}],
           "target_file": str(EN / "targets.json"),
           "judge": {"backend": "openai", "model": "fake-judge", "base_url": server.url, "api_key_env": "GPT_KEY",
                     "max_retries": 1, "timeout": 5, "mode": "logprobs", "cache": False,
                     "price": {"prompt": 1.0, "completion": 2.0}},
           **extra}
    path = tmp_path / "c.json"
    path.write_text(json.dumps(cfg))
    return path


def answers(text):
    first = text.split(A1, 1)[1].split(A2, 1)[0]
    second = text.split(A2, 1)[1]
    second = second.split("[End of Assistant 2's answer]", 1)[0]
    first = first.split("[End of Assistant 1's answer]", 1)[0]
    return first.strip(), second.strip()


def rating_reply(score):
    probs = {str(score): 0.9, str(max(1, score - 1)): 0.1} if score > 1 else {"1": 0.9, "2": 0.1}
    return Reply(content=str(score), top_logprobs=[{k: math.log(v) for k, v in probs.items()}])


def scripted(battle_fn, rating_fn=lambda text: 3):
    def reply(rec):
        text = rec.user_text
        if A1 in text:
            s1, s2 = battle_fn(text, *answers(text))
            return Reply(content=f"{s1} {s2}", usage=(100, 3))
        return rating_reply(rating_fn(text))
    return reply


# --- labelled data: "What is 2+i?"; the right answer is the longer one in 30 of 40 pairs ----------
def labelled_file(tmp_path, n=40):
    rng = random.Random(7)
    rows = []
    for i in range(n):
        right, wrong = f"The answer is {2 + i}.", f"The answer is {3 + i}."
        pad = " I checked it twice, so I am quite sure."
        if i % 4 != 3:
            right += pad
        else:
            wrong += pad
        label = rng.choice("ab")
        a, b = (right, wrong) if label == "a" else (wrong, right)
        rows.append({"id": f"p{i}", "instruction": f"What is 2+{i}?", "input": "", "response_a": a,
                     "response_b": b, "label": label})
    rows.append({"id": "tie", "instruction": "What is 2+2?", "input": "", "response_a": "4", "response_b": "four",
                 "label": "tie"})
    path = tmp_path / "pairs.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return path


def by_content(text, first, second):
    q = int(re.search(r"What is 2\+(\d+)\?", text).group(1))
    return (9, 2) if f"is {2 + q}." in first else (2, 9)


def by_length(text, first, second):
    return (8, 3) if len(first) >= len(second) else (3, 8)


def always_first(text, first, second):
    return (9, 2)


def run_check(tmp_path, monkeypatch, capsys, server, judge, *args, cfg=None):
    monkeypatch.setenv("GPT_KEY", "sk-test")
    server.reply_fn = judge
    cfg = cfg or config(tmp_path, server)
    code = main(["judge-check", "--config", str(cfg), *args])
    out = capsys.readouterr()
    assert code == 0, out.err
    return json.loads((tmp_path / "out" / "judge_check.json").read_text()), out


def test_judge_that_prefers_longer_answers_does_not_beat_the_length_baseline(tmp_path, fake_openai, monkeypatch,
                                                                              capsys):
    data = labelled_file(tmp_path)
    rec, out = run_check(tmp_path, monkeypatch, capsys, fake_openai, scripted(by_length), "--data", str(data))
    lab = rec["labelled"]
    assert lab["pairs"] == 40 and lab["label_ties_left_out"] == 1
    assert lab["baselines"]["longer"]["accuracy"] == pytest.approx(0.75)
    assert lab["agreement"]["accuracy"] == pytest.approx(0.75)
    assert lab["p_longer"]["rate"] == 1.0
    assert not lab["beats_length_baseline"] and rec["trustworthy"] is False
    assert "does not beat the length baseline" in rec["verdict_text"]
    # Cohen's kappa beside agreement: this judge says what the length rule says, item by item
    from sklearn.metrics import cohen_kappa_score

    said = [it["verdict"] for it in lab["items"]]
    truth = [it["label"].upper() for it in lab["items"]]
    assert lab["agreement"]["kappa"] == pytest.approx(cohen_kappa_score(said, truth), abs=1e-4)
    assert lab["agreement"]["kappa"] == lab["baselines"]["longer"]["kappa"]
    assert lab["baselines"]["first"]["kappa"] == 0.0 and lab["baselines"]["first"]["accuracy"] is not None
    assert f"Cohen's kappa {lab['agreement']['kappa']:.2f}" in rec["verdict_text"]
    assert f"has 0.750 (kappa {lab['baselines']['longer']['kappa']:.2f})" in rec["verdict_text"]
    assert set(lab["agreement"]["verdicts"]) == {"raw", "weighted", "calibrated"}
    assert "NOT TRUSTWORTHY" in out.out
    # tokens and cost from the judge's usage: 40 pairs x 2 orders x (100 + 3) tokens at $1 / $2 per 1M
    assert lab["usage"]["requests"] == 80 and lab["usage"]["prompt_tokens"] == 8000
    assert lab["usage"]["cost_usd"] == pytest.approx((8000 * 1.0 + 240 * 2.0) / 1e6)
    assert set(rec) >= {"judge", "prompts", "trustworthy", "verdict_text", "labelled", "sanity", "created"}
    # a table a person reads: aligned columns, usage in words, no Python dict and no markup
    assert "{'" not in out.out and "|---" not in out.out
    head = next(x for x in out.out.splitlines() if x.startswith("who"))
    rows = out.out.splitlines()[out.out.splitlines().index(head):][:6]
    assert rows[1].startswith("-----") and rows[2].startswith("judge, parsed (ties half)")
    assert len({r.index("accuracy") if "accuracy" in r else None for r in rows[:1]}) == 1
    assert "usage: 80 requests (0 from the cache, 0 failed), 8,240 tokens, $0.0085" in out.out


def test_judge_that_always_picks_the_first_position_is_flagged(tmp_path, fake_openai, monkeypatch, capsys):
    data = labelled_file(tmp_path)
    rec, _ = run_check(tmp_path, monkeypatch, capsys, fake_openai, scripted(always_first), "--data", str(data))
    lab = rec["labelled"]
    assert lab["position"]["p_first"]["rate"] == 1.0
    assert lab["position"]["flip_rate"]["rate"] == 1.0
    assert lab["agreement"]["accuracy"] == 0.5  # every item a tie across the two orders
    assert lab["decides_by_position"] and rec["trustworthy"] is False
    assert "decides by position" in rec["verdict_text"]
    # agreement .5 but kappa 0: no better than chance, said in the verdict; calibrated for position,
    # every item is still a tie (the judge said "first" in both orders)
    assert lab["agreement"]["kappa"] == 0.0 and not lab["above_chance"]
    assert "but Cohen's kappa 0.00" in rec["verdict_text"] and "no better than chance" in rec["verdict_text"]
    cal = lab["agreement"]["verdicts"]["calibrated"]
    assert cal["ties"] == cal["n"] == 40
    assert lab["position_prior"]["method"] == "scores" and lab["position_prior"]["position_bias"] == 7.0  # "9 2"


def test_judge_that_knows_the_answer_passes(tmp_path, fake_openai, monkeypatch, capsys):
    data = labelled_file(tmp_path)
    rec, _ = run_check(tmp_path, monkeypatch, capsys, fake_openai, scripted(by_content), "--data", str(data))
    lab = rec["labelled"]
    assert lab["agreement"]["accuracy"] == 1.0 and lab["agreement"]["ci95"][0] > 0.75
    assert lab["position"]["flip_rate"]["rate"] == 0.0
    assert lab["p_longer"]["rate"] == pytest.approx(0.75)
    assert rec["trustworthy"] is True and rec["verdict_text"].startswith("trustworthy")
    assert lab["agreement"]["kappa"] == 1.0 and "and Cohen's kappa 1.00 (almost perfect" in rec["verdict_text"]


def test_labelled_limit_is_a_seeded_sample(tmp_path, fake_openai, monkeypatch, capsys):
    data = labelled_file(tmp_path)
    r1, _ = run_check(tmp_path, monkeypatch, capsys, fake_openai, scripted(by_content), "--data", str(data),
                      "--limit", "10", "--seed", "3")
    ids1 = [it["id"] for it in r1["labelled"]["items"]]
    r2, _ = run_check(tmp_path, monkeypatch, capsys, fake_openai, scripted(by_content), "--data", str(data),
                      "--limit", "10", "--seed", "3")
    r3, _ = run_check(tmp_path, monkeypatch, capsys, fake_openai, scripted(by_content), "--data", str(data),
                      "--limit", "10", "--seed", "4")
    assert len(ids1) == 10 and ids1 == [it["id"] for it in r2["labelled"]["items"]]
    assert ids1 != [it["id"] for it in r3["labelled"]["items"]]


# --- without labels ------------------------------------------------------------------------------
def _own_refs(prompt):
    """The references of the question shown in the prompt (not those of other questions)."""
    return [t.strip() for q, _, ts in TARGETS if q in prompt for t in ts]


def intact_battle(text, first, second):
    refs = _own_refs(text)
    return (9, 3) if first in refs and second not in refs else (3, 9) if second in refs and first not in refs \
        else (5, 5)


def intact_rating(text):
    answer = text
    for q, inp, _ in TARGETS:  # look for the reference in the answer, not in the question's own passage
        answer = answer.replace(q, "").replace(inp, "") if inp else answer.replace(q, "")
    return 5 if any(r in answer for r in _own_refs(text)) else 2


def random_battle(text, first, second):
    h = int(hashlib.sha256(text.encode()).hexdigest(), 16)
    return (1 + h % 10, 1 + (h // 10) % 10)


def random_rating(text):
    return 1 + int(hashlib.sha256(text.encode()).hexdigest(), 16) % 5


def test_label_free_judge_that_prefers_the_intact_text_passes(tmp_path, fake_openai, monkeypatch, capsys):
    rec, out = run_check(tmp_path, monkeypatch, capsys, fake_openai, scripted(intact_battle, intact_rating))
    san = rec["sanity"]
    assert rec["labelled"] is None
    assert set(san["by_corruption"]) == set(CORRUPTIONS)
    assert san["pooled"]["battle"]["preference"] == 1.0 and san["pooled"]["battle"]["n"] >= 12
    assert san["pooled"]["rating"]["preference"] == 1.0 and san["pooled"]["rating"]["mean_drop"] == pytest.approx(3.0)
    for kind, blk in san["by_corruption"].items():
        assert blk["pairs"] >= 1, kind
        assert set(blk["by_category"]) <= {"closed_qa", "summarization", "brainstorming"}
    # the intact text is shown first in about half of the pairs (seeded), so position cannot pass for knowledge
    firsts = [it["intact_first"] for it in san["items"]]
    assert 0 < sum(firsts) < len(firsts)
    assert rec["trustworthy"] is True and "Without labels" in out.out
    assert "{'" not in out.out and "|---" not in out.out
    assert re.search(r"^corruption +category +pairs +battle prefers intact", out.out, re.M)
    assert "usage: battle " in out.out and " requests (" in out.out
    # kappa against the side the intact text was shown on: a perfect judge has 1
    assert san["pooled"]["battle"]["kappa"] == 1.0 and san["pooled"]["battle_verdicts"]["raw"]["kappa"] == 1.0
    assert "Cohen's kappa against the side the intact text was shown on" in out.out


def test_label_free_judge_that_always_picks_the_first_position_has_kappa_zero(tmp_path, fake_openai, monkeypatch,
                                                                                capsys):
    rec, _ = run_check(tmp_path, monkeypatch, capsys, fake_openai, scripted(always_first, intact_rating))
    san = rec["sanity"]
    from sklearn.metrics import cohen_kappa_score

    said = [it["battle_verdict"] for it in san["items"]]
    sides = ["A" if it["intact_first"] else "B" for it in san["items"]]
    assert san["pooled"]["battle"]["kappa"] == pytest.approx(cohen_kappa_score(said, sides)) == 0.0
    assert san["pooled"]["battle_verdicts"]["calibrated"]["ties"] == san["pooled"]["battle_verdicts"]["calibrated"]["n"]


def test_label_free_random_judge_is_near_chance(tmp_path, fake_openai, monkeypatch, capsys):
    rec, _ = run_check(tmp_path, monkeypatch, capsys, fake_openai, scripted(random_battle, random_rating))
    san = rec["sanity"]
    assert san["pooled"]["battle"]["near_chance"] and san["pooled"]["rating"]["near_chance"]
    assert rec["trustworthy"] is False and "near chance" in rec["verdict_text"]


def test_label_free_judge_without_a_valid_battle_verdict_says_so(tmp_path, fake_openai, monkeypatch, capsys):
    def reply(rec):
        if A1 in rec.user_text:
            return Reply(content="Assistant 1 is better.")  # no score line: every battle order invalid
        return rating_reply(intact_rating(rec.user_text))
    rec, _ = run_check(tmp_path, monkeypatch, capsys, fake_openai, reply, "--limit", "1")
    battle = rec["sanity"]["pooled"]["battle"]
    assert battle["n"] == 0 and battle["invalid"] == rec["sanity"]["pairs"] == 4
    assert rec["trustworthy"] is False
    assert "battle: no valid verdict on the sanity pairs (all 4 invalid" in rec["verdict_text"]
    assert "battle near chance" not in rec["verdict_text"]


def test_label_free_limit_is_per_corruption_and_deterministic(tmp_path, fake_openai, monkeypatch, capsys):
    r1, _ = run_check(tmp_path, monkeypatch, capsys, fake_openai, scripted(intact_battle, intact_rating),
                      "--limit", "2", "--seed", "5")
    r2, _ = run_check(tmp_path, monkeypatch, capsys, fake_openai, scripted(intact_battle, intact_rating),
                      "--limit", "2", "--seed", "5")
    got = {k: (v["pairs"], v["not_applicable"]) for k, v in r1["sanity"]["by_corruption"].items()}
    assert got["truncate"][0] == got["other_answer"][0] == 2  # every reference has 3+ words and a neighbour
    assert all(n <= 2 for n, _ in got.values()) and all(n == 2 or skipped for n, skipped in got.values())
    assert [(i["id"], i["corrupted_text"]) for i in r1["sanity"]["items"]] == \
        [(i["id"], i["corrupted_text"]) for i in r2["sanity"]["items"]]


# --- the stored check seen by later runs ----------------------------------------------------------
def test_check_is_found_by_a_later_run_and_a_changed_prompt_is_not_checked(tmp_path, fake_openai, monkeypatch,
                                                                          capsys):
    data = labelled_file(tmp_path)
    cfg = config(tmp_path, fake_openai)
    rec, _ = run_check(tmp_path, monkeypatch, capsys, fake_openai, scripted(by_length), "--data", str(data), cfg=cfg)
    key = rec["key"]
    assert (tmp_path / "out" / "judge_checks" / f"{key}.json").exists()
    # a label-free check of the same judge is merged into the same record
    rec2, _ = run_check(tmp_path, monkeypatch, capsys, fake_openai, scripted(intact_battle, intact_rating),
                        "--limit", "1", cfg=cfg)
    assert rec2["key"] == key and rec2["labelled"] is not None and rec2["sanity"] is not None
    assert rec2["trustworthy"] is False  # the labelled part still fails

    fake_openai.reply_fn = scripted(intact_battle, intact_rating)
    assert main(["--config", str(cfg), "--only", "GPT", "--no-charts"]) == 0
    err = capsys.readouterr().err
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["judge_check"]["checked"] and manifest["judge_check"]["trustworthy"] is False
    assert manifest["judge_check"]["key"] == key
    res = json.loads((tmp_path / "out" / "results" / "model_a.json").read_text())
    gpt = {k: v for k, v in res["signatures"].items() if k.startswith("GPT/")}
    assert gpt and all(v["judge_check"]["trustworthy"] is False for v in gpt.values())
    assert "does not beat the length baseline" in next(iter(gpt.values()))["judge_check"]["verdict"]
    battle = json.loads((tmp_path / "out" / "battles" / "model_a__vs__model_b.json").read_text())
    assert battle["signature"]["judge_check"]["key"] == key
    tail = err.strip().splitlines()[-2:]
    assert "WARNING" in tail[0] and "judge check: NOT trustworthy" in tail[1]

    # the same judge with an edited battle prompt: another key, "not checked"
    prompt = json.loads((REPO / "prompts" / "battle_prompt_en.json").read_text())
    prompt["prompt"] = prompt["prompt"].replace("helpfulness", "usefulness", 1) + " "
    (tmp_path / "battle.json").write_text(json.dumps(prompt))
    cfg2 = config(tmp_path, fake_openai, prompts={"battle": str(tmp_path / "battle.json")})
    assert main(["--config", str(cfg2), "--only", "GPT", "--no-charts"]) == 0
    err = capsys.readouterr().err
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["judge_check"]["checked"] is False and manifest["judge_check"]["key"] != key
    assert "not checked" in manifest["judge_check"]["verdict"] and "not checked" in err.splitlines()[-1]


def test_run_with_judge_check_checks_first_and_shows_the_verdict(tmp_path, fake_openai, monkeypatch, capsys):
    """`eval.py --config A B --judge-check N`: the label-free check of each config that lists GPT metrics
    runs in the run's process before its run, and that run's manifest and closing lines show it."""
    monkeypatch.setenv("GPT_KEY", "sk-test")
    fake_openai.reply_fn = scripted(random_battle, random_rating)
    cfg = config(tmp_path, fake_openai)
    metrics_only = tmp_path / "m.json"
    metrics_only.write_text(json.dumps({**json.loads(cfg.read_text()), "save_path": str(tmp_path / "m"),
                                        "category": {"closed_qa": {"Metrics": ["BLEU"]}}}))
    assert main(["--config", str(cfg), str(metrics_only), "--judge-check", "1", "--no-charts"]) == 0
    out = capsys.readouterr()
    rec = json.loads((tmp_path / "out" / "judge_check.json").read_text())
    assert rec["sanity"]["limit_per_corruption"] == 1 and rec["sanity"]["pairs"] == 4
    assert "Without labels: 4 sanity pairs" in out.out and "NOT TRUSTWORTHY" in out.out
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["judge_check"]["checked"] and manifest["judge_check"]["key"] == rec["key"]
    assert manifest["judge_check"]["trustworthy"] is False
    assert "lists no GPT metrics; nothing to check" in out.err
    assert not (tmp_path / "m" / "judge_check.json").exists()
    assert main(["--config", str(cfg), "--judge-check", "0"]) == 2
    assert "--judge-check: expected a positive number" in capsys.readouterr().err


def test_bad_pairwise_file_is_a_clear_error(tmp_path, fake_openai, monkeypatch, capsys):
    monkeypatch.setenv("GPT_KEY", "sk-test")
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"instruction": "q", "response_a": "x", "response_b": "y", "label": "a"}) + "\n"
                   + json.dumps({"instruction": "q", "response_a": "x", "response_b": "y", "label": "A+"}) + "\n")
    code = main(["judge-check", "--config", str(config(tmp_path, fake_openai)), "--data", str(bad)])
    err = capsys.readouterr().err
    assert code == 2 and "bad.jsonl: line 2" in err and "label" in err and "Traceback" not in err
    assert fake_openai.chat_calls == 0


# --- corruptions on constructed text --------------------------------------------------------------
TEXT = ("Marie Curie was born in Warsaw in 1867. She moved to Paris to study physics. "
        "Together with Pierre Curie she discovered polonium and radium. She won 2 Nobel Prizes.")


def test_corruptions_change_the_text_as_stated_and_are_seeded():
    sents = split_sentences(TEXT)
    assert len(sents) == 4
    shuffled, _ = corrupt(TEXT, "shuffle", seed=1, key="k")
    assert shuffled != TEXT and sorted(split_sentences(shuffled)) == sorted(sents)
    cut, _ = corrupt(TEXT, "truncate", seed=1, key="k")
    assert TEXT.startswith(cut) and len(cut.split()) == len(TEXT.split()) // 3
    other, _ = corrupt(TEXT, "other_answer", seed=1, key="k", others=["Water boils at 100 C.", TEXT])
    assert other == "Water boils at 100 C."
    swapped, note = corrupt(TEXT, "swap", seed=1, key="k")
    assert swapped != TEXT and note.startswith("number")
    diff = [(a, b) for a, b in zip(re.findall(r"\d+", TEXT), re.findall(r"\d+", swapped)) if a != b]
    assert len(diff) == 1 and swapped.split() != TEXT.split() and len(swapped.split()) == len(TEXT.split())
    # no numbers: a named entity is replaced by one from another text of the category
    ent, note = corrupt("The report was written by Ada Lovelace in London.", "swap", seed=0, key="e",
                        others=["Alan Turing worked at Bletchley Park."])
    assert note.startswith("entity") and ent != "The report was written by Ada Lovelace in London."
    assert any(n in ent for n in ("Alan Turing", "Bletchley Park"))
    # deterministic by seed; another seed gives another draw for at least one of them
    for kind in CORRUPTIONS:
        assert corrupt(TEXT, kind, seed=1, key="k", others=["a b c d", "e f g h"]) == \
            corrupt(TEXT, kind, seed=1, key="k", others=["a b c d", "e f g h"])
    assert any(corrupt(TEXT, k, seed=1, key="k") != corrupt(TEXT, k, seed=2, key="k") for k in ("shuffle", "swap"))
    # not applicable: one sentence to shuffle, two words to truncate, nothing to swap, no other answer
    assert corrupt("Just one sentence here.", "shuffle") is None
    clauses, note = corrupt("Bring water, a map, and a torch.", "shuffle", seed=0, key="c")
    assert note.startswith("clauses") and sorted(clauses.split()) == sorted("Bring water, a map, and a torch.".split())
    assert corrupt("Two words", "truncate") is None
    assert corrupt("nothing to swap here", "swap") is None
    assert corrupt(TEXT, "other_answer", others=[TEXT]) is None
    # Chinese: sentences end in 。！？, numbers inside CJK text are found
    assert corrupt("我喜欢北京。北京很大！有2000万人。", "swap", language="cn")[0] != "我喜欢北京。北京很大！有2000万人。"


def test_near_chance_rule():
    assert near_chance(5, 10)  # 50%
    assert near_chance(11, 20)  # 55%: below 0.6
    assert near_chance(3, 4)  # 75%, but the interval includes 0.5
    assert not near_chance(18, 20)
    assert near_chance(0, 0)
