"""The judge check and meta-eval of a panel as a whole: two scripted judges on the real fake OpenAI
server (weights 2 and 1), one that tells an intact reference from its corrupted copy (or prefers the
longer answer) and one that always prefers the first-shown answer. Each judge is checked on its own,
then the panel on the same pairs from the cache those checks filled; the panel's preference, rating
drop, accuracy, correlations and the judges' Fleiss' kappa are checked against values computed by
hand here (scipy for Spearman), and a run takes the panel's own verdict."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from evaluate.cli import main

try:
    from tests.fake_openai_server import FakeOpenAIServer, RecordedRequest, Reply
    from tests.test_panels import fleiss
except ImportError:  # run from inside tests/
    from fake_openai_server import FakeOpenAIServer, RecordedRequest, Reply
    from test_panels import fleiss

# multi-sentence references with numbers and names, so every corruption applies
REFERENCES = [
    "The bridge opened to traffic in 1937. Joseph Strauss led its design. It is 2737 metres long.",
    "The library opened in 1895 with 300 books. Andrew Carnegie paid for the building. It now lends 9000 books a year.",
    "The river is 410 kilometres long. It rises near Grenoble in the Alps. Salmon returned to it in 2004.",
    "The school has 620 pupils. Maria Lopez became its head in 2019. Lessons start at 8 in the morning.",
]
N = len(REFERENCES)


def _block(text: str, start: str, end: str) -> str:
    m = re.search(re.escape(start) + r"\n(.*?)\n" + re.escape(end), text, re.S)
    assert m, text[:300]
    return m.group(1)


def _intact(text: str, answer: str) -> bool:
    """Whether `answer` is the reference of the question in `text` (another question's is not)."""
    i = int(re.search(r"Tell me about place (\d+)\.", text).group(1))
    return answer == REFERENCES[i]


def _good(rec: RecordedRequest) -> Reply:
    """Prefers the intact text in a battle (either order); rates an intact text 5, anything else 1."""
    text = rec.user_text
    if "[Assistant 1's answer]" in text:
        first = _block(text, "[Assistant 1's answer]", "[End of Assistant 1's answer]")
        return Reply(content="8 3" if _intact(text, first) else "3 8")
    return Reply(content="5" if _intact(text, _block(text, "[Answer]", "[End of answer]")) else "1")


def _first(rec: RecordedRequest) -> Reply:
    """Always the first-shown answer; every text rated 3."""
    return Reply(content="8 3" if "[Assistant 1's answer]" in rec.user_text else "3")


@pytest.fixture(autouse=True)
def _key(monkeypatch):
    monkeypatch.setenv("PANEL_KEY", "sk-panel-test")


@pytest.fixture
def servers():
    with FakeOpenAIServer(reply_fn=_good, model="judge-good") as good, \
            FakeOpenAIServer(reply_fn=_first, model="judge-first") as first:
        yield good, first


def _config(tmp: Path, servers) -> Path:
    for m in ("ma", "mb"):
        rows = [{"id": i, "category": "open_qa", "instruction": f"Tell me about place {i}.", "input": "",
                 "output": f"{m}'s answer about place {i}.", "target": REFERENCES[i]} for i in range(N)]
        (tmp / f"{m}.json").write_text(json.dumps(rows))

    def judge(name: str, server: FakeOpenAIServer) -> dict:
        return {"name": name, "backend": "openai", "model": server.model, "base_url": server.url,
                "api_key_env": "PANEL_KEY", "mode": "generate", "max_retries": 0, "timeout": 10}

    cfg = {"answers": [{"name": m, "path": str(tmp / f"{m}.json")} for m in ("ma", "mb")],
           "save_path": str(tmp / "out"), "category": {"open_qa": {"GPT": ["correctness"]}},
           "judge": [judge("good", servers[0]), judge("first", servers[1])],
           "panel": {"weights": {"good": 2, "first": 1}}}
    path = tmp / "panel.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def _records(save: Path) -> dict[str, dict]:
    """The stored checks by what they are of: a judge's model name, or "panel"."""
    out = {}
    for f in (save / "judge_checks").glob("*.json"):
        rec = json.loads(f.read_text())
        battle = rec["judge"]["battle"]
        out["panel" if "panel" in battle else battle["judge"]["model"]] = rec
    return out


def test_the_panel_is_checked_as_a_whole_on_its_judges_cached_replies(tmp_path, servers, capsys):
    good, first = servers
    cfg = _config(tmp_path, servers)
    code = main(["judge-check", "--config", str(cfg), "--limit", "4", "--output", str(tmp_path / "panel_check.json")])
    out = capsys.readouterr()
    assert code == 0, out.err[-3000:]
    assert out.out.index("== judge check of the panel's judge first ==") < out.out.index(
        "== judge check of the panel as a whole ==")
    assert "judge: a panel of 2 judges: good (openai judge-good), first (openai judge-first)" in out.out

    recs = _records(tmp_path / "out")
    assert set(recs) == {"judge-good", "judge-first", "panel"}  # one stored check per judge, one for the panel
    whole, good_rec, first_rec = recs["panel"], recs["judge-good"], recs["judge-first"]
    assert json.loads((tmp_path / "panel_check.json").read_text())["key"] == whole["key"]  # --output: the panel's
    assert len({whole["key"], good_rec["key"], first_rec["key"]}) == 3

    # each judge on its own: good prefers every intact text; first ties every item (its orders disagree)
    n = good_rec["sanity"]["pairs"]
    assert n >= 4 and whole["sanity"]["pairs"] == first_rec["sanity"]["pairs"] == n
    assert good_rec["sanity"]["pooled"]["battle"]["preference"] == 1.0 and good_rec["trustworthy"] is True
    assert first_rec["sanity"]["pooled"]["battle"]["preference"] == 0.5 and first_rec["trustworthy"] is False

    # the panel: good's weight 2 outvotes first's tie; ratings are the weighted means, by hand
    pooled = whole["sanity"]["pooled"]
    assert pooled["battle"]["preference"] == 1.0 and pooled["battle"]["n"] == n
    assert pooled["rating"]["intact_mean"] == pytest.approx((2 * 5 + 3) / 3, abs=1e-4)
    assert pooled["rating"]["corrupted_mean"] == pytest.approx((2 * 1 + 3) / 3, abs=1e-4)
    assert pooled["rating"]["mean_drop"] == pytest.approx(8 / 3, abs=1e-4)
    assert whole["trustworthy"] is True  # a panel can be worth more than its weakest judge

    # the judges' agreement on the pairs: Fleiss' kappa from its definition over their item verdicts
    rows = [[g["battle_verdict"], f["battle_verdict"]]
            for g, f in zip(good_rec["sanity"]["items"], first_rec["sanity"]["items"])]
    assert {r[1] for r in rows} == {"tie"} and {r[0] for r in rows} <= {"A", "B"}
    agreement = pooled["panel"]["battle_agreement"]
    assert agreement["fleiss_kappa"] == pytest.approx(fleiss(rows), abs=1e-9) and agreement["fleiss_kappa"] < 0
    assert [it["battle_verdict"] for it in whole["sanity"]["items"]] == [r[0] for r in rows]
    assert "the panel's judges on these pairs: Fleiss' kappa" in out.out

    # the panel asked nothing new: its requests all came from the cache the judges' checks filled
    for part in ("battle", "rating"):
        usage = whole["sanity"]["usage"][part]
        assert usage["requests"] > 0 and usage["cache_hits"] == usage["requests"], usage
        assert set(usage["judges"]) == {"good", "first"}
        assert usage["requests"] == sum(u["requests"] for u in usage["judges"].values())
    asked = {name: sum(rec["sanity"]["usage"][p]["cache_misses"] for p in ("battle", "rating"))
             for name, rec in (("good", good_rec), ("first", first_rec))}
    assert good.chat_calls == asked["good"] and first.chat_calls == asked["first"]

    # a run of the panel takes the panel's own check as the verdict on its scores, and names each judge's
    assert main(["--config", str(cfg), "--no-charts"]) == 0
    run_out = capsys.readouterr()
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    check = manifest["judge_check"]
    assert check["checked"] is True and check["trustworthy"] is True and check["key"] == whole["key"]
    assert check["verdict"].startswith("the panel as a whole: ") and "; judge first: NOT trustworthy" in check[
        "verdict"], check["verdict"]
    assert set(check["panel"]) == {"good", "first"}
    assert "WARNING: the GPT scores" not in run_out.err
    assert not [k for k in manifest["usage"] if k.startswith("judge-check")]  # no empty lookup entries


# ------------------------------------------------------------------ meta-eval of a panel against human labels
def _by_length(rec: RecordedRequest) -> Reply:
    """Prefers the longer answer; rates an answer by its length (1-5)."""
    text = rec.user_text
    if "[Assistant 1's answer]" in text:
        a = _block(text, "[Assistant 1's answer]", "[End of Assistant 1's answer]")
        b = _block(text, "[Assistant 2's answer]", "[End of Assistant 2's answer]")
        return Reply(content="8 3" if len(a) > len(b) else "3 8")
    return Reply(content=str(_length_rating(_block(text, "[Answer]", "[End of answer]"))))


def _length_rating(answer: str) -> int:
    return min(5, 1 + len(answer) // 6)


def _by_question(rec: RecordedRequest) -> Reply:
    """Always the first-shown answer; rates by the question's number alone (blind to the answer)."""
    text = rec.user_text
    if "[Assistant 1's answer]" in text:
        return Reply(content="8 3")
    return Reply(content=str(_question_rating(text)))


def _question_rating(text: str) -> int:
    return int(re.search(r"Question number (\d+)\.", text).group(1)) % 5 + 1


def test_meta_eval_measures_the_panel_and_each_judge(tmp_path, capsys):
    from scipy.stats import spearmanr

    with FakeOpenAIServer(reply_fn=_by_length, model="judge-good") as good, \
            FakeOpenAIServer(reply_fn=_by_question, model="judge-first") as first:
        cfg = _config(tmp_path, (good, first))
        # pairwise: the longer answer is the labelled one on 7 of 10 pairs
        pairs = [{"instruction": f"Question number {i}.", "input": "", "response_a": "a" * (3 + i),
                  "response_b": "b" * (12 - i), "label": ("a" if 3 + i > 12 - i else "b") if i < 7 else
                  ("b" if 3 + i > 12 - i else "a")} for i in range(10)]
        (tmp_path / "pairs.jsonl").write_text("\n".join(json.dumps(r) for r in pairs))
        code = main(["meta-eval", "--config", str(cfg), "--data", str(tmp_path / "pairs.jsonl"),
                     "--evaluator", "GPT:battle", "--output", str(tmp_path / "pairwise.json")])
        out = capsys.readouterr()
        assert code == 0, out.err[-3000:]
        report = json.loads((tmp_path / "pairwise.json").read_text())
        acc = report["pairwise"]
        assert acc["GPT/battle@good"]["accuracy"] == pytest.approx(0.7)  # right where the longer one is labelled
        assert acc["GPT/battle@first"]["accuracy"] == 0.5 and acc["GPT/battle@first"]["predicted_ties"] == 10
        assert acc["GPT/battle"]["accuracy"] == pytest.approx(0.7)  # good's double weight carries the vote
        rows = [[g["verdict"], f["verdict"]] for g, f in zip(acc["GPT/battle@good"]["items"],
                                                             acc["GPT/battle@first"]["items"])]
        assert report["panel"]["judges"] == ["good", "first"]
        assert report["panel"]["battle_agreement"]["fleiss_kappa"] == pytest.approx(fleiss(rows), abs=1e-9)
        assert "| GPT/battle@good | 0.700 |" in out.out and "panel of 2 judges (good, first)" in out.out

        # absolute: each judge's ratings and the panel's weighted mean, correlated with the human scores
        answers = ["x" * (4 * i + 1) for i in range(12)]
        human = [1, 2, 2, 3, 1, 4, 3, 5, 4, 2, 5, 3]
        (tmp_path / "abs.jsonl").write_text("\n".join(json.dumps(
            {"instruction": f"Question number {i}.", "input": "", "output": answers[i], "references": ["r"],
             "human": {"quality": human[i]}}) for i in range(12)))
        code = main(["meta-eval", "--config", str(cfg), "--data", str(tmp_path / "abs.jsonl"),
                     "--evaluator", "GPT:correctness", "--output", str(tmp_path / "absolute.json")])
        assert code == 0, capsys.readouterr().err[-3000:]
    corr = json.loads((tmp_path / "absolute.json").read_text())["correlations"]
    g = [_length_rating(a) for a in answers]
    q = [i % 5 + 1 for i in range(12)]
    panel = [(2 * a + b) / 3 for a, b in zip(g, q)]
    for key, values in (("GPT/correctness@good", g), ("GPT/correctness@first", q), ("GPT/correctness", panel)):
        assert corr[key]["quality"]["dataset"]["spearman"] == pytest.approx(spearmanr(values, human)[0], abs=1e-9), key


def test_an_unchecked_panel_fails_the_judge_gate_saying_how_to_check_it(tmp_path, servers, capsys):
    cfg = _config(tmp_path, servers)
    code = main(["--config", str(cfg), "--no-charts", "--fail-on-untrusted-judge"])
    err = capsys.readouterr().err
    assert code != 0, err
    flat = " ".join(err.split())
    assert "each judge of the panel is checked, then the panel as a whole, whose check decides" in flat, err[-2000:]
    assert main(["judge-check", "--config", str(cfg), "--limit", "4"]) == 0  # good outvotes first: the panel passes
    capsys.readouterr()
    assert main(["--config", str(cfg), "--no-charts", "--fail-on-untrusted-judge"]) == 0
