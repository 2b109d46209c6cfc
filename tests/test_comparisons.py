"""evaluate.pipeline.comparisons: paired rows from result dicts, dropped counts, one family per pair, files."""

from __future__ import annotations

import csv
import json
import os
import stat

import pytest

from evaluate.pipeline.comparisons import ROW_FIELDS, SCHEMA, compare_results, load_results, write_comparisons

GPT_SIG = {"evaluator": "rating", "scale": [1, 5], "judge": "fake"}
F1_SIG = {"metric": "F1 score", "scale": "0-1"}


def _result(model, f1, gpt, invalid_gpt=(), extra_key=False):
    """A result dict in the schema of evaluate/pipeline/results.py ModelResults.to_dict (the parts read here).
    Ids 1-12 are "qa", 13-15 "chat"; f1 / gpt map id -> score."""
    items = []
    for i in range(1, 16):
        scores = {"Metrics/F1": f1[i], "GPT/relevance": gpt[i]}
        invalid = {}
        if i in invalid_gpt:
            scores["GPT/relevance"] = None
            invalid["GPT/relevance"] = {"reason": "unparseable reply", "raw": "great"}
        if extra_key:
            scores["UniEval/fluency"] = 0.5
        items.append({"id": i, "category": "qa" if i <= 12 else "chat", "output": f"answer {i}",
                      "scores": scores, "invalid": invalid, "details": {}, "flags": []})
    sigs = {"Metrics/F1": F1_SIG, "GPT/relevance": GPT_SIG}
    return {"schema": "llm-eval-results/1", "model": model, "answer_file": f"{model}.json", "runs": ["r1"],
            "signatures": sigs, "aggregates": {}, "skipped_categories": {}, "items": items}


F1_B = {i: (i % 5) / 8 + 0.25 for i in range(1, 16)}                       # exact binary fractions
F1_A = {i: F1_B[i] + (0.25 if i <= 12 else 0.0) for i in range(1, 16)}     # A +0.25 on qa, equal on chat
GPT_B = {i: float(1 + i % 5) for i in range(1, 16)}
GPT_A = {i: GPT_B[i] for i in range(1, 16)}


def _rows(comp):
    return {(r["category"], r["score"]): r for r in comp["rows"]}


def test_rows_of_two_models():
    # names sorted: "alpha" is model A even when listed second
    comps = compare_results([_result("beta", F1_B, GPT_B, extra_key=True),
                             _result("alpha", F1_A, GPT_A, invalid_gpt=(2, 3))], resamples=200)
    assert list(comps) == [("alpha", "beta")]
    comp = comps[("alpha", "beta")]
    assert comp["schema"] == SCHEMA and comp["model_a"] == "alpha" and comp["model_b"] == "beta"
    rows = _rows(comp)
    # UniEval/fluency is scored for beta only: not comparable, no row
    assert set(rows) == {(c, k) for c in ("chat", "qa", "(all)") for k in ("GPT/relevance", "Metrics/F1")}
    assert [r["category"] for r in comp["rows"]] == ["chat", "chat", "qa", "qa", "(all)", "(all)"]

    qa_f1 = rows[("qa", "Metrics/F1")]
    assert qa_f1["n"] == 12 and qa_f1["dropped"] == 0 and qa_f1["role"] == "exploratory"
    # every item differs by exactly 0.25: no spread to resample, the exact test decides (2 of 2^12 flips)
    assert qa_f1["diff"] == 0.25 and qa_f1["interval"] is None and "exactly 0.25" in qa_f1["interval_note"]
    assert qa_f1["p"] == pytest.approx(2 / 4096) and qa_f1["p_adj"] == qa_f1["p"]
    assert qa_f1["verdict"] == "A better" and qa_f1["better"] == "alpha"
    assert qa_f1["scale"] == [0.0, 1.0] and qa_f1["signature"] == F1_SIG

    chat_f1 = rows[("chat", "Metrics/F1")]
    assert chat_f1["n"] == 3 and chat_f1["p"] == 1.0 and chat_f1["verdict"] == "no detectable difference"
    assert chat_f1["better"] is None and chat_f1["test"].startswith("exact sign-flip")

    qa_gpt = rows[("qa", "GPT/relevance")]
    assert qa_gpt["n"] == 10 and qa_gpt["dropped"] == 2 and qa_gpt["scale"] == [1.0, 5.0]
    assert qa_gpt["diff"] == 0.0 and qa_gpt["verdict"] == "no detectable difference"
    assert rows[("(all)", "GPT/relevance")]["n"] == 13 and rows[("(all)", "GPT/relevance")]["dropped"] == 2
    all_f1 = rows[("(all)", "Metrics/F1")]
    assert all_f1["n"] == 15 and all_f1["diff"] == pytest.approx(0.25 * 12 / 15)
    # the primary scores over all items are the confirmatory family of this pair (m = 2)
    assert all_f1["role"] == "confirmatory" and all_f1["m"] == 2 and all_f1["simultaneous"]
    assert all_f1["level"] == pytest.approx(0.975) and all_f1["interval"][0] > 0 and all_f1["verdict"] == "A better"
    assert comp["method"]["primary"] == ["GPT/relevance", "Metrics/F1"] and comp["method"]["primary_from"] == "default"
    assert comp["method"]["adjustment"] == "Bonferroni within the pair's 2 primary scores (each at 0.025)"


def test_each_pair_is_its_own_family_and_a_third_model_changes_nothing():
    f1_c = {i: F1_B[i] - 0.125 * (i % 2) for i in range(1, 16)}
    results = [_result("a", F1_A, GPT_A), _result("b", F1_B, GPT_B), _result("c", f1_c, GPT_B)]
    comps = compare_results(results, resamples=100)
    assert list(comps) == [("a", "b"), ("a", "c"), ("b", "c")]
    alone = compare_results(results[:2], resamples=100)[("a", "b")]
    assert comps[("a", "b")] == alone  # the verdicts of a and b do not depend on c
    for comp in comps.values():
        assert comp["method"]["confirmatory_tests"] == 2
        for r in comp["rows"]:
            assert r["role"] == ("confirmatory" if r["category"] == "(all)" else "exploratory")
            assert r["p_adj"] == pytest.approx(min(1.0, r["p"] * r["m"]))


def test_configured_primary_sets_the_family():
    results = [_result("a", F1_A, GPT_A), _result("b", F1_B, GPT_B)]
    comp = compare_results(results, primary=["Metrics/F1"], resamples=100)[("a", "b")]
    rows = _rows(comp)
    assert comp["method"]["primary_from"] == "config" and comp["method"]["confirmatory_tests"] == 1
    assert rows[("(all)", "Metrics/F1")]["role"] == "confirmatory" and rows[("(all)", "Metrics/F1")]["m"] == 1
    assert rows[("(all)", "GPT/relevance")]["role"] == "exploratory"
    assert not rows[("(all)", "Metrics/F1")]["simultaneous"] and rows[("(all)", "Metrics/F1")]["level"] == 0.95


def test_write_comparisons_files_and_mode(tmp_path):
    results = [_result("model a/1", F1_A, GPT_A, invalid_gpt=(2,)), _result("model_b", F1_B, GPT_B)]
    old = os.umask(0o022)
    try:
        paths = write_comparisons(tmp_path, results, resamples=100)
    finally:
        os.umask(old)
    names = sorted(p.name for p in paths)
    assert names == ["comparisons.csv", "model_a_1__vs__model_b.json"]
    for p in paths:
        assert stat.S_IMODE(p.stat().st_mode) == 0o644
    assert not [p for p in (tmp_path / "comparisons").iterdir() if p.name.startswith(".")]  # no temp files left

    def no_nan(x):
        raise AssertionError(f"non-standard JSON constant {x}")

    data = json.loads((tmp_path / "comparisons" / "model_a_1__vs__model_b.json").read_text(),
                      parse_constant=no_nan)
    assert data["method"]["interval"].startswith("expanded percentile bootstrap") and data["method"]["resamples"] == 100
    assert data["schema"] == "llm-eval-comparison/2" and "primary scores over all items" in data["method"]["family"]
    assert all(list(r) == list(ROW_FIELDS) for r in data["rows"])
    with open(tmp_path / "comparisons" / "comparisons.csv", newline="") as fh:
        lines = list(csv.DictReader(fh))
    assert len(lines) == len(data["rows"]) == 6
    qa = next(r for r in lines if r["category"] == "qa" and r["score"] == "GPT/relevance")
    assert qa["model_a"] == "model a/1" and qa["dropped"] == "1" and qa["scale_high"] == "5"


def test_models_run_one_at_a_time_are_read_from_the_save_path(tmp_path):
    (tmp_path / "results").mkdir()
    for res in (_result("a", F1_A, GPT_A), _result("b", F1_B, GPT_B)):
        (tmp_path / "results" / f"{res['model']}.json").write_text(json.dumps(res))
    (tmp_path / "results" / "broken.json").write_text("{not json")
    assert [r["model"] for r in load_results(tmp_path)] == ["a", "b"]
    paths = write_comparisons(tmp_path, resamples=50)
    assert (tmp_path / "comparisons" / "a__vs__b.json") in paths


def test_one_model_writes_nothing(tmp_path):
    assert compare_results([_result("a", F1_A, GPT_A)]) == {}
    assert write_comparisons(tmp_path, [_result("a", F1_A, GPT_A)]) == []
