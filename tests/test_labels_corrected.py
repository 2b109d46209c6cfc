"""Label-corrected verdicts (issue 44): the label queue, `eval.py label`, `judge-check --labels --json`, the
closing lines and the Python API, on constructed data with known answers (a hand computation of the
estimate, inverse-probability weights, scikit-learn's kappa) and on a real save path judged by the fake
OpenAI-compatible server (tests/view_fixtures.py)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score

from evaluate import api
from evaluate.judgecheck.corrected import corrected_from
from evaluate.judgecheck.queue import gpt_metrics, next_units, rating_units
from evaluate.savepath.labels import Label, QueueDraw, QueueState, read_labels, read_queues
from evaluate.savepath.log import RunLog, read_run_log
from evaluate.stats.ppi import corrected_mean, rating_error

try:
    from tests import view_fixtures as vf
    from tests.fake_openai_server import FakeOpenAIServer
except ImportError:
    import view_fixtures as vf
    from fake_openai_server import FakeOpenAIServer

REPO = Path(__file__).resolve().parents[1]
ESTIMATE_KEYS = {"estimate", "low", "high"}


def battle(a: str, b: str, verdicts: list[str], flipped: set[int] = frozenset()) -> dict:
    items = []
    for i, v in enumerate(verdicts, 1):
        orders = [{"order": o, "verdict": v, "scores": None, "raw": "", "reason": ""} for o in ("AB", "BA")]
        items.append({"id": str(i), "category": "qa", "verdict": v, "orders": orders, "flipped": i in flipped,
                      "inconsistent": i in flipped})
    return {"summary": {"model_a": a, "model_b": b, "items": len(items)}, "items": items}


def queue_of(n: int, design: str, p: list[float] | None = None, draws: list[int] | None = None,
             handed: list[int] | None = None) -> QueueState:
    units = [[str(i), "qa", "m1", "m2"] for i in range(1, n + 1)]
    q = QueueState(kind="battle", design=design, seed=7, metric=None, units=units, p=p or [1 / n] * n,
                   draws=draws if draws is not None else list(range(n)))
    for d in handed if handed is not None else range(len(q.draws)):
        q.handed[d] = ["ann"]
    return q


def on(q: QueueState, draw: int, verdict: str, *, annotator: str = "ann", swap: bool = False) -> Label:
    unit = q.units[q.draws[draw]]
    a, b = (unit[3], unit[2]) if swap else (unit[2], unit[3])
    return Label(id=unit[0], category="qa", model_a=a, model_b=b, verdict=verdict, annotator=annotator,
                 queue=QueueDraw(seed=q.seed, design=q.design, draw=draw, p=q.p[q.draws[draw]]))


JUDGE = ["A", "A", "B", "tie", "A", "B", "A", "A"]  # f = 1, 1, 0, .5, 1, 0, 1, 1


def test_the_estimate_is_the_hand_computation_on_a_tiny_case(tmp_path):
    """8 items, uniform queue, labels on draws 0-3 (items 1-4): y = 1, 0, 0, 0.5; the second given with the
    models the other way round ("A" for (m2, m1) is 0 for m1); a fifth label off the queue, left out."""
    q = queue_of(8, "uniform", handed=[0, 1, 2, 3])
    labels = [on(q, 0, "A"), on(q, 1, "A", swap=True), on(q, 2, "B"), on(q, 3, "tie"),
              Label(id="5", category="qa", model_a="m1", model_b="m2", verdict="B", annotator="ann")]  # off the queue
    log = RunLog(path=tmp_path, battles=[battle("m1", "m2", JUDGE)])
    d = corrected_from(log, labels, [], {q.key: q})
    (p,) = d["pairs"]
    y, f_lab = [1.0, 0.0, 0.0, 0.5], [1.0, 1.0, 0.0, 0.5]
    f_all = [1, 1, 0, 0.5, 1, 0, 1, 1]
    lam = p["lam"]
    # the estimate by hand: lam * mean(f over all items) + mean(y - lam f over the labelled ones)
    by_hand = lam * np.mean(f_all) + np.mean(np.array(y) - lam * np.array(f_lab))
    assert p["label_corrected"]["estimate"] == pytest.approx(by_hand, abs=1e-6)
    assert p["labels_only"]["estimate"] == pytest.approx(np.mean(y), abs=1e-6)
    assert p["judge_only"]["estimate"] == pytest.approx(np.mean(f_all), abs=1e-6)
    ref = corrected_mean(y, f_lab, f_all, null=0.5)
    assert p["label_corrected"]["low"] == pytest.approx(ref.label_corrected.low, abs=1e-6)
    assert p["label_corrected"]["high"] == pytest.approx(ref.label_corrected.high, abs=1e-6)
    assert p["labels_used"] == 4 and p["items"] == 8 and p["left_out"] == {"off the queue": 1}
    assert d["left_out"] == {"off the queue": 1}


def test_several_annotators_are_averaged_and_their_kappa_is_sklearns(tmp_path):
    n = 12
    q = queue_of(n, "uniform")
    ann = ["A", "A", "B", "B", "tie", "A", "B", "A", "A", "B", "tie", "A"]
    bob = ["A", "B", "B", "B", "A", "A", "B", "tie", "A", "B", "tie", "B"]
    labels = [on(q, i, v, annotator="ann") for i, v in enumerate(ann)]
    labels += [on(q, i, v, annotator="bob") for i, v in enumerate(bob)]
    for lab in labels:
        q.handed.setdefault(lab.queue.draw, []).append(lab.annotator)
    log = RunLog(path=tmp_path, battles=[battle("m1", "m2", (JUDGE * 2)[:n])])
    d = corrected_from(log, labels, [], {q.key: q})
    (p,) = d["pairs"]
    value = {"A": 1.0, "tie": 0.5, "B": 0.0}
    y = [(value[a] + value[b]) / 2 for a, b in zip(ann, bob)]
    f = [value[v] for v in (JUDGE * 2)[:n]]
    assert p["labels_used"] == n  # items, each the mean of two labels
    assert p["labels_only"]["estimate"] == pytest.approx(np.mean(y), abs=1e-6)
    ref = corrected_mean(y, f, f, null=0.5)
    assert p["label_corrected"]["estimate"] == pytest.approx(ref.label_corrected.estimate, abs=1e-6)
    (k,) = d["annotators"]["kappa"]
    assert (k["a"], k["b"], k["items"]) == ("ann", "bob", n)
    assert k["kappa"] == pytest.approx(cohen_kappa_score(ann, bob), abs=1e-6)
    judge_agree = d["annotators"]["agreement_with_judge"]["ann"]
    decided = [(a, j) for a, j in zip(ann, (JUDGE * 2)[:n]) if a in ("A", "B")]
    assert judge_agree["agreement"] == pytest.approx(
        round(sum(1.0 if a == j else 0.5 if j == "tie" else 0.0 for a, j in decided) / len(decided), 4))


def test_active_draws_are_weighted_by_inverse_probability(tmp_path):
    """An active queue over two pairs: draws are weighted 1 / (N p_j / P(pair)) within the pair, a unit
    drawn twice counts twice, draws of the other pair do not enter."""
    n = 6
    p = np.array([0.05, 0.05, 0.2, 0.1, 0.05, 0.05, 0.1, 0.1, 0.1, 0.1, 0.05, 0.05])
    units = [[str(i), "qa", "m1", "m2"] for i in range(1, n + 1)] + [[str(i), "qa", "m1", "m3"] for i in range(1, n + 1)]
    draws = [2, 3, 2, 7, 0, 9]
    q = QueueState(kind="battle", design="active", seed=1, metric=None, units=units, p=p.tolist(), draws=draws)
    for dd in range(len(draws)):
        q.handed[dd] = ["ann"]
    verdict = {2: "B", 3: "A", 0: "A", 7: "A", 9: "B"}
    labels = []
    for dd, u in enumerate(draws):
        if dd == 2:
            continue  # unit 2 again: the same label counts for this draw too
        unit = units[u]
        labels.append(Label(id=unit[0], category="qa", model_a=unit[2], model_b=unit[3], verdict=verdict[u],
                            annotator="ann", queue=QueueDraw(seed=1, design="active", draw=dd, p=float(p[u]))))
    log = RunLog(path=tmp_path, battles=[battle("m1", "m2", JUDGE[:n]), battle("m1", "m3", JUDGE[:n])])
    d = corrected_from(log, labels, [], {q.key: q})
    pair = next(x for x in d["pairs"] if x["model_b"] == "m2")
    in_pair = [2, 3, 2, 0]  # the draws of the pair (m1, m2), in order
    total = p[:n].sum()
    w = [total / (n * p[u]) for u in in_pair]
    value = {"A": 1.0, "tie": 0.5, "B": 0.0}
    y = [value[verdict[u]] for u in in_pair]
    f_all = [value[v] for v in JUDGE[:n]]
    f_lab = [f_all[u] for u in in_pair]
    ref = corrected_mean(y, f_lab, f_all, weights=w, null=0.5)
    assert pair["labels_used"] == 4
    assert pair["label_corrected"]["estimate"] == pytest.approx(ref.label_corrected.estimate, abs=1e-6)
    assert pair["labels_only"]["estimate"] == pytest.approx(float(np.mean(np.array(w) * y)), abs=1e-6)


def test_a_v1_label_file_is_read_as_anonymous_off_the_queue(tmp_path):
    (tmp_path / "labels.jsonl").write_text(json.dumps({"id": "1", "category": "qa", "model_a": "m1", "model_b": "m2",
                                                       "verdict": "A", "time": "t", "schema": "llm-eval-label/1"})
                                           + "\n", encoding="utf-8")
    (lab,) = read_labels(tmp_path).labels
    assert lab.annotator == "anonymous" and lab.queue is None and lab.verdict == "A"


# --- through eval.py on a real run --------------------------------------------------------------------
def eval_py(*argv: str) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "eval.py", *argv], cwd=REPO, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "NO_COLOR": "1", "PYTHONPATH": str(REPO)})
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    return proc


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("corrected")
    server = FakeOpenAIServer().start()
    try:
        yield vf.battle_run(tmp, server)
    finally:
        server.stop()


@pytest.fixture
def save(made, tmp_path):
    out = tmp_path / "run"
    shutil.copytree(made, out)
    return out


def test_the_queue_is_the_same_for_every_caller_and_stores_each_draws_probability(save, tmp_path):
    other = tmp_path / "again"
    shutil.copytree(save, other)
    first = [(u.id, u.model_a, u.model_b) for u in next_units(save, 8, seed=5)]
    full = [(u.id, u.model_a, u.model_b) for u in next_units(other, 10, seed=5, record=False)]
    assert first == full[:8]  # same seed, same draws
    assert first != [(u.id, u.model_a, u.model_b) for u in next_units(other, 8, seed=6, annotator="x")]
    assert [(u.id, u.model_a) for u in next_units(save, 3, seed=5, annotator="b")] == [(i, a) for i, a, _ in first[:3]]
    proc = eval_py("label", str(save), "--next", "2", "--seed", "5", "--json")  # the anonymous annotator goes on
    assert [(x["id"], x["model_a"]) for x in json.loads(proc.stdout)["items"]] == [(i, a) for i, a, _ in full[8:10]]
    queue = next(q for q in read_queues(save).values() if q.seed == 5)
    n = len(queue.units)
    proc = eval_py("label", str(save), "--set", f"{first[0][0]}=A", "--pair", f"{first[0][1]},{first[0][2]}",
                   "--set", f"{first[1][0]}=tie", "--pair", f"{first[1][1]},{first[1][2]}")
    assert proc.returncode == 0, proc.stderr
    assert "2 label(s) stored, 2 on the queue, 0 off it" in proc.stdout
    labs = read_labels(save).labels
    assert [(x.queue.draw, x.queue.seed, x.queue.design) for x in labs] == [(0, 5, "uniform"), (1, 5, "uniform")]
    assert all(x.queue.p == pytest.approx(1 / n) for x in labs)
    stored = json.loads((save / "labels" / "corrected.json").read_text())
    assert sum(p["labels_used"] for p in stored["pairs"]) == 2


def test_active_design_draws_more_where_the_judge_is_unsure(save):
    units = next_units(save, 40, design="active", seed=2, record=False)
    queue = next(q for q in read_queues(save).values() if q.design == "active")
    p = np.array(queue.p)
    assert p.max() > p.min() > 0 and p.sum() == pytest.approx(1.0)
    # the fake judge flips with the order on closed_qa: in the pair (model_a, model_b), whose other items it
    # decides the same way in both orders, those items are the most likely draws
    pair = [i for i, u in enumerate(queue.units) if u[2:] == ["model_a", "model_b"]]
    flips = [i for i in pair if queue.units[i][1] == "closed_qa"]
    assert flips and min(p[i] for i in flips) > max(p[i] for i in pair if i not in flips)
    assert all(u.p == pytest.approx(p[queue.draws[u.draw]]) for u in units)


def test_judge_check_json_has_the_contract_shape(save):
    units = next_units(save, 12, annotator="ann")
    labels = [{"id": u.id, "category": u.category, "model_a": u.model_a, "model_b": u.model_b,
               "verdict": ["A", "B", "tie"][i % 3]} for i, u in enumerate(units)]
    stored = api.add_labels(save, labels, annotator="ann")
    assert all(x["queue"] is not None for x in stored)
    api.add_labels(save, [{"id": units[0].id, "model_a": units[0].model_a, "model_b": units[0].model_b,
                           "category": units[0].category, "verdict": "A"}], annotator="off")
    proc = eval_py("judge-check", "--labels", str(save), "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert set(out) >= {"pairs", "level", "ratings", "annotators"}
    for p in out["pairs"]:
        assert {"model_a", "model_b", "labels_used", "effective_labels", "label_corrected", "labels_only",
                "judge_only", "left_out", "labels_to_decide", "items", "categories"} <= set(p)
        for row in ("label_corrected", "labels_only", "judge_only"):
            assert ESTIMATE_KEYS <= set(p[row])
    assert sum(p["labels_used"] for p in out["pairs"]) == 12
    assert sum(p["left_out"].get("off the queue", 0) for p in out["pairs"]) == 1
    assert out == {**api.corrected(save), "problems": out["problems"]}
    text = eval_py("judge-check", "--labels", str(save)).stdout
    assert "label-corrected" in text and "(if the judge were right)" in text and "1 off the queue" in text
    summary = eval_py("summary", str(save), "--width", "200").stdout
    assert "what people would say: " in summary and "left out: 1 off the queue" in summary


def test_labels_of_items_the_run_lacks_are_named(save):
    from evaluate.savepath.labels import append_label

    append_label(save, {"id": "no-such", "category": "qa", "model_a": "model_a", "model_b": "ghost", "verdict": "A"})
    append_label(save, {"id": "1", "category": "qa", "model_a": "model_a", "model_b": "model_b", "verdict": "A"})
    d = api.corrected(save)
    named = {(x["id"], x["model_b"]) for x in d["not_in_run"]}
    assert named == {("no-such", "ghost"), ("1", "model_b")} and d["left_out"] == {"not in the run": 2}
    assert "no model 'ghost'" in " ".join(x["why"] for x in d["not_in_run"])
    proc = eval_py("judge-check", "--labels", str(save))
    assert "not in the run: item 'no-such'" in proc.stdout and "no model 'ghost'" in proc.stdout


def _one_battle_item(save: Path) -> tuple[str, str]:
    bt = json.loads((save / "battles" / "model_a__vs__model_b.json").read_text())
    return bt["items"][0]["id"], bt["items"][0]["category"]


@pytest.mark.parametrize("args, named", [
    (["--set", "{item}=A", "--set", "no-such-item=B", "--pair", "model_a,model_b"], ["label 2", "no-such-item", '"id"']),
    (["--set", "{item}=A", "--pair", "model_a,ghost"], ["label 1", '"model_b"', "ghost"]),
    (["--set", "{item}=maybe", "--pair", "model_a,model_b"], ["'{item}=maybe'", '"verdict"', "A, B, tie"]),
    (["--set", "{item}=4", "--metric", "nope", "--model", "model_a"], ['"metric"', "'nope'", "correctness"]),
    (["--set", "{item}=9", "--metric", "correctness", "--model", "model_a"], ['"score"', "1-5", "9"]),
    (["--set", "{item}=3", "--metric", "correctness", "--model", "ghost"], ['"model"', "ghost"]),
])
def test_bad_labels_exit_2_naming_the_label_and_field_and_write_nothing(save, args, named):
    item, _ = _one_battle_item(save)
    (save / "labels.jsonl").write_text("", encoding="utf-8")
    before = (save / "labels.jsonl").read_bytes()
    proc = eval_py("label", str(save), *[a.replace("{item}", item) for a in args])
    assert proc.returncode == 2, proc.stdout + proc.stderr
    err = proc.stderr.strip().splitlines()[-1]
    for word in named:
        assert word.replace("{item}", item) in err, err
    assert (save / "labels.jsonl").read_bytes() == before
    assert not (save / "labels" / "corrected.json").exists()


def test_an_import_with_a_broken_line_takes_nothing_and_a_good_one_is_off_the_queue(save, tmp_path):
    item, cat = _one_battle_item(save)
    good = {"id": item, "category": cat, "model_a": "model_a", "model_b": "model_b", "verdict": "A", "annotator": "eve"}
    broken = tmp_path / "broken.jsonl"
    broken.write_text(json.dumps(good) + "\n{\"id\": \"2\", \"verdict\"\n", encoding="utf-8")
    proc = eval_py("label", str(save), "--import", str(broken))
    assert proc.returncode == 2 and f"{broken} line 2: not JSON" in proc.stderr and "nothing was taken" in proc.stderr
    assert not (save / "labels.jsonl").exists()
    wrong = tmp_path / "wrong.csv"
    wrong.write_text(f"id,category,model_a,model_b,verdict\n{item},{cat},model_a,model_b,A\n{item},{cat},model_a,"
                     "model_b,X\n", encoding="utf-8")
    proc = eval_py("label", str(save), "--import", str(wrong))
    assert proc.returncode == 2 and f"{wrong} line 3" in proc.stderr and '"verdict"' in proc.stderr
    assert not (save / "labels.jsonl").exists()
    ok = tmp_path / "ok.csv"
    ok.write_text(f"id,category,model_a,model_b,verdict,annotator\n{item},{cat},model_b,model_a,B,eve\n", encoding="utf-8")
    proc = eval_py("label", str(save), "--import", str(ok))
    assert proc.returncode == 0 and "off the queue" in proc.stdout
    (lab,) = read_labels(save).labels
    assert lab.queue is None and lab.annotator == "eve"
    # a file that says how its items were sampled: its draws of the seed-0 uniform queue are on the queue
    first = next_units(save, 1, seed=9, record=False)[0]
    sampled = tmp_path / "sampled.jsonl"
    sampled.write_text(json.dumps({"id": first.id, "category": first.category, "model_a": first.model_a,
                                   "model_b": first.model_b, "verdict": "tie", "annotator": "sam",
                                   "queue": {"seed": 9, "design": "uniform", "draw": 0}}) + "\n", encoding="utf-8")
    proc = eval_py("label", str(save), "--import", str(sampled))
    assert proc.returncode == 0 and "on the queue (uniform draws, seed 9, draw 0" in proc.stdout, proc.stdout


def test_ratings_get_each_models_mean_and_the_paired_difference(save):
    units = api.next_to_label(save, 30, metric="correctness", annotator="r")
    scores = [5, 4, 2, 1, 3]
    labels = [{"kind": "rating", "id": u["id"], "category": u["category"], "model": u["model"], "metric": u["metric"],
               "score": scores[i % 5]} for i, u in enumerate(units)]
    api.add_labels(save, labels, annotator="r")
    d = api.corrected(save)
    mean_a = np.mean([lab["score"] for lab in labels if lab["model"] == "model_a"])
    row = next(r for r in d["ratings"] if r.get("model") == "model_a")
    assert row["labels_only"]["estimate"] == pytest.approx(mean_a, abs=1e-6)
    assert row["labels_used"] == sum(lab["model"] == "model_a" for lab in labels)
    # the corrected row is corrected_mean on the rating's scale with a rating's judge error (half the range)
    log = read_run_log(save)
    lo, hi = gpt_metrics(log)["correctness"]
    judged = {(u[0], u[1]): v for u, v in rating_units(log, "correctness") if u[2] == "model_a"}
    mine = [lab for lab in labels if lab["model"] == "model_a"]
    ref = corrected_mean([lab["score"] for lab in mine], [judged[(lab["id"], lab["category"])] for lab in mine],
                         list(judged.values()), bounds=(lo, hi), error=rating_error((lo, hi)))
    got = row["label_corrected"]
    assert (got["estimate"], got["low"], got["high"]) == pytest.approx(
        (ref.label_corrected.estimate, ref.label_corrected.low, ref.label_corrected.high), abs=1e-6)
    assert row["lam"] == pytest.approx(ref.lam, abs=1e-6)
    by = {(lab["model"], lab["id"], lab["category"]): lab["score"] for lab in labels}
    both = [(by[("model_a", i, c)] - by[("model_b", i, c)]) for (m, i, c) in by if m == "model_a" and ("model_b", i, c) in by]
    diff = next(r for r in d["ratings"] if r.get("model_a") == "model_a" and r.get("model_b") == "model_b")
    assert diff["labels_used"] == len(both)
    assert diff["difference"]["labels_only"]["estimate"] == pytest.approx(np.mean(both), abs=1e-6)


def test_the_gate_may_name_the_label_corrected_win_rate(save):
    """`--fail-under-win-rate A:B:label-corrected=X` gates on what people would say: with no label on the
    queue it fails and says how to label; with labels it passes below the estimate and fails (exit 1)
    above it, the line giving the interval and the labels; in the other order the rate is one minus it;
    a misspelt estimate is exit 2 with the right name."""
    pairs = api.corrected(save)["pairs"]
    a, b = pairs[0]["model_a"], pairs[0]["model_b"]
    gate = f"{a}:{b}:label-corrected="
    proc = eval_py("summary", str(save), "--fail-under-win-rate", gate + "0.1")
    assert proc.returncode == 1 and "no label on the label queue" in proc.stdout and "eval.py label" in proc.stdout
    units = [u for u in next_units(save, 12, seed=3) if {u.model_a, u.model_b} == {a, b}][:6]
    assert len(units) >= 4
    sets = [x for i, u in enumerate(units) for x in ("--set", f"{u.id}={'AB'[i % 2] if i < 4 else 'tie'}",
                                                     "--pair", f"{u.model_a},{u.model_b}")]
    assert eval_py("label", str(save), *sets).returncode == 0
    (pair,) = [p for p in api.corrected(save)["pairs"] if (p["model_a"], p["model_b"]) == (a, b)]
    x = pair["label_corrected"]["estimate"]
    assert pair["labels_used"] == len(units) and 0 < x < 1
    passed = eval_py("summary", str(save), "--fail-under-win-rate", gate + f"{x - 0.01:.4f}")
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert f"gate passed: --fail-under-win-rate {gate}" in passed.stdout
    assert f"label-corrected win rate {x:.3f}" in passed.stdout and f"{len(units)} labels" in passed.stdout
    failed = eval_py("summary", str(save), "--fail-under-win-rate", gate + f"{x + 0.01:.4f}")
    assert failed.returncode == 1 and "gate FAILED" in failed.stdout
    other = eval_py("summary", str(save), "--fail-under-win-rate", f"{b}:{a}:label-corrected={1 - x - 0.01:.4f}")
    assert other.returncode == 0 and f"label-corrected win rate {1 - x:.3f}" in other.stdout
    got = api.open_run(save).gate(fail_under_win_rate=[gate + f"{x + 0.01:.4f}"])
    assert [r.passed for r in got] == [False]
    bad = eval_py("summary", str(save), "--fail-under-win-rate", f"{a}:{b}:label-corected=0.5")
    assert bad.returncode == 2 and 'did you mean "label-corrected"' in bad.stderr


def test_label_next_shows_the_question_and_both_answers(save):
    """A person labelling from the terminal reads what to judge under each item: the question and each model's
    answer as the result files hold them (A and B in the pair's order); --brief leaves them out."""
    proc = eval_py("label", str(save), "--next", "2", "--seed", "11", "--annotator", "terminal")
    assert proc.returncode == 0, proc.stderr
    # the queue is one sequence: an annotator who has none yet is handed its first draw, as "terminal" was
    (unit, *_), lines = next_units(save, 1, seed=11, annotator="peek", record=False), proc.stdout.splitlines()
    log = RunLog.read(save)
    item = {r["model"]: it for r in log.results for it in r["items"] if it["id"] == unit.id and
            it["category"] == unit.category}
    head = next(i for i, line in enumerate(lines) if line.startswith(f"{unit.id}\t"))
    assert lines[head + 1].startswith("    question: ") and item[unit.model_a]["instruction"][:40] in lines[head + 1]
    assert lines[head + 2].startswith(f"    A = {unit.model_a}: ") and lines[head + 3].startswith(f"    B = {unit.model_b}: ")
    assert " ".join(item[unit.model_b]["output"].split())[:40] in lines[head + 3]
    brief = eval_py("label", str(save), "--next", "1", "--seed", "11", "--annotator", "other", "--brief")
    assert brief.returncode == 0 and "question:" not in brief.stdout and brief.stdout.count("\n") == 1
