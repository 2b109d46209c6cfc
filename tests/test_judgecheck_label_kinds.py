"""Issue 47: `eval.py judge-check --labels` holds the probability-weighted and position-calibrated
verdicts against the labels beside the parsed ones (table and --output), or says on the line that
the run has none; and after labels give a verdict, the report, the viewer's runs list and run page say
that verdict (and that no label-free check is stored), never "not checked".

The run is a real pipeline run against the fake OpenAI-compatible judge, which returns
log-probabilities; on closed_qa it prefers whichever answer it is shown first (a parsed tie) while its
probabilities lean to model_a's answer, so the three kinds of verdict differ. The expected numbers
are computed here from the battle file's own verdicts, with scikit-learn's kappa."""

from __future__ import annotations

import json
import math
import os

import pytest
from sklearn.metrics import cohen_kappa_score

from evaluate.cli import main
from evaluate.savepath.labels import append_label

try:
    from tests import report_fixtures as rf
    from tests import view_fixtures as vf
    from tests.fake_openai_server import FakeOpenAIServer, Reply
    from tests.test_labels_corrected import eval_py
except ImportError:
    import report_fixtures as rf
    import view_fixtures as vf
    from fake_openai_server import FakeOpenAIServer, Reply
    from test_labels_corrected import eval_py

CLOSED_QA = [r["instruction"] for r in json.loads((rf.EN / "answers_model_a.json").read_text()) if r["category"] == "closed_qa"]


def lp(**probs: float) -> dict[str, float]:
    return {k: math.log(v) for k, v in probs.items()}


def judge(rec) -> Reply:
    text = rec.user_text
    if "[Assistant 1's answer]" in text:
        first = text.split("[Assistant 1's answer]", 1)[1].split("[Assistant 2's answer]", 1)[0]
        first_is_a = any(a and a in first for a in rf.A.values())
        if any(q in text for q in CLOSED_QA):  # "8 3" in both orders: a parsed tie; the probabilities favour A
            top = [lp(**{"8": 0.9, "2": 0.1}), {" ": 0.0}, lp(**{"3": 0.9, "9": 0.1})] if first_is_a else \
                  [lp(**{"8": 0.55, "2": 0.45}), {" ": 0.0}, lp(**{"3": 0.9, "9": 0.1})]
            return Reply(content="8 3\nThe first answer is better.", top_logprobs=top)
        return Reply(content="9 2\nThe first answer is better." if first_is_a else "2 9\nThe second is better.",
                     top_logprobs=[lp(**{"9": 0.8, "8": 0.2}), {" ": 0.0}, lp(**{"2": 0.7, "3": 0.3})] if first_is_a
                     else [lp(**{"2": 0.7, "3": 0.3}), {" ": 0.0}, lp(**{"9": 0.8, "8": 0.2})])
    return rf.judge(rec)


@pytest.fixture(scope="module")
def labelled(tmp_path_factory):
    """The run, with a label on every battle item of model_a vs model_b: model_a better, except B on every
    third item (so the judge, which mostly prefers model_a, is neither perfect nor useless)."""
    tmp = tmp_path_factory.mktemp("kinds")
    os.environ.setdefault("KINDS_KEY", "sk-kinds")
    with FakeOpenAIServer() as server:
        server.reply_fn = judge
        cfg = {"language": "en", "save_path": str(tmp / "save"), "target_file": str(rf.EN / "targets.json"),
               "answers": [{"name": "model_a", "path": str(rf.EN / "answers_model_a.json")},
                           {"name": "model_b", "path": str(rf.EN / "answers_model_b.json")}],
               "category": {c: {"GPT": ["correctness"]} for c in ("closed_qa", "classification", "extraction",
                                                                   "rewriting", "summarization")},
               "judge": {"backend": "openai", "model": "fake-judge", "base_url": server.url, "api_key_env": "KINDS_KEY",
                         "mode": "logprobs", "max_retries": 1, "timeout": 5, "both_orders": True}}
        (tmp / "config.json").write_text(json.dumps(cfg))
        assert main(["--config", str(tmp / "config.json"), "--no-charts"]) in (0, 3)
    save = tmp / "save"
    bt = json.loads((save / "battles" / "model_a__vs__model_b.json").read_text())
    truth = {}
    for i, it in enumerate(bt["items"]):
        truth[(it["id"], it["category"])] = "B" if i % 3 == 2 else "A"
        append_label(save, {"id": it["id"], "category": it["category"], "model_a": "model_a", "model_b": "model_b",
                            "verdict": truth[(it["id"], it["category"])]})
    return save, bt, truth


def expected(bt: dict, truth: dict, field: str) -> dict:
    pairs = [(truth[(it["id"], it["category"])], it.get(field)) for it in bt["items"]
             if it.get(field) in ("A", "B", "tie")]
    decided = [(t, v) for t, v in pairs if t in ("A", "B")]
    k = sum(v == t for t, v in decided) + 0.5 * sum(v == "tie" for _, v in decided)
    return {"n": len(decided), "accuracy": k / len(decided),
            "kappa": cohen_kappa_score([t for t, _ in pairs], [v for _, v in pairs])}


def test_the_three_kinds_of_verdict_against_the_labels(labelled, tmp_path):
    save, bt, truth = labelled
    raw = [it["verdict"] for it in bt["items"]]
    weighted = [it.get("weighted_verdict") for it in bt["items"]]
    assert "tie" in raw and None not in weighted and weighted != raw  # the kinds differ on this run
    assert all(it.get("calibrated_verdict") in ("A", "B", "tie") for it in bt["items"])
    out = tmp_path / "check.json"
    proc = eval_py("judge-check", "--labels", str(save), "--output", str(out))
    assert proc.returncode == 0, proc.stderr
    rec = json.loads(out.read_text())
    vs = rec["agreement"]["verdicts"]
    for kind, field in (("raw", "verdict"), ("weighted", "weighted_verdict"), ("calibrated", "calibrated_verdict")):
        want = expected(bt, truth, field)
        got = vs[kind]
        assert got["missing"] is None and got["n"] == want["n"]
        assert got["accuracy"] == pytest.approx(want["accuracy"], abs=1e-4)
        assert got["kappa"] == pytest.approx(want["kappa"], abs=1e-9)
        assert got["ci95"][0] <= got["accuracy"] <= got["ci95"][1]
    assert vs["raw"]["accuracy"] == rec["agreement"]["accuracy"]  # the parsed row is the headline agreement
    assert vs["weighted"]["accuracy"] != vs["raw"]["accuracy"]
    lines = proc.stdout.splitlines()
    w_line = next(x for x in lines if x.startswith("judge, probability-weighted"))
    c_line = next(x for x in lines if x.startswith("judge, position-calibrated"))
    assert f"{vs['weighted']['accuracy']:.3f}" in w_line and f"{vs['weighted']['kappa']:.3f}" in w_line
    assert f"{vs['calibrated']['accuracy']:.3f}" in c_line and f" {vs['calibrated']['n']} " in c_line


def test_a_run_without_probabilities_says_so_on_the_line(tmp_path):
    with FakeOpenAIServer() as server:
        save = vf.battle_run(tmp_path, server)
    bt = json.loads((save / "battles" / "model_a__vs__model_b.json").read_text())
    assert all(it.get("weighted_verdict") is None for it in bt["items"])
    for it in bt["items"]:
        append_label(save, {"id": it["id"], "category": it["category"], "model_a": "model_a", "model_b": "model_b",
                            "verdict": "A"})
    proc = eval_py("judge-check", "--labels", str(save), "--output", str(tmp_path / "c.json"))
    assert proc.returncode == 0, proc.stderr
    line = next(x for x in proc.stdout.splitlines() if x.startswith("judge, probability-weighted"))
    assert "none: the run has no probabilities" in line
    rec = json.loads((tmp_path / "c.json").read_text())
    assert rec["agreement"]["verdicts"]["weighted"]["n"] == 0
    assert "no probabilities" in rec["agreement"]["verdicts"]["weighted"]["missing"]
    assert rec["agreement"]["verdicts"]["calibrated"]["missing"] is None  # the scores calibrate


def test_report_and_viewer_say_the_labels_verdict(labelled, tmp_path):
    save, _, _ = labelled
    assert not (save / "judge_check.json").exists()
    proc = eval_py("judge-check", "--labels", str(save), "--output", str(tmp_path / "c.json"))
    rec = json.loads((tmp_path / "c.json").read_text())
    assert rec["trustworthy"] in (True, False)
    word = "trustworthy" if rec["trustworthy"] else "NOT trustworthy"
    used = rec["agreement"]["n"] + rec["label_ties_left_out"]
    # the report
    proc = eval_py("report", str(save))
    assert proc.returncode == 0, proc.stderr
    html = (save / "report.html").read_text(encoding="utf-8")
    line = html.split("<p>Judge check:", 1)[1].split("</p>", 1)[0]
    assert "not checked" not in line and f">{word}</strong>" in line
    assert f"agreement {rec['agreement']['accuracy']:.3f}" in line
    assert f"from your {used} labels" in line and "no label-free check (judge_check.json) is stored" in line
    # the viewer: the runs list and the run page's data
    view = vf.start_view(save)
    try:
        runs = view.json("/api/runs")["runs"]
        assert len(runs) == 1 and runs[0]["trust"]["trustworthy"] is rec["trustworthy"]
        assert runs[0]["trust"]["source"] == "labels" and runs[0]["trust"]["verdict"] == rec["verdict_text"]
        run = view.json(f"/api/run?run={runs[0]['rid']}")
        jc = run["headline"]["judge_check"]
        assert jc["trustworthy"] is rec["trustworthy"] and jc["source"] == "labels"
        assert jc["verdict"] == rec["verdict_text"].split(": ", 1)[1] and f"from your {used} labels" in jc["note"]
        assert run["labels"]["trustworthy"] is rec["trustworthy"]  # the labels panel says the same
    finally:
        view.stop()
