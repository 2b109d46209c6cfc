"""The main job: config + answer files -> per-model results, battles, summary, charts, manifest.

Flow: load and validate everything (no model loaded, no call paid) -> print the plan (and stop
there with --dry-run) -> for each model, category and family: score and save -> summary, charts,
manifest -> --fail-under checks.
"""

from __future__ import annotations

import platform
import sys
import time
import traceback
import uuid
import json
from dataclasses import asdict, dataclass, field, fields, is_dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from . import __version__
from .config import RunConfig
from .data import AnswerSet, load_answer_sets
from .core.errors import ConfigError, InputError
from .backends.pool import JudgePool
from .families import Context, Family, family_names, get_family
from .core.records import Record
from .results import ModelResults, atomic_write_json, load_all, write_summary_csv


@dataclass
class Plan:
    """What a run will do; printed by --dry-run and stored in the manifest."""

    families: list[str]
    categories: dict[str, dict[str, list[str]]]  # used category -> family -> names
    items: dict[str, dict[str, int]]  # model -> category -> records
    skipped: dict[str, int]  # category without a config entry -> records (per model)
    work: dict[str, dict[str, int]] = field(default_factory=dict)  # family -> {"scores": n, "judge_calls": n}
    options: dict[str, dict[str, Any]] = field(default_factory=dict)  # family -> its resolved options

    def to_dict(self) -> dict[str, Any]:
        return {"families": self.families, "categories": self.categories, "items": self.items,
                "skipped_categories": self.skipped, "work": self.work, "options": self.options}

    def describe(self) -> str:
        lines = [f"families: {', '.join(self.families) or '(none)'}"]
        models = list(self.items)
        lines.append(f"models: {', '.join(models)}")
        lines.append("categories:")
        for cat, fams in self.categories.items():
            counts = ", ".join(f"{m}={self.items[m].get(cat, 0)}" for m in models)
            lines.append(f"  {cat} ({counts} records)")
            for fam, names in fams.items():
                lines.append(f"    {fam}: {', '.join(names)}")
        if self.skipped:
            lines.append("skipped (no config entry for the category): "
                         + ", ".join(f"{c} ({n} records)" for c, n in self.skipped.items()))
        for fam, work in self.work.items():
            lines.append(f"work {fam}: " + ", ".join(f"{k}={v}" for k, v in work.items()))
        for fam, opts in self.options.items():
            lines.append(f"options {fam}: " + ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}"
                                                        for k, v in opts.items()))
        return "\n".join(lines)


def select_families(only: list[str] | None, skip: list[str] | None) -> list[str]:
    from .core.registry import suggest

    known = family_names()
    for flag, names in (("--only", only), ("--skip", skip)):
        for name in names or []:
            if name not in known:
                raise InputError(f'{flag}: unknown evaluator family "{name}"{suggest(name, known)} '
                                 f"(known: {', '.join(known)})")
    chosen = list(only) if only else known
    return [f for f in known if f in chosen and f not in (skip or [])]


def family_context(cfg: RunConfig, fam: str, sets: list[AnswerSet], **kw: Any) -> Context:
    """The context a family's calls get: config, its options, every model's records (and, in a run,
    the judge pool, the save path and the per-run memo)."""
    return Context(cfg=cfg, options=cfg.family_options(fam), sets=sets, family=fam, **kw)


def build_plan(cfg: RunConfig, sets: list[AnswerSet], families: list[str],
               contexts: dict[str, Context] | None = None) -> tuple[Plan, dict[str, Family]]:
    """Validate every name the run will use and count the work. Raises ConfigError with all problems."""
    used = {r.category for s in sets for r in s.records}
    problems: list[str] = []
    fam_objs: dict[str, Family] = {}
    contexts = {} if contexts is None else contexts
    for fam in families:
        if any(entry.get(fam) for entry in cfg.categories.values()):
            try:
                fam_objs[fam] = get_family(fam)
            except KeyError:
                problems.append(f"{fam}: this evaluator family is not available in this version; "
                                f"run with --skip {fam}")
    for fam in fam_objs:
        contexts.setdefault(fam, family_context(cfg, fam, sets))
    categories: dict[str, dict[str, list[str]]] = {}
    for cat, entry in cfg.categories.items():
        for fam, obj in fam_objs.items():
            names = entry.get(fam) or []
            if names:
                problems.extend(obj.validate(contexts[fam], cat, names, f"category.{cat}.{fam}", used=cat in used))
        if cat in used:
            active = {f: entry[f] for f in fam_objs if entry.get(f)}
            categories[cat] = active
    items = {s.name: {} for s in sets}
    for s in sets:
        for r in s.records:
            items[s.name][r.category] = items[s.name].get(r.category, 0) + 1
    skipped: dict[str, int] = {}
    for cat in sorted(used - set(cfg.categories)):
        skipped[cat] = max(items[s.name].get(cat, 0) for s in sets)
    for fam, obj in fam_objs.items():
        problems.extend(obj.validate_run(contexts[fam], categories))
    if problems:
        raise ConfigError(problems, str(cfg.source) if cfg.source else None)
    work: dict[str, dict[str, int]] = {}
    for fam, obj in fam_objs.items():
        total: dict[str, int] = {}
        for s in sets:
            for cat, fams in categories.items():
                if fam in fams:
                    for k, v in obj.plan(contexts[fam], cat, fams[fam], items[s.name].get(cat, 0)).items():
                        total[k] = total.get(k, 0) + v
        for k, v in obj.plan_run(contexts[fam], categories).items():
            total[k] = total.get(k, 0) + v
        work[fam] = total
    plan = Plan(families=[f for f in families if f in fam_objs], categories=categories, items=items,
                skipped=skipped, work=work,
                options={f: asdict(contexts[f].options) for f in fam_objs if is_dataclass(contexts[f].options)
                         and fields(contexts[f].options)})
    return plan, fam_objs


def with_scale(signatures: dict[str, dict[str, Any]], family: Family) -> dict[str, dict[str, Any]]:
    """Every signature says the range of its score (charts and comparisons read it from there): the
    family's declared `scale` where the evaluator did not state one (null: unbounded)."""
    scale = list(family.scale) if family.scale else None
    return {k: sig if "scale" in sig else {**sig, "scale": scale} for k, sig in signatures.items()}


def limit_records(sets: list[AnswerSet], n: int) -> None:
    """Keep the first `n` records of each category, in the first file's order; every other model
    keeps the same ids (answer files hold the same ids, which loading has checked)."""
    keep: set[str] = set()
    counts: dict[str, int] = {}
    for r in sets[0].records:
        if counts.get(r.category, 0) < n:
            counts[r.category] = counts.get(r.category, 0) + 1
            keep.add(r.id)
    for s in sets:
        s.records = [r for r in s.records if r.id in keep]
        s.empty_output_ids = [i for i in s.empty_output_ids if i in keep]


def _versions() -> dict[str, str]:
    from importlib import metadata

    out = {"python": platform.python_version(), "evaluate": __version__}
    for pkg in ("torch", "transformers", "sacrebleu", "rouge-score", "nltk", "jieba", "bert-score",
                "scikit-learn", "numpy", "openai", "matplotlib", "pyyaml"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            pass
    return out


def run(cfg: RunConfig, *, families: list[str], dry_run: bool = False, charts: bool = True,
        log: Callable[[str], None] = lambda s: print(s, file=sys.stderr)) -> dict[str, Any]:
    """Run the job; returns the manifest. Raises InputError/ConfigError on bad input (before any work)."""
    if not cfg.answers:
        raise InputError("no answer files: list them under `answers:` in the config or pass --answer_file_list")
    sets = load_answer_sets([(a.name, a.path) for a in cfg.answers], cfg.target_file)
    if cfg.limit:
        limit_records(sets, cfg.limit)
    judges = JudgePool(api_key=cfg.openai_key)
    contexts: dict[str, Context] = {}
    plan, fam_objs = build_plan(cfg, sets, families, contexts)
    if dry_run:
        return {"dry_run": True, "plan": plan.to_dict(), "plan_text": plan.describe()}

    run_id = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ") + "-" + uuid.uuid4().hex[:6]
    started = time.time()
    save = cfg.save_path
    save.mkdir(parents=True, exist_ok=True)
    manifest: dict[str, Any] = {
        "run_id": run_id, "status": "running", "config": cfg.to_dict(), "config_hash": cfg.hash,
        "config_file": str(cfg.source) if cfg.source else None, "argv": _scrub_argv(sys.argv),
        "versions": _versions(), "started": _iso(started), "finished": None,
        "models": [{"name": s.name, "answer_file": str(s.path), "records": len(s.records),
                    "empty_outputs": s.empty_output_ids} for s in sets],
        "plan": plan.to_dict(), "errors": [], "usage": {},
    }
    _write_manifest(save, manifest)
    log(plan.describe())
    for fam, ctx in contexts.items():  # the run's contexts: the judge pool, the save path, a log, a fresh memo
        contexts[fam] = family_context(cfg, fam, sets, judges=judges, save_path=save, log=log)
    try:
        for s in sets:
            res = ModelResults.open(save, s.name, str(s.path), s.records)
            res.skipped_categories = dict(plan.skipped)
            by_cat: dict[str, list[Record]] = {}
            for r in s.records:
                by_cat.setdefault(r.category, []).append(r)
            for cat, fams in plan.categories.items():
                recs = by_cat.get(cat, [])
                if not recs:
                    continue
                for fam, names in fams.items():
                    t0 = time.time()
                    try:
                        out = fam_objs[fam].score(contexts[fam].for_model(s.name), cat, names, recs)
                    except InputError:
                        raise
                    except Exception as exc:  # one broken evaluator must not lose the rest of the run
                        manifest["errors"].append({"model": s.name, "category": cat, "family": fam,
                                                   "error": f"{type(exc).__name__}: {exc}",
                                                   "traceback": traceback.format_exc(limit=5)})
                        log(f"error: {s.name} / {cat} / {fam}: {type(exc).__name__}: {exc}")
                        _write_manifest(save, manifest)
                        continue
                    res.add(fam, cat, recs, out.items, with_scale(out.signatures, fam_objs[fam]), out.corpus)
                    res.save(save, run_id)
                    log(f"{s.name} / {cat} / {fam}: {len(recs)} items in {time.time() - t0:.1f}s")
            res.save(save, run_id)
        for fam, obj in fam_objs.items():
            try:
                extra = obj.score_run(contexts[fam], plan.categories)
                if extra:
                    manifest.setdefault("outputs", {})[fam] = extra
            except InputError:
                raise
            except Exception as exc:
                manifest["errors"].append({"family": fam, "error": f"{type(exc).__name__}: {exc}",
                                           "traceback": traceback.format_exc(limit=5)})
                log(f"error: {fam}: {type(exc).__name__}: {exc}")
        from .judgecheck import attach_to_run  # the stored check of this judge and prompts -> manifest, signatures, log

        attach_to_run(cfg, plan, judges, save, manifest, log)
        manifest["status"] = "finished with errors" if manifest["errors"] else "ok"
    except BaseException as exc:
        manifest["status"] = "interrupted" if isinstance(exc, KeyboardInterrupt) else "failed"
        manifest["errors"].append({"error": f"{type(exc).__name__}: {exc}"})
        raise
    finally:
        manifest["usage"] = judges.usage()
        judges.close()
        manifest["finished"] = _iso(time.time())
        all_results = load_all(save)
        manifest["outputs_files"] = {
            "results": [str(ModelResults.path_for(save, r.model)) for r in all_results],
            "summary_csv": str(write_summary_csv(save, all_results)) if all_results else None,
        }
        if charts and all_results:
            try:
                from .charts import write_charts

                manifest["outputs_files"]["charts"] = [str(p) for p in write_charts(save, all_results)]
            except Exception as exc:  # charts are a view; never lose results over them
                manifest["errors"].append({"error": f"charts: {type(exc).__name__}: {exc}"})
        _write_manifest(save, manifest)
    return manifest


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, timezone.utc).isoformat(timespec="seconds")


def _scrub_argv(argv: list[str]) -> list[str]:
    out, hide = [], False
    for a in argv:
        if hide:
            out.append("***")
            hide = False
        elif a == "--openai_key":
            out.append(a)
            hide = True
        elif a.startswith("--openai_key="):
            out.append("--openai_key=***")
        else:
            out.append(a)
    return out


def _write_manifest(save: Path, manifest: dict[str, Any]) -> None:
    atomic_write_json(save / "manifest.json", manifest)
    atomic_write_json(save / "runs" / f"{manifest['run_id']}.json", manifest)


def check_fail_under(save: Path, specs: list[str]) -> list[str]:
    """`[CATEGORY:]METRIC=VALUE` -> failures (aggregate below VALUE). METRIC with or without family prefix.

    Raises InputError when a spec is malformed or matches no aggregate of any model.
    """
    results = load_all(save)
    failures = []
    for spec in specs:
        if "=" not in spec:
            raise InputError(f'--fail-under "{spec}": expected [CATEGORY:]METRIC=VALUE, e.g. BLEU-4=0.2')
        lhs, _, value = spec.rpartition("=")
        try:
            threshold = float(value)
        except ValueError:
            raise InputError(f'--fail-under "{spec}": "{value}" is not a number') from None
        cat, _, metric = lhs.rpartition(":") if ":" in lhs else ("", "", lhs)
        matched = False
        for res in results:
            aggs = res.aggregates()
            block = aggs["by_category"].get(cat, {}) if cat else aggs["overall"]
            for key, agg in block.items():
                if key == metric or key.split("/", 1)[-1] == metric:
                    matched = True
                    if agg["mean"] is not None and agg["mean"] < threshold:
                        failures.append(f"{res.model}: {cat + ':' if cat else ''}{key} = {agg['mean']:.4f} "
                                        f"< {threshold}")
        if not matched:
            known = sorted({k for r in results for k in r.aggregates()["overall"]})
            raise InputError(f'--fail-under "{spec}": no aggregate named "{metric}"'
                             f"{' in category ' + cat if cat else ''} (known: {', '.join(known)})")
    return failures
