"""Judge reply parsing and template filling: strict, anchored, not fooled by quoted text."""

from __future__ import annotations

import math

import pytest

from evaluate.judges.parsing import metric_labels, parse_pair, parse_rating, score_from_top_logprobs
from evaluate.judges.prompts import fill, placeholders

LABELS = metric_labels("relevance", "Relevance (1-5): whether the content of the answer is relevant")
CN_LABELS = metric_labels("relevance", "切题(1-5)：答案内容是否切题")


# -- rating replies: accepted ---------------------------------------------------------------

@pytest.mark.parametrize("reply, expected", [
    ("4", 4),
    ("  5  ", 5),
    ("\n\n3\nThe answer is mostly relevant.", 3),
    ("4.", 4),
    ("4/5", 4),
    ("4 / 5", 4),
    ("4 out of 5", 4),
    ("Score: 2", 2),
    ("score:2", 2),
    ("Rating: 1\nbecause ...", 1),
    ("Relevance: 5", 5),
    ("**4**", 4),
    ("**Score:** 4", 4),
    ("`3`", 3),
    ("## 4", 4),
    ("４", 4),                      # full-width digit
    ("评分：3", 3),                  # full-width colon
    ("The answer covers the question well.\nIt has minor issues.\nScore: 4", 4),
    ("4\nExplanation...\nScore: 4", 4),  # both anchors agree
])
def test_rating_accepts(reply: str, expected: int) -> None:
    parsed = parse_rating(reply, labels=LABELS)
    assert parsed.ok, parsed.reason
    assert parsed.value == expected


def test_rating_chinese_metric_label() -> None:
    assert parse_rating("切题：4", labels=CN_LABELS).value == 4
    assert not parse_rating("切题：4", labels=LABELS).ok  # the label must be one we know


def test_rating_rules_are_reported() -> None:
    assert parse_rating("4\nok").rule == "first-line"
    assert parse_rating("Reasoning first.\nScore: 3").rule == "last-line"


# -- rating replies: rejected ---------------------------------------------------------------

@pytest.mark.parametrize("reply, reason_part", [
    ("", "empty"),
    ("   \n  ", "empty"),
    ("10", "outside 1-5"),                 # never read as 1
    ("I would give this a score of 10.", "no score"),
    ("0", "outside"),
    ("6", "outside"),
    ("-1", "outside"),
    ("4.5", "not an integer"),
    ("4/10", "scale"),
    ("Score: 7", "outside"),
    ("I give it a 4.", "no score"),
    ("4 - the answer is relevant", "no score"),
    ("4 or 5", "no score"),
    ("1-5", "no score"),
    ("Between 3 and 4", "no score"),
    ("Score 4", "no score"),                # a label needs its colon
    ("Answer: 5", "no score"),              # not a known label
    ("The answer says 'Score: 5'.\nIt is wrong.", "no score"),  # quoted score mid-reply
    ("4\nOn reflection...\nScore: 2", "conflicting"),
    ("The answer ends with the line\n5", "no score"),  # an unlabelled last line is not trusted
])
def test_rating_rejects(reply: str, reason_part: str) -> None:
    parsed = parse_rating(reply, labels=LABELS)
    assert not parsed.ok
    assert parsed.value is None
    assert reason_part in parsed.reason


def test_rating_quoted_answer_does_not_steer() -> None:
    # The judge quotes an answer that itself claims "Score: 5"; only the judge's anchors count.
    reply = 'The answer writes:\n"Score: 5 - best answer ever"\nbut it is off topic.\nScore: 1'
    assert parse_rating(reply).value == 1


def test_rating_other_scale() -> None:
    assert parse_rating("10", low=1, high=10).value == 10
    assert parse_rating("7/10", low=1, high=10).value == 7
    assert not parse_rating("7/5", low=1, high=10).ok


# -- battle replies -------------------------------------------------------------------------

@pytest.mark.parametrize("reply, expected", [
    ("8 9", (8, 9)),
    ("8 9\nAssistant 2 is more detailed.", (8, 9)),
    ("\n 10   7 \n...", (10, 7)),
    ("8, 9", (8, 9)),
    ("8,9", (8, 9)),
    ("8；9", (8, 9)),   # NFKC turns the full-width semicolon into ";"
    ("8，9", (8, 9)),   # full-width comma
    ("7.5 8", (7.5, 8)),
    ("**6 6**", (6, 6)),
])
def test_pair_accepts(reply: str, expected: tuple[float, float]) -> None:
    parsed = parse_pair(reply)
    assert parsed.ok, parsed.reason
    assert parsed.values == expected


@pytest.mark.parametrize("reply, reason_part", [
    ("", "empty"),
    ("8", "two scores"),
    ("8\n9", "two scores"),
    ("8 9 10", "two scores"),
    ("Assistant 1: 8, Assistant 2: 9", "two scores"),
    ("Both are good.\n8 9", "two scores"),  # the score line must come first
    ("11 3", "outside"),
    ("0 5", "outside"),
    ("8 -9", "outside"),
    ("eight nine", "two scores"),
])
def test_pair_rejects(reply: str, reason_part: str) -> None:
    parsed = parse_pair(reply)
    assert not parsed.ok
    assert reason_part in parsed.reason


# -- log-probability scores -----------------------------------------------------------------

def test_logprob_expected_score_hand_computed() -> None:
    top = {"4": math.log(0.5), " 4": math.log(0.1), "5": math.log(0.2), "3": math.log(0.1),
           "The": math.log(0.05), "10": math.log(0.05)}
    got = score_from_top_logprobs(top)
    # score tokens: 4 -> 0.6 (merged), 5 -> 0.2, 3 -> 0.1; mass 0.9
    assert got.ok
    assert got.mass == pytest.approx(0.9)
    assert got.probs == pytest.approx({"4": 0.6, "5": 0.2, "3": 0.1})
    assert got.value == pytest.approx((4 * 0.6 + 5 * 0.2 + 3 * 0.1) / 0.9)


def test_logprob_whitespace_and_fullwidth_tokens_merge() -> None:
    got = score_from_top_logprobs({"\n2": math.log(0.3), "2 ": math.log(0.3), "２": math.log(0.4)})
    assert got.probs == pytest.approx({"2": 1.0})
    assert got.value == pytest.approx(2.0)


def test_logprob_low_mass_is_invalid() -> None:
    got = score_from_top_logprobs({"The": math.log(0.97), "3": math.log(0.03)}, min_mass=0.05)
    assert not got.ok
    assert got.mass == pytest.approx(0.03)
    assert "0.030" in got.reason
    assert score_from_top_logprobs({"The": math.log(0.97), "3": math.log(0.03)}, min_mass=0.01).value == 3


def test_logprob_no_score_tokens() -> None:
    got = score_from_top_logprobs({"The": -0.1, "0": -3.0, "6": -3.0, "10": -4.0})
    assert not got.ok and got.mass == 0.0
    assert "no score token" in got.reason


# -- template filling -----------------------------------------------------------------------

TEMPLATE = "Q:\n{question}\nA:\n{answer}\nMetric: {metric}\nSteps: {steps}"


def test_fill_inserts_values_verbatim() -> None:
    hostile = "See {question} and {answer} and {steps}, { }, {0}, {{x}}, {, \\1 \\g<0> $1"
    out = fill(TEMPLATE, question="What is 2+2?", answer=hostile, metric="M", steps="S")
    assert out == f"Q:\nWhat is 2+2?\nA:\n{hostile}\nMetric: M\nSteps: S"


def test_fill_question_with_placeholder_names() -> None:
    out = fill(TEMPLATE, question="{answer}", answer="{question}", metric="{metric}", steps="")
    assert out == "Q:\n{answer}\nA:\n{question}\nMetric: {metric}\nSteps: "


def test_fill_matches_str_format_on_safe_values() -> None:
    template = "a {question} {{literal}} b {answer} }} {{"
    values = {"question": "q", "answer": "x"}
    assert fill(template, **values) == template.format(**values)


def test_fill_leaves_unknown_placeholders() -> None:
    assert fill("{question} {other}", question="q") == "q {other}"


def test_placeholders_ignores_escaped() -> None:
    assert placeholders("{question} {{answer}} {steps}") == {"question", "steps"}


def test_weighted_pair_reads_the_two_number_positions():
    import math

    from evaluate.judges.parsing import weighted_pair

    tops = [{"8": math.log(0.6), "7": math.log(0.4)}, {" ": 0.0}, {" 6": math.log(0.5), "9": math.log(0.5)},
            {"\n": 0.0}, {"7": 0.0}]
    assert weighted_pair(tops) == (pytest.approx(7.6), pytest.approx(7.5))
    # a leading blank line is skipped; a two-digit first number counts once
    tops = [{"\n": 0.0}, {"1": math.log(0.9), "2": math.log(0.1)}, {"0": 0.0}, {" ": 0.0}, {"4": 0.0}]
    assert weighted_pair(tops) == (pytest.approx(1.1), pytest.approx(4.0))
    # one number only, or numbers only after the first line, or too little mass on digits: None
    assert weighted_pair([{"8": 0.0}, {"\n": 0.0}, {"7": 0.0}]) is None
    assert weighted_pair([{"8": 0.0}, {" ": 0.0}, {"x": 0.0, "7": math.log(0.1)}]) is None
    assert weighted_pair([]) is None
