"""configs/example_rules.yaml (every rule check) on the bundled English example, end to end through
`eval.py`: pass rates per model against counts made by hand from examples/en, a failing item's reason,
the McNemar comparison and the closing lines. No judge, no model: a few seconds."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from scipy.stats import binomtest

from evaluate.stats.intervals import wilson_interval

REPO = Path(__file__).resolve().parents[1]

# (passed, n) per check and model, counted by hand from examples/en/answers_model_{a,b}.json:
# ExactMatch: classification 5-7, extraction 10-12, rewriting 21-23; model_a misses 22 (a reworded
#   apology), model_b matches none.
# Contains: closed_qa 8-9, open_qa 16-18, chat 3-4, one key fact each; model_b states none of them.
# NotContains: chat, roleplay, brainstorming, generation (9 items); model_b's item 19 says "As an AI
#   language model".
# Regex (full match): classification labels, model_b's "business and sports" fails; extraction lists,
#   model_b's "10 March" (one item) fails.
# JSON: the labels are plain words, never JSON.
# Length (8-60 words): chat, roleplay, brainstorming, generation, summarization (11 items); model_b's
#   4 ("A marathon is 42.195 km.", 6 words), 14 (5), 15 (empty) and 20 (7) are too short.
EXPECTED = {
    "ExactMatch": ((8, 9), (0, 9)),
    "Contains": ((7, 7), (0, 7)),
    "NotContains": ((9, 9), (8, 9)),
    "Regex": ((6, 6), (4, 6)),
    "JSON": ((0, 3), (0, 3)),
    "Length": ((11, 11), (7, 11)),
}


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("rules") / "save"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "NO_COLOR": "1"}
    proc = subprocess.run([sys.executable, "eval.py", "--config", "configs/example_rules.yaml", "--save_path", str(out)],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out, proc


def test_pass_rates_match_the_hand_counts(run):
    out, _ = run
    for model, side in (("model_a", 0), ("model_b", 1)):
        overall = json.loads((out / "results" / f"{model}.json").read_text(encoding="utf-8"))["aggregates"]["overall"]
        for check, counts in EXPECTED.items():
            k, n = counts[side]
            agg = overall[f"Metrics/{check}"]
            assert (agg["n"], agg["mean"]) == (n, pytest.approx(k / n)), (model, check)
            assert agg["ci95"] == pytest.approx(list(wilson_interval(k, n))) and agg["ci_method"] == "wilson"


def test_a_failing_items_reason_is_in_its_details(run):
    out, _ = run
    items = {it["id"]: it for it in json.loads((out / "results" / "model_b.json").read_text(encoding="utf-8"))["items"]}
    assert items["19"]["details"]["Metrics/NotContains"]["found"] == ["as an AI", "language model"]
    assert items["15"]["details"]["Metrics/Length"]["reason"] == "0 words, below the minimum 8"
    assert items["11"]["details"]["Metrics/Regex"]["reason"] == "the whole answer does not match"
    assert items["5"]["details"]["Metrics/JSON"]["reason"] == "not JSON: Expecting value at line 1 column 1"


def test_comparison_is_mcnemar_in_the_family_and_the_closing_lines_show_pass_rates(run):
    out, proc = run
    comp = json.loads((out / "comparisons" / "model_a__vs__model_b.json").read_text(encoding="utf-8"))
    rows = {r["score"]: r for r in comp["rows"] if r["category"] == "(all)"}
    m = comp["method"]["confirmatory_tests"]
    assert m == 6 and sorted(comp["method"]["primary"]) == sorted(f"Metrics/{c}" for c in EXPECTED)
    for check, ((ka, n), (kb, _)) in EXPECTED.items():
        row = rows[f"Metrics/{check}"]
        # on these items one model never passes where the other fails except in A's favour: c = 0
        p = binomtest(ka - kb, ka - kb, 0.5).pvalue if ka > kb else 1.0
        assert row["p"] == pytest.approx(p) and "McNemar" in row["test"]
        assert row["p_adj"] == pytest.approx(min(1.0, p * m))
    assert rows["Metrics/ExactMatch"]["verdict"] == "A better"  # 2 / 2^8 * 6 = 0.047
    assert rows["Metrics/Contains"]["verdict"] == "no detectable difference"  # 2 / 2^7 * 6 = 0.094
    assert "Metrics/ExactMatch: model_a 8/9 [0.57, 0.98]; model_b 0/9 [0.00, 0.30]" in proc.stdout
