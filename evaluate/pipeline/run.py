"""The main job: config + answer files -> per-model results, battles, comparisons, report, manifest.

Flow: load and validate everything (`prepare`: no model loaded, no call paid) -> the plan (and
stop there with --dry-run: `plan_only`) -> for each model, category and family: score into the
save path's `SaveDir` -> run-wide work (battles) -> the judge check's verdict -> every output,
written once (`evaluate.pipeline.outputs`).
"""

from __future__ import annotations

import sys
import time
import traceback
from dataclasses import dataclass
from typing import Any, Callable

from ..backends.probing import ProbingPool
from ..backends.registry import capabilities
from ..core.errors import InputError
from ..core.io import check_output_dir, ensure_dir
from ..core.records import Record
from ..core.scores import InvalidTally
from ..families import Context, Family
from ..savepath import layout
from ..savepath import read as savepath_read
from ..savepath.lock import SaveLock
from ..savepath.manifest import iso as _iso, new_manifest, new_run_id
from ..savepath.write import server_logs
from .answers import AnswerSet, missing_lines
from .collect import describe_estimate, estimate, prefetch_batches
from .config import (RunConfig, check_judge_model, judge_blocks, judge_reachability,
                     resolve_score_names)
from .item_sets import check_item_sets
from .outputs import write_outputs
from .plan import Plan, Prepared, family_context, load_inputs, with_scale
from .savedir import SaveDir
from .schedule import UnitScheduler


def prepare(cfg: RunConfig, families: list[str]) -> Prepared:
    """Answer files, plan and every name checked (`load_inputs` and the run's checks). Raises
    InputError/ConfigError on bad input."""
    prep = load_inputs(cfg, families)
    resolve_score_names(cfg, prep.plan.score_keys())
    check_output_dir(cfg.save_path, "save_path", layout.RUN_FOLDERS)
    savepath_read.check(cfg.save_path)  # a save path of a newer layout is refused before any work
    if any(w.get("judge_calls") for w in prep.plan.work.values()):
        judge_reachability(cfg)
        check_judge_model(cfg)
    return prep


def plan_only(cfg: RunConfig, families: list[str], check: Callable[[Prepared], None] | None = None) -> dict[str, Any]:
    """The plan and, for an HTTP, priced or local judge, the requests, tokens and cost (a local judge's time from
    its measured speed); nothing is scored.
    `check(prepared)`: more checks of the input (the gates' names) before the estimate."""
    prep = prepare(cfg, families)
    if check is not None:
        check(prep)
    out = {"dry_run": True, "plan": prep.plan.to_dict(),
           "plan_text": "\n".join([prep.plan.describe(), *missing_lines(prep.sets)])}
    paid = any(capabilities(j).http or j.price for _, j in judge_blocks(cfg))
    if paid or any(capabilities(j).in_process for _, j in judge_blocks(cfg)):
        try:
            out["estimate"] = estimate(prep)
        except InputError as exc:  # a local judge whose weights are not here yet: the run says so, not the plan
            if paid:
                raise
            why = str(exc).splitlines()[0]
            out["plan_text"] += f"\nlocal judge time: not estimated ({why[:160]}{'…' if len(why) > 160 else ''})"
        else:
            out["plan_text"] += "\n" + describe_estimate(out["estimate"])
    return out


class JudgeStopped(Exception):
    """The judge cannot be reached: the run stops (exit 3); what was computed is still written."""

    def __init__(self, reason: str):
        super().__init__(reason if reason.startswith("judge unreachable") else f"judge unreachable: {reason}")
        self.reason = reason


@dataclass
class Outcome:
    """What a run leaves: its manifest, and the save path's content as the outputs read it."""

    manifest: dict[str, Any]
    save: SaveDir
    view: Any = None  # the run's RunLog, from memory (closing lines, report), None when there are no results


def run(cfg: RunConfig, *, families: list[str], dry_run: bool = False, charts: bool = True,
        log: Callable[[str], None] = lambda s: print(s, file=sys.stderr), parallel: bool | None = None,
        attach_check: Callable[..., Any] | None = None) -> dict[str, Any]:
    """Run the job (or only plan it); returns the manifest."""
    if dry_run:
        return plan_only(cfg, families)
    return run_job(cfg, families=families, charts=charts, log=log, parallel=parallel,
                   attach_check=attach_check).manifest


def run_job(cfg: RunConfig, *, families: list[str], charts: bool = True,
            log: Callable[[str], None] = lambda s: print(s, file=sys.stderr), parallel: bool | None = None,
            check: Callable[[Prepared], None] | None = None,
            attach_check: Callable[..., Any] | None = None) -> Outcome:
    """Score every unit (model x category x family), then the run-wide work (battles), then write the
    outputs once. Raises InputError/ConfigError on bad input, before any work (`check(prepared)`:
    the caller's own checks, e.g. the gates' names, at that point too); JudgeStopped when the judge
    cannot be reached (the outputs of what was computed are written first).
    `attach_check(cfg, plan, judges, save, manifest, log)`: after scoring, before anything is written,
    finds the stored judge check of this run's judge and prompts and shows it in the run
    (evaluate.judgecheck.store.attach_to_run, which the command line and the API pass: the judge
    check builds on the run, so the run is handed it rather than importing it).

    parallel: work on judge-bound units side by side (evaluate.pipeline.schedule); None: when the
    judge is an HTTP server. Results are the same either way."""
    prep = prepare(cfg, families)
    if check is not None:
        check(prep)
    plan, fam_objs, sets = prep.plan, prep.fam_objs, prep.sets
    run_id = new_run_id()
    started = time.time()
    ensure_dir(cfg.save_path, "save_path")
    lock = SaveLock.acquire(cfg.save_path, run_id)  # a second run into this save_path is refused, never merged blindly
    save = SaveDir(cfg.save_path, log=log, run_id=run_id, started=_iso(started))
    try:  # the earlier results as the run reads them (once), before anything is scored or written
        check_item_sets(cfg.save_path, save.earlier_files()[0], sets, cfg.limit, cfg.force)
    except InputError:
        lock.release()
        raise
    judges = ProbingPool(api_key=cfg.openai_key, log=log, server_log=server_logs(cfg.save_path))
    manifest = new_manifest(
        run_id=run_id, config=cfg.to_dict(), config_hash=cfg.hash,
        config_file=str(cfg.source) if cfg.source else None, started=_iso(started),
        models=[{"name": s.name, "answer_file": str(s.path), "sha256": _sha256(s.path),
                 "records": len(s.records), "empty_outputs": s.empty_output_ids,
                 **({"missing_ids": s.missing_ids} if cfg.missing == "common" else {})} for s in sets],
        plan=plan.to_dict(), shard=list(cfg.shard) if cfg.shard else None)
    log(plan.describe())
    for line in missing_lines(sets):
        log(line)
    contexts = {fam: family_context(cfg, fam, sets, judges=judges, save_path=cfg.save_path, save=save, log=log)
                for fam in prep.contexts}
    for s in sets:
        save.open_model(s.name, str(s.path), s.records, plan.skipped)
    scheduler = unit_scheduler(cfg, parallel)
    outcome = Outcome(manifest, save)
    try:
        if cfg.judge.batch:  # the whole run's judge requests as one batch job per round
            prefetch_batches(prep, judges, log=log)
        tally = _score_units(cfg, plan, fam_objs, contexts, sets, save, scheduler, manifest, log, judges.unreachable)
        manifest["invalid"] = {f: {"valid": v, "invalid": i, **({"judges": tally.judge_counts(f)}
                                                                if tally.judge_counts(f) else {})}
                               for f, (v, i) in tally.counts.items()}
        manifest["invalid_total"] = dict(zip(("valid", "invalid"), tally.totals()))
        manifest["errors"].extend(tally.failures(cfg.max_invalid_share))  # the judge-failure contract: exit 3
        for line in tally.lines():
            log(f"scored {line}")
        for err in tally.failures(cfg.max_invalid_share):
            log(f"error: {err['family']}: {err['error']}")
        if attach_check is not None:
            attach_check(cfg, plan, judges, save, manifest, log)
        manifest["status"] = "finished with errors" if manifest["errors"] else "ok"
    except BaseException as exc:
        manifest["status"] = "interrupted" if isinstance(exc, KeyboardInterrupt) else "failed"
        manifest["errors"].append({"error": str(exc) if isinstance(exc, JudgeStopped) else f"{type(exc).__name__}: {exc}"})
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
            manifest["judge_cache"] = [vars(c) for c in _safe(judges.cache_stats, [])]
            judges.close()
            manifest["finished"] = _iso(time.time())
            _note_earlier(save, manifest, log)
            outcome.view = write_outputs(save, manifest, run_id=run_id, charts=charts)
        finally:  # the save_path is free again whatever happened above
            lock.release()
    return outcome


def _safe(fn: Callable[[], Any], default: Any) -> Any:
    try:
        return fn()
    except Exception:  # a statistic for the closing lines; never lose a run over it
        return default


def _note_earlier(save: SaveDir, manifest: dict[str, Any], log: Callable[[str], None]) -> None:
    """Results in the save path of models this config does not score stay in the outputs (runs of
    one model at a time share a save path) but are named as coming from an earlier run, in the
    manifest and the log; no gate reads them."""
    save.include_earlier()
    earlier = sorted(set(save.models) - save.opened)
    if not earlier:
        return
    manifest["from_earlier_runs"] = {m: list(save.models[m].runs or [])[-1:] for m in earlier}
    log(f"note: {', '.join(earlier)}: results from an earlier run in this save path, not scored by this config; "
        "shown beside this run's models, not gated")


def _battle_counts(save: SaveDir, tally: InvalidTally) -> None:
    """Battle verdicts count like scores: an invalid verdict (the judge's reply named no winner) is
    an invalid score of "GPT battles", under the same max_invalid_share."""
    for data in save.battles.values():
        s = data.get("summary") or {}
        valid = int(s.get("wins") or 0) + int(s.get("ties") or 0) + int(s.get("losses") or 0)
        reasons = _invalid_reasons([it for it in data.get("items") or [] if it.get("verdict") == "invalid"])
        tally.add_counts("GPT battles", valid, int(s.get("invalid") or 0), reasons)
        for judge, own in ((data.get("panel") or {}).get("judges") or {}).items():  # a panel's: each judge's own
            js = own.get("summary") or {}
            mine = [it for it in own.get("items") or [] if it.get("verdict") == "invalid"]
            tally.add_counts("GPT battles", sum(int(js.get(k) or 0) for k in ("wins", "ties", "losses")),
                             int(js.get("invalid") or 0), _invalid_reasons(mine), judge=judge)


def _invalid_reasons(items: list[dict[str, Any]]) -> dict[str, int]:
    """Why battle items are invalid: each item's first invalid order's reason, counted (a panel's item has
    no orders of its own: "no judge of the panel gave a verdict")."""
    reasons: dict[str, int] = {}
    for item in items:
        bad = next((o for o in item.get("orders") or [] if o.get("verdict") == "invalid"), None)
        why = ("no judge of the panel gave a verdict" if bad is None and "judges" in item
               else (bad or {}).get("reason") or f"unparsable reply: {str((bad or {}).get('raw') or '')[:80]!r}")
        reasons[why] = reasons.get(why, 0) + 1
    return reasons


def _score_units(cfg: RunConfig, plan: Plan, fam_objs: dict[str, Family], contexts: dict[str, Context],
                 sets: list[AnswerSet], save: SaveDir, scheduler: UnitScheduler | None, manifest: dict[str, Any],
                 log: Callable[[str], None], unreachable: Callable[[], str | None] = lambda: None) -> InvalidTally:
    """Every unit in the sequential order (judge-bound ones side by side on the scheduler's threads),
    then each family's run-wide work. A failing evaluator is recorded and the rest goes on; a judge
    that cannot be reached stops the run (JudgeStopped)."""
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
    tally = InvalidTally()
    for (s, cat, fam, names, recs), fut in zip(units, started):
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
        else:
            tally.add(fam, out.items, cfg.panel.names if getattr(cfg, "panel", None) is not None else ())
            save.add(s.name, fam, cat, recs, out.items, with_scale(out.signatures, fam_objs[fam]), out.corpus)
            log(f"{s.name} / {cat} / {fam}: {len(recs)} items in {secs:.1f}s")
        if (why := unreachable()) is not None:
            raise JudgeStopped(why)
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
        if (why := unreachable()) is not None:
            raise JudgeStopped(why)
    _battle_counts(save, tally)  # the SaveDir holds this run's battles only (earlier ones stay on disk)
    return tally


def unit_scheduler(cfg: RunConfig, parallel: bool | None) -> UnitScheduler | None:
    """Threads for judge-bound units when the judge is an HTTP server (a local judge stays sequential):
    enough units at a time to keep the judge's requests in flight (a unit of one small category
    has only a few), at most 64."""
    if parallel is False or (parallel is None and not all(capabilities(j).http for _, j in judge_blocks(cfg))):
        return None  # a panel with an in-process judge too: sequential, as one such judge is
    specs = cfg.judge.endpoint_specs() or [{"concurrency": cfg.judge.concurrency}]
    in_flight = sum(int(e["concurrency"]) for e in specs)
    return UnitScheduler(min(64, max(4, in_flight // 4)))


def _sha256(path: Any) -> str | None:
    """The answer file's bytes, hashed: `merge` refuses shards made from different data."""
    import hashlib

    try:
        with open(path, "rb") as f:
            return hashlib.file_digest(f, "sha256").hexdigest()
    except (OSError, AttributeError):
        return None


def _timed(fn: Callable[..., Any], *args: Any) -> tuple[Any, float]:
    t0 = time.time()
    return fn(*args), time.time() - t0



