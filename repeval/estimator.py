"""RepEval as a scikit-learn-style estimator: fit a direction on K pairs, score many texts.

    rep = RepEval(criterion="fluency", layer=-10, token=-1).fit(pairs)
    rep.score(["A fluent sentence.", "sentence fluent A."])   # higher = better
    rep.save("fluency.json"); RepEval.load("fluency.json")

Hyper-parameters are set in ``__init__`` and nothing else happens there (the model loads on
first use); learned state ends in an underscore.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from evaluate.core.errors import InputError

from .version import __version__
from .direction import METHODS, fit_direction
from .extract import extract_hidden_states, n_layers, normalize_layers
from .pairs import Pair, as_pairs
from .templates import fields, render, template_for

FORMAT = "repeval-direction/1"


def _check_texts(texts: Sequence[Any], what: str) -> None:
    for i, text in enumerate(texts):
        if not isinstance(text, str) or not text.strip():
            raise InputError(f"{what} #{i}: expected a non-empty string, got {text!r:.60}")


def is_pairwise(template: str) -> bool:
    return {"a", "b"} <= fields(template)


class RepEval:
    """Score text by projecting an LLM's hidden state onto a learned quality direction.

    model: a model name/path for `evaluate.models.load.load_causal_lm`, or an already loaded
        ``(model, tokenizer[, info])`` tuple.
    criterion: key of ``templates.json`` (fluency, coherence, consistency, relevance, meaning,
        helpfulness, pairwise); `template` overrides the prompt text.
    layer: decoder layer to read (1..N, or -1..-N from the top). The default, -13 (18 of 30 in
        SmolLM2), sits where layer sweeps on SummEval fluency picked most often (15-18 of 30).
    token: position from the end of the prompt (-1 = last token).
    method: "pca" (paper), "mean" (mean difference) or "svm" (linear SVM baseline).
    n_components: PCA components combined (weights = explained-variance ratios).
    dtype: "auto" (bfloat16 on a GPU and on CPUs with AMX, else float32: see
        `evaluate.models.load.resolve_dtype`), "bfloat16", "float16" or "float32"; a saved direction
        records the one used.
    device: where the model runs: "auto" (a CUDA GPU when torch sees one, else the CPU), "cpu", "cuda",
        "cuda:N" or "mps" (`evaluate.models.device`); not part of a saved direction (a direction fitted
        on one device applies on another).
    """

    def __init__(self, model: Any = "SmolLM2-135M-Instruct", criterion: str = "fluency", layer: int = -13,
                 token: int = -1, method: str = "pca", n_components: int = 1, template: str | None = None,
                 seed: int = 0, dtype: str = "auto", batch_size: int = 8, max_tokens: int | None = 2048,
                 device: str = "auto"):
        self.model = model
        self.criterion = criterion
        self.layer = layer
        self.token = token
        self.method = method
        self.n_components = n_components
        self.template = template
        self.seed = seed
        self.dtype = dtype
        self.batch_size = batch_size
        self.max_tokens = max_tokens
        self.device = device

    # ------------------------------------------------------------------ model and prompts

    def _loaded(self) -> tuple[Any, Any, dict]:
        """(model, tokenizer, info dict); loading happens here, once per process per model."""
        if isinstance(self.model, (tuple, list)):
            model, tok = self.model[0], self.model[1]
            info = self.model[2] if len(self.model) > 2 else None
        else:
            from evaluate.models.load import load_causal_lm

            model, tok, info = load_causal_lm(str(self.model), dtype=self.dtype, device=self.device)
        if info is None:
            info_d = {"name": getattr(model.config, "_name_or_path", type(model).__name__), "sha256": None,
                      "dtype": str(model.dtype).replace("torch.", ""), "device": str(model.device)}
        else:
            info_d = {"name": info.name, "sha256": info.sha256, "dtype": info.dtype, "device": info.device}
        return model, tok, info_d

    def runs_on(self) -> str:
        """The device type the model runs on ("cpu", "cuda", "mps"): the model is loaded if it is not yet."""
        _, _, info = self._loaded()
        return str(info.get("device") or "cpu").partition(":")[0]

    def _template(self) -> str:
        return template_for(self.criterion, self.template)

    def render_pair(self, pair: Pair, where: str) -> tuple[str, str]:
        """The two prompts whose representations are compared for one training pair."""
        tpl = self._template()
        if is_pairwise(tpl):
            return (render(tpl, a=pair.good, b=pair.bad, question=pair.question, src=pair.src, where=where),
                    render(tpl, a=pair.bad, b=pair.good, question=pair.question, src=pair.src, where=where))
        return (render(tpl, hyp=pair.good, src=pair.src, question=pair.question, where=where),
                render(tpl, hyp=pair.bad, src=pair.src, question=pair.question, where=where))

    def represent(self, prompts: Sequence[str], layers: Any = None, tokens: Any = None) -> np.ndarray:
        """Hidden states of already rendered prompts (see `extract_hidden_states` for shapes)."""
        model, tok, _ = self._loaded()
        return extract_hidden_states(model, tok, prompts, self.layer if layers is None else layers,
                                     self.token if tokens is None else tokens,
                                     batch_size=self.batch_size, max_tokens=self.max_tokens)

    # ------------------------------------------------------------------ fit

    def _check_params(self) -> None:
        if self.method not in METHODS:
            raise InputError(f'RepEval method "{self.method}": expected one of {", ".join(METHODS)}')
        if isinstance(self.token, bool) or not isinstance(self.token, (int, np.integer)) or self.token >= 0:
            raise InputError(f"RepEval token {self.token!r}: expected a negative position from the end (-1 = last)")
        self._template()

    def fit(self, pairs: Sequence[Any]) -> "RepEval":
        """Learn the direction from (good, bad) pairs (tuples, dicts or `Pair`)."""
        self._check_params()
        pairs = as_pairs(pairs)
        if self.method == "pca" and len(pairs) <= self.n_components:
            raise InputError(f"{len(pairs)} pairs for {self.n_components} PCA component(s): "
                             f"need at least n_components + 1 pairs")
        if len(pairs) < 2:
            raise InputError(f"{len(pairs)} pair(s): RepEval needs at least 2 (good, bad) pairs")
        model, _, info = self._loaded()
        layer = normalize_layers(model, self.layer)[0]
        prompts = [p for i, pair in enumerate(pairs) for p in self.render_pair(pair, f"pairs[{i}]")]
        reps = self.represent(prompts, layers=layer, tokens=self.token)[:, 0]  # [2K, hidden]
        self._set_fit(reps[0::2], reps[1::2], layer, info)
        return self

    def fit_representations(self, good: np.ndarray, bad: np.ndarray, layer: int, info: dict | None = None) -> "RepEval":
        """Fit from representations already extracted (layer sweeps extract once, fit many times)."""
        self._check_params()
        self._set_fit(np.asarray(good), np.asarray(bad), int(layer), info or {"name": str(self.model)})
        return self

    def _set_fit(self, good: np.ndarray, bad: np.ndarray, layer: int, info: dict) -> None:
        fit = fit_direction(good, bad, self.method, self.n_components, self.seed)
        self.direction_ = fit.direction
        self.explained_variance_ratio_ = fit.explained_variance_ratio
        self.train_accuracy_ = fit.train_accuracy
        self.layer_ = layer
        self.token_ = int(self.token)
        self.n_pairs_ = len(good)
        # midpoint of the good and bad training projections: score - offset_ > 0 leans "good"
        self.offset_ = float(((good + bad) / 2 @ fit.direction).mean())
        self.orientation_ = "good-high"
        self.template_ = self._template()
        self.model_info_ = dict(info)

    # ------------------------------------------------------------------ score

    def _check_fitted(self) -> None:
        if not hasattr(self, "direction_"):
            raise InputError("RepEval: call fit() (or load()) before score()/compare()")
        model, _, info = self._loaded()
        depth = n_layers(model)
        if self.layer_ > depth:
            raise InputError(f"RepEval direction was fitted on layer {self.layer_}; this model has {depth}")
        saved, now = self.model_info_.get("sha256"), info.get("sha256")
        if saved and now and saved != now:
            raise InputError(f"RepEval direction was fitted on weights sha256 {saved[:12]}..., "
                             f"this model is {now[:12]}...; refit it for this model")

    def _project(self, prompts: list[str]) -> np.ndarray:
        self._check_fitted()
        reps = self.represent(prompts, layers=self.layer_, tokens=self.token_)[:, 0]
        return reps @ self.direction_

    def score(self, texts: Sequence[str], sources: Sequence[str] | None = None,
              questions: Sequence[str] | None = None) -> np.ndarray:
        """Projection of each text's representation on the direction; higher = better."""
        texts = list(texts)
        if is_pairwise(self.template_ if hasattr(self, "template_") else self._template()):
            raise InputError(f'RepEval criterion "{self.criterion}" is pairwise: use compare(a, b)')
        for name, extra in (("sources", sources), ("questions", questions)):
            if extra is not None and len(extra) != len(texts):
                raise InputError(f"score: {len(texts)} texts but {len(extra)} {name}")
        _check_texts(texts, "text")
        tpl = self.template_ if hasattr(self, "template_") else self._template()
        prompts = [render(tpl, hyp=t, src=None if sources is None else sources[i],
                          question=None if questions is None else questions[i], where=f"text #{i}")
                   for i, t in enumerate(texts)]
        if not prompts:
            return np.zeros(0, dtype=np.float32)
        return self._project(prompts)

    def compare(self, a: Sequence[str] | str, b: Sequence[str] | str,
                question: Sequence[str] | str | None = None) -> np.ndarray:
        """+1 where a is better than b, -1 otherwise: the A-vs-B prompt projects above B-vs-A."""
        return np.where(self.compare_margin(a, b, question) > 0, 1, -1)

    def compare_margin(self, a: Sequence[str] | str, b: Sequence[str] | str,
                       question: Sequence[str] | str | None = None) -> np.ndarray:
        """proj(A vs B) - proj(B vs A): the signed strength of the preference for A."""
        a = [a] if isinstance(a, str) else list(a)
        b = [b] if isinstance(b, str) else list(b)
        if len(a) != len(b):
            raise InputError(f"compare: {len(a)} answers a but {len(b)} answers b")
        qs = [question] * len(a) if question is None or isinstance(question, str) else list(question)
        if len(qs) != len(a):
            raise InputError(f"compare: {len(a)} pairs but {len(qs)} questions")
        _check_texts(a, "answer a")
        _check_texts(b, "answer b")
        tpl = self.template_ if hasattr(self, "template_") else self._template()
        if not is_pairwise(tpl):
            raise InputError(f'RepEval criterion "{self.criterion}" is not pairwise: its template has no {{a}}/{{b}}')
        prompts = []
        for i, (x, y, q) in enumerate(zip(a, b, qs)):
            prompts += [render(tpl, a=x, b=y, question=q, where=f"pair #{i}"),
                        render(tpl, a=y, b=x, question=q, where=f"pair #{i}")]
        if not prompts:
            return np.zeros(0, dtype=np.float32)
        proj = self._project(prompts)
        return proj[0::2] - proj[1::2]

    # ------------------------------------------------------------------ save / load

    def to_dict(self) -> dict:
        self._check_fitted_only()
        import torch
        import transformers

        return {
            "format": FORMAT,
            "repeval_version": __version__,
            "model": self.model_info_.get("name") if isinstance(self.model, (tuple, list)) else str(self.model),
            "model_sha256": self.model_info_.get("sha256"),
            "dtype": self.model_info_.get("dtype", self.dtype),
            "criterion": self.criterion,
            "template": self.template_,
            "layer": self.layer_,
            "token": self.token_,
            "method": self.method,
            "n_components": self.n_components,
            "seed": self.seed,
            "k": self.n_pairs_,
            "explained_variance_ratio": self.explained_variance_ratio_,
            "train_accuracy": self.train_accuracy_,
            "offset": self.offset_,
            "orientation": self.orientation_,
            "versions": {"transformers": transformers.__version__, "torch": torch.__version__},
            "hidden_size": int(self.direction_.shape[0]),
            "direction": [float(v) for v in self.direction_],
        }

    def _check_fitted_only(self) -> None:
        if not hasattr(self, "direction_"):
            raise InputError("RepEval: nothing to save; call fit() first")

    def save(self, path: str | Path) -> Path:
        """Write the fitted direction and everything needed to reuse it to one JSON file."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.to_dict(), indent=1) + "\n", encoding="utf-8")
        return path

    @classmethod
    def load(cls, path: str | Path, model: Any = None, device: str = "auto") -> "RepEval":
        """Read a saved direction; `model` overrides the saved model name (e.g. a loaded tuple); `device`
        is where the model is loaded to score with it."""
        path = Path(path)
        try:
            d = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise InputError(f"{path}: no such file") from None
        except json.JSONDecodeError as exc:
            raise InputError(f"{path}: not valid JSON ({exc.msg})") from None
        if d.get("format") != FORMAT:
            raise InputError(f"{path}: format {d.get('format')!r}, expected {FORMAT!r}")
        missing = [k for k in ("model", "criterion", "template", "layer", "token", "method", "direction") if k not in d]
        if missing:
            raise InputError(f"{path}: missing field(s) {missing}")
        rep = cls(model=d["model"] if model is None else model, criterion=d["criterion"], layer=d["layer"],
                  token=d["token"], method=d["method"], n_components=d.get("n_components", 1),
                  template=d["template"], seed=d.get("seed", 0), dtype=d.get("dtype", "bfloat16"), device=device)
        rep.direction_ = np.asarray(d["direction"], dtype=np.float32)
        rep.explained_variance_ratio_ = list(d.get("explained_variance_ratio", []))
        rep.train_accuracy_ = d.get("train_accuracy")
        rep.layer_ = int(d["layer"])
        rep.token_ = int(d["token"])
        rep.n_pairs_ = d.get("k")
        rep.offset_ = float(d.get("offset", 0.0))
        rep.orientation_ = d.get("orientation", "good-high")
        rep.template_ = d["template"]
        rep.model_info_ = {"name": d["model"], "sha256": d.get("model_sha256"), "dtype": d.get("dtype")}
        return rep

    def __repr__(self) -> str:
        return (f"RepEval(model={self.model if isinstance(self.model, str) else '<loaded>'!r}, "
                f"criterion={self.criterion!r}, layer={self.layer}, token={self.token}, method={self.method!r}, "
                f"n_components={self.n_components})")
