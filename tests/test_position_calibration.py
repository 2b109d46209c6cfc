"""Position-calibrated battle verdicts (evaluate/stats/position.py) on constructed battles with a known
position bias: the calibration must find the planted bias and recover the unbiased preferences far
better than the raw verdicts, without ever seeing a label."""

from __future__ import annotations

import inspect
import math

import numpy as np
import pytest
from scipy.special import expit

from evaluate.backends.base import Completion
from evaluate.judges import battle
from evaluate.judges.battle import BattleItem, BattleResult, OrderJudgment
from evaluate.judges.parsing import first_preferred
from evaluate.stats.position import PATTERNS, TIE_BAND, calibrate

try:
    from tests.test_judges import ScriptedJudge, answers, battle_prompt, shown, user_text  # noqa: F401
except ImportError:  # tests/ itself on sys.path
    from test_judges import ScriptedJudge, answers, battle_prompt, shown, user_text  # noqa: F401


def simulate(n: int, bias: float, seed: int, *, tau: float = 0.4, sd: float = 1.5, prob_noise: float = 0.5):
    """Items with known preferences d ~ N(0, sd^2) (log-odds for A) judged in both orders by a judge with
    a lean `bias` to the first position. Returns (truth, verdict-only judgments, judgments with p)."""
    rng = np.random.default_rng(seed)
    d = rng.normal(0.0, sd, n)
    verdicts, probs = [], []
    for di in d:
        vo, po = [], []
        for order, sign in (("AB", 1.0), ("BA", -1.0)):
            z = sign * di + bias  # the judge's log-odds for the first-shown answer
            u = rng.random()
            pos = "first" if u < expit(z - tau) else "second" if u < expit(z - tau) + expit(-z - tau) else "tie"
            v = "tie" if pos == "tie" else order[0] if pos == "first" else order[1]
            vo.append((order, v, None))
            po.append((order, v, float(expit(z + rng.normal(0.0, prob_noise)))))
        verdicts.append(vo)
        probs.append(po)
    truth = ["A" if x > 0 else "B" for x in d]
    return truth, verdicts, probs


def raw_rule(judgment) -> str:
    said = {v for _, v, _ in judgment}
    return said.pop() if len(said) == 1 else "tie"


def agreement(verdicts, truth) -> float:
    return float(np.mean([1.0 if v == t else 0.5 if v == "tie" else 0.0 for v, t in zip(verdicts, truth)]))


def test_calibrate_takes_no_labels() -> None:
    assert "label" not in " ".join(inspect.signature(calibrate).parameters)


@pytest.mark.parametrize("bias", [1.5, -1.0])
def test_probabilities_recover_the_planted_bias_and_the_unbiased_preferences(bias: float) -> None:
    truth, verdicts, probs = simulate(600, bias, seed=3)
    cal = calibrate(probs)
    assert cal.method == "probabilities" and cal.judgments == 600
    assert cal.bias == pytest.approx(bias, abs=0.1)
    assert cal.bias_ci[0] < bias < cal.bias_ci[1]
    raw = agreement([raw_rule(j) for j in verdicts], truth)
    calibrated = agreement(cal.verdicts, truth)
    assert calibrated > 0.85 and calibrated - raw > 0.2  # far better than the raw verdicts
    # the prior in words names its sign and the lean's position
    assert f"{bias:+.2f}"[:3] in cal.text() and ("first" if bias > 0 else "second") in cal.text()


def test_verdicts_alone_recover_the_planted_bias_by_maximum_likelihood() -> None:
    truth, verdicts, _ = simulate(3000, 1.5, seed=5)
    cal = calibrate(verdicts)
    assert cal.method == "verdicts"
    assert cal.bias == pytest.approx(1.5, abs=0.2) and cal.tau == pytest.approx(0.4, abs=0.15)
    assert cal.bias_ci[0] < 1.5 < cal.bias_ci[1]
    raw = agreement([raw_rule(j) for j in verdicts], truth)
    assert agreement(cal.verdicts, truth) > raw + 0.04
    # symmetric patterns carry no preference: a tie, as in the raw rule
    for judgment, verdict, margin in zip(verdicts, cal.verdicts, cal.margins):
        pos = ["first" if v == o[0] else "second" if v != "tie" else "tie" for o, v, _ in judgment]
        if pos[0] == pos[1]:
            assert verdict == "tie" and margin == pytest.approx(0.0, abs=1e-9)
    # a lean to the first position: a win where A was first and a tie where B was first goes to A
    # (B had the lean and did not win); the raw rule calls it a tie
    k = next(i for i, j in enumerate(verdicts) if [v for _, v, _ in j] == ["A", "tie"])
    assert raw_rule(verdicts[k]) == "tie" and cal.verdicts[k] == "A"
    assert sum(cal.extra["patterns"].values()) == 3000 and len(cal.extra["patterns"]) == len(PATTERNS)


def test_a_hand_computed_probability_calibration() -> None:
    """Two items: p(first) .9 / .6 and .5 / .5. Item 1: l = logit .9 = 2.197, logit .6 = .405; the
    lean (l_AB + l_BA) / 2 = 1.301, the preference (l_AB - l_BA) / 2 = .896 > 0: A. Item 2: 0, 0: balanced,
    a tie. The median of the two leans (1.301 and 0) is .651."""
    cal = calibrate([[("AB", "A", 0.9), ("BA", "B", 0.6)], [("AB", "tie", 0.5), ("BA", "tie", 0.5)]])
    l9, l6 = math.log(9), math.log(1.5)
    assert cal.margins == [pytest.approx((l9 - l6) / 2), pytest.approx(0.0)]
    assert cal.verdicts == ["A", "tie"]
    assert cal.bias == pytest.approx((l9 + l6) / 4)
    assert cal.bias_ci is None  # two pairs: no interval
    assert TIE_BAND < 1e-6  # a tie only for balanced evidence


def test_parsed_scores_give_what_the_raw_rule_throws_away() -> None:
    """"8 1" with A first and "8 7" with B first: the first answer won both times, a tie for the raw
    rule; in points, m_AB = 8 - 1 = 7 and m_BA = 8 - 7 = 1: the lean (7 + 1) / 2 = 4, the preference
    (7 - 1) / 2 = 3 for A. "8 7" then "8 1": 3 for B. "8 8" both times: balanced, a tie."""
    cal = calibrate([[("AB", "A", None, 7.0), ("BA", "B", None, 1.0)],
                     [("AB", "A", None, 1.0), ("BA", "B", None, 7.0)],
                     [("AB", "tie", None, 0.0), ("BA", "tie", None, 0.0)]])
    assert cal.method == "scores" and cal.unit == "points" and cal.p_first_equal is None
    assert cal.margins == [3.0, -3.0, 0.0] and cal.verdicts == ["A", "B", "tie"]
    assert cal.bias == 4.0 and "+4.00 points" in cal.text()


def test_scores_recover_the_planted_bias_in_points() -> None:
    rng = np.random.default_rng(11)
    d = rng.normal(0.0, 1.5, 500)  # the judge's preference for A, in points
    judgments = []
    for di in d:
        m_ab = float(np.clip(np.round(di + 3.0 + rng.normal(0, 1.0)), -9, 9))  # a lean of 3 points to the first
        m_ba = float(np.clip(np.round(-di + 3.0 + rng.normal(0, 1.0)), -9, 9))
        judgments.append([("AB", "A" if m_ab > 0 else "B" if m_ab < 0 else "tie", None, m_ab),
                          ("BA", "B" if m_ba > 0 else "A" if m_ba < 0 else "tie", None, m_ba)])
    cal = calibrate(judgments)
    truth = ["A" if x > 0 else "B" for x in d]
    assert cal.method == "scores" and cal.bias == pytest.approx(3.0, abs=0.3)
    raw = agreement([raw_rule([(o, v, None) for o, v, _, _ in j]) for j in judgments], truth)
    assert agreement(cal.verdicts, truth) > 0.8 and agreement(cal.verdicts, truth) - raw > 0.15


def test_only_pairs_valid_in_both_orders_are_calibrated() -> None:
    cal = calibrate([[("AB", "A", 0.8), ("BA", "invalid", None)], [("AB", "A", 0.8), ("BA", "A", 0.3)],
                     [("AB", "A", 0.8)]])
    assert cal.judgments == 1 and cal.verdicts[0] is None and cal.verdicts[2] is None and cal.verdicts[1] == "A"
    assert calibrate([[("AB", "A", 0.9)], [("AB", "B", 0.2)]]) is None  # one order only: nothing to fit


def test_p_first_from_the_judges_token_probabilities() -> None:
    """Score distributions (9: .5, 8: .5) and (8: .5, 2: .5): P(S1 > S2) = .5 + .25 = .75 and
    P(S1 = S2) = .25, so P(first preferred) = .875."""
    top = [{"9": math.log(0.5), "8": math.log(0.5)}, {" ": 0.0}, {"8": math.log(0.5), "2": math.log(0.5)}]
    assert first_preferred(top) == pytest.approx(0.875)
    assert first_preferred([{"9": 0.0}]) is None


def lean_judge(bias: float, seed: int):
    """A scripted judge with a lean to the first position: it prefers the better answer (by the q= in
    the text) in log-odds d = (q_first - q_second) / 2, plus `bias`, and writes two scores whose
    top log-probabilities give that probability."""
    def respond(req):
        first, second = shown(req)
        qa, qb = (int(x.split("q=")[1]) for x in (first, second))
        p = float(expit((qa - qb) / 2 + bias))
        hi, lo = ("8", "4") if p >= 0.5 else ("4", "8")
        top = [{"8": math.log(p), "4": math.log(1 - p)}, {" ": 0.0}, {"4": math.log(p), "8": math.log(1 - p)}]
        return Completion(text=f"{hi} {lo}", top_logprobs=top)
    return respond


def test_a_battle_reports_the_prior_and_the_calibrated_verdicts(battle_prompt) -> None:
    rng = np.random.default_rng(0)
    qa, qb = rng.integers(1, 10, 40).tolist(), rng.integers(1, 10, 40).tolist()
    res = battle(ScriptedJudge(lean_judge(2.0, 0), logprobs=True), battle_prompt, answers("A", qa), answers("B", qb))
    s = res.summary()
    cal = s["calibrated"]
    assert cal["prior"]["method"] == "probabilities" and cal["prior"]["position_bias"] == pytest.approx(2.0, abs=0.05)
    assert "+2.0" in cal["prior"]["text"]
    truth = ["A" if a > b else "B" if b > a else "tie" for a, b in zip(qa, qb)]
    got = [it.calibrated_verdict for it in res.items]
    assert got == truth  # the lean taken out, every item is read right (equal answers: a tie)
    assert sum(v == t for v, t in zip([it.verdict for it in res.items], truth)) < 30  # the raw rule: ties
    stored = res.to_dict()
    assert stored["items"][0]["calibrated_verdict"] == got[0]
    assert "p_first" in stored["items"][0]["orders"][0]
    # a battle rebuilt from its file is calibrated again, to the same verdicts
    back = BattleResult("A", "B", [BattleItem.from_dict(it) for it in stored["items"]])
    assert [it.calibrated_verdict for it in back.items] == [None] * 40
    assert back.summary()["calibrated"]["wins"] == cal["wins"]
    assert [it.calibrated_verdict for it in back.items] == got


def test_a_category_of_a_battle_keeps_the_prior_of_the_whole(battle_prompt) -> None:
    from evaluate.judges.battle_summary import by_category

    items = []
    for i in range(12):
        orders = [OrderJudgment("AB", "A", (8, 4), "8 4", p_first=0.9 if i % 2 else 0.6),
                  OrderJudgment("BA", "B", (8, 4), "8 4", p_first=0.6 if i % 2 else 0.9)]
        items.append(BattleItem(id=str(i), verdict="tie", orders=orders, category="x" if i < 4 else "y"))
    res = BattleResult("a", "b", items)
    whole = res.summary()["calibrated"]["prior"]["position_bias"]
    cats = by_category(res)
    assert cats["x"]["calibrated"]["prior"]["position_bias"] == whole
    assert cats["x"]["calibrated"]["items"] == 4 and cats["y"]["calibrated"]["wins"] == 4


def test_a_lean_beyond_what_the_verdicts_can_measure_is_said_so() -> None:
    cal = calibrate([[("AB", "A", None), ("BA", "B", None)]] * 40)  # the first-shown answer, every time
    assert cal.method == "verdicts" and cal.bias_ci is None and set(cal.verdicts) == {"tie"}
    assert "beyond what its 40 two-order pairs can measure" in cal.text()
