"""The GPT family through the command line, against a fake OpenAI-compatible server."""

import json
import math
from pathlib import Path

import numpy as np
import pytest

from evaluate.cli import main

try:
    from tests.fake_openai_server import Reply, fake_openai  # noqa: F401
except ImportError:
    from fake_openai_server import Reply, fake_openai  # noqa: F401

REPO = Path(__file__).resolve().parents[1]
EN = REPO / "examples" / "en"
KEY = "sk-gpt-family-NEVER-WRITTEN-77"
A = {str(r["id"]): r["output"] for r in json.loads((EN / "answers_model_a.json").read_text())}


def config(tmp_path, server, categories=None, **extra):
    cfg = {"language": "en", "save_path": str(tmp_path / "out"),
           "category": categories or {"closed_qa": {"GPT": ["relevance", "correctness"]},
                                      "classification": {"GPT": ["correctness"]}},
           "answers": [{"name": "model_a", "path": str(EN / "answers_model_a.json")},
                       {"name": "model_b", "path": str(EN / "answers_model_b.json")}],
           "target_file": str(EN / "targets.json"),
           "judge": {"backend": "openai", "model": "fake-judge", "base_url": server.url, "api_key_env": "GPT_KEY",
                     "max_retries": 1, "timeout": 5},
           **extra}
    path = tmp_path / "c.json"
    path.write_text(json.dumps(cfg))
    return path


def judge(rec):
    text = rec.user_text
    if "[Assistant 1's answer]" in text:
        # battle: model_a's answer wins in whichever position it is shown
        first = text.split("[Assistant 1's answer]", 1)[1].split("[Assistant 2's answer]", 1)[0]
        first_is_a = any(a and a in first for a in A.values())
        return Reply(content="9 2\nThe first answer is better." if first_is_a else "2 9\nThe second is better.")
    # rating: a good answer gets mostly 5s, a weak one mostly 2s
    good = any(a and a in text for a in A.values())
    probs = {"5": 0.7, "4": 0.3} if good else {"2": 0.6, "1": 0.4}
    return Reply(content=max(probs, key=probs.get), top_logprobs=[{k: math.log(v) for k, v in probs.items()}])


def test_rating_and_battle_end_to_end(tmp_path, fake_openai, monkeypatch, capsys):
    monkeypatch.setenv("GPT_KEY", KEY)
    fake_openai.reply_fn = judge
    cfg = config(tmp_path, fake_openai, judge={"backend": "openai", "model": "fake-judge", "base_url": fake_openai.url,
                                               "api_key_env": "GPT_KEY", "mode": "logprobs", "max_retries": 1})
    assert main(["--config", str(cfg)]) == 0, capsys.readouterr().err
    out = tmp_path / "out"
    ra = json.loads((out / "results" / "model_a.json").read_text())
    rb = json.loads((out / "results" / "model_b.json").read_text())
    qa_a = ra["aggregates"]["by_category"]["closed_qa"]["GPT/relevance"]
    assert qa_a["mean"] == pytest.approx(0.7 * 5 + 0.3 * 4)  # G-Eval expectation over the score tokens
    qa_b = rb["aggregates"]["by_category"]["closed_qa"]["GPT/relevance"]
    assert qa_b["mean"] < 2.0
    assert ra["signatures"]["GPT/relevance"]["mode"] == "logprobs"
    battle = json.loads((out / "battles" / "model_a__vs__model_b.json").read_text())
    n = 5  # closed_qa (2) + classification (3)
    assert battle["summary"]["wins"] == n and battle["summary"]["losses"] == 0
    assert battle["summary"]["flips"] == 0
    assert set(battle["by_category"]) == {"closed_qa", "classification"}
    assert (out / "charts" / "GPT" / "battle_model_a__vs__model_b.png").exists()
    calls = fake_openai.chat_calls
    assert calls == 2 * (2 * 2 + 3) + 2 * n  # ratings for both models + battles in both orders
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["usage"]["GPT"]["cache_misses"] > 0
    # a re-run is served from the cache: no call is paid twice
    assert main(["--config", str(cfg)]) == 0
    assert fake_openai.chat_calls == calls
    # the key never reaches a file
    for f in out.rglob("*"):
        if f.is_file():
            assert KEY.encode() not in f.read_bytes(), f


def test_unparseable_replies_are_invalid_not_scores(tmp_path, fake_openai, monkeypatch):
    monkeypatch.setenv("GPT_KEY", KEY)
    fake_openai.reply_fn = lambda rec: Reply(content="I would give it a score of 10 out of 5!",
                                             top_logprobs=[{"I": -0.1, "The": -2.5}])
    cfg = config(tmp_path, fake_openai, categories={"closed_qa": {"GPT": ["relevance"]}}, battle=False,
                 judge={"backend": "openai", "model": "fake-judge", "base_url": fake_openai.url,
                        "api_key_env": "GPT_KEY", "mode": "generate", "max_retries": 1})
    assert main(["--config", str(cfg)]) == 3  # every score invalid: the run failed, not "ok"
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["status"] == "finished with errors" and manifest["invalid"]["GPT"] == {"valid": 0, "invalid": 4}
    assert "4 of 4 scores invalid" in manifest["errors"][0]["error"]
    ra = json.loads((tmp_path / "out" / "results" / "model_a.json").read_text())
    agg = ra["aggregates"]["by_category"]["closed_qa"]["GPT/relevance"]
    assert agg["mean"] is None and agg["n"] == 0 and agg["invalid"] == 2
    item = next(i for i in ra["items"] if i["category"] == "closed_qa")
    assert "score of 10" in item["invalid"]["GPT/relevance"]["raw"]
    assert "GPT/relevance" not in item["scores"]


def test_server_errors_give_invalid_items_and_are_not_cached(tmp_path, fake_openai, monkeypatch):
    monkeypatch.setenv("GPT_KEY", KEY)
    fake_openai.reply_fn = lambda rec: Reply.server_error(500)
    cfg = config(tmp_path, fake_openai, categories={"classification": {"GPT": ["correctness"]}}, battle=False)
    assert main(["--config", str(cfg)]) == 3  # every call failed: exit 3, never a silent success
    ra = json.loads((tmp_path / "out" / "results" / "model_a.json").read_text())
    assert ra["aggregates"]["by_category"]["classification"]["GPT/correctness"]["invalid"] == 3
    fake_openai.reply_fn = judge
    assert main(["--config", str(cfg)]) == 0  # the failures were not cached: asked again, now answered
    ra = json.loads((tmp_path / "out" / "results" / "model_a.json").read_text())
    agg = ra["aggregates"]["by_category"]["classification"]["GPT/correctness"]
    assert agg["invalid"] == 0 and agg["n"] == 3


def test_colossalai_prompt_files_and_flags(colossal, tmp_path, fake_openai, monkeypatch):
    fake_openai.reply_fn = judge
    prompt = colossal / "prompt"
    code = main(["--config_file", str(colossal / "config" / "config_en.json"),
                 "--battle_prompt_file", str(prompt / "battle_prompt" / "battle_prompt_en.json"),
                 "--gpt_evaluation_prompt_file", str(prompt / "evaluation_prompt" / "evaluation_prompt_en.json"),
                 "--target_file", str(EN / "targets.json"),
                 "--answer_file_list", str(EN / "answers_model_a.json"), str(EN / "answers_model_b.json"),
                 "--model_name_list", "a", "b", "--gpt_model", "fake-judge", "--openai_key", KEY,
                 "--save_path", str(tmp_path / "c"), "--only", "GPT", "--dry-run"])
    assert code == 0
    # ColossalAI's config asks `reasonableness` for logical_reasoning, which its prompt file does not
    # define (the category falls back to `general`): an error only when answers have that category.
    recs = json.loads((EN / "answers_model_a.json").read_text())
    recs[0]["category"] = "logical_reasoning"
    (tmp_path / "lr.json").write_text(json.dumps(recs))
    tg = json.loads((EN / "targets.json").read_text())
    tg[0]["category"] = "logical_reasoning"
    (tmp_path / "tg.json").write_text(json.dumps(tg))
    code = main(["--config_file", str(colossal / "config" / "config_en.json"),
                 "--gpt_evaluation_prompt_file", str(prompt / "evaluation_prompt" / "evaluation_prompt_en.json"),
                 "--target_file", str(tmp_path / "tg.json"), "--answer_file_list", str(tmp_path / "lr.json"),
                 "--save_path", str(tmp_path / "c2"), "--only", "GPT", "--openai_key", KEY, "--dry-run"])
    assert code == 2


def test_battle_chart_draws_weighted_verdicts_beside_parsed(tmp_path):
    """All parsed verdicts tie (position bias) while the weighted ones separate the models: the
    chart must show both, or a reader sees only grey ties."""
    import matplotlib.image as mpimg

    from evaluate.report.charts import write_battle_charts
    from evaluate.core.io import atomic_write_json
    from evaluate.judges.battle_summary import by_category
    from evaluate.judges.battle import BattleItem, BattleResult, OrderJudgment

    def item(i, weighted):
        orders = [OrderJudgment("AB", "A", (8, 7), "8 7", weighted=weighted[0]),
                  OrderJudgment("BA", "B", (7, 8), "8 7", weighted=weighted[1])]
        return BattleItem(id=str(i), verdict="tie", orders=orders, inconsistent=True, flipped=True, category="qa")

    with_w = BattleResult("a", "b", [item(i, [(7.9, 7.1), (7.2, 7.6)]) for i in range(3)])
    assert with_w.summary()["weighted"]["wins"] == 3 and with_w.summary()["ties"] == 3
    without = BattleResult("c", "d", [item(i, [None, None]) for i in range(3)])
    for res in (with_w, without):  # charts are drawn from the battle files, as a run writes them
        atomic_write_json(tmp_path / "battles" / f"{res.model_a}__vs__{res.model_b}.json",
                          {**res.to_dict(), "by_category": by_category(res)})
    write_battle_charts(tmp_path)
    two = mpimg.imread(tmp_path / "charts" / "GPT" / "battle_a__vs__b.png")
    one = mpimg.imread(tmp_path / "charts" / "GPT" / "battle_c__vs__d.png")
    # parsed, weighted and position-calibrated panels beside parsed and calibrated ones, same height
    assert two.shape[0] == one.shape[0] and 2 * two.shape[1] == 3 * one.shape[1]
    # the judge said "8 7" for the first-shown answer in both orders: calibrated for position (in points:
    # a lean of 1, no preference), every item is a tie
    assert with_w.summary()["calibrated"]["ties"] == 3
    # the weighted panel's bars are model a's colour (green wins); the parsed-only chart has
    # green only in its legend patch
    green = np.array([0x2c, 0xa0, 0x2c]) / 255

    def green_pixels(img):
        return int((np.abs(img[..., :3] - green).max(axis=-1) < 0.02).sum())

    assert green_pixels(two) > 20 * green_pixels(one) > 0
