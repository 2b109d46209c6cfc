"""Rule checks (ExactMatch, Contains, NotContains, Regex, JSON, Length) against hand-computed answers:
each item's 0/1 and the reason in its details, Chinese, empty answers, a pattern that matches nothing,
a schema failure deep in an object (its JSON Pointer named), options refused at load with their key path
and did-you-mean, and a bad pattern through `eval.py` (exit 2, no traceback, nothing written)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from evaluate.core.errors import ConfigError, InputError
from evaluate.metrics import METRICS, MetricInput, build
from evaluate.metrics.rule import normalize
from evaluate.pipeline.config import parse_config

REPO = Path(__file__).resolve().parents[1]


def run(name: str, items: list[MetricInput], language: str = "en", **options):
    scores, details = build(name, language, **options).score_details(items)
    return [s[next(iter(s))] for s in scores], details


# --- ExactMatch ------------------------------------------------------------------------------------

def test_exact_match_normalisations_by_hand():
    items = [MetricInput("  The  Bridge. ", ["the bridge"]), MetricInput("Ｃａｎｂｅｒｒａ", ["Canberra"]),
             MetricInput("an apple", ["apple"]), MetricInput("", ["x"])]
    assert run("ExactMatch", items)[0] == [0, 0, 0, 0]  # default: whitespace only, so case and "." still count
    assert run("ExactMatch", items, normalize=["case", "whitespace"])[0] == [0, 0, 0, 0]
    assert run("ExactMatch", items, normalize=["case", "whitespace", "punctuation"])[0] == [1, 0, 0, 0]
    assert run("ExactMatch", items, normalize=["nfkc", "whitespace"])[0] == [0, 1, 0, 0]  # full-width letters
    values, details = run("ExactMatch", items, normalize=["articles", "whitespace"])
    assert values == [0, 0, 1, 0]
    assert details[3] == {"passed": False, "reason": "empty answer", "answer": ""}
    assert details[2]["reason"] == "equals target 1 of 1"
    # the normalisation order is fixed whatever the list's order
    assert normalize("The  A.", ["whitespace", "punctuation", "case", "articles"], "en") == ""


def test_exact_match_chinese_is_not_split_into_words():
    items = [MetricInput("北京 是 首都。", ["北京是首都"]), MetricInput("北京是首都", ["北京是首都！"]),
             MetricInput("北京", ["北京是首都"]), MetricInput("", ["北京"])]
    values, details = run("ExactMatch", items, "cn", normalize=["whitespace", "punctuation"])
    assert values == [1, 1, 0, 0]  # cn: all whitespace and CJK punctuation removed, whole strings compared
    assert "at character 3" in details[2]["reason"]  # "北京" leaves "北京是首都" after two characters
    assert run("ExactMatch", items[:1], "cn")[0] == [0]  # whitespace only: the "。" still differs


def test_exact_match_any_of_several_targets():
    values, details = run("ExactMatch", [MetricInput("May 28, 1937", ["The bridge opened.", "May 28, 1937"])])
    assert values == [1] and details[0]["reason"] == "equals target 2 of 2"


# --- Contains / NotContains ------------------------------------------------------------------------

def test_contains_any_all_targets_and_reasons():
    items = [MetricInput("Canberra is the capital", ["canberra"]), MetricInput("", ["canberra"]),
             MetricInput("sydney", ["canberra", "sydney"])]
    assert run("Contains", items)[0] == [0, 0, 1]  # the targets, case kept
    assert run("Contains", items, normalize=["case"])[0] == [1, 0, 1]
    values, details = run("Contains", items, normalize=["case"], mode="all")
    assert values == [1, 0, 0]
    assert details[2]["missing"] == ["canberra"] and "1 of 2 missing" in details[2]["reason"]
    assert "(empty answer)" in details[1]["reason"]
    # strings per category from the config
    per_cat = [MetricInput("206 bones", category="open_qa"), MetricInput("206 bones", category="closed_qa")]
    assert run("Contains", per_cat, strings={"open_qa": ["206"], "closed_qa": ["1937"]})[0] == [1, 0]


def test_not_contains_any_and_all_with_chinese():
    items = [MetricInput("作为 AI 语言模型，我不能"), MetricInput("好的，这是答案"), MetricInput("")]
    values, details = run("NotContains", items, "cn", strings=["作为AI", "语言模型"])
    assert values == [0, 1, 1]  # cn whitespace removal: "作为 AI" is found as "作为AI"
    assert details[0]["found"] == ["作为AI", "语言模型"]
    assert run("NotContains", [MetricInput("作为AI助手")], "cn", strings=["作为AI", "语言模型"], mode="all")[0] == [1]
    assert run("NotContains", [MetricInput("As an AI...")], strings=["as an ai"], normalize=["case"])[0] == [0]


# --- Regex -----------------------------------------------------------------------------------------

def test_regex_search_full_per_category_and_no_match():
    items = [MetricInput(" negative\n", category="cls"), MetricInput("it is negative", category="cls"),
             MetricInput("Order 12-345", category="ids"), MetricInput("no digits here", category="ids"),
             MetricInput("", category="ids")]
    opts = dict(patterns={"cls": "positive|negative|neutral"}, pattern=r"\d{2}-\d{3}")
    assert run("Regex", items, **opts)[0] == [1, 1, 1, 0, 0]
    values, details = run("Regex", items, match="full", **opts)
    assert values == [1, 0, 0, 0, 0]  # full: the whole (stripped) answer
    assert details[3] == {"passed": False, "reason": "the whole answer does not match", "pattern": r"\d{2}-\d{3}"}
    assert details[4]["reason"].endswith("(empty answer)")
    # a pattern that matches nothing at all
    values, details = run("Regex", items, pattern=r"(?!x)x")
    assert values == [0] * 5 and all(d["reason"].startswith("no match anywhere") for d in details)
    assert run("Regex", [MetricInput("NEGATIVE", category="c")], pattern="negative", flags=["ignorecase"])[0] == [1]
    values, details = run("Regex", [MetricInput("答案是：北京", category="c")], "cn", pattern="北京|上海")
    assert values == [1] and details[0]["matched"] == "北京" and details[0]["reason"] == "matched at character 5"


def test_regex_category_without_pattern_refused_at_load():
    metric = build("Regex", "en", patterns={"a": "x"})
    assert metric.check_category("a") == []
    assert "no pattern for category 'b'" in metric.check_category("b")[0]


# --- JSON ------------------------------------------------------------------------------------------

SCHEMA = {"type": "object", "required": ["order"],
          "properties": {"order": {"type": "object", "properties": {
              "items": {"type": "array", "items": {"type": "object", "required": ["sku", "qty"],
                                                   "properties": {"sku": {"type": "string"},
                                                                  "qty": {"type": "integer", "minimum": 1}}}}}}}}


def test_json_parse_and_schema_failure_deep_in_an_object(tmp_path):
    schema = tmp_path / "order.json"
    schema.write_text(json.dumps(SCHEMA), encoding="utf-8")
    good = '{"order": {"items": [{"sku": "a/b~c", "qty": 1}]}}'
    deep = '{"order": {"items": [{"sku": "x", "qty": 2}, {"sku": "y", "qty": 0}]}}'
    items = [MetricInput(good), MetricInput(deep), MetricInput("```json\n" + good + "\n```"),
             MetricInput('{"order": }'), MetricInput(""), MetricInput("[1, 2]")]
    values, details = run("JSON", items, schema=str(schema))
    assert values == [1, 0, 1, 0, 0, 0]
    assert details[1]["path"] == "/order/items/1/qty"  # the JSON Pointer of the value that broke the schema
    assert details[1]["schema_path"] == "/properties/order/properties/items/items/properties/qty/minimum"
    assert "0 is less than the minimum of 1" in details[1]["reason"]
    assert details[3]["reason"] == "not JSON: Expecting value at line 1 column 11"
    assert details[4]["reason"] == "not JSON: empty answer"
    assert details[5]["path"] == "" and "whole document" in details[5]["reason"]
    # without a schema: parsing only; a fence is unwrapped unless code_fence is false
    assert run("JSON", items)[0] == [1, 1, 1, 0, 0, 1]
    assert run("JSON", items[2:3], code_fence=False)[0] == [0]
    # pointer escaping (RFC 6901): "/" -> "~1", "~" -> "~0"
    from evaluate.metrics.json_check import pointer
    assert pointer(["a/b", "c~d", 0]) == "/a~1b/c~0d/0"


def test_json_schema_file_problems_are_refused_at_load(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"type": "objekt"}', encoding="utf-8")
    notjson = tmp_path / "nj.json"
    notjson.write_text("{type: object}", encoding="utf-8")
    for path, needle in ((tmp_path / "missing.json", "cannot read the schema file"),
                         (bad, "not a valid JSON Schema"), (notjson, "not JSON (line 1 column 2")):
        with pytest.raises(ConfigError) as exc:
            build("JSON", "en", schema=str(path))
        assert exc.value.problems[0].startswith("metric_options.JSON.schema: ") and needle in exc.value.problems[0]


# --- Length ----------------------------------------------------------------------------------------

def test_length_characters_words_tokens():
    items = [MetricInput("one, two three!"), MetricInput(""), MetricInput("a b c d e")]
    values, details = run("Length", items, unit="words", min=1, max=4)
    assert values == [1, 0, 0]
    assert details[1]["reason"] == "0 words, below the minimum 1" and details[2]["length"] == 5
    assert run("Length", [MetricInput(" 你好吗 "), MetricInput("你好吗？")], "cn", unit="characters", max=3)[0] == [1, 0]
    # jieba: 我 / 爱 / 北京 / 天安门 = 4 words
    values, details = run("Length", [MetricInput("我爱北京天安门")], "cn", unit="words", max=4)
    assert values == [1] and details[0]["length"] == 4
    pytest.importorskip("bpe_openai")
    import bpe_openai

    text = "Rule checks count tokens too."
    n = len(bpe_openai.get_encoding("o200k_base").encode(text))
    assert run("Length", [MetricInput(text)], unit="tokens", max=n)[0] == [1]
    assert run("Length", [MetricInput(text)], unit="tokens", max=n - 1)[0] == [0]


# --- options: typed, key paths, did-you-mean --------------------------------------------------------

@pytest.mark.parametrize("name,options,needle", [
    ("ExactMatch", {"normalise": ["case"]}, 'metric_options.ExactMatch: unknown key "normalise"; did you mean "normalize"?'),
    ("ExactMatch", {"normalize": ["lowercase"]}, "metric_options.ExactMatch.normalize[0]: unknown normalisation"),
    ("Contains", {"mode": "alll"}, 'metric_options.Contains.mode: expected "any" or "all", got "alll"; did you mean "all"?'),
    ("Contains", {"strings": [""]}, "metric_options.Contains.strings[0]: an empty string"),
    ("Regex", {"pattern": "(unclosed"}, "metric_options.Regex.pattern: pattern '(unclosed' does not compile: missing )"),
    ("Regex", {"patterns": {"coding": "[a-"}}, "metric_options.Regex.patterns.coding: pattern '[a-' does not compile"),
    ("Regex", {"pattern": "x", "flags": ["ignorcase"]}, 'did you mean "ignorecase"?'),
    ("Regex", {}, "metric_options.Regex: give `pattern`"),
    ("Length", {"unit": "chars", "max": 3}, 'did you mean "characters"?'),
    ("Length", {"min": 5, "max": 2}, "metric_options.Length.min: 5 is above max 2"),
    ("Length", {"max": -1}, "metric_options.Length.max: expected a non-negative integer or null, got -1"),
])
def test_bad_options_name_their_key_path(name, options, needle):
    with pytest.raises(InputError) as exc:
        build(name, "en", **options)
    assert needle in str(exc.value)


def test_config_load_refuses_bad_options_and_categories_without_patterns(tmp_path):
    raw = {"language": "en", "category": {"closed_qa": {"Metrics": ["Regex"]}},
           "metric_options": {"Regex": {"patterns": {"closed_qa": "(a"}}, "Lenght": {"max": 3}}}
    with pytest.raises(ConfigError) as exc:
        parse_config(raw, tmp_path / "c.yaml")
    text = "\n".join(exc.value.problems)
    assert "metric_options.Regex.patterns.closed_qa: pattern '(a' does not compile" in text
    assert 'did you mean "Length"?' in text
    # schema paths are resolved against the config's folder
    (tmp_path / "s.json").write_text('{"type": "object"}', encoding="utf-8")
    cfg = parse_config({"language": "en", "metric_options": {"JSON": {"schema": "s.json"}}}, tmp_path / "c.yaml")
    assert cfg.metric_options["JSON"]["schema"] == str(tmp_path / "s.json")


def test_each_rule_check_is_registered_with_a_pass_fail_signature():
    for name in ("ExactMatch", "Contains", "NotContains", "Regex", "JSON", "Length"):
        assert name in METRICS
    sig = build("Regex", "en", pattern="x").signature()
    assert sig["outcome"] == "pass/fail" and sig["options"]["pattern"] == "x" and "pattern=x" in sig["text"]
    assert build("ExactMatch", "en", normalize=["whitespace", "case"]).signature()["options"]["normalize"] == \
        ["case", "whitespace"]  # stated in the order they are applied


# --- through eval.py -------------------------------------------------------------------------------

def _setup(tmp_path: Path, metric_options: dict, metrics: list[str]) -> Path:
    recs = [{"id": i, "category": "closed_qa", "instruction": f"Q{i}?", "input": "", "output": out,
             "target": "negative"} for i, out in enumerate(["negative", "Positive", ""])]
    (tmp_path / "a.json").write_text(json.dumps(recs), encoding="utf-8")
    cfg = {"language": "en", "save_path": str(tmp_path / "out"), "category": {"closed_qa": {"Metrics": metrics}},
           "answers": [{"name": "model_a", "path": "a.json"}], "metric_options": metric_options}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg), encoding="utf-8")
    return path


def _eval(config: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    return subprocess.run([sys.executable, "eval.py", "--config", str(config)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300)


def test_bad_regex_is_exit_2_at_load_through_eval_py(tmp_path):
    proc = _eval(_setup(tmp_path, {"Regex": {"patterns": {"closed_qa": "neg(ative"}}}, ["Regex"]))
    assert proc.returncode == 2, proc.stderr
    assert "metric_options.Regex.patterns.closed_qa: pattern 'neg(ative' does not compile" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "out").exists()


def test_details_reach_the_result_file_through_eval_py(tmp_path):
    proc = _eval(_setup(tmp_path, {"Regex": {"pattern": "negative", "match": "full"},
                                   "ExactMatch": {"normalize": ["case"]}}, ["Regex", "ExactMatch"]))
    assert proc.returncode == 0, proc.stderr
    result = json.loads((tmp_path / "out" / "results" / "model_a.json").read_text(encoding="utf-8"))
    items = result["items"]
    assert [it["scores"]["Metrics/Regex"] for it in items] == [1.0, 0.0, 0.0]
    assert [it["scores"]["Metrics/ExactMatch"] for it in items] == [1.0, 0.0, 0.0]  # "positive" != "negative"
    assert items[1]["details"]["Metrics/ExactMatch"]["closest_target"] == "negative"
    assert items[2]["details"]["Metrics/Regex"]["reason"] == "the whole answer does not match (empty answer)"
    agg = result["aggregates"]["overall"]["Metrics/Regex"]
    assert agg["mean"] == pytest.approx(1 / 3) and agg["ci_method"] == "wilson" and agg["ci95"] is not None


def test_a_category_the_options_do_not_cover_and_a_check_without_options_are_exit_2(tmp_path):
    proc = _eval(_setup(tmp_path, {"Contains": {"strings": {"open_qa": ["206"]}}}, ["Contains", "Length"]))
    assert proc.returncode == 2, proc.stderr
    assert "category.closed_qa.Metrics[0] (Contains): metric_options.Contains.strings has no entry for category " \
           "'closed_qa'" in proc.stderr
    assert "category.closed_qa.Metrics[1] (Length): metric_options.Length: give `min`, `max` or both" in proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "out").exists()
