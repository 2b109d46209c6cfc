"""UniEval: question formats, score arithmetic, checkpoint errors, and the T5 path end to end.

No UniEval weights exist offline, so the end-to-end tests build a tiny random T5 and a
word-level tokenizer that knows "Yes", "No" and "</s>", save them like a real checkpoint and
load them through the public API.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import unieval  # noqa: E402
from evaluate.core.errors import InputError  # noqa: E402
from unieval import DIMENSIONS, boolean_prob, build_inputs, combine, parse_name, split_sentences  # noqa: E402

SHARED = Path(__file__).resolve().parents[1] / ".." / "shared"

DOC = "Peter and Elizabeth took a taxi. Elizabeth collapsed at the party."
REF = "Elizabeth was hospitalized after a party."
HISTORY = "hi , do you know much about the internet ? \n i know a lot . \n\n"
FACT = "the 3 horizontal line menu is called a hamburger button .\n"


# ---------------------------------------------------------------- names and dimensions

def test_dimension_table_matches_the_release():
    assert DIMENSIONS == {
        "summarization": ("coherence", "consistency", "fluency", "relevance"),
        "dialogue": ("naturalness", "coherence", "engagingness", "groundedness", "understandability"),
        "data2text": ("naturalness", "informativeness"),
        "fact": ("consistency",),
    }
    assert unieval.CHECKPOINTS["data2text"] == "MingZhong/unieval-sum"


def test_parse_name():
    assert parse_name("summarization-fluency") == ("summarization", "fluency")
    assert parse_name(" Dialogue-Naturalness ") == ("dialogue", "naturalness")
    assert parse_name("data2text-informativeness") == ("data2text", "informativeness")


@pytest.mark.parametrize("bad, hint", [
    ("summarization-fluncy", '"summarization-fluency"'),
    ("dialog-naturalness", '"dialogue-naturalness"'),
    ("fluency", "task-dimension"),
    ("fact-fluency", "task-dimension"),
])
def test_parse_name_unknown_suggests(bad, hint):
    with pytest.raises(InputError) as err:
        parse_name(bad)
    assert bad in str(err.value) and hint in str(err.value)


def test_unknown_task_or_dimension_in_build_inputs():
    with pytest.raises(InputError, match='did you mean "summarization"'):
        build_inputs("sumarization", "fluency", ["x"])
    with pytest.raises(InputError, match='no dimension "fluent".*"fluency"'):
        build_inputs("summarization", "fluent", ["x"])


# ---------------------------------------------------------------- input formats, written out by hand

EXPECTED = {
    ("summarization", "coherence"):
        "question: Is this a coherent summary to the document? </s> summary: OUT </s> document: " + DOC,
    ("summarization", "consistency"):
        "question: Is this claim consistent with the document? </s> claim: OUT </s> document: " + DOC,
    ("summarization", "fluency"): "question: Is this a fluent paragraph? </s> paragraph: OUT",
    ("summarization", "relevance"):
        "question: Is this summary relevant to the reference? </s> summary: OUT </s> reference: " + REF,
    ("dialogue", "naturalness"): "question: Is this a natural response in the dialogue? </s> response: OUT",
    ("dialogue", "coherence"): "question: Is this a coherent response given the dialogue history? "
                               "</s> response: OUT </s> dialogue history: " + HISTORY,
    ("dialogue", "engagingness"): "question: Is this an engaging and informative response according to the "
                                  "dialogue history and fact? </s> response: OUT </s> dialogue history: "
                                  + HISTORY + " </s> fact: " + FACT,
    ("dialogue", "groundedness"): "question: Is this response consistent with knowledge in the fact? "
                                  "</s> response: OUT </s> fact: " + FACT,
    ("dialogue", "understandability"):
        "question: Is this an understandable response in the dialogue? </s> response: OUT",
    ("data2text", "naturalness"): "question: Is this a fluent utterance? </s> utterance: OUT",
    ("data2text", "informativeness"): "question: Is this sentence informative according to the reference? "
                                      "</s> sentence: OUT </s> reference: " + REF,
    ("fact", "consistency"):
        "question: Is this claim consistent with the document? </s> claim: OUT </s> document: " + DOC,
}


def _inputs_for(task: str) -> dict:
    if task == "dialogue":
        return {"sources": [HISTORY], "contexts": [FACT]}
    return {"sources": [DOC], "references": [REF]}


@pytest.mark.parametrize("task, dim", sorted(EXPECTED))
def test_input_format(task, dim):
    out = "Elizabeth was taken to hospital."
    got = build_inputs(task, dim, [out], **_inputs_for(task))
    assert got == [(EXPECTED[task, dim].replace("OUT", out), 0)]


def test_every_dimension_has_a_hand_written_format():
    assert sorted(EXPECTED) == sorted((t, d) for t, dims in DIMENSIONS.items() for d in dims)


def test_sentence_level_dimensions_split_the_output():
    outputs = ["Peter took a taxi. Elizabeth collapsed! Was she hurt?", "One sentence only"]
    sources = [DOC, DOC]
    for task, dim in [("summarization", "consistency"), ("summarization", "fluency"), ("fact", "consistency")]:
        got = build_inputs(task, dim, outputs, sources=sources)
        assert [i for _, i in got] == [0, 0, 0, 1]
        units = ["Peter took a taxi.", "Elizabeth collapsed!", "Was she hurt?", "One sentence only"]
        assert [t for t, _ in got] == [EXPECTED[task, dim].replace("OUT", u) for u in units]
    got = build_inputs("dialogue", "engagingness", ["i do too . did you know that ?"],
                       sources=[HISTORY], contexts=[FACT])
    assert [t for t, _ in got] == [EXPECTED["dialogue", "engagingness"].replace("OUT", u)
                                   for u in ["i do too .", "did you know that ?"]]
    # whole-output dimensions never split
    assert len(build_inputs("summarization", "coherence", outputs, sources=sources)) == 2
    # a blank output is still one unit
    assert build_inputs("summarization", "fluency", [""]) == [
        ("question: Is this a fluent paragraph? </s> paragraph: ", 0)]


@pytest.mark.parametrize("task, dim, kwargs, words", [
    ("summarization", "coherence", {}, ["summarization-coherence", "`sources`", "source document"]),
    ("summarization", "relevance", {"sources": ["d"]}, ["summarization-relevance", "`references`"]),
    ("dialogue", "groundedness", {"sources": ["h"]}, ["dialogue-groundedness", "`contexts`", "the fact"]),
    ("dialogue", "engagingness", {"contexts": ["f"]}, ["dialogue-engagingness", "`sources`", "dialogue history"]),
    ("data2text", "informativeness", {}, ["data2text-informativeness", "`references`"]),
    ("fact", "consistency", {"references": ["r"]}, ["fact-consistency", "`sources`"]),
    ("summarization", "coherence", {"sources": ["a", "b"]}, ["2 sources for 1 outputs"]),
    ("summarization", "coherence", {"sources": "a document"}, ["list of strings", "not a single string"]),
    ("summarization", "coherence", {"sources": [None]}, ["sources[0] is NoneType"]),
])
def test_missing_inputs_fail_up_front(task, dim, kwargs, words):
    with pytest.raises(InputError) as err:
        build_inputs(task, dim, ["an output"], **kwargs)
    for w in words:
        assert w in str(err.value)


def test_fields_a_dimension_does_not_need_are_optional():
    assert len(build_inputs("summarization", "fluency", ["a."])) == 1
    assert len(build_inputs("dialogue", "naturalness", ["a."])) == 1
    assert len(build_inputs("data2text", "naturalness", ["a."])) == 1


# ---------------------------------------------------------------- sentence splitter

@pytest.mark.parametrize("text, sents", [
    ("Peter and Elizabeth attend party city. Elizabeth rushed hospital.",
     ["Peter and Elizabeth attend party city.", "Elizabeth rushed hospital."]),
    ("i do too . did you know the menu ?", ["i do too .", "did you know the menu ?"]),
    ("Dr. Smith met Mr. Jones at 5 p.m. in the U.S. capital. They talked.",
     ["Dr. Smith met Mr. Jones at 5 p.m. in the U.S. capital.", "They talked."]),
    ('He said "hi!" Then he left.', ['He said "hi!"', "Then he left."]),
    ("Pi is 3.14 roughly. Yes.", ["Pi is 3.14 roughly.", "Yes."]),
    ("1. First item.\n2. Second item", ["1. First item.", "2. Second item"]),
    ("Title line\n\nBody text here", ["Title line", "Body text here"]),
    ("no punctuation at all", ["no punctuation at all"]),
    ("   ", []),
])
def test_split_sentences(text, sents):
    assert split_sentences(text) == sents


# ---------------------------------------------------------------- score arithmetic

def test_boolean_prob_hand_values():
    assert boolean_prob(0.0, 0.0) == 0.5
    assert boolean_prob(2.0, 0.0) == pytest.approx(1 / (1 + math.exp(-2)), abs=1e-15)
    assert boolean_prob(0.0, math.log(3)) == pytest.approx(0.25, abs=1e-12)  # odds 1:3
    assert boolean_prob(1000.0, 0.0) == 1.0 and boolean_prob(-1000.0, 0.0) == 0.0


def test_boolean_prob_equals_the_release_softmax_ratio():
    import numpy as np

    rng = np.random.default_rng(0)
    for _ in range(20):
        logits = rng.normal(scale=5, size=50)
        p = np.exp(logits - logits.max())
        p /= p.sum()
        assert boolean_prob(logits[7], logits[3]) == pytest.approx(p[7] / (p[7] + p[3]), rel=1e-12)


def test_combine_mean_sum_single():
    s = [0.2, 0.4, 0.9, 0.5]
    idx = [0, 0, 0, 1]
    assert combine("summarization", "fluency", s, idx, 2) == pytest.approx([0.5, 0.5])
    assert combine("fact", "consistency", s, idx, 2) == pytest.approx([0.5, 0.5])
    assert combine("dialogue", "engagingness", s, idx, 2) == pytest.approx([1.5, 0.5])
    assert combine("summarization", "coherence", [0.3, 0.7], [0, 1], 2) == [0.3, 0.7]


def test_combine_rejects_inconsistent_units():
    with pytest.raises(ValueError, match="several units"):
        combine("summarization", "coherence", [0.3, 0.7], [0, 0], 1)
    with pytest.raises(ValueError, match="without any scored unit"):
        combine("summarization", "fluency", [0.3], [0], 2)
    with pytest.raises(ValueError, match="unit scores"):
        combine("summarization", "fluency", [0.3], [0, 0], 1)


# ---------------------------------------------------------------- a tiny T5 checkpoint

CORPUS = [
    *EXPECTED.values(),
    "Peter took a taxi . Elizabeth collapsed ! Was she hurt ? One sentence only",
    "The cat sat on the mat . It was happy . The dog barked loudly at night .",
    "i do too . did you know the 3 horizontal line menu on apps is called a hamburger button ?",
    "Yes No yes no",
]


def _tokenizer(words: list[str] | None = None):
    from tokenizers import Tokenizer, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator(words or CORPUS, trainers.WordLevelTrainer(special_tokens=["<pad>", "</s>", "<unk>"]))
    # like T5: "</s>" closes every input
    tok.post_processor = processors.TemplateProcessing(single="$A </s>", special_tokens=[("</s>", 1)])
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="</s>", unk_token="<unk>")


def _save_checkpoint(folder: Path, words: list[str] | None = None, seed: int = 0) -> Path:
    import torch
    from transformers import T5Config, T5ForConditionalGeneration

    tok = _tokenizer(words)
    config = T5Config(vocab_size=len(tok), d_model=32, d_ff=64, d_kv=8, num_heads=4, num_layers=2,
                      num_decoder_layers=2, pad_token_id=0, eos_token_id=1, decoder_start_token_id=0)
    torch.manual_seed(seed)
    model = T5ForConditionalGeneration(config)  # tied embeddings: scores spread over about 0.15-0.3
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def checkpoint(tmp_path_factory) -> Path:
    return _save_checkpoint(tmp_path_factory.mktemp("unieval-tiny"))


@pytest.fixture(scope="session")
def evaluator(checkpoint):
    return unieval.UniEvaluator(checkpoint, batch_size=3)


def _release_scores(ev, texts: list[str]) -> list[float]:
    """The release's computation, written independently: labels=first token of "No" (the model
    shifts it right into the decoder start token), softmax over the whole vocabulary, ratio."""
    import torch

    out = []
    with torch.no_grad():
        for text in texts:
            enc = ev.tokenizer([text], return_tensors="pt", max_length=ev.max_length, truncation=True)
            labels = ev.tokenizer(["No"], return_tensors="pt")["input_ids"][:, 0].unsqueeze(-1)
            logits = ev.model(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"],
                              labels=labels).logits.view(-1, ev.model.config.vocab_size)
            p = torch.softmax(logits.double(), dim=1)[0]
            yes = ev.tokenizer("Yes")["input_ids"][0]
            no = ev.tokenizer("No")["input_ids"][0]
            out.append(float(p[yes] / (p[yes] + p[no])))
    return out


OUTPUTS = [
    "Peter took a taxi. Elizabeth collapsed! Was she hurt?",
    "The cat sat on the mat.",
    "The dog barked loudly at night. It was happy.",
    "One sentence only",
    "i do too . did you know the 3 horizontal line menu on apps is called a hamburger button ?",
]


def test_scores_match_the_release_computation(evaluator):
    texts = [t for t, _ in build_inputs("summarization", "coherence", OUTPUTS, sources=[DOC] * len(OUTPUTS))]
    got = evaluator.score_texts(texts)
    assert got == pytest.approx(_release_scores(evaluator, texts), abs=1e-5)
    assert all(0.0 < s < 1.0 for s in got)
    assert max(got) - min(got) > 1e-3  # the inputs really reach the score


def test_batching_does_not_change_scores(checkpoint, evaluator):
    one = unieval.UniEvaluator(checkpoint, batch_size=1)
    for task, dim in [("summarization", "coherence"), ("summarization", "fluency"), ("dialogue", "engagingness")]:
        kw = _inputs_for(task)
        kw = {k: v * len(OUTPUTS) for k, v in kw.items()}
        batched = evaluator.score(task, dim, OUTPUTS, **kw)
        alone = [one.score(task, dim, [o], **{k: [v[0]] for k, v in kw.items()})[0] for o in OUTPUTS]
        assert batched == pytest.approx(alone, abs=1e-5)


def test_sentence_scores_are_averaged_or_summed(evaluator):
    sentences = ["The dog barked loudly at night.", "It was happy.", "The cat sat on the mat."]
    text = " ".join(sentences)
    each = evaluator.score("summarization", "fluency", sentences)
    assert evaluator.score("summarization", "fluency", [text]) == pytest.approx([sum(each) / 3], abs=1e-6)
    each = evaluator.score("fact", "consistency", sentences, sources=[DOC] * 3)
    assert evaluator.score("fact", "consistency", [text], sources=[DOC]) == pytest.approx([sum(each) / 3], abs=1e-6)
    each = evaluator.score("dialogue", "engagingness", sentences, sources=[HISTORY] * 3, contexts=[FACT] * 3)
    summed = evaluator.score("dialogue", "engagingness", [text], sources=[HISTORY], contexts=[FACT])
    assert summed == pytest.approx([sum(each)], abs=1e-6)
    assert summed[0] > max(each)  # a sum of three probabilities, not their mean


def test_controlled_logits_give_the_known_probability(evaluator):
    """Force the first-step logits of "Yes" and "No": the score must be the logistic of their gap."""
    def force(module, args, output):
        output = output.clone()
        output[:, 0, :] = -5.0
        output[:, 0, evaluator.yes_id] = 3.0
        output[:, 0, evaluator.no_id] = 1.0
        return output

    handle = evaluator.model.lm_head.register_forward_hook(force)
    try:
        p = 1 / (1 + math.exp(-2.0))
        three = "The dog barked. It was happy. The cat sat."
        assert evaluator.score("summarization", "fluency", [three, "x"]) == pytest.approx([p, p], abs=1e-6)
        assert evaluator.score("dialogue", "engagingness", [three, "x"], sources=["h", "h"],
                               contexts=["f", "f"]) == pytest.approx([3 * p, p], abs=1e-6)
    finally:
        handle.remove()


def test_truncation_cuts_at_max_length(checkpoint):
    ev = unieval.UniEvaluator(checkpoint, max_length=12)
    long_text = "question: Is this a fluent paragraph? </s> paragraph: " + "The cat sat on the mat . " * 5
    # 11 content tokens kept + the closing </s>
    kept = ev.tokenizer(long_text, add_special_tokens=False)["input_ids"][:11]
    short_text = ev.tokenizer.decode(kept)
    assert ev.score_texts([long_text]) == pytest.approx(ev.score_texts([short_text]), abs=1e-6)
    assert ev.truncated_inputs == 1


def test_for_task_reads_the_config_mapping(checkpoint):
    ev = unieval.UniEvaluator.for_task("data2text", {"data2text": str(checkpoint)})
    assert ev.score("data2text", "naturalness", ["The cat sat on the mat."])[0] == pytest.approx(
        _release_scores(ev, [EXPECTED["data2text", "naturalness"].replace("OUT", "The cat sat on the mat.")])[0],
        abs=1e-5)
    sig = ev.signature()
    assert sig["yes_token"] == "Yes" and sig["no_token"] == "No" and sig["max_length"] == 1024


def test_empty_outputs_give_no_scores(evaluator):
    assert evaluator.score("summarization", "fluency", []) == []


def test_missing_field_fails_before_the_model_runs(evaluator):
    with pytest.raises(InputError, match="summarization-relevance needs `references`"):
        evaluator.score("summarization", "relevance", ["x"], sources=["d"])


# ---------------------------------------------------------------- checkpoint errors

def _assert_hint(err: InputError, repo: str, task: str):
    msg = str(err)
    assert repo in msg and "Hugging Face hub" in msg and f"path_for_UniEval.{task}" in msg


def test_placeholder_path_from_colossalai_config():
    with pytest.raises(InputError) as err:
        unieval.UniEvaluator.for_task("summarization", {"summarization": "path to unieval-sum"})
    assert "no such folder" in str(err.value)
    _assert_hint(err.value, "MingZhong/unieval-sum", "summarization")


def test_missing_config_key():
    with pytest.raises(InputError) as err:
        unieval.UniEvaluator.for_task("fact", {"summarization": "x"})
    assert "path_for_UniEval.fact` is missing" in str(err.value)
    _assert_hint(err.value, "MingZhong/unieval-fact", "fact")


def test_bad_paths(tmp_path, checkpoint):
    a_file = tmp_path / "weights.bin"
    a_file.write_text("x")
    with pytest.raises(InputError, match="not a folder") as err:
        unieval.UniEvaluator(a_file, task="dialogue")
    _assert_hint(err.value, "MingZhong/unieval-dialog", "dialogue")

    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(InputError, match="no config.json"):
        unieval.UniEvaluator(empty)

    bert = tmp_path / "bert"
    bert.mkdir()
    (bert / "config.json").write_text(json.dumps({"model_type": "bert"}))
    with pytest.raises(InputError, match='model_type "bert".*T5') as err:
        unieval.UniEvaluator(bert, task="data2text")
    _assert_hint(err.value, "MingZhong/unieval-sum", "data2text")

    no_weights = tmp_path / "no_weights"
    no_weights.mkdir()
    (no_weights / "config.json").write_text((checkpoint / "config.json").read_text())
    (no_weights / "tokenizer.json").write_text((checkpoint / "tokenizer.json").read_text())
    with pytest.raises(InputError, match="no weights"):
        unieval.UniEvaluator(no_weights)

    no_tok = tmp_path / "no_tokenizer"
    no_tok.mkdir()
    for name in ("config.json", "model.safetensors"):
        (no_tok / name).write_bytes((checkpoint / name).read_bytes())
    with pytest.raises(InputError, match="no tokenizer") as err:
        unieval.UniEvaluator(no_tok)
    assert "unieval-sum" in str(err.value) and "unieval-fact" in str(err.value)  # no task: every hint

    with pytest.raises(InputError, match="no checkpoint path"):
        unieval.UniEvaluator("", task="fact")


def test_tokenizer_without_yes_is_rejected(tmp_path):
    folder = _save_checkpoint(tmp_path / "no_yes", words=["a b c d No"])
    with pytest.raises(InputError, match='no token for "Yes"'):
        unieval.UniEvaluator(folder)


def test_bad_options(checkpoint):
    with pytest.raises(InputError, match="dtype"):
        unieval.UniEvaluator(checkpoint, dtype="float8")
    with pytest.raises(InputError, match="batch_size"):
        unieval.UniEvaluator(checkpoint, batch_size=0)
    with pytest.raises(InputError, match="device"):
        unieval.UniEvaluator(checkpoint, device="tpu:7")


# ---------------------------------------------------------------- real data

def test_topical_chat_rows_build(tmp_path):
    path = SHARED / "data" / "unieval" / "reproduce" / "data" / "dialogue" / "topical_chat.json"
    if not path.is_file():
        pytest.skip(f"{path} not present")
    rows = json.loads(path.read_text(encoding="utf-8"))[:60]
    outs = [r["system_output"] for r in rows]
    srcs = [r["source"] for r in rows]
    ctxs = [r["context"] for r in rows]
    got = build_inputs("dialogue", "engagingness", outs, sources=srcs, contexts=ctxs)
    assert len(got) == sum(len(split_sentences(o)) or 1 for o in outs) > len(rows)
    for text, i in got:
        assert text.endswith(" </s> dialogue history: " + srcs[i] + " </s> fact: " + ctxs[i])
    got = build_inputs("dialogue", "understandability", outs)
    assert [t for t, _ in got] == [
        "question: Is this an understandable response in the dialogue? </s> response: " + o for o in outs]


def test_lm_layout_puts_the_shared_document_first_and_ends_on_the_question():
    from unieval import build_inputs

    units = build_inputs("summarization", "consistency", ["Cats purr. Dogs bark."], sources=["THE DOC"],
                         lm_instruction="Answer Yes or No.")
    assert [i for _, i in units] == [0, 0]
    texts = [t for t, _ in units]
    assert texts[0] == ("document: THE DOC\n\nclaim: Cats purr.\n\n"
                        "question: Is this claim consistent with the document?\nAnswer Yes or No.")
    assert texts[1].startswith("document: THE DOC\n\nclaim: Dogs bark.")
    # the T5 layout is unchanged by default
    t5 = build_inputs("summarization", "consistency", ["Cats purr."], sources=["THE DOC"])
    assert t5[0][0] == "question: Is this claim consistent with the document? </s> claim: Cats purr. </s> document: THE DOC"
