"""AlpacaEval 2: the annotation readers, the raw leaderboard columns against the published ones, the
length-controlled win rate (constructed data with a known answer, then the published numbers,
in-sample and with models left out of the reference set), and `eval.py leaderboard`."""

from __future__ import annotations

import csv
import json
import math
import sys
import types
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from evaluate.benchmarks.alpaca_eval.leaderboard import (COLUMNS, EXTRA_COLUMNS, ModelAnnotations, head_to_head, leaderboard,
                                             read_annotations, read_model_outputs)
from evaluate.commands.leaderboard import main as leaderboard_main
from evaluate.core.errors import InputError
from evaluate.stats.length_control import METHOD_JOINT, METHOD_MINIMAL, fit_glms, length_controlled_win_rates

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "alpaca_eval"


def _sig(z):
    return 1.0 / (1.0 + np.exp(-z))


# --- raw metrics, by hand -------------------------------------------------------------------------
def test_head_to_head_hand_computed():
    out = head_to_head([1.0, 2.0, 1.5, 0, 1.2, None])
    valid = np.array([0.0, 1.0, 0.5, 0.5, 0.2])
    assert out["win_rate"] == pytest.approx(44.0)
    assert out["standard_error"] == pytest.approx(valid.std(ddof=1) / math.sqrt(5) * 100)
    assert (out["n_wins"], out["n_wins_base"], out["n_draws"], out["n_total"]) == (1, 2, 2, 5)
    assert out["discrete_win_rate"] == pytest.approx(40.0)  # 1.2 rounds to a baseline win


# --- the LC method on constructed data ------------------------------------------------------------
def test_fit_glms_recovers_known_coefficients():
    rng = np.random.default_rng(0)
    k, n = 3, 3000
    x = np.stack([rng.uniform(-1, 1, (k, n)), rng.normal(0, 1.5, (k, n)), np.ones((k, n))], axis=-1)
    truth = np.array([[-2.0, 1.0, -1.0], [-0.5, 0.7, 0.3], [-3.0, 1.3, -2.5]])
    y = _sig(np.einsum("knp,kp->kn", x, truth))  # soft labels equal to the true probabilities
    assert np.allclose(fit_glms(x, y, np.ones((k, n))), truth, atol=2e-3)


def _constructed(rng, a, b, n=600):
    """Models with true quality a_m, one judge length slope b and a shared instruction difficulty."""
    k = len(a)
    d = rng.normal(0, 1.5, n)
    len_base = rng.uniform(500, 3000, (k, n))
    len_model = len_base * rng.lognormal(rng.normal(0, 0.6, (k, 1)), 0.5, (k, n))
    delta = len_base - len_model
    t = np.tanh(delta / delta.std(axis=1, ddof=1, keepdims=True))
    y = _sig(np.asarray(a)[:, None] + b * t + d[None, :])
    truth = 100 * _sig(np.asarray(a)[:, None] + d[None, :]).mean(1)
    return y, len_model, len_base, truth


def test_lc_recovers_the_equal_length_win_rate():
    rng = np.random.default_rng(1)
    a = [-3.0, -2.0, -1.0, 0.0, 0.5, 1.0, -2.5, -0.5]
    y, lm, lb, truth = _constructed(rng, a, b=-2.0)
    res = length_controlled_win_rates(y, lm, lb)
    assert res.method == METHOD_JOINT and len(res.reference) == len(a)
    assert np.abs(res.win_rate - truth).max() < 0.5
    raw = 100 * y.mean(1)
    assert np.abs(raw - truth).max() > 3  # the length effect is real: raw win rates are off


def test_lc_without_reference_set_is_the_minimal_glm():
    rng = np.random.default_rng(2)
    t = rng.uniform(-1, 1, 4000)
    lb = rng.uniform(500, 3000, 4000)
    delta = np.arctanh(np.clip(t, -0.999, 0.999))
    lm = lb - delta * 1000
    tt = np.tanh((lb - lm) / (lb - lm).std(ddof=1))
    y = _sig(-1.0 - 1.5 * tt)
    res = length_controlled_win_rates(y[None], lm[None], lb[None])
    assert res.method == METHOD_MINIMAL and res.difficulty is None
    assert res.win_rate[0] == pytest.approx(100 * _sig(-1.0), abs=0.05)


def test_lc_baseline_is_fifty():
    y = np.full((1, 10), 0.5)
    lens = np.full((1, 10), 100.0)
    res = length_controlled_win_rates(y, lens, lens, is_baseline=np.array([True]))
    assert res.win_rate[0] == 50.0 and res.standard_error[0] == 0.0


# --- readers --------------------------------------------------------------------------------------
def _row(i, model="m1", pref=1.5, **kw):
    row = {"instruction": f"q{i}", "output_1": "base answer", "generator_1": "base", "dataset": "d",
           "output_2": "model answer" * (i + 1), "generator_2": model, "annotator": "judge", "preference": pref}
    row.update(kw)
    return row


def _write(path: Path, rows) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(rows), encoding="utf-8")
    return path


@pytest.mark.parametrize("rows, needle", [
    ({"a": 1}, "expected a JSON list"),
    ([], "empty"),
    ([_row(0), {k: v for k, v in _row(1).items() if k != "preference"}], "annotation 1: missing key 'preference'"),
    ([_row(0, pref="2")], "annotation 0: key 'preference': expected a number"),
    ([_row(0, pref=3.5)], "annotation 0: key 'preference': expected 0 (draw), a number from 1 to 2"),
    ([_row(0), _row(1, generator_2=7)], "annotation 1: key 'generator_2': expected a string"),
    ([_row(0), _row(1, generator_1="other")], "annotation 1: key 'generator_1'"),
    ([_row(0), "x"], "annotation 1: expected an object"),
])
def test_read_annotations_errors(tmp_path, rows, needle):
    path = _write(tmp_path / "bad.json", rows)
    with pytest.raises(InputError) as err:
        read_annotations(path)
    assert str(path) in str(err.value) and needle in str(err.value)


def test_read_annotations_layouts(tmp_path):
    _write(tmp_path / "flat" / "whatever.json", [_row(i, "m1", 2.0) for i in range(3)])
    _write(tmp_path / "flat" / "other.json", [_row(i, "m2", 1.0) for i in range(3)])
    assert sorted(m.model for m in read_annotations(tmp_path / "flat")) == ["m1", "m2"]
    _write(tmp_path / "results" / "m1" / "judge" / "annotations.json", [_row(i, "m1") for i in range(3)])
    _write(tmp_path / "results" / "m1" / "model_outputs.json", [{"instruction": "q0"}])
    (found,) = read_annotations(tmp_path / "results")
    assert (found.model, found.baseline, found.annotator, len(found.rows)) == ("m1", "base", "judge", 3)
    _write(tmp_path / "dup" / "a.json", [_row(0, "m1")])
    _write(tmp_path / "dup" / "b.json", [_row(0, "m1")])
    with pytest.raises(InputError, match="also in"):
        read_annotations(tmp_path / "dup")
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="no annotations found"):
        read_annotations(tmp_path / "empty")


def test_leaderboard_refuses_mixed_baselines(tmp_path):
    a = read_annotations(_write(tmp_path / "a.json", [_row(i, "m1") for i in range(3)]))
    b = read_annotations(_write(tmp_path / "b.json", [_row(i, "m2", generator_1="other") for i in range(3)]))
    with pytest.raises(InputError, match="one baseline"):
        leaderboard(a + b)


def test_read_model_outputs(tmp_path):
    path = _write(tmp_path / "mo.json", [{"instruction": "q", "output": "a", "generator": "g", "dataset": "d"},
                                         {"instruction": "r", "output": 5, "generator": "g"}])
    with pytest.raises(InputError, match=r"output 1: key 'output': expected a string"):
        read_model_outputs(path)
    if not (DATA / "model_outputs").is_dir():
        pytest.skip("../shared/data is not present beside this checkout")
    recs = read_model_outputs(DATA / "model_outputs" / "alpaca-7b.json")
    assert len(recs) == 805 and recs[0].id == "0" and recs[0].category == "helpful_base"
    assert recs[0].extra["generator"] == "alpaca-7b" and recs[0].output.startswith("Some famous actors")


# --- the published numbers -------------------------------------------------------------------------
@pytest.fixture(scope="module")
def published():
    if not (DATA / "annotations").is_dir():
        pytest.skip("../shared/data is not present beside this checkout")
    with (DATA / "leaderboard_dev.csv").open(encoding="utf-8") as f:
        pub = {row[""]: row for row in csv.DictReader(f)}
    return pub, read_annotations(DATA / "annotations")


@pytest.fixture(scope="module")
def board(published):
    return leaderboard(published[1])


def _lc_errors(board, pub, names=None):
    return {r["model"]: r["length_controlled_winrate"] - float(pub[r["model"]]["length_controlled_winrate"])
            for r in board.rows if r["model"] in pub and (names is None or r["model"] in names)}


def test_raw_columns_equal_published(published, board):
    pub, _ = published
    rows = {r["model"]: r for r in board.rows}
    assert set(pub) <= set(rows) and len(pub) == 41
    for name, p in pub.items():
        r = rows[name]
        for col in ("win_rate", "standard_error", "discrete_win_rate"):
            assert abs(r[col] - float(p[col])) <= 0.01, (name, col)
        for col in ("n_wins", "n_wins_base", "n_draws", "n_total", "avg_length"):
            assert r[col] == int(p[col]), (name, col)


def test_lc_matches_published(published, board):
    pub, _ = published
    err = np.abs(list(_lc_errors(board, pub).values()))
    assert len(err) == 41  # the baseline included (50 by construction)
    assert np.median(err) <= 1.0 and err.max() <= 4.0, (np.median(err), err.max())
    assert board.lc_method == METHOD_JOINT and len(board.reference_models) == 41


def test_lc_left_out_models(published):
    """Every fourth model is scored with the difficulty and slope prior fitted without it."""
    pub, models = published
    names = sorted(m.model for m in models if m.model in pub and not m.is_baseline)
    out = set(names[::4])
    board = leaderboard(models, reference=[m.model for m in models if m.model not in out])
    assert len(board.reference_models) == len(models) - 1 - len(out)
    err = np.abs(list(_lc_errors(board, pub, out).values()))
    assert len(err) == len(out)
    assert np.median(err) <= 1.0 and err.max() <= 4.0, (np.median(err), err.max())


def test_truncation_attack_does_not_pay(published):
    """AlpacaEval's gpt4_gamed recipe: keep an answer where it is longer than the baseline's and won,
    cut every other one to 10 characters (judged a loss). The attacked copy must rank below the
    honest model; a per-model length fit without the slope prior gets it far above."""
    _, models = published
    source = next(m for m in models if m.model == "claude-2.1")
    rows = [r if len(r.output_2) > len(r.output_1) and r.preference > 1.5
            else replace(r, output_2=r.output_2[:10], preference=1.0) for r in source.rows]
    attacked = ModelAnnotations("attacked", source.baseline, source.annotator, "(constructed)", rows)
    lc = {r["model"]: r["length_controlled_winrate"] for r in leaderboard([*models, attacked]).rows}
    alone = leaderboard([attacked]).rows[0]["length_controlled_winrate"]
    assert lc["attacked"] < lc["claude-2.1"] - 5
    assert alone > lc["claude-2.1"]  # why the prior is needed


# --- the command ----------------------------------------------------------------------------------
def test_cli_writes_leaderboard_csv(published, tmp_path, capsys):
    pub, _ = published
    out = tmp_path / "lb.csv"
    assert leaderboard_main(["--alpaca-eval", str(DATA / "annotations"), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert all(len(line) <= 80 for line in printed.splitlines() if str(tmp_path) not in line)  # a path is never cut
    with out.open(encoding="utf-8") as f:
        reader = csv.reader(f)
        header = next(reader)
        rows = list(reader)
    assert header == ["", *COLUMNS, *EXTRA_COLUMNS]
    assert len(rows) == 42
    lc = [float(r[header.index("length_controlled_winrate")]) for r in rows]
    assert lc == sorted(lc, reverse=True)
    by_name = {r[0]: r for r in rows}
    fuse = by_name["FuseChat-Gemma-2-9B-Instruct"]
    assert float(fuse[header.index("win_rate")]) == pytest.approx(float(pub[fuse[0]]["win_rate"]), abs=1e-9)


def test_cli_bad_input_exits_2(tmp_path, capsys):
    bad = _write(tmp_path / "bad.json", [_row(0, pref="high")])
    assert leaderboard_main(["--alpaca-eval", str(bad), "--out", str(tmp_path / "x.csv")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "annotation 0" in err and "Traceback" not in err
    assert not (tmp_path / "x.csv").exists()
    with pytest.raises(SystemExit) as exc:
        leaderboard_main(["--alpaca-eval", str(bad), "--arena-hard", str(tmp_path)])
    assert exc.value.code == 2


def test_cli_single_file_flags_minimal_method(tmp_path, capsys):
    path = _write(tmp_path / "one.json", [_row(i, "m1", 1.0 + (i % 3) / 2) for i in range(12)])
    assert leaderboard_main(["--alpaca-eval", str(path), "--out", str(tmp_path / "one.csv")]) == 0
    assert "No reference set" in capsys.readouterr().out
    with (tmp_path / "one.csv").open(encoding="utf-8") as f:
        row = next(csv.DictReader(f))
    assert row["lc_method"] == METHOD_MINIMAL and row["lc_reference_models"] == "1"


def test_cli_arena_hard_writes_rows(tmp_path, capsys):
    """leaderboard --arena-hard on a small judgment folder: the CSV holds leaderboard_table's rows for
    the seed given, the question without a verdict is counted apart, the table fits 80 columns."""
    from evaluate.benchmarks.arena_hard.run import leaderboard_table

    (tmp_path / "model_judgment" / "j").mkdir(parents=True)
    (tmp_path / "model_answer").mkdir()
    verdicts = [("A>B", "A>B"), ("B>>A", "A=B"), ("A=B", None), ("B>A", "A>>B"), ("A<B", "B>A"), ("A>B", "B>A")]
    recs = [{"uid": f"q{i}", "category": "c", "judge": "j", "model": "m", "baseline": "b0",
             "games": [{"score": g1}, {"score": g2}]} for i, (g1, g2) in enumerate(verdicts)]
    (tmp_path / "model_judgment" / "j" / "m.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    for name, text in (("m", "# Title\n- a point\n**bold** words here"), ("b0", "plain words only")):
        rows = [{"uid": f"q{i}", "model": name, "messages": [{"role": "user", "content": "q"},
                {"role": "assistant", "content": {"answer": text * (i + 1)}}]} for i in range(len(verdicts))]
        (tmp_path / "model_answer" / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "ah.csv"
    code = leaderboard_main(["--arena-hard", str(tmp_path), "--judge", "j", "--baseline", "b0", "--seed", "3",
                             "--out", str(out)])
    assert code == 0
    printed = capsys.readouterr().out
    assert max(len(line) for line in printed.splitlines() if not line.startswith("wrote")) <= 80
    cols, want = leaderboard_table(tmp_path, "j", baseline="b0", seed=3)
    with open(out, encoding="utf-8") as f:
        got = list(csv.DictReader(f))
    assert [r["model"] for r in got] == [r["model"] for r in want] == ["m", "b0"]  # m wins 9.5 of 14 battles
    m = next(r for r in got if r["model"] == "m")
    assert float(m["score"]) == pytest.approx(next(r for r in want if r["model"] == "m")["score"], abs=1e-9)
    assert (m["n_questions"], m["n_invalid"]) == ("5", "1")
