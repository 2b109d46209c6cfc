"""Verdicts of a real run on constructed data with known effects (eval.py, the Metrics family's F1).

Every answer is 40 words; a target is 40 other words; an answer sharing k of its words with the target
has F1 = k / 40 exactly. Model B shares 2 more words than model A on the "math" items (a shift of
0.05 in F1) and the same number give or take noise elsewhere; model C is unrelated to both. The noise
comes in antithetic pairs (+e on one item, -e on the next), so each category's sample mean difference
is exactly the planted one: "none elsewhere" is true of the sample, not only of its expectation.
"""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import numpy as np
import pytest

from evaluate.cli import main
from evaluate.stats.family import ALL

CATS = ("chat", "math", "qa")
N_PER_CAT, WORDS, SHIFT_STEPS = 30, 40, 2
SHIFT = SHIFT_STEPS / WORDS


def _word(prefix: str, i: int) -> str:
    return prefix + chr(97 + i // 26 % 26) + chr(97 + i % 26)


def _answer(target_words: list[str], k: int, rid: int) -> str:
    k = int(np.clip(k, 0, WORDS))
    filler = [_word(f"fill{chr(97 + rid % 26)}", j) for j in range(WORDS - k)]
    return " ".join(target_words[:k] + filler)


def _data(tmp: Path, seed: int = 7) -> dict[str, Path]:
    rng = np.random.default_rng(seed)
    recs = {m: [] for m in ("model_a", "model_b", "model_c")}
    rid = 0
    for cat in CATS:
        noise = rng.integers(-3, 4, N_PER_CAT // 2)
        noise = np.ravel(np.column_stack([noise, -noise]))
        for i in range(N_PER_CAT):
            rid += 1
            words = [_word(f"tgt{chr(97 + rid % 26)}{chr(97 + rid // 26 % 26)}", j) for j in range(WORDS)]
            k_a = int(rng.integers(10, 31))
            k_b = k_a + int(noise[i]) + (SHIFT_STEPS if cat == "math" else 0)
            k_c = int(rng.integers(0, 41))
            for m, k in (("model_a", k_a), ("model_b", k_b), ("model_c", k_c)):
                recs[m].append({"id": rid, "category": cat, "instruction": f"question {rid}", "input": "",
                                "output": _answer(words, k, rid), "target": " ".join(words)})
    out = {}
    for m, rows in recs.items():
        out[m] = tmp / f"{m}.json"
        out[m].write_text(json.dumps(rows))
    return out


def _run(tmp: Path, files: dict[str, Path], models: list[str], name: str) -> Path:
    cfg = {"answers": [{"name": m, "path": str(files[m])} for m in models], "save_path": str(tmp / name),
           "category": {c: {"Metrics": ["F1 score"]} for c in CATS}}
    path = tmp / f"{name}.json"
    path.write_text(json.dumps(cfg))
    assert main(["--config", str(path), "--no-charts"]) == 0
    return tmp / name


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("verdicts")
    files = _data(tmp)
    return {"ab": _run(tmp, files, ["model_a", "model_b"], "ab"),
            "abc": _run(tmp, files, ["model_a", "model_b", "model_c"], "abc")}


def _comparison(save: Path, a: str = "model_a", b: str = "model_b") -> dict:
    return json.loads((save / "comparisons" / f"{a}__vs__{b}.json").read_text())


def _rows(comp: dict) -> dict[tuple[str, str], dict]:
    return {(r["category"], r["score"]): r for r in comp["rows"]}


def test_the_planted_shift_is_found_and_nothing_else(runs):
    rows = _rows(_comparison(runs["ab"]))
    math = rows[("math", "Metrics/F1")]
    assert math["n"] == N_PER_CAT and math["role"] == "exploratory"
    assert math["verdict"] == "B better" and math["better"] == "model_b"
    assert math["diff"] == pytest.approx(-SHIFT) and math["interval"][0] < -SHIFT < math["interval"][1]
    # the shift is of the size the row itself (and the README's rule) says this n detects
    stated = float(re.search(r"detects \|A − B\| of about ([0-9.]+)", math["detectable"]).group(1))
    assert stated <= SHIFT
    for cat in ("chat", "qa"):
        assert rows[(cat, "Metrics/F1")]["diff"] == pytest.approx(0, abs=1e-12)
        assert rows[(cat, "Metrics/F1")]["verdict"] == "no detectable difference"
    overall = rows[(ALL, "Metrics/F1")]
    assert overall["role"] == "confirmatory" and overall["m"] == 1


def test_a_third_model_changes_no_verdict_of_a_and_b(runs):
    alone, with_c = _comparison(runs["ab"]), _comparison(runs["abc"])
    assert alone["rows"] == with_c["rows"] and alone["method"] == with_c["method"]
    assert (runs["abc"] / "comparisons" / "model_a__vs__model_c.json").is_file()


def _contradicts(verdict: str, lo: float, hi: float) -> bool:
    excluded = lo > 0 or hi < 0
    called = verdict in ("A better", "B better")
    return excluded != called or (verdict == "A better" and hi < 0) or (verdict == "B better" and lo > 0)


def test_no_verdict_contradicts_its_interval_in_any_file(runs):
    seen = 0
    for save in runs.values():
        for f in sorted((save / "comparisons").glob("*.json")):
            for r in json.loads(f.read_text())["rows"]:
                if r["interval"] is not None:
                    assert not _contradicts(r["verdict"], *r["interval"]), (f.name, r)
                    assert r["level"] == pytest.approx(1 - 0.05 / r["m"])
                    seen += 1
                else:
                    assert r["interval_note"] or r["verdict"].startswith("not comparable"), r
        with open(save / "comparisons" / "comparisons.csv", newline="") as fh:
            for line in csv.DictReader(fh):
                if line["interval_low"]:
                    assert not _contradicts(line["verdict"], float(line["interval_low"]),
                                            float(line["interval_high"])), line
    assert seen == 4 * 1 + 4 * 3  # 4 rows per pair (3 categories and "(all)"), 1 pair and 3 pairs: all checked


def test_per_model_means_below_ten_items_have_no_interval(tmp_path):
    files = _data(tmp_path)
    for m, f in files.items():
        rows = json.loads(f.read_text())
        f.write_text(json.dumps([r for r in rows if r["id"] in (1, 2, 3, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40,
                                                                  41, 42)]))
    save = _run(tmp_path, files, ["model_a", "model_b"], "small")
    res = json.loads((save / "results" / "model_a.json").read_text())
    chat = res["aggregates"]["by_category"]["chat"]["Metrics/F1"]
    assert chat["n"] == 3 and chat["ci95"] is None and chat["ci_note"].startswith("too few items (n = 3 < 10)")
    math = res["aggregates"]["by_category"]["math"]["Metrics/F1"]
    assert math["n"] == 12 and math["ci95"][0] < math["mean"] < math["ci95"][1]
    row = _rows(_comparison(save))[("chat", "Metrics/F1")]
    assert row["interval"] is None and "too few pairs for any test" in row["detectable"]  # 2/2^3 > .05


def test_primary_and_summary_scores_are_checked_against_the_plan(tmp_path, capsys):
    files = _data(tmp_path)
    cfg = {"answers": [{"name": m, "path": str(files[m])} for m in ("model_a", "model_b")],
           "save_path": str(tmp_path / "p"), "category": {c: {"Metrics": ["F1 score", "BLEU"]} for c in CATS},
           "primary": ["F1", "Metrics/BLEU-2"], "summary_scores": ["BLEU-4"]}
    path = tmp_path / "p.json"
    path.write_text(json.dumps(cfg))
    assert main(["--config", str(path), "--no-charts"]) == 0
    out = capsys.readouterr().out
    comp = _comparison(tmp_path / "p")
    assert comp["method"]["primary"] == ["Metrics/F1", "Metrics/BLEU-2"] and comp["method"]["primary_from"] == "config"
    assert {r["score"] for r in comp["rows"] if r["role"] == "confirmatory"} == {"Metrics/F1", "Metrics/BLEU-2"}
    table = out[out.index("mean, all items"):].split("\n\n", 1)[0]
    assert "Metrics/BLEU-4" in table and "Metrics/F1" not in table  # summary_scores picks the closing lines' scores
    for bad, want in ((["Metrics/F2"], 'primary[0]: no score "Metrics/F2" in this run; did you mean "Metrics/F1"'),
                      (["BLEU"], 'primary[0]: no score "BLEU" in this run'), ("F1", "primary: expected a list")):
        path.write_text(json.dumps({**cfg, "primary": bad}))
        assert main(["--config", str(path), "--no-charts"]) == 2
        err = capsys.readouterr().err
        assert want in err and "Traceback" not in err, err


def test_comparison_files_of_an_older_version_are_decided_again(runs, tmp_path, capsys):
    import shutil

    save = tmp_path / "old"
    shutil.copytree(runs["ab"], save)
    f = save / "comparisons" / "model_a__vs__model_b.json"
    old = json.loads(f.read_text())
    old["schema"] = "llm-eval-comparison/1"
    for r in old["rows"]:  # what the first schema held: Holm over the save path, no role
        r["p_holm"], r["ci95"] = r.pop("p_adj"), r.pop("interval")
        r.pop("role")
    f.write_text(json.dumps(old))
    capsys.readouterr()
    assert main(["summary", str(save), "--width", "80"]) == 0
    out = capsys.readouterr().out
    assert "model_a vs model_b: model_a better on 0, model_b better on 1" in out  # decided again in memory
    assert json.loads(f.read_text())["schema"] == "llm-eval-comparison/1"  # summary only reads
    assert main(["report", str(save)]) == 0
    assert json.loads(f.read_text()) == _comparison(runs["ab"])  # report writes them as a run would
