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
from .config import RunConfig, check_model_names, judge_reachability
from .data import AnswerSet, load_answer_sets
from .core.errors import ConfigError, InputError
from .backends.pool import JudgePool
from .families import Context, Family, family_names, get_family
from .core.records import Record
from .core.scores import InvalidTally
from .core.io import check_output_dir, ensure_dir
from .core.lock import SaveLock
from .core.secrets import scrub_argv
from .thresholds import parse_all
from .results import ModelResults, atomic_write_json, load_all, write_summary_csv
from .schedule import UnitScheduler


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
    options = {f: asdict(contexts[f].options) for f in fam_objs if is_dataclass(contexts[f].options)
               and fields(contexts[f].options)}
    if any(w.get("judge_calls") or w.get("battle_calls") for w in work.values()):  # the resolved judge block
        from .core.secrets import scrub_url

        judge = asdict(cfg.judge)
        urls = judge.get("base_url")
        judge["base_url"] = [scrub_url(u) for u in urls] if isinstance(urls, list) else \
            scrub_url(urls) if isinstance(urls, str) else urls
        if judge.get("endpoints"):
            judge["endpoints"] = [{**e, "base_url": scrub_url(str(e.get("base_url", "")))}
                                  if isinstance(e, dict) else e for e in judge["endpoints"]]
        options["judge"] = judge
    if "Metrics" in fam_objs and cfg.metric_options:
        options["metric_options"] = cfg.metric_options
    plan = Plan(families=[f for f in families if f in fam_objs], categories=categories, items=items,
                skipped=skipped, work=work, options=options)
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
        log: Callable[[str], None] = lambda s: print(s, file=sys.stderr), parallel: bool | None = None) -> dict[str, Any]:
    """Run the job; returns the manifest. Raises InputError/ConfigError on bad input (before any work).

    parallel: work on judge-bound units side by side (evaluate/schedule.py); None: when the judge
    is an HTTP server. Results are the same either way."""
    if not cfg.answers:
        raise InputError("no answer files: list them under `answers:` in the config or pass --answer_file_list")
    check_model_names([a.name for a in cfg.answers], str(cfg.source or "config"))
    sets = load_answer_sets([(a.name, a.path) for a in cfg.answers], cfg.target_file)
    if cfg.limit:
        limit_records(sets, cfg.limit)
    if cfg.shard:  # --shard I/N: this job's slice of the items (evaluate/shard.py)
        from .shard import apply_shard

        apply_shard(sets, cfg.shard)
    judges = JudgePool(api_key=cfg.openai_key)
    contexts: dict[str, Context] = {}
    plan, fam_objs = build_plan(cfg, sets, families, contexts)
    check_output_dir(cfg.save_path, "save_path", ("results", "runs", "charts", "battles"))
    if any(w.get("judge_calls") for w in plan.work.values()):
        judge_reachability(cfg)
    if dry_run:
        out = {"dry_run": True, "plan": plan.to_dict(), "plan_text": plan.describe()}
        if cfg.judge.backend == "openai" or cfg.judge.price:  # judge requests, tokens, cost (requests_io)
            from .requests_io import describe_estimate, estimate

            out["estimate"] = estimate(cfg, families)
            out["plan_text"] += "\n" + describe_estimate(out["estimate"])
        return out

    run_id = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ") + "-" + uuid.uuid4().hex[:6]
    started = time.time()
    save = cfg.save_path
    ensure_dir(save, "save_path")
    lock = SaveLock.acquire(save, run_id)  # a second run into this save_path is refused, never merged blindly
    manifest: dict[str, Any] = {
        "run_id": run_id, "status": "running", "config": cfg.to_dict(), "config_hash": cfg.hash,
        "config_file": str(cfg.source) if cfg.source else None, "argv": _scrub_argv(sys.argv),
        "versions": _versions(), "started": _iso(started), "finished": None,
        "models": [{"name": s.name, "answer_file": str(s.path), "records": len(s.records),
                    "empty_outputs": s.empty_output_ids} for s in sets],
        "plan": plan.to_dict(), "errors": [], "usage": {}, "shard": list(cfg.shard) if cfg.shard else None,
    }
    _write_manifest(save, manifest)
    log(plan.describe())
    for fam, ctx in contexts.items():  # the run's contexts: the judge pool, the save path, a log, a fresh memo
        contexts[fam] = family_context(cfg, fam, sets, judges=judges, save_path=save, log=log)
    scheduler = unit_scheduler(cfg, parallel)
    tally = InvalidTally()
    try:
        if cfg.judge.batch:  # the whole run's judge requests as one batch job per round (requests_io)
            from .requests_io import prefetch_batches

            prefetch_batches(cfg, families, judges, log=log)
        # every unit in the sequential order; judge-bound ones start now on the scheduler's threads
        units: list[tuple[AnswerSet, str, str, list[str], list[Record]]] = []
        for s in sets:
            by_cat: dict[str, list[Record]] = {}
            for r in s.records:
                by_cat.setdefault(r.category, []).append(r)
            for cat, fams in plan.categories.items():
                if by_cat.get(cat):
                    units.extend((s, cat, fam, names, by_cat[cat]) for fam, names in fams.items())
        side = lambda fam: scheduler is not None and fam_objs[fam].judge_bound(contexts[fam])  # noqa: E731
        early = {fam: scheduler.submit(_timed, obj.score_run, contexts[fam], plan.categories)
                 for fam, obj in fam_objs.items() if side(fam) and obj.run_independent}
        started = [scheduler.submit(_timed, fam_objs[fam].score, contexts[fam].for_model(s.name), cat, names, recs)
                   if side(fam) else None for s, cat, fam, names, recs in units]
        if scheduler is not None and any(started):
            log(f"judge-bound units side by side: {sum(1 for f in started if f)} of {len(units)}, "
                f"{scheduler.workers} at a time, {cfg.judge.concurrency} judge requests in flight per endpoint")
        results: dict[str, ModelResults] = {}
        for i, ((s, cat, fam, names, recs), fut) in enumerate(zip(units, started)):
            if s.name not in results:
                res = results[s.name] = ModelResults.open(save, s.name, str(s.path), s.records)
                res.skipped_categories = dict(plan.skipped)
            res = results[s.name]
            try:
                out, secs = fut.result() if fut is not None else \
                    _timed(fam_objs[fam].score, contexts[fam].for_model(s.name), cat, names, recs)
            except InputError:
                raise
            except Exception as exc:  # one broken evaluator must not lose the rest of the run
                manifest["errors"].append({"model": s.name, "category": cat, "family": fam,
                                           "error": f"{type(exc).__name__}: {exc}",
                                           "traceback": "".join(traceback.format_exception(exc, limit=5))})
                log(f"error: {s.name} / {cat} / {fam}: {type(exc).__name__}: {exc}")
                _write_manifest(save, manifest)
            else:
                tally.add(fam, out.items)
                res.add(fam, cat, recs, out.items, with_scale(out.signatures, fam_objs[fam]), out.corpus)
                res.save(save, run_id)
                log(f"{s.name} / {cat} / {fam}: {len(recs)} items in {secs:.1f}s")
            if i + 1 == len(units) or units[i + 1][0] is not s:
                res.save(save, run_id)
        for s in sets:  # a model without any unit still gets its file, as before
            if s.name not in results:
                res = results[s.name] = ModelResults.open(save, s.name, str(s.path), s.records)
                res.skipped_categories = dict(plan.skipped)
                res.save(save, run_id)
        for fam, obj in fam_objs.items():
            try:
                extra = early[fam].result()[0] if fam in early else obj.score_run(contexts[fam], plan.categories)
                if extra:
                    manifest.setdefault("outputs", {})[fam] = extra
            except InputError:
                raise
            except Exception as exc:
                manifest["errors"].append({"family": fam, "error": f"{type(exc).__name__}: {exc}",
                                           "traceback": "".join(traceback.format_exception(exc, limit=5))})
                log(f"error: {fam}: {type(exc).__name__}: {exc}")
        manifest["invalid"] = {f: {"valid": v, "invalid": i} for f, (v, i) in tally.counts.items()}
        manifest["errors"].extend(tally.failures(cfg.max_invalid_share))  # the judge-failure contract: exit 3
        for line in tally.lines():
            log(f"scored {line}")
        for err in tally.failures(cfg.max_invalid_share):
            log(f"error: {err['family']}: {err['error']}")
        from .judgecheck import attach_to_run  # the stored check of this judge and prompts -> manifest, signatures, log

        attach_to_run(cfg, plan, judges, save, manifest, log)
        manifest["status"] = "finished with errors" if manifest["errors"] else "ok"
    except BaseException as exc:
        manifest["status"] = "interrupted" if isinstance(exc, KeyboardInterrupt) else "failed"
        manifest["errors"].append({"error": f"{type(exc).__name__}: {exc}"})
        if scheduler is not None:  # units not started never start; unsent requests come back at once
            scheduler.shutdown()
            judges.cancel()
            scheduler.join(min(cfg.judge.timeout, 30.0))  # in flight: paid for, let the cache keep them
        raise
    finally:
        try:
            if scheduler is not None:
                scheduler.shutdown()
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
            if len(all_results) >= 2:  # paired comparisons of every pair of models found in results/
                try:
                    from .comparisons import write_comparisons

                    manifest["outputs_files"]["comparisons"] = [str(p) for p in write_comparisons(save)]
                except Exception as exc:
                    manifest["errors"].append({"error": f"comparisons: {type(exc).__name__}: {exc}"})
            _write_manifest(save, manifest)
            if all_results:  # the report reads the manifest, so it comes last
                try:
                    from .report import write_report

                    manifest["outputs_files"]["report"] = str(write_report(save))
                except Exception as exc:
                    manifest["errors"].append({"error": f"report: {type(exc).__name__}: {exc}"})
                _write_manifest(save, manifest)
        finally:  # the save_path is free again whatever happened above
            lock.release()
    return manifest


def unit_scheduler(cfg: RunConfig, parallel: bool | None) -> UnitScheduler | None:
    """Threads for judge-bound units when the judge is an HTTP server (a local judge stays sequential):
    enough units at a time to keep the judge's requests in flight (a unit of one small category
    has only a few), at most 64."""
    if parallel is False or (parallel is None and cfg.judge.backend != "openai"):
        return None
    specs = cfg.judge.endpoint_specs() or [{"concurrency": cfg.judge.concurrency}]
    in_flight = sum(int(e["concurrency"]) for e in specs)
    return UnitScheduler(min(64, max(4, in_flight // 4)))


def _timed(fn: Callable[..., Any], *args: Any) -> tuple[Any, float]:
    t0 = time.time()
    return fn(*args), time.time() - t0


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, timezone.utc).isoformat(timespec="seconds")


def _scrub_argv(argv: list[str]) -> list[str]:
    return scrub_argv(argv)


def _write_manifest(save: Path, manifest: dict[str, Any]) -> None:
    atomic_write_json(save / "manifest.json", manifest)
    atomic_write_json(save / "runs" / f"{manifest['run_id']}.json", manifest)


def check_fail_under(save: Path, specs: list[str]) -> list[str]:
    """`[CATEGORY:]METRIC=VALUE` -> failures (aggregate below VALUE). METRIC with or without family prefix.

    Raises InputError when a spec is malformed or matches no aggregate of any model.
    """
    results = load_all(save)
    failures = []
    for t in parse_all(specs):
        spec, cat, metric, threshold = t.spec, t.category, t.metric, t.value
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
