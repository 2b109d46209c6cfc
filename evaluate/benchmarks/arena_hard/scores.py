"""Arena-Hard's scores, computed as its show_result.py does (lmarena/arena-hard-auto @ 196f6b8).

Battles: each judged question gives, for the model, the weighted outcomes of game 2 (model as A)
followed by one minus those of game 1 (baseline as A); a strong verdict (A>>B) counts as three
battles. A question is dropped when either game has no verdict (or a label the weights do not know).

Raw score: per model, 100 bootstrap resamples of its battles; the score is the mean of the
resampled mean outcomes, the interval their 5th and 95th percentiles (a 90% interval). Against a
single baseline this is the win rate, the baseline's own score being 50.

Style-controlled score: a Bradley-Terry model (logistic regression without intercept, soft outcomes)
on [model and baseline indicators, 4 style features], the features being the normalized differences
of token length and of header / list / bold densities between the model's and the baseline's
answers; 100 bootstrap fits over battles, median and 5th/95th percentiles of sigmoid(model - baseline).
The fit is the project's one (evaluate/stats/bradley_terry.py) with show_result.py's optimizer (torch
LBFGS), whose early stop the published intervals carry.

Random draws: show_result.py draws from numpy's global generator (pandas' groupby sample for the raw
scores, one randint matrix for the style fits) and never seeds it. Both functions here take a seed
and draw the same sequence from a RandomState seeded with it, so a run of show_result.py after
np.random.seed(s), with its battles in the same order, gives the same resamples and the same
numbers; unseeded runs of show_result.py differ from each other by a few tenths of a point.
"""
from __future__ import annotations

import hashlib
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ...stats.bradley_terry import fit_logistic

_CODE = re.compile("```([^`]*)```")
_TOKEN = re.compile(r"\w+|[^\w\s]", re.UNICODE)


def markdown_counts(answer: str) -> dict[str, Any]:
    """Headers, lists and bold spans after removing fenced code blocks, counted as add_markdown_info.py does."""
    text = answer
    for block in _CODE.findall(answer):
        text = text.replace(block, "")
    return {
        "header_count": {f"h{i}": len(re.findall(rf"^#{{{i}}}\s", text, re.MULTILINE)) for i in range(1, 7)},
        "list_count": {"ordered": len(re.findall(r"^\s*\d+\.\s", text, re.MULTILINE)),
                       "unordered": len(re.findall(r"^\s*[-*+]\s", text, re.MULTILINE))},
        "bold_count": {"**": len(re.findall(r"\*\*[^*\n]+\*\*", text)),
                       "__": len(re.findall(r"__[^_\n]+__", text))},
    }


def token_len(answer: str) -> int:
    """Tokens by tiktoken's o200k_base (gpt-4o's encoding), as add_markdown_info.py counts them, when an
    o200k_base encoder is available without a download (`_encoder`); otherwise words and punctuation marks
    (`\\w+|[^\\w\\s]`), which runs some 10-30% off BPE counts. Length enters the style fit as a relative
    difference between two answers, so a tokenizer's constant factor cancels; its unevenness does not
    (0.7 pp on Arena-Hard's style-controlled scores, BENCHMARKS.md)."""
    enc = _encoder()
    if enc is not None:
        return len(enc.encode(answer, disallowed_special=()))
    return len(_TOKEN.findall(answer))


O200K_URL = "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"
_ENC: list[Any] = []


def _tiktoken_cache_file() -> Path | None:
    """Where tiktoken keeps o200k_base once downloaded (tiktoken.load.read_file_cached's rule: the sha1
    of the URL in TIKTOKEN_CACHE_DIR, else DATA_GYM_CACHE_DIR, else <tmp>/data-gym-cache); None when
    caching is switched off (an empty directory name), where tiktoken would download on every load."""
    for var in ("TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR"):
        if var in os.environ:
            folder = os.environ[var]
            break
    else:
        folder = os.path.join(tempfile.gettempdir(), "data-gym-cache")
    if folder == "":
        return None
    return Path(folder) / hashlib.sha1(O200K_URL.encode()).hexdigest()


def _load_encoder() -> Any:
    """An o200k_base encoder that needs no network: bpe-openai's (the `arena` extra; it ships the
    vocabulary, the same file tiktoken downloads, and gives tiktoken's counts), else tiktoken's when its
    cache already holds the vocabulary (tiktoken downloads it on first use otherwise, which an offline
    run must not attempt), else None (words are counted)."""
    try:
        import bpe_openai  # type: ignore

        return bpe_openai.get_encoding("o200k_base")
    except Exception:
        pass
    try:
        import tiktoken  # type: ignore
    except Exception:
        return None
    cached = _tiktoken_cache_file()
    if cached is None or not cached.is_file():
        return None
    try:
        return tiktoken.get_encoding("o200k_base")
    except Exception:
        return None


def _encoder() -> Any:
    if not _ENC:
        _ENC.append(_load_encoder())
    return _ENC[0]


def token_counter() -> str:
    """How token_len counts here, said in the leaderboard's footer."""
    enc = _encoder()
    if enc is not None:
        package = type(enc).__module__.split(".")[0].replace("_", "-")
        return f"o200k_base tokens ({package}), as add_markdown_info.py counts them"
    return ("words and punctuation marks (no o200k_base encoder: `pip install bpe-openai==0.1.4`, the `arena` "
            "extra, gives add_markdown_info.py's counts; on Arena-Hard's answers this count is 0.81-1.11 times "
            "the o200k_base count for 90% of them)")


def style_metadata(answer: str) -> dict[str, Any]:
    return {"token_len": token_len(answer), **markdown_counts(answer)}


def _vector(meta: dict[str, Any]) -> list[float]:
    """[token_len, headers, lists, bold] from a metadata record (show_result.py sums each group)."""
    def total(v: Any) -> float:
        return float(sum(v.values())) if isinstance(v, dict) else float(v)
    return [total(meta["token_len"]), total(meta["header_count"]), total(meta["list_count"]), total(meta["bold_count"])]


def battle_outcomes(record: dict[str, Any], weights: dict[str, tuple[float, int]]) -> list[float] | None:
    """The model's outcomes from one judgment record, or None when it is not counted."""
    g1, g2 = record["games"]
    if g1 is None or g2 is None or g1.get("score") not in weights or g2.get("score") not in weights:
        return None
    s2, n2 = weights[g2["score"]]
    s1, n1 = weights[g1["score"]]
    return [s2] * n2 + [1 - s1] * n1


@dataclass
class Interval:
    score: float
    lower: float
    upper: float

    def __post_init__(self) -> None:  # plain floats: numpy scalars print as np.float64(...) in files
        self.score, self.lower, self.upper = float(self.score), float(self.lower), float(self.upper)


def raw_scores(battles: dict[str, list[float]], seed: int, rounds: int = 100) -> dict[str, Interval]:
    """Bootstrap means per model: each round resamples every model's battles (models in sorted order,
    `randint(0, n, n)` each, the draws pandas' groupby sample makes) from RandomState(seed)."""
    rs = np.random.RandomState(seed)
    xs = {m: np.asarray(v, dtype=float) for m, v in battles.items()}
    names = sorted(xs)
    means = np.empty((rounds, len(names)))
    for r in range(rounds):
        for j, m in enumerate(names):
            means[r, j] = xs[m][rs.randint(0, len(xs[m]), len(xs[m]))].mean()
    return {m: Interval(100 * means[:, j].mean(), 100 * np.quantile(means[:, j], 0.05),
                        100 * np.quantile(means[:, j], 0.95)) for j, m in enumerate(names)}


def style_features(model_meta: Sequence[dict[str, Any]], base_meta: Sequence[dict[str, Any]]) -> np.ndarray:
    """Per battle: normalized length difference and header / list / bold density differences, each
    column standardized (sample standard deviation). Computed in float32 as show_result.py does; a
    column with no spread (e.g. no answer has a header) is left at 0 where show_result.py stops on a NaN."""
    m = np.array([_vector(d) for d in model_meta], dtype=np.float32)
    b = np.array([_vector(d) for d in base_meta], dtype=np.float32)
    feat = np.zeros_like(m)
    feat[:, 0] = (m[:, 0] - b[:, 0]) / np.maximum(m[:, 0] + b[:, 0], np.float32(1e-12))
    md, bd = m[:, 1:] / (m[:, :1] + 1), b[:, 1:] / (b[:, :1] + 1)
    feat[:, 1:] = (md - bd) / (md + bd + 1)
    sd = feat.std(axis=0, ddof=1) if len(feat) > 1 else np.zeros(feat.shape[1], dtype=np.float32)
    return np.where(sd > 0, (feat - feat.mean(axis=0)) / np.where(sd > 0, sd, 1), 0).astype(np.float32)


def style_controlled(models: Sequence[str], outcomes: Sequence[float], model_meta: Sequence[dict[str, Any]],
                     base_meta: Sequence[dict[str, Any]], baseline: str, seed: int,
                     rounds: int = 100) -> tuple[dict[str, Interval], list[float]]:
    """Per model the style-controlled win rate against the baseline, and the median style coefficients.
    Battles are resampled by one `randint(0, N, (rounds, N))` from RandomState(seed); the indicator
    columns are the models and the baseline in sorted order (+1 for the model, -1 for the baseline)."""
    feat = style_features(model_meta, base_meta)
    names = sorted(set(models) | {baseline})
    col = {n: i for i, n in enumerate(names)}
    onehot = np.zeros((len(models), len(names)), dtype=np.float32)
    onehot[np.arange(len(models)), [col[x] for x in models]] = 1
    onehot[:, col[baseline]] = -1
    x = np.hstack([onehot, feat])
    y = np.asarray(outcomes, dtype=np.float32)
    idxs = np.random.RandomState(seed).randint(0, len(y), size=(rounds, len(y)))
    coefs = np.array([fit_logistic(x[idx], y[idx], l2=0.0, solver="lbfgs") for idx in idxs])
    k = len(names)
    probs = 1 / (1 + np.exp(-(coefs[:, :k] - coefs[:, [col[baseline]]])))
    out = {n: Interval(100 * np.quantile(probs[:, i], 0.5), 100 * np.quantile(probs[:, i], 0.05),
                       100 * np.quantile(probs[:, i], 0.95)) for i, n in enumerate(names) if n != baseline}
    return out, np.median(coefs[:, k:], axis=0).tolist()
