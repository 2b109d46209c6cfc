"""Meta-evaluation: correlation levels on hand-made data, pairwise accuracy, the published ROUGE table."""

import json
import math

import numpy as np
import pytest
from scipy import stats

from evaluate.metaeval.run import correlations, format_report, pairwise_accuracy, run_metaeval

try:
    from tests.fake_openai_server import Reply, fake_openai  # noqa: F401
except ImportError:
    from fake_openai_server import Reply, fake_openai  # noqa: F401


def rows_for(doc_scores):
    rows = []
    for doc, systems in doc_scores.items():
        for sys_id, h in systems.items():
            rows.append({"doc_id": doc, "system_id": sys_id, "human": {"q": h}})
    return rows


def test_summary_level_skips_constant_groups_and_averages():
    rows = rows_for({"d1": {"s1": 1, "s2": 2, "s3": 3}, "d2": {"s1": 3, "s2": 1, "s3": 2},
                     "d3": {"s1": 2, "s2": 2, "s3": 2}})  # d3: human constant -> skipped
    scores = [0.1, 0.2, 0.3, 0.1, 0.2, 0.3, 0.5, 0.1, 0.9]
    res = correlations(rows, scores, "q")
    d1 = stats.spearmanr([0.1, 0.2, 0.3], [1, 2, 3]).statistic
    d2 = stats.spearmanr([0.1, 0.2, 0.3], [3, 1, 2]).statistic
    assert res["summary"]["spearman"] == pytest.approx((d1 + d2) / 2)
    assert res["summary"]["groups"] == 2 and res["summary"]["skipped"] == 1
    # system level: means per system
    xs = [np.mean([0.1, 0.1, 0.5]), np.mean([0.2, 0.2, 0.1]), np.mean([0.3, 0.3, 0.9])]
    ys = [2, 5 / 3, 7 / 3]
    assert res["system"]["pearson"] == pytest.approx(stats.pearsonr(xs, ys).statistic)
    assert res["dataset"]["kendall"] == pytest.approx(stats.kendalltau(scores, [r["human"]["q"] for r in rows]).statistic)


def test_invalid_scores_are_left_out():
    rows = rows_for({"d1": {"s1": 1, "s2": 2, "s3": 3, "s4": 4}})
    res = correlations(rows, [0.1, None, 0.3, 0.4], "q")
    assert res["n"] == 3
    assert res["summary"]["spearman"] == pytest.approx(1.0)


def test_pairwise_accuracy_counts_ties_half_and_skips_label_ties():
    rows = [{"label": "a"}, {"label": "b"}, {"label": "a"}, {"label": "tie"}, {"label": "b"}]
    res = pairwise_accuracy(rows, [2, 1, 1, 5, None], [1, 2, 1, 0, 3])
    assert res["n"] == 3 and res["right"] == 2 and res["predicted_ties"] == 1 and res["invalid"] == 1
    assert res["accuracy"] == pytest.approx(2.5 / 3)
    # kappa of the picks A, B, tie against a, b, a (the invalid pick left out): p_o = 2/3,
    # p_e = 1/3 * 2/3 + 1/3 * 1/3 = 1/3, kappa = (2/3 - 1/3) / (2/3) = .5
    assert res["kappa"] == pytest.approx(0.5) and res["agreement"]["no_verdict"] == 1


def test_length_baseline_on_hhh_matches_sources_md(shared):
    rep = run_metaeval(shared / "data" / "metaeval" / "hhh_alignment.jsonl", ["Length"])
    acc = rep["pairwise"]["baseline/Length"]
    # SOURCES.md: "pick the longer response" is right on 62.9% of HHH pairs (by characters or words)
    assert acc["n"] == 221
    assert acc["accuracy"] == pytest.approx(0.629, abs=0.02)


def test_rouge_reproduces_the_published_summeval_table(shared):
    """SOURCES.md: summary-level Spearman of ROUGE F1 (Porter stemmer, mean over the 11 references)."""
    rep = run_metaeval(shared / "data" / "metaeval" / "summeval.jsonl", ["ROUGE"],
                       options={"ROUGE": {"multi_ref": "mean"}})
    table = {"Metrics/ROUGE-1": (.169, .160, .116, .328), "Metrics/ROUGE-2": (.184, .187, .159, .290),
             "Metrics/ROUGE-Lsum": (.130, .115, .106, .311)}
    for key, expected in table.items():
        got = [rep["correlations"][key][d]["summary"]["spearman"]
               for d in ("coherence", "consistency", "fluency", "relevance")]
        assert got == pytest.approx(expected, abs=0.005), key


def test_battle_accuracy_against_labels_with_a_fake_judge(tmp_path, fake_openai, monkeypatch):
    """GPT:battle on a pairwise file: label ties are dropped before any call; a judge that prefers
    GOOD in either position is right both ways; a position-biased verdict becomes a tie (half
    credit, counted as a flip); an unparseable reply is invalid and left out of the accuracy."""
    rows = [
        {"id": "p1", "instruction": "q1", "response_a": "GOOD one", "response_b": "BAD one", "label": "a"},
        {"id": "p2", "instruction": "q2", "response_a": "BAD two", "response_b": "GOOD two", "label": "b"},
        {"id": "p3", "instruction": "BIASED q3", "response_a": "GOOD three", "response_b": "BAD three", "label": "a"},
        {"id": "p4", "instruction": "q4", "response_a": "GOOD four", "response_b": "BAD four", "label": "b"},
        {"id": "p5", "instruction": "q5", "response_a": "x", "response_b": "y", "label": "tie"},
        {"id": "p6", "instruction": "q6 XX", "response_a": "GOOD six", "response_b": "BAD six", "label": "a"},
    ]
    data = tmp_path / "pairs.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))

    def scored(first: dict, second: dict) -> Reply:
        """A "x y" reply with top log-probs at the two number positions (probabilities given)."""
        best = lambda d: max(d, key=d.get)  # noqa: E731
        return Reply(content=f"{best(first)} {best(second)}",
                     top_logprobs=[{k: math.log(v) for k, v in first.items()}, {" ": 0.0},
                                   {k: math.log(v) for k, v in second.items()}])

    def judge(rec):
        text = rec.user_text
        if "XX" in text:
            return Reply(content="I cannot decide.")
        if "BIASED" in text:
            # the first position always wins "9 2"; the weighted scores still lean to A:
            # AB (A first): A 8.5, B 2.0; BA (B first): B 8.5, A 2.5 -> mean margin +0.25
            a_first = text.index("GOOD") < text.index("BAD")
            return scored({"9": 0.5, "8": 0.5}, {"2": 1.0} if a_first else {"2": 0.5, "3": 0.5})
        if text.index("GOOD") < text.index("BAD"):
            return scored({"9": 1.0}, {"2": 1.0})
        return scored({"2": 1.0}, {"9": 1.0})

    fake_openai.reply_fn = judge
    monkeypatch.setenv("META_KEY", "sk-meta")
    extra = {"judge": {"backend": "openai", "model": "fake-judge", "base_url": fake_openai.url, "api_key_env": "META_KEY",
                       "explain": False, "max_retries": 0, "cache": False}}
    report = run_metaeval(data, ["GPT:battle", "Length"], extra_config=extra)
    acc = report["pairwise"]["GPT/battle"]
    assert report["rows"] == 5 and fake_openai.chat_calls == 10  # 5 non-tie rows x 2 orders
    assert (acc["right"], acc["wrong"], acc["predicted_ties"], acc["invalid"]) == (2, 1, 1, 1)
    assert acc["accuracy"] == pytest.approx((2 + 0.5) / 4)
    assert acc["accuracy_decisive_only"] == pytest.approx(2 / 3)
    assert acc["order_flip_rate"] == pytest.approx(1 / 4)
    # single orders: the biased item is right in AB (first wins, label a) and wrong in BA
    assert acc["single_order_accuracy"] == {"AB": pytest.approx(3 / 4), "BA": pytest.approx(2 / 4)}
    assert [it["verdict"] for it in acc["items"]] == ["A", "B", "tie", "A", "invalid"]
    assert report["pairwise"]["baseline/Length"]["n"] == 5
    # probability-weighted: the biased item is decided by the magnitudes (right), p4 stays wrong
    assert acc["weighted_n"] == 4 and acc["weighted_accuracy"] == pytest.approx(3 / 4)
    assert [it["weighted_margin"] for it in acc["items"]][:4] == [pytest.approx(7), pytest.approx(-7),
                                                                 pytest.approx(0.25), pytest.approx(7)]
    # Cohen's kappa beside agreement, as scikit-learn computes it on the same verdicts. By hand: verdicts
    # A, B, tie, A against labels a, b, a, b: p_o = .5, p_e = .5 * .5 + .25 * .5 = .375, kappa = .2
    from sklearn.metrics import cohen_kappa_score

    valid = [it for it in acc["items"] if it["verdict"] != "invalid"]
    said, truth = [it["verdict"] for it in valid], [it["label"].upper() for it in valid]
    assert acc["kappa"] == pytest.approx(0.2) == pytest.approx(cohen_kappa_score(said, truth))
    assert acc["verdicts"]["raw"]["accuracy"] == pytest.approx(acc["accuracy"])
    w = [it for it in acc["items"] if it["weighted_verdict"]]
    assert acc["verdicts"]["weighted"]["kappa"] == pytest.approx(
        cohen_kappa_score([it["weighted_verdict"] for it in w], [it["label"].upper() for it in w]))
    # the trivial rules on the same items, each with agreement and kappa (a constant rule: kappa 0)
    rules = acc["trivial_rules"]
    assert rules["first"]["kappa"] == 0.0 and rules["first"]["accuracy"] == pytest.approx(2 / 4)
    assert rules["first"]["n"] == rules["longer"]["n"] == 4
    # the position-calibrated verdicts and the judge's prior, fitted on these pairs' own two orders
    assert acc["position_prior"]["method"] == "probabilities" and acc["calibrated_n"] == 4
    assert "log-odds" in acc["position_prior"]["text"]
    text = format_report(report)
    assert "position-calibrated" in text and "rule: always the first" in text and "position prior:" in text


def test_sample_is_seeded_and_keeps_file_order(tmp_path):
    rows = [{"id": f"r{i}", "response_a": "a" * (i + 1), "response_b": "b", "label": "a" if i % 2 else "b"}
            for i in range(20)]
    data = tmp_path / "p.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    one = run_metaeval(data, ["Length"], sample=6, seed=3)
    two = run_metaeval(data, ["Length"], sample=6, seed=3)
    other = run_metaeval(data, ["Length"], sample=6, seed=4)
    assert one["rows"] == 6 and one["pairwise"] == two["pairwise"]
    assert one["selection"] == {"docs": None, "limit": None, "sample": 6, "seed": 3}
    ids = one["row_ids"]
    assert ids == two["row_ids"] and len(set(ids)) == 6
    assert ids == sorted(ids, key=lambda s: int(s[1:]))  # file order kept
    assert set(other["row_ids"]) != set(ids)


def test_every_family_works_in_meta_eval_with_the_run_context(tmp_path, fake_openai, monkeypatch):
    """meta-eval drives families the way a run does (one context: records, judge pool, memo), so
    RepEval fits fluency on the rows' own references and scores consistency against each row's
    source, and the judge families (GPT, UniEval through the judge, SAGEval) answer too."""
    article = ("The city council approved the new park on Monday. Construction starts in May and costs "
               "two million dollars. The park will have a playground and a pond.")
    ref = "The council approved a park that will cost two million dollars; work starts in May."
    rows = [{"id": f"r{i}", "doc_id": f"d{i // 3}", "system_id": f"s{i % 3}", "source": article,
             "references": [ref, "Council backs a new park with a pond and playground, building from May."],
             "output": out, "human": {"consistency": h}}
            for i, (out, h) in enumerate([
                ("The council approved a park costing two million dollars.", 5),
                ("The council rejected the park and it costs nine million dollars.", 1),
                ("Construction of the park starts in May; it has a pond.", 4),
                ("The park will open in May with a playground.", 3),
                ("The mayor closed the pond on Monday.", 1),
                ("A two million dollar park was approved on Monday.", 5)])]
    data = tmp_path / "rows.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))

    def judge(rec):
        body = rec.body
        if body.get("max_tokens") == 1:
            if "Yes or No" in rec.user_text:
                return Reply(content="Yes", top_logprobs=[{"Yes": math.log(0.7), "No": math.log(0.3)}])
            return Reply(content="4", top_logprobs=[{"4": math.log(0.6), "5": math.log(0.4)}])
        if "SAGE" in json.dumps(body["messages"][:1]):
            return Reply(content=json.dumps({"aspects": {"accuracy": {"score": 3, "reason": "ok.", "definition": None}},
                                             "new_aspects": []}))
        return Reply(content=json.dumps({"accuracy": {"score": 4, "reason": "fine."}}))

    fake_openai.reply_fn = judge
    monkeypatch.setenv("META_KEY", "sk-meta")
    extra = {"judge": {"backend": "openai", "model": "fake-judge", "base_url": fake_openai.url, "api_key_env": "META_KEY",
                       "mode": "logprobs", "max_retries": 0, "cache": False},
             "repeval": {"k": 4, "method": "mean"}, "unieval": {"evaluator": "judge"},
             "sageval": {"use_logprobs": False, "max_retries": 0}}
    report = run_metaeval(data, ["RepEval:fluency", "RepEval:consistency", "GPT:relevance",
                                 "UniEval:summarization-consistency", "SAGEval:accuracy"], extra_config=extra)
    for key in ("RepEval/fluency", "RepEval/consistency", "GPT/relevance", "UniEval/summarization-consistency",
                "SAGEval/accuracy"):
        assert report["invalid"][key] == 0, key
    sigs = report["signatures"]
    assert "synthetic pairs" in sigs["RepEval/fluency"]["direction"]
    assert "synthetic pairs" in sigs["RepEval/consistency"]["direction"]
    # (before the context carried each row's source, consistency failed: "the template needs {src}")
    assert report["rows"] == 6


def test_a_pairwise_answer_that_is_a_json_scalar_is_read_as_its_text(tmp_path):
    """PandaLM has answers that are JSON `true`: read as the text "true", not a refusal of the file;
    null or a list is still refused with the line and id."""
    from evaluate.core.errors import InputError
    from evaluate.metaeval.run import read_metaeval_rows as read_jsonl

    rows = [{"id": "p1", "instruction": "Is it odd?", "response_a": True, "response_b": "Yes, it is.", "label": "a"},
            {"id": "p2", "instruction": "2+2?", "response_a": 4, "response_b": "four", "label": "tie"}]
    path = tmp_path / "pairs.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    got = read_jsonl(path)
    assert got[0]["response_a"] == "true" and got[1]["response_a"] == "4"
    path.write_text(json.dumps({**rows[0], "response_b": None}) + "\n")
    with pytest.raises(InputError, match=r"line 1 \(id p1\): response_b must be a string"):
        read_jsonl(path)
