"""The `RepEval` family: project each answer's hidden states on a learned quality direction.

Config (all optional):

    repeval:
      model: SmolLM2-135M-Instruct      # any model the local backend resolves
      k: 20                             # pairs used to fit a direction
      method: pca                       # pca | mean | svm
      directions: {fluency: dirs/fluency.json}   # fitted by `eval.py repeval fit`
      pairs: {coherence: my_pairs.jsonl}         # {good, bad[, src]} per line

Where a criterion has neither a saved direction nor a pairs file, the direction is fitted at run
time from synthetic pairs: the run's own reference answers (targets) against corrupted copies
of them (word shuffles/drops for fluency, sentence shuffles for coherence...). Scores are
projections (higher is better), comparable within one direction, not across criteria.
"""

from __future__ import annotations

from typing import Any

from ..errors import InputError
from ..scores import Invalid, ItemScores
from . import Family, FamilyOutput

SYNTHETIC = ("fluency", "coherence")  # corruptions that need no source document


class RepEvalFamily(Family):
    name = "RepEval"

    def __init__(self) -> None:
        self._fitted: dict[str, Any] = {}
        self._targets: list[str] = []

    def _opts(self, cfg) -> dict[str, Any]:
        return cfg.repeval or {}

    def validate(self, cfg, category, names, where, *, used):
        from repeval.templates import template_for

        problems = []
        opts = self._opts(cfg)
        for i, name in enumerate(names):
            try:
                template_for(name)
            except InputError as exc:
                problems.append(f"{where}[{i}]: {exc}")
                continue
            if not used:
                continue
            d = (opts.get("directions") or {}).get(name)
            p = (opts.get("pairs") or {}).get(name)
            if d and not cfg.resolve(d).is_file():
                problems.append(f"{where}[{i}]: repeval.directions.{name}: file not found: {cfg.resolve(d)}")
            elif p and not cfg.resolve(p).is_file():
                problems.append(f"{where}[{i}]: repeval.pairs.{name}: file not found: {cfg.resolve(p)}")
            elif not d and not p and name not in SYNTHETIC:
                problems.append(f'{where}[{i}]: RepEval "{name}" needs repeval.directions.{name} (fit one with '
                                f"`eval.py repeval fit`) or repeval.pairs.{name}; synthetic pairs are only made "
                                f"for {', '.join(SYNTHETIC)}")
        return problems

    def validate_run(self, cfg, sets, categories) -> list[str]:
        self._targets = list(dict.fromkeys(t for s in sets for r in s.records for t in r.targets if t.strip()))
        return []

    def _estimator(self, cfg, name: str):
        if name in self._fitted:
            return self._fitted[name]
        from repeval import RepEval
        from repeval.pairs import load_pairs_jsonl, synthetic_pairs

        opts = self._opts(cfg)
        d = (opts.get("directions") or {}).get(name)
        if d:
            est = RepEval.load(cfg.resolve(d))
            how = f"loaded from {d}"
        else:
            k = int(opts.get("k", 20))
            p = (opts.get("pairs") or {}).get(name)
            if p:
                pairs = load_pairs_jsonl(cfg.resolve(p))[:k]
                how = f"fitted on {len(pairs)} pairs from {p}"
            else:
                pairs = synthetic_pairs(self._targets, name, k=None, seed=int(opts.get("seed", 0)))[:k]
                how = f"fitted on {len(pairs)} synthetic pairs (the run's targets vs corrupted copies)"
            if len(pairs) < 2:
                raise InputError(f'RepEval "{name}": only {len(pairs)} training pairs; give repeval.pairs.{name} '
                                 "or more targets")
            kw = {k2: opts[k2] for k2 in ("layer", "token", "method", "n_components") if k2 in opts}
            est = RepEval(model=opts.get("model", "SmolLM2-135M-Instruct"), criterion=name,
                          seed=int(opts.get("seed", 0)), **kw).fit(pairs)
        self._fitted[name] = (est, how)
        return self._fitted[name]

    def run(self, cfg, category, names, records):
        items = [ItemScores() for _ in records]
        out = FamilyOutput(items=items)
        scored = [i for i, r in enumerate(records) if r.output.strip()]
        for name in names:
            est, how = self._estimator(cfg, name)
            for i in range(len(records)):
                if i not in scored:
                    items[i].invalid[name] = Invalid(reason="empty output: no text to represent")
            if scored:
                vals = est.score([records[i].output for i in scored],
                                 questions=[records[i].question for i in scored])
                for i, v in zip(scored, vals):
                    items[i].scores[name] = float(v)
            out.signatures[name] = {"evaluator": "RepEval", "criterion": name, "direction": how,
                                    "model": est.model_info_.get("name"),
                                    "model_sha256": est.model_info_.get("sha256"),
                                    "layer": getattr(est, "layer_", None), "token": getattr(est, "token_", None),
                                    "method": est.method, "k": getattr(est, "n_pairs_", None)}
        return out

    def close(self):
        self._fitted.clear()
