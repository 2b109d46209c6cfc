"""`eval.py judge-check --labels SAVE_PATH`: the judge's battle verdicts already in a run against a
person's labels (labels.jsonl), checked on a hand-computed case, against scikit-learn's
`cohen_kappa_score`, and through `eval.py` on a real run judged by the fake OpenAI-compatible server
(no new judge request)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from sklearn.metrics import cohen_kappa_score

from evaluate.judgecheck.labels import MIN_LABELS, agreement, check_labels
from evaluate.judgecheck.store import verdict_of
from evaluate.savepath.labels import Label, append_label

try:
    from tests import view_fixtures as vf
    from tests.fake_openai_server import FakeOpenAIServer
except ImportError:
    import view_fixtures as vf
    from fake_openai_server import FakeOpenAIServer

REPO = Path(__file__).resolve().parents[1]


def battle(model_a: str, model_b: str, verdicts: list[str]) -> dict:
    """A battle file's content: item i+1 with verdict verdicts[i] (both orders agreeing)."""
    items = []
    for i, v in enumerate(verdicts, 1):
        orders = [{"order": o, "verdict": v, "scores": None, "raw": f"reply {o}", "reason": ""} for o in ("AB", "BA")]
        items.append({"id": str(i), "category": "qa", "verdict": v, "orders": orders, "flipped": False})
    return {"summary": {"model_a": model_a, "model_b": model_b, "items": len(items)}, "items": items}


def lab(i: int, verdict: str, a: str = "m1", b: str = "m2") -> Label:
    return Label(id=str(i), category="qa", model_a=a, model_b=b, verdict=verdict, time="2026-01-01T00:00:00+00:00")


# items 1..12: the person's labels, the judge's verdicts, which answer is longer
LABELS = ["A", "A", "A", "A", "A", "B", "B", "B", "B", "tie", "tie", "A"]
JUDGE = ["A", "A", "A", "B", "tie", "B", "B", "A", "B", "A", "tie", "invalid"]
LONGER = ["A"] * 6 + ["B"] * 5 + ["tie"]


def outputs() -> dict:
    out = {}
    for i, longer in enumerate(LONGER, 1):
        la, lb = {"A": (20, 10), "B": (10, 20), "tie": (15, 15)}[longer]
        out[("m1", str(i), "qa")] = "x" * la
        out[("m2", str(i), "qa")] = "y" * lb
    return out


def hand_case() -> dict:
    labels = [lab(1, "B")]  # changed later: the latest label of an item counts
    labels += [lab(i, v) for i, v in enumerate(LABELS, 1) if i != 8]
    labels.append(lab(8, "A", a="m2", b="m1"))  # given the other way round: m2 better, "B" in the battle file's orientation
    return agreement(labels, [battle("m1", "m2", JUDGE)], outputs(), source="labels.jsonl")


def test_a_hand_computed_case():
    rec = hand_case()
    a = rec["agreement"]
    assert rec["labels"] == 13 and rec["items_labelled"] == 12 and rec["relabelled"] == 1
    assert rec["with_judge_verdict"] == 12 and a["invalid"] == 1
    # decided labels with a valid verdict: items 1-9; right on 1, 2, 3, 6, 7, 9; a judge tie on 5 (half)
    assert a["n"] == 9 and a["right"] == 6 and a["judge_ties"] == 1 and a["wrong"] == 2
    assert a["accuracy"] == pytest.approx(6.5 / 9, abs=1e-4)
    assert rec["label_ties_left_out"] == 2
    # kappa over the 11 valid items, ties included: p_o = 7/11, p_e = 45/121 -> (77 - 45) / (121 - 45) = 8/19
    assert a["kappa"] == pytest.approx(8 / 19, abs=1e-12)
    base = rec["baselines"]
    assert base["longer"]["accuracy"] == pytest.approx(8 / 9, abs=1e-4)  # wrong on item 6 only
    assert base["first"]["accuracy"] == pytest.approx(5 / 9, abs=1e-4)
    assert base["second"]["accuracy"] == pytest.approx(4 / 9, abs=1e-4)
    assert base["tie"]["accuracy"] == 0.5
    assert rec["best_trivial_rule"] == "longer"
    # the judge's Wilson interval cannot clear .889: not trustworthy, in the words of the labelled check
    assert rec["trustworthy"] is False
    assert rec["verdict_text"] == verdict_of({"labelled": rec})[1]
    assert rec["verdict_text"].startswith("NOT trustworthy: with labels (labels.jsonl, 9 pairs): agreement 0.722")
    assert "does not beat the length baseline" in rec["verdict_text"]


def test_kappa_agrees_with_scikit_learn():
    rec = hand_case()
    valid = [(lv, jv) for lv, jv in zip(LABELS, JUDGE) if jv != "invalid"]
    truth, said = [v for v, _ in valid], [v for _, v in valid]
    assert rec["agreement"]["kappa"] == pytest.approx(cohen_kappa_score(truth, said), abs=1e-12)
    longer = [LONGER[i] for i, jv in enumerate(JUDGE) if jv != "invalid"]
    assert rec["baselines"]["longer"]["kappa"] == pytest.approx(cohen_kappa_score(truth, longer), abs=1e-12)
    assert rec["baselines"]["first"]["kappa"] == pytest.approx(cohen_kappa_score(truth, ["A"] * len(truth)), abs=1e-12)
    lo, hi = rec["agreement"]["kappa_ci95"]
    assert -1 <= lo <= rec["agreement"]["kappa"] <= hi <= 1


def test_a_panels_judges_each_against_the_labels():
    """A panel's battle file: the panel's verdict per item and each judge's (`judges`); the labels measure
    the panel as one judge and each judge beside it, on the items the panel gave a valid verdict."""
    y = ["B"] * len(JUDGE)
    y[2] = "invalid"  # judge y could not judge item 3
    bt = battle("m1", "m2", JUDGE)
    for it, x_v, y_v in zip(bt["items"], JUDGE, y):
        it["judges"] = {"x": x_v, "y": y_v}
    bt["signature"] = {"panel": {"judges": ["x", "y"]},
                       "judges": {"x": {"judge": {"backend": "openai", "model": "judge-x"}},
                                  "y": {"judge": {"backend": "local", "model": "judge-y"}}}}
    labels = [lab(i, v) for i, v in enumerate(LABELS, 1)]
    rec = agreement(labels, [bt], outputs(), source="labels.jsonl")
    assert rec["agreement"]["accuracy"] == pytest.approx(6.5 / 9, abs=1e-4)  # the panel: as one judge above
    x, yy = rec["judges"]["x"], rec["judges"]["y"]
    assert (x["accuracy"], x["n"]) == (rec["agreement"]["accuracy"], 9) and x["kappa"] == pytest.approx(8 / 19, abs=1e-12)
    # y on the panel's 11 valid items less item 3: decided labels 1, 2, 4-9 (n 8), right on 6-9
    assert (yy["n"], yy["invalid"], yy["accuracy"]) == (8, 1, 0.5)
    rated = [(lv, yv) for lv, jv, yv in zip(LABELS, JUDGE, y) if jv != "invalid" and yv != "invalid"]
    assert yy["kappa"] == pytest.approx(cohen_kappa_score([t for t, _ in rated], [v for _, v in rated]), abs=1e-12)
    from evaluate.judgecheck.labels import _judge_name, format_labels_report

    assert _judge_name(bt["signature"]) == "a panel of 2 judges (x: openai judge-x, y: local judge-y)"
    text = format_labels_report({**rec, "judge": [_judge_name(bt["signature"])]})
    assert "panel (ties half)" in text and "  judge x" in text and "  judge y" in text
    assert "judges" not in hand_case()  # one judge: no per-judge rows


def test_a_judge_that_agrees_is_trusted_and_few_labels_give_no_verdict():
    n = 40
    truth = ["A" if i % 3 else "B" for i in range(n)]
    outs = {}
    for i in range(1, n + 1):  # the longer answer is the wrong one half the time: no rule scores high
        outs[("m1", str(i), "qa")] = "x" * (10 + 5 * (i % 2))
        outs[("m2", str(i), "qa")] = "y" * 12
    rec = agreement([lab(i, v) for i, v in enumerate(truth, 1)], [battle("m1", "m2", truth)], outs)
    assert rec["agreement"]["accuracy"] == 1.0 and rec["agreement"]["kappa"] == pytest.approx(1.0)
    assert rec["trustworthy"] is True
    assert rec["verdict_text"].startswith("trustworthy: with labels") and rec["verdict_text"].endswith(": passes")
    few = agreement([lab(i, v) for i, v in enumerate(truth[:MIN_LABELS - 1], 1)], [battle("m1", "m2", truth)], outs)
    assert few["trustworthy"] is None
    assert few["verdict_text"] == f"not checked: {MIN_LABELS - 1} of the {MIN_LABELS} labels with a judge verdict needed (1 more)"


def eval_py(*argv: str) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "eval.py", *argv], cwd=REPO, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "NO_COLOR": "1"})
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    return proc


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("labels")
    server = FakeOpenAIServer().start()
    try:
        save = vf.battle_run(tmp, server)
        yield save, server
    finally:
        server.stop()


def test_judge_check_labels_through_eval_py(run):
    save, server = run
    files = {p.name: json.loads(p.read_text()) for p in (save / "battles").glob("*__vs__*.json")}
    bt = next(b for b in files.values() if b["summary"]["model_a"] == "model_a" and b["summary"]["model_b"] == "model_b")
    truth, said = [], []
    for i, it in enumerate(bt["items"]):
        verdict = ["A", "B", "tie"][i % 3] if i % 4 else it["verdict"]
        append_label(save, {"id": it["id"], "category": it["category"], "model_a": "model_a", "model_b": "model_b",
                            "verdict": verdict})
        if it["verdict"] != "invalid":
            truth.append(verdict)
            said.append(it["verdict"])
    with open(save / "labels.jsonl", "a", encoding="utf-8") as fh:
        fh.write("{not a label\n")
    calls = server.chat_calls
    proc = eval_py("judge-check", "--labels", str(save), "--output", str(save.parent / "labels_check.json"))
    assert proc.returncode == 0, proc.stderr
    assert server.chat_calls == calls  # the judge was asked nothing
    assert f"{save / 'labels.jsonl'} line {len(bt['items']) + 1}: not JSON" in proc.stderr
    out = proc.stdout
    assert "Cohen's kappa" in out and "judge (ties half)" in out and "always A" in out and "the longer answer" in out
    rec = json.loads((save.parent / "labels_check.json").read_text())
    assert rec["agreement"]["kappa"] == pytest.approx(cohen_kappa_score(truth, said), abs=1e-9)
    assert len(truth) >= MIN_LABELS and rec["trustworthy"] in (True, False)
    assert ("TRUSTWORTHY: " if rec["trustworthy"] else "NOT TRUSTWORTHY: ") + rec["verdict_text"].split(": ", 1)[1] in out
    again, found = check_labels(save)
    assert again["agreement"]["kappa"] == rec["agreement"]["kappa"] and len(found.problems) == 1


def test_judge_check_labels_refuses_what_it_cannot_check(run, tmp_path):
    save, _ = run
    proc = eval_py("judge-check", "--labels", str(tmp_path / "nowhere"))
    assert proc.returncode == 2 and "no such folder" in proc.stderr.strip().splitlines()[-1]
    (tmp_path / "results").mkdir()
    proc = eval_py("judge-check", "--labels", str(tmp_path))
    assert proc.returncode == 2 and "no labels.jsonl" in proc.stderr
    append_label(tmp_path, {"id": "1", "model_a": "x", "model_b": "y", "verdict": "A"})
    proc = eval_py("judge-check", "--labels", str(tmp_path))
    assert proc.returncode == 2 and "no battle verdicts" in proc.stderr
    proc = eval_py("judge-check", "--labels", str(save), "--config", "configs/example_en.yaml")
    assert proc.returncode == 2 and "--config does not apply" in proc.stderr
    proc = eval_py("judge-check")
    assert proc.returncode == 2 and "--labels SAVE_PATH" in proc.stderr
