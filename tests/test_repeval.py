"""RepEval: extraction (truncated == full pass, padding), directions, fit/score, save/load, errors.

The model tests use the real SmolLM2-135M-Instruct (a pinned PyPI package carrying the GGUF);
they skip when it is not installed.
"""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from evaluate.core.errors import InputError
from repeval import RepEval
from repeval.direction import fit_direction
from repeval.pairs import (Pair, corrupt_coherence, corrupt_consistency, corrupt_fluency, pairs_from_pairwise,
                           pairs_from_scored, synthetic_pairs)
from repeval.select import grid, grouped_spearman, sweep
from repeval.templates import render, template_for

GOOD = [
    "The weather was pleasant, so we walked to the park after lunch.",
    "She finished her homework before dinner and then read a book.",
    "The museum opens at nine in the morning and closes at five.",
    "Our team won the match after a long and difficult second half.",
    "He bought fresh bread from the bakery on the corner of the street.",
    "The children played in the garden while their parents cooked dinner.",
    "The train to London was delayed by twenty minutes this morning.",
    "I forgot my umbrella at home, and it started to rain heavily.",
    "The new library has a large collection of books for young readers.",
    "After the meeting, the manager sent a short summary to everyone.",
]


def garble(text: str, seed: int) -> str:
    return corrupt_fluency(text, random.Random(seed))


BAD = [garble(t, i) for i, t in enumerate(GOOD)]


@pytest.fixture(scope="session")
def smol():
    try:
        from evaluate.models.load import load_causal_lm

        return load_causal_lm("SmolLM2-135M-Instruct")
    except InputError as exc:
        pytest.skip(f"SmolLM2 not available: {exc}")


# --------------------------------------------------------------------------- no model needed

def test_pca_direction_survives_centring():
    """Every difference = mu + noise: plain PCA on them would centre mu away; flipping half keeps it."""
    rng = np.random.default_rng(0)
    mu = rng.normal(size=64)
    mu /= np.linalg.norm(mu)
    bad = rng.normal(size=(20, 64))
    good = bad + 3 * mu + 0.3 * rng.normal(size=(20, 64))
    fit = fit_direction(good, bad, "pca", n_components=1, seed=0)
    assert float(fit.direction @ mu) > 0.9  # oriented: good projects higher
    assert fit.train_accuracy == 1.0
    from sklearn.decomposition import PCA

    naive = PCA(1).fit(good - bad).components_[0]
    assert abs(float(naive @ mu)) < 0.5  # the pitfall the flipping avoids
    for method in ("mean", "svm"):
        assert float(fit_direction(good, bad, method).direction @ mu) > 0.8


def test_pca_weights_components_by_explained_variance():
    rng = np.random.default_rng(1)
    bad = rng.normal(size=(10, 16))
    good = bad + rng.normal(size=(10, 16)) + 2.0
    fit = fit_direction(good, bad, "pca", n_components=3, seed=0)
    evr = fit.explained_variance_ratio
    assert len(evr) == 3 and evr == sorted(evr, reverse=True) and sum(evr) <= 1
    assert np.isclose(np.linalg.norm(fit.direction), 1.0, atol=1e-5)


def test_direction_errors():
    x = np.ones((3, 8))
    with pytest.raises(InputError, match="n_components=3 with 3 pairs"):
        fit_direction(x + np.eye(3, 8), x, "pca", n_components=3)
    with pytest.raises(InputError, match="direction method"):
        fit_direction(x, x, "lda")
    with pytest.raises(InputError, match="do not differ"):
        fit_direction(x, x, "mean")


def test_grouped_spearman_by_hand():
    pred = [1, 2, 3, 3, 2, 1, 5, 5, 5]
    human = [1, 2, 3, 1, 2, 3, 1, 2, 3]
    groups = ["a"] * 3 + ["b"] * 3 + ["c"] * 3  # a: +1, b: -1, c: constant -> skipped
    assert grouped_spearman(pred, human, groups) == pytest.approx(0.0)
    assert grouped_spearman(pred[:6], human[:6], groups[:6]) == pytest.approx(0.0)
    assert grouped_spearman(pred[:3], human[:3], None) == pytest.approx(1.0)


def test_sweep_finds_the_layer_that_carries_the_signal():
    rng = np.random.default_rng(0)
    n, hidden, layers, tokens = 30, 32, [4, 8], [-1]
    mu = rng.normal(size=hidden)
    quality = rng.normal(size=n)
    val = rng.normal(size=(n, 1, 2, hidden))
    val[:, 0, 1] += quality[:, None] * mu  # only layer 8 carries quality
    bad = rng.normal(size=(6, 1, 2, hidden))
    good = bad.copy()
    good[:, 0, 1] += mu
    good[:, 0, 0] += rng.normal(size=(6, hidden))
    rows = sweep(good, bad, val, layers, tokens, grid(layers, tokens, ("mean",)), human=quality)
    assert rows[0].layer == 8 and rows[0].validation > 0.8
    assert rows[1].validation < 0.6


def test_pairs_from_scored_and_pairwise():
    rows = [{"id": i, "doc_id": d, "output": f"out{i}", "source": f"src{d}", "human": {"fluency": s}}
            for i, (d, s) in enumerate([("x", 1), ("x", 3), ("x", 2), ("y", 4), ("y", 4), ("z", 5), ("z", 1)])]
    pairs = pairs_from_scored(rows, "fluency")
    assert [(p.good, p.bad, p.src) for p in pairs] == [("out1", "out0", "srcx"), ("out5", "out6", "srcz")]  # y tied
    single = [{"id": i, "doc_id": str(i), "output": f"o{i}", "human": {"fluency": s}} for i, s in enumerate([5, 1, 3, 9])]
    assert [(p.good, p.bad) for p in pairs_from_scored(single, "fluency", k=2)] == [("o3", "o1"), ("o0", "o2")]
    with pytest.raises(InputError, match="no human score 'meaning'"):
        pairs_from_scored(rows, "meaning")
    pw = [{"instruction": "Q", "input": "ctx", "response_a": "A", "response_b": "B", "label": "b"},
          {"instruction": "Q", "input": "", "response_a": "A", "response_b": "B", "label": "tie"}]
    assert pairs_from_pairwise(pw) == [Pair("B", "A", None, "Q\nctx")]


def test_synthetic_corruptions_are_seeded_and_change_the_text():
    text = "Tom Smith scored 3 goals on Sunday. The crowd cheered loudly. Fans went home happy after the game."
    src = "Tom Smith and Peter Jones played on Sunday before 40000 fans in Madrid."
    assert corrupt_fluency(text, random.Random(0)) == corrupt_fluency(text, random.Random(0))
    assert corrupt_fluency(text, random.Random(0)) != text
    shuffled = corrupt_coherence(text, random.Random(0))
    assert shuffled != text and sorted(shuffled.split()) == sorted(text.split())
    swapped = corrupt_consistency(text, src, random.Random(0))
    assert "3 goals" not in swapped and swapped != text
    assert corrupt_coherence("One sentence only.", random.Random(0)) is None
    pairs = synthetic_pairs([text, "Short one. Two."], "coherence", seed=1)
    assert len(pairs) == 1 and pairs[0].good == text
    with pytest.raises(InputError, match="need the source"):
        synthetic_pairs([text], "consistency")


def test_templates():
    assert "{hyp}" in template_for("fluency")
    with pytest.raises(InputError, match='unknown RepEval criterion "fluncy".*did you mean "fluency"'):
        template_for("fluncy")
    with pytest.raises(InputError, match="needs {src}"):
        render(template_for("consistency"), hyp="x", where="row 3")
    with pytest.raises(InputError, match="unknown placeholder"):
        template_for("x", template="Rate {answer}")


# --------------------------------------------------------------------------- SmolLM2

def test_truncated_forward_equals_full_forward(smol):
    import torch

    from repeval.extract import decoder_layers, extract_hidden_states

    model, tok, _ = smol
    text = GOOD[0]
    calls = []
    top = decoder_layers(model)[-1].register_forward_hook(lambda *a: calls.append(1))
    try:
        got = extract_hidden_states(model, tok, [text], [4, 12], token=[-1, -3])  # [1, 2 tokens, 2 layers, H]
    finally:
        top.remove()
    assert calls == []  # the pass stopped at layer 12: the last layer never ran
    assert len(decoder_layers(model)) == model.config.num_hidden_layers  # layers restored
    with torch.inference_mode():
        full = model.model(**tok(text, return_tensors="pt"), output_hidden_states=True).hidden_states
    for li, layer in enumerate([4, 12]):
        for ti, t in enumerate([-1, -3]):
            np.testing.assert_array_equal(got[0, ti, li], full[layer][0, t].float().numpy())
    untruncated = extract_hidden_states(model, tok, [text], [4, 12], token=[-1, -3], truncate=False)
    np.testing.assert_array_equal(got, untruncated)


def test_left_padding_matches_single_texts(smol):
    from repeval.extract import extract_hidden_states

    model, tok, _ = smol
    texts = [GOOD[0], "Short text here.", GOOD[3] + " " + GOOD[4]]
    batched = extract_hidden_states(model, tok, texts, -13, batch_size=3)
    assert batched.shape == (3, 1, model.config.hidden_size) and batched.dtype == np.float32
    for i, text in enumerate(texts):
        alone = extract_hidden_states(model, tok, [text], -13)[0]
        rel = np.linalg.norm(batched[i] - alone) / np.linalg.norm(alone)
        assert rel < 0.05, (i, rel)  # bf16 noise only; wrong positions/masks give O(1) errors


def test_prefix_groups_share_only_long_common_prefixes():
    from repeval.extract import prefix_groups

    src = list(range(100, 170))  # 70 shared tokens
    ids = [src + [1, 2, 3], [9] * 80, src + [4, 5], src + [1, 2, 6, 7], [9] * 50 + [8] * 30, [5] * 4]
    groups = prefix_groups(ids, min_prefix=64, keep=3)
    # src-texts: common prefix 70, shortest member has 72 tokens -> prefix 72 - 3 = 69 (the last 3 run per text)
    # [9]*80 and [9]*50+[8]*30 share only 50 tokens: no group
    assert sorted((n, sorted(m)) for n, m in groups) == [(69, [0, 2, 3])]
    # texts 0 and 3 also share [1, 2]: 72 tokens, shortest 73 -> 72
    assert [(n, sorted(m)) for n, m in prefix_groups(ids, min_prefix=71, keep=1)] == [(72, [0, 3])]
    assert prefix_groups(ids, min_prefix=73, keep=1) == []
    assert prefix_groups([], min_prefix=8, keep=1) == []


def test_shared_prefix_only_for_full_attention_models():
    from transformers import LlamaConfig, MistralConfig, Qwen2Config

    from repeval.extract import full_attention_only

    assert full_attention_only(LlamaConfig()) and full_attention_only(Qwen2Config())
    # a sliding-window cache keeps only the last window: such models run every text on its own
    assert not full_attention_only(MistralConfig(sliding_window=4096))
    assert not full_attention_only(Qwen2Config(use_sliding_window=True, sliding_window=128, max_window_layers=0))


def test_shared_prefix_pass_equals_separate_passes(smol):
    """Summaries of one article behind the same source run the source once; states must not change."""
    import torch

    from repeval.extract import decoder_layers, extract_hidden_states

    model, tok, _ = smol
    src = "Source: " + " ".join(GOOD[:4]) + "\nIs the following summary consistent with the source above?\nSummary: "
    texts = [src + GOOD[5] + "\nThe summary is", "An unrelated short text.", src + BAD[5] + "\nThe summary is",
             src + "Cats.\nThe summary is", src + GOOD[6] + " " + GOOD[7] + "\nThe summary is"]
    seen = []
    hook = decoder_layers(model)[0].register_forward_hook(lambda _m, inp, _o: seen.append(inp[0].shape[1]))
    try:
        shared = extract_hidden_states(model, tok, texts, [3, 12], token=[-1, -3], batch_size=2)
        n_shared = sum(seen)
        seen.clear()
        separate = extract_hidden_states(model, tok, texts, [3, 12], token=[-1, -3], batch_size=2,
                                         min_shared_prefix=None)
        n_separate = sum(seen)
    finally:
        hook.remove()
    assert n_shared < n_separate / 2  # the ~100-token source ran once, not four times
    tol = 1e-4 if model.dtype == torch.float32 else 0.05
    for i in range(len(texts)):
        rel = np.linalg.norm(shared[i] - separate[i]) / np.linalg.norm(separate[i])
        assert rel < tol, (i, rel)  # wrong positions or a lost prefix give O(1) errors


@pytest.fixture(scope="module")
def fitted(smol):
    return RepEval(model=smol, criterion="fluency", method="mean").fit(list(zip(GOOD[:6], BAD[:6])))


def test_direction_separates_held_out_pairs(smol, fitted):
    good, bad = fitted.score(GOOD[6:]), fitted.score(BAD[6:])
    assert np.all(good > bad), (good, bad)
    assert fitted.train_accuracy_ == 1.0 and fitted.layer_ == model_depth(smol) - 12
    pca = RepEval(model=smol, criterion="fluency", method="pca", n_components=2).fit(list(zip(GOOD[:6], BAD[:6])))
    assert len(pca.explained_variance_ratio_) == 2
    assert np.mean(pca.score(GOOD[6:]) > pca.score(BAD[6:])) >= 0.75


def model_depth(smol) -> int:
    return smol[0].config.num_hidden_layers


def test_save_load_round_trip(smol, fitted, tmp_path):
    path = fitted.save(tmp_path / "flu.json")
    saved = json.loads(path.read_text())
    assert saved["model_sha256"] == smol[2].sha256 and saved["layer"] == fitted.layer_
    assert saved["k"] == 6 and saved["method"] == "mean" and len(saved["direction"]) == smol[0].config.hidden_size
    loaded = RepEval.load(path, model=smol)
    texts = GOOD[6:] + BAD[6:]
    np.testing.assert_array_equal(loaded.score(texts), fitted.score(texts))
    saved["model_sha256"] = "0" * 64
    path.write_text(json.dumps(saved))
    with pytest.raises(InputError, match="refit it for this model"):
        RepEval.load(path, model=smol).score(texts[:1])


def test_pairwise_compare_is_antisymmetric(smol):
    q = "Describe your afternoon."
    pairs = [{"good": g, "bad": b, "question": q} for g, b in zip(GOOD[:4], BAD[:4])]
    rep = RepEval(model=smol, criterion="pairwise", method="mean").fit(pairs)
    m_ab = rep.compare_margin(GOOD[6:8], BAD[6:8], q)
    m_ba = rep.compare_margin(BAD[6:8], GOOD[6:8], q)
    np.testing.assert_allclose(m_ab, -m_ba, rtol=1e-6)
    assert list(rep.compare(GOOD[6:8], BAD[6:8], q)) == list(np.where(m_ab > 0, 1, -1))
    with pytest.raises(InputError, match="is pairwise"):
        rep.score(GOOD[:1])


def test_bad_input(smol, fitted):
    pairs = list(zip(GOOD[:3], BAD[:3]))
    with pytest.raises(InputError, match="3 pairs for 3 PCA component"):
        RepEval(model=smol, method="pca", n_components=3).fit(pairs)
    with pytest.raises(InputError, match="non-empty string"):
        RepEval(model=smol).fit([(GOOD[0], ""), (GOOD[1], BAD[1])])
    with pytest.raises(InputError, match="text #1: expected a non-empty string"):
        fitted.score([GOOD[0], "   "])
    with pytest.raises(InputError, match="layer 31: this model has 30 decoder layers"):
        RepEval(model=smol, layer=31).fit(pairs)
    with pytest.raises(InputError, match='unknown RepEval criterion "fluent"'):
        RepEval(model=smol, criterion="fluent").fit(pairs)
    with pytest.raises(InputError, match="call fit"):
        RepEval(model=smol).score(GOOD[:1])
    with pytest.raises(InputError, match="is not pairwise"):
        fitted.compare(GOOD[:1], BAD[:1])


def test_cli_fit_and_score(smol, tmp_path, capsys):
    from repeval import cli

    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text("".join(json.dumps({"good": g, "bad": b}) + "\n" for g, b in zip(GOOD[:5], BAD[:5])))
    out = tmp_path / "dir.json"
    assert cli.main(["fit", "--pairs", str(pairs), "--method", "mean", "--output", str(out)]) == 0
    items = tmp_path / "items.jsonl"
    items.write_text("".join(json.dumps({"id": f"t{i}", "output": t}) + "\n" for i, t in enumerate([GOOD[8], BAD[8]])))
    scores = tmp_path / "scores.jsonl"
    assert cli.main(["score", "--direction", str(out), "--input", str(items), "--output", str(scores)]) == 0
    got = [json.loads(line) for line in scores.read_text().splitlines()]
    assert [g["id"] for g in got] == ["t0", "t1"] and got[0]["repeval"] > got[1]["repeval"]
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"good": "x"}\n')
    assert cli.main(["fit", "--pairs", str(bad), "--output", str(out)]) == 2
    assert f"{bad}:1: missing field(s) ['bad']" in capsys.readouterr().err
