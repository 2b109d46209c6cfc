"""Structural checks on the bundled prompt files (prompts/) and example data (examples/).

Prompts are data that code renders with `str.format` and parses the judge's reply from, so a
missing metric, a stray brace or a step list that does not end on the score label breaks a run
far from its cause. These tests catch that when the files are edited.
"""

from __future__ import annotations

import difflib
import json
import re
import string
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
PROMPTS = ROOT / "prompts"
EXAMPLES = ROOT / "examples"
COLOSSAL = ROOT / ".." / "shared" / "data" / "colossalai" / "Chat" / "evaluate"

LANGS = ("en", "cn")
CATEGORIES = (
    "brainstorming", "chat", "classification", "closed_qa", "extraction",
    "generation", "open_qa", "roleplay", "rewriting", "summarization",
)
METRICS = (
    "language organization", "relevance", "creativity", "practicality", "reasonableness",
    "naturalness", "engagingness", "fidelity", "correctness", "diversity", "conciseness",
)
EVAL_FIELDS = {"question", "answer", "metric", "steps"}
BATTLE_FIELDS = {"question", "answer_1", "answer_2", "prompt"}
RECORD_KEYS = {"category", "instruction", "input", "output", "target", "id"}
EXAMPLE_FILES = ("targets", "answers_model_a", "answers_model_b")
KNOWN_FLAWS = {"duplicate question", "leading wording", "off-topic item", "biased wording"}
# "Name (1-5): ..." in English, "名称（1-5）：..." in Chinese.
DEFINITION_RE = re.compile(r"^(?P<name>[^(（]+?)\s?[(（]1-5[)）][:：]\s?\S")
COLON = {"en": ":", "cn": "："}
# The GPT metrics ColossalAI's config_en.json asks of each category (hpcaitech/ColossalAI @ 079bf3cb2),
# kept here so the coverage check also runs where ../shared is absent; checked against the file when present.
COLOSSAL_GPT_METRICS = {
    "brainstorming": ["language organization", "relevance", "creativity", "practicality", "reasonableness"],
    "chat": ["language organization", "naturalness", "engagingness", "fidelity"],
    "classification": ["relevance", "correctness"],
    "closed_qa": ["relevance", "correctness"],
    "extraction": ["relevance", "correctness"],
    "generation": ["language organization", "relevance", "diversity"],
    "logical_reasoning": ["correctness", "relevance", "reasonableness"],
    "open_qa": ["language organization", "relevance", "correctness"],
    "rewriting": ["language organization", "relevance", "correctness"],
    "roleplay": ["language organization", "relevance", "fidelity", "creativity"],
    "summarization": ["language organization", "relevance", "correctness", "conciseness"],
    **{c: ["relevance", "correctness"] for c in (
        "Finance", "Law", "Education", "Medical", "STEM", "SocialScience", "Humanity", "Other", "ethics")},
}


def load(path: Path) -> Any:
    with path.open(encoding="utf-8") as f:
        return json.load(f)


def fields(template: str) -> set[str]:
    """Placeholder names in a `str.format` template (raises ValueError on unbalanced braces)."""
    return {name for _, name, _, _ in string.Formatter().parse(template) if name is not None}


@pytest.fixture(scope="module", params=LANGS)
def lang(request) -> str:
    return request.param


@pytest.fixture(scope="module")
def eval_prompts() -> dict[str, dict]:
    return {lg: load(PROMPTS / f"evaluation_prompt_{lg}.json") for lg in LANGS}


@pytest.fixture(scope="module")
def battle_prompts() -> dict[str, dict]:
    return {lg: load(PROMPTS / f"battle_prompt_{lg}.json") for lg in LANGS}


@pytest.fixture(scope="module")
def examples() -> dict[str, dict[str, list[dict]]]:
    return {lg: {name: load(EXAMPLES / lg / f"{name}.json") for name in EXAMPLE_FILES} for lg in LANGS}


# --------------------------------------------------------------------------- evaluation prompts


def test_eval_prompt_categories_and_keys_match_across_languages(eval_prompts):
    en, cn = eval_prompts["en"], eval_prompts["cn"]
    assert set(en) == set(CATEGORIES) | {"general"}
    assert set(cn) == set(en)
    for cat in en:
        assert set(en[cat]["metrics"]) == set(cn[cat]["metrics"]), cat
        assert en[cat]["id"] == cn[cat]["id"], cat


def test_eval_prompt_entry_shape(eval_prompts, lang):
    entries = eval_prompts[lang]
    ids = [e["id"] for e in entries.values()]
    assert len(ids) == len(set(ids)), f"duplicate ids in evaluation_prompt_{lang}.json"
    for cat, entry in entries.items():
        assert entry["category"] == cat
        assert set(entry) >= {"id", "category", "metrics", "CoT", "prompt", "reference_prompt"}, cat
        assert entry["metrics"], f"{cat}: no metrics"
        assert set(entry["metrics"]) == set(entry["CoT"]), f"{cat}: metrics and CoT keys differ"
        unknown = set(entry["metrics"]) - set(METRICS)
        assert not unknown, f"{cat}: unknown metric names {unknown}"


def test_general_covers_the_fallback_metrics(eval_prompts, lang):
    general = eval_prompts[lang]["general"]["metrics"]
    for metric in ("language organization", "relevance", "correctness", "reasonableness"):
        assert metric in general


def test_metric_definitions_and_steps_end_on_the_score_label(eval_prompts, lang):
    """Each CoT must end with '<Name>:' so the judge's next token is the score."""
    display: dict[str, str] = {}
    for cat, entry in eval_prompts[lang].items():
        for metric, definition in entry["metrics"].items():
            m = DEFINITION_RE.match(definition)
            assert m, f"{lang}/{cat}/{metric}: definition must start with 'Name (1-5):', got {definition[:40]!r}"
            name = m.group("name").strip()
            # one display name per metric within a language, whatever the category
            assert display.setdefault(metric, name) == name, f"{lang}/{cat}/{metric}: name {name!r} != {display[metric]!r}"

            steps = entry["CoT"][metric]
            body, _, last = steps.rpartition("\n")
            assert last == name + COLON[lang], f"{lang}/{cat}/{metric}: CoT must end with {name + COLON[lang]!r}, got {last!r}"
            numbers = [int(n) for n in re.findall(r"^(\d+)\. ", body, flags=re.M)]
            assert numbers == list(range(1, len(numbers) + 1)) and len(numbers) >= 3, f"{lang}/{cat}/{metric}: {numbers}"
            final_step = body.strip().splitlines()[-1]
            assert "1" in final_step and "5" in final_step, f"{lang}/{cat}/{metric}: last step must give the 1-5 scale"
    assert set(display) == set(METRICS), f"{lang}: metrics never defined: {set(METRICS) - set(display)}"


def test_eval_prompt_placeholders_and_rendering(eval_prompts, lang):
    for cat, entry in eval_prompts[lang].items():
        assert fields(entry["prompt"]) == EVAL_FIELDS, cat
        assert fields(entry["reference_prompt"]) == EVAL_FIELDS | {"reference"}, cat
        for key in ("prompt", "reference_prompt"):
            # the steps (ending on the score label) must be the very last thing the judge reads
            assert entry[key].endswith("{steps}"), f"{lang}/{cat}/{key} must end with {{steps}}"
        for metric in entry["metrics"]:
            values = dict(question="Q {x}", answer="A {y}", metric=entry["metrics"][metric],
                          steps=entry["CoT"][metric], reference="R")
            rendered = entry["reference_prompt"].format(**values)
            assert "Q {x}" in rendered and "A {y}" in rendered and "\nR\n" in rendered
            assert rendered.endswith(entry["CoT"][metric])
            assert "{" not in entry["prompt"].format(**values).replace("{x}", "").replace("{y}", "")


def test_conversation_prompts_rate_the_latest_reply(eval_prompts, lang):
    """Every entry can rate a conversation's turn: the earlier turns, the latest message and the reply
    are filled in that order, the steps last (the score token comes next), and the reference variant
    only adds its block."""
    for cat, entry in eval_prompts[lang].items():
        conv, conv_ref = entry["conversation_prompt"], entry["conversation_reference_prompt"]
        assert fields(conv) == EVAL_FIELDS | {"conversation"}, cat
        assert fields(conv_ref) == EVAL_FIELDS | {"conversation", "reference"}, cat
        for metric in entry["metrics"]:
            rendered = conv_ref.format(conversation="HIST", question="LAST", answer="REPLY", reference="REF",
                                       metric=entry["metrics"][metric], steps=entry["CoT"][metric])
            assert rendered.index("HIST") < rendered.index("LAST") < rendered.index("REPLY") < rendered.index("REF")
            assert rendered.endswith(entry["CoT"][metric]), f"{lang}/{cat}/{metric}"
        ops = difflib.SequenceMatcher(None, conv.splitlines(), conv_ref.splitlines(), autojunk=False).get_opcodes()
        assert {op for op, *_ in ops} <= {"equal", "insert"}, f"{lang}/{cat}: {ops}"


def test_reference_prompt_only_adds_to_prompt(eval_prompts, lang):
    """`reference_prompt` is `prompt` plus a reference block: nothing removed or reworded."""
    for cat, entry in eval_prompts[lang].items():
        ops = difflib.SequenceMatcher(
            None, entry["prompt"].splitlines(), entry["reference_prompt"].splitlines(), autojunk=False
        ).get_opcodes()
        assert {op for op, *_ in ops} <= {"equal", "insert"}, f"{lang}/{cat}: {ops}"


def _assert_metrics_resolve(eval_prompts: dict[str, dict], asked: dict[str, list[str]]) -> None:
    """ColossalAI uses a category's own prompt, else `general`; every asked metric must resolve."""
    for lg in LANGS:
        prompts = eval_prompts[lg]
        for cat, metrics in asked.items():
            entry = prompts.get(cat, prompts["general"])
            missing = set(metrics) - set(entry["metrics"])
            assert not missing, f"evaluation_prompt_{lg}.json: {cat} lacks {missing}"


def test_every_metric_colossalai_asks_for_is_defined(eval_prompts):
    _assert_metrics_resolve(eval_prompts, COLOSSAL_GPT_METRICS)


@pytest.mark.parametrize("config_lang", LANGS)
def test_every_metric_in_colossalai_config_file_is_defined(eval_prompts, config_lang):
    path = COLOSSAL / "config" / f"config_{config_lang}.json"
    if not path.is_file():
        pytest.skip(f"{path} not present (shared data is absent)")
    config = load(path)["category"]
    asked = {cat: spec.get("GPT", []) for cat, spec in config.items()}
    if config_lang == "en":
        assert asked == COLOSSAL_GPT_METRICS, "COLOSSAL_GPT_METRICS no longer matches config_en.json"
    _assert_metrics_resolve(eval_prompts, asked)


# --------------------------------------------------------------------------- battle prompts


def test_battle_prompt_shape(battle_prompts, lang):
    b = battle_prompts[lang]
    assert set(b) == {"id", "system_prompt", "prompt_template", "prompt", "reference_template",
                      "conversation_template", "conversation_prompt"}
    assert fields(b["prompt_template"]) == BATTLE_FIELDS
    assert fields(b["conversation_template"]) == BATTLE_FIELDS | {"conversation_1", "conversation_2"}
    assert "{" not in b["conversation_prompt"] and "}" not in b["conversation_prompt"]
    turn = b["conversation_template"].format(conversation_1="C1", conversation_2="C2", question="Q", answer_1="A1",
                                             answer_2="A2", prompt=b["conversation_prompt"])
    # each assistant's history before the shared message, both replies after it, the instructions last
    assert turn.index("C1") < turn.index("C2") < turn.index("Q") < turn.index("A1") < turn.index("A2") \
        < turn.index(b["conversation_prompt"])
    assert not re.search(r"\b(10|[1-9]) (10|[1-9])\b", b["conversation_prompt"])
    assert fields(b["reference_template"]) == {"reference"}
    for key in ("system_prompt", "prompt"):
        assert "{" not in b[key] and "}" not in b[key], f"battle_prompt_{lang}.json: braces in {key}"
    rendered = b["prompt_template"].format(
        question="Q", answer_1="A1", answer_2="A2", prompt=b["prompt"]
    )
    assert rendered.index("A1") < rendered.index("A2") < rendered.index(b["prompt"])
    assert "\nR\n" in b["reference_template"].format(reference="R")
    # no concrete score pair as an example: the local 1.5B judge copied "7 4" verbatim into every
    # reply (both orders), which made every verdict follow the position
    assert not re.search(r"\b(10|[1-9]) (10|[1-9])\b", b["prompt"]), "battle prompt shows an 'x y' example"


# --------------------------------------------------------------------------- originality


def _strings(obj: Any):
    if isinstance(obj, str):
        yield obj
    elif isinstance(obj, dict):
        for v in obj.values():
            yield from _strings(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from _strings(v)


def _shingles(text: str, lang: str) -> set[str]:
    if lang == "en":
        units, n = re.findall(r"[a-z0-9]+", text.lower()), 8
    else:
        units, n = re.findall(r"[\u4e00-\u9fff]", text), 8
    return {" ".join(units[i:i + n]) for i in range(len(units) - n + 1)}


@pytest.mark.parametrize("kind", ["evaluation_prompt", "battle_prompt"])
def test_prompts_are_not_copied_from_colossalai(kind, lang):
    theirs_path = COLOSSAL / "prompt" / kind / f"{kind}_{lang}.json"
    if not theirs_path.is_file():
        pytest.skip(f"{theirs_path} not present (shared data is absent)")
    theirs = set().union(*(_shingles(s, lang) for s in _strings(load(theirs_path))))
    ours = set().union(*(_shingles(s, lang) for s in _strings(load(PROMPTS / f"{kind}_{lang}.json"))))
    assert not ours & theirs, f"{kind}_{lang}.json shares wording with ColossalAI: {sorted(ours & theirs)[:5]}"


# --------------------------------------------------------------------------- examples


def _check_record(rec: dict, where: str) -> None:
    assert set(rec) == RECORD_KEYS, f"{where}: keys {sorted(rec)}"
    assert isinstance(rec["id"], (int, str)) and not isinstance(rec["id"], bool), where
    for key in ("category", "instruction", "input", "output"):
        assert isinstance(rec[key], str), f"{where}: {key} must be a string"
    assert rec["instruction"].strip(), f"{where}: empty instruction"
    target = rec["target"]
    refs = target if isinstance(target, list) else [target]
    assert refs and all(isinstance(t, str) and t.strip() for t in refs), f"{where}: bad target {target!r}"


def test_example_files_parse_and_align(examples, lang):
    files = examples[lang]
    for name, records in files.items():
        for rec in records:
            _check_record(rec, f"examples/{lang}/{name}.json id={rec.get('id')!r}")
        ids = [r["id"] for r in records]
        assert len(ids) == len(set(ids)), f"examples/{lang}/{name}.json: duplicate ids"
    base = files["targets"]
    for name in ("answers_model_a", "answers_model_b"):
        assert [r["id"] for r in files[name]] == [r["id"] for r in base], f"{lang}/{name}: ids differ from targets"
        for rec, ref in zip(files[name], base):
            for key in ("category", "instruction", "input", "target"):
                assert rec[key] == ref[key], f"{lang}/{name} id={rec['id']}: {key} differs from targets.json"


def test_examples_cover_all_categories(examples, lang):
    counts = Counter(r["category"] for r in examples[lang]["targets"])
    assert set(counts) == set(CATEGORIES), f"{lang}: {set(CATEGORIES) ^ set(counts)}"
    assert min(counts.values()) >= 2, f"{lang}: {counts}"
    assert len(examples[lang]["targets"]) >= 20


def test_example_outputs(examples, lang):
    files = examples[lang]
    assert all(r["output"] == "" for r in files["targets"])
    assert all(r["output"].strip() for r in files["answers_model_a"])
    empty = [r["id"] for r in files["answers_model_b"] if not r["output"].strip()]
    assert len(empty) == 1, f"{lang}/answers_model_b.json: expected exactly one empty output, got ids {empty}"
    assert any(isinstance(r["target"], list) and len(r["target"]) > 1 for r in files["targets"])


def _units(text: str, lang: str) -> list[str]:
    """Words for English, Han characters/digit runs for Chinese: enough for an overlap check."""
    if lang == "en":
        return re.findall(r"[a-z0-9']+", text.lower())
    return re.findall(r"[\u4e00-\u9fff]|\d+", text)


def _f1(pred: str, ref: str, lang: str) -> float:
    p, r = Counter(_units(pred, lang)), Counter(_units(ref, lang))
    common = sum((p & r).values())
    if not common:
        return 0.0
    precision, recall = common / sum(p.values()), common / sum(r.values())
    return 2 * precision * recall / (precision + recall)


def _best_f1(rec: dict, lang: str) -> float:
    refs = rec["target"] if isinstance(rec["target"], list) else [rec["target"]]
    return max(_f1(rec["output"], t, lang) for t in refs)


def test_model_b_is_measurably_weaker(examples, lang):
    """The example exists to show a gap: model_a must beat model_b on reference overlap."""
    a, b = examples[lang]["answers_model_a"], examples[lang]["answers_model_b"]
    fa = [_best_f1(r, lang) for r in a]
    fb = [_best_f1(r, lang) for r in b]
    assert sum(fa) / len(fa) > sum(fb) / len(fb) + 0.3, (sum(fa) / len(fa), sum(fb) / len(fb))
    for ra, sa, sb in zip(a, fa, fb):
        if ra["category"] in ("classification", "extraction"):
            assert sa == 1.0 > sb, f"{lang} id={ra['id']}: a={sa:.2f} b={sb:.2f}"


def test_label_targets_are_short(examples, lang):
    """Precision/recall/F1 only mean something on short label or entity-list targets."""
    limit = 12 if lang == "en" else 30
    for rec in examples[lang]["targets"]:
        if rec["category"] in ("classification", "extraction"):
            assert len(_units(rec["target"], lang)) <= limit, f"{lang} id={rec['id']}: target too long"


def test_examples_render_into_their_category_prompt(examples, eval_prompts, lang):
    for rec in examples[lang]["answers_model_b"]:
        entry = eval_prompts[lang].get(rec["category"], eval_prompts[lang]["general"])
        metric = next(iter(entry["metrics"]))
        text = entry["prompt"].format(
            question=rec["instruction"], answer=rec["output"],
            metric=entry["metrics"][metric], steps=entry["CoT"][metric],
        )
        assert rec["instruction"] in text


# --------------------------------------------------------------------------- SAGEval example


def test_sageval_surveys():
    records = load(EXAMPLES / "sageval" / "surveys.json")
    assert 6 <= len(records) <= 12
    ids = [r["id"] for r in records]
    assert len(ids) == len(set(ids))
    flawed = 0
    for rec in records:
        where = f"examples/sageval/surveys.json id={rec.get('id')!r}"
        assert set(rec) == RECORD_KEYS | {"planted_flaws"}, where
        assert rec["category"] in {"survey", "form", "quiz"}, where
        assert rec["input"] == "" and rec["target"] == "", where
        assert rec["instruction"].strip() and rec["output"].strip(), where
        assert isinstance(rec["planted_flaws"], list), where
        assert set(rec["planted_flaws"]) <= KNOWN_FLAWS, f"{where}: {rec['planted_flaws']}"
        flawed += bool(rec["planted_flaws"])
    assert 3 <= flawed <= 4
    assert {r["category"] for r in records} == {"survey", "form", "quiz"}


def test_sageval_duplicate_flaw_is_real():
    """A record that claims a duplicate question must actually repeat a line."""
    for rec in load(EXAMPLES / "sageval" / "surveys.json"):
        if "duplicate question" in rec["planted_flaws"]:
            items = [re.sub(r"^\s*(\d+\.|-)\s*", "", line) for line in rec["output"].splitlines()[1:]]
            assert len(items) != len(set(items)), rec["id"]
