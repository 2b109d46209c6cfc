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
(word shuffles/drops for fluency, sentence shuffles for coherence, swapped facts for
consistency, another source's summary for relevance). Each answer is read with its record's
source (the record's `source`, else the question), so criteria whose template needs `{src}`
(consistency, relevance, meaning) work. Scores are projections (higher is better), comparable
within one direction, not across criteria.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from ..core.errors import InputError
from ..core.options import option
from ..core.records import Record
from ..core.scores import Invalid, ItemScores
from .base import Context, Family, FamilyOutput, register_family

SYNTHETIC = ("fluency", "coherence", "consistency", "relevance")  # corruptions repeval.pairs can make


def source_of(record: Record) -> str:
    """What a `{src}` placeholder holds for a record: its `source` field, else the question."""
    return record.extra.get("source") or record.question


@dataclass
class RepEvalOptions:
    model: str = option("SmolLM2-135M-Instruct", "the causal LM whose hidden states are read", nonempty=True)
    k: int = option(20, "pairs used to fit a direction", min=2)
    method: Literal["pca", "mean", "svm"] = option("pca", "how the direction is estimated from the pairs")
    layer: int | list[int] | None = option(None, "layer(s) read (null: the estimator's default, 13 from the top)")
    token: int | list[int] | None = option(None, "token position(s) read from the end (null: the last)")
    n_components: int | None = option(None, "PCA components (null: 1)", min=1)
    seed: int = option(0, "seed of the pair sampling and the synthetic corruptions")
    directions: dict[str, str] = option({}, "criterion -> a direction file fitted by `eval.py repeval fit`")
    pairs: dict[str, str] = option({}, "criterion -> a JSONL file of {good, bad[, src]} pairs")
    device: str = option("auto", "where the model runs: auto (a CUDA GPU when torch sees one, else the CPU), cpu, "
                                 "cuda, cuda:N or mps (as judge.device)", nonempty=True)

    def problems(self) -> list[tuple[str, str]]:
        from ..models.device import device_problem

        bad = device_problem(self.device)
        return [("device", bad)] if bad else []


@register_family
class RepEvalFamily(Family):
    name = "RepEval"
    options_key = "repeval"
    Options = RepEvalOptions
    scale = None  # projections: comparable within one direction only

    def validate(self, ctx, category, names, where, *, used):
        from repeval.templates import template_for

        problems = []
        opts: RepEvalOptions = ctx.options
        if used and names:  # the model found (a relative path from the config's folder) and its folder checked
            from pathlib import Path

            from ..models.load import preflight

            bases = ([ctx.cfg.source.resolve().parent] if ctx.cfg.source else []) + [Path.cwd()]
            try:
                opts.model = preflight(opts.model, bases, "repeval.model", chat=False)
            except InputError as exc:
                problems.append(str(exc))
        for i, name in enumerate(names):
            try:
                template_for(name)
            except InputError as exc:
                problems.append(f"{where}[{i}]: {exc}")
                continue
            if not used:
                continue
            d, p = opts.directions.get(name), opts.pairs.get(name)
            if d and not ctx.cfg.resolve(d).is_file():
                problems.append(f"{where}[{i}]: repeval.directions.{name}: file not found: {ctx.cfg.resolve(d)}")
            elif p and not ctx.cfg.resolve(p).is_file():
                problems.append(f"{where}[{i}]: repeval.pairs.{name}: file not found: {ctx.cfg.resolve(p)}")
            elif not d and not p and name not in SYNTHETIC:
                problems.append(f'{where}[{i}]: RepEval "{name}" needs repeval.directions.{name} (fit one with '
                                f"`eval.py repeval fit`) or repeval.pairs.{name}; synthetic pairs are only made "
                                f"for {', '.join(SYNTHETIC)}")
        return problems

    def estimator(self, ctx: Context, name: str) -> tuple[Any, str]:
        """The fitted direction for criterion `name` (once per run: kept in the run's memo)."""
        key = ("estimator", name)
        if key in ctx.memo:
            return ctx.memo[key]
        from repeval import RepEval
        from repeval.pairs import load_pairs_jsonl, synthetic_pairs

        opts: RepEvalOptions = ctx.options
        d = opts.directions.get(name)
        if d:
            est = RepEval.load(ctx.cfg.resolve(d), device=opts.device)
            how = f"loaded from {d}"
        else:
            p = opts.pairs.get(name)
            if p:
                pairs = load_pairs_jsonl(ctx.cfg.resolve(p))[:opts.k]
                how = f"fitted on {len(pairs)} pairs from {p}"
            else:
                if name in ("consistency", "relevance"):  # a reference is judged against its own source
                    refs = list(dict.fromkeys((t, source_of(r)) for r in ctx.records for t in r.targets if t.strip()))
                    pairs = synthetic_pairs([t for t, _ in refs], name, k=None, seed=opts.seed,
                                            sources=[s for _, s in refs])[:opts.k]
                else:
                    texts = list(dict.fromkeys(t for r in ctx.records for t in r.targets if t.strip()))
                    pairs = synthetic_pairs(texts, name, k=None, seed=opts.seed)[:opts.k]
                how = f"fitted on {len(pairs)} synthetic pairs (the run's targets vs corrupted copies)"
            if len(pairs) < 2:
                raise InputError(f'RepEval "{name}": only {len(pairs)} training pairs; give repeval.pairs.{name} '
                                 "or more targets")
            kw = {k: getattr(opts, k) for k in ("layer", "token", "n_components") if getattr(opts, k) is not None}
            est = RepEval(model=opts.model, criterion=name, seed=opts.seed, method=opts.method, device=opts.device,
                          **kw).fit(pairs)
        ctx.memo[key] = (est, how)
        return ctx.memo[key]

    def score(self, ctx, category, names, records):
        items = [ItemScores() for _ in records]
        out = FamilyOutput(items=items)
        scored = [i for i, r in enumerate(records) if r.output.strip()]
        for name in names:
            est, how = self.estimator(ctx, name)
            for i in range(len(records)):
                if i not in scored:
                    items[i].invalid[name] = Invalid(reason="empty output: no text to represent")
            if scored:
                vals = est.score([records[i].output for i in scored],
                                 sources=[source_of(records[i]) for i in scored],
                                 questions=[records[i].question for i in scored])
                for i, v in zip(scored, vals):
                    items[i].scores[name] = float(v)
            out.signatures[name] = {"evaluator": "RepEval", "criterion": name, "direction": how,
                                    "model": est.model_info_.get("name"),
                                    "model_sha256": est.model_info_.get("sha256"),
                                    "layer": getattr(est, "layer_", None), "token": getattr(est, "token_", None),
                                    "method": est.method, "k": getattr(est, "n_pairs_", None)}
            if est.runs_on() != "cpu":  # a GPU's hidden states round differently; a CPU signature stays as it was
                out.signatures[name].update(device=est.runs_on(), dtype=est.model_info_.get("dtype"))
        return out
