"""Join the save paths of sharded runs (`--shard I/N`) into one (`eval.py merge OUT DIR...`).

- results/<model>.json: items of every shard, in the answer file's order (the order an unsharded
  run writes); signatures joined (a key signed differently by two shards is refused: they were not
  made the same way); aggregates recomputed from the items. Corpus-level values (corpus BLEU,
  corpus chrF) are not averages of the shards': they are recomputed from the merged items with the
  metric and options the run used; one that cannot be recomputed is removed and its signature says
  so (`corpus_note`).
- battles/<a>__vs__<b>.json: items concatenated (answer file order), summary and per-category
  summaries recomputed with the same BattleResult code as a run; ranking.json recomputed. A panel's
  battle: each judge's items joined into that judge's result (its position calibration fitted on all
  of them) and the panel's verdicts voted again, as one run does.
- judge_cache.sqlite: every shard's rows copied (a re-run of the whole config from OUT pays nothing).
- runs/: every shard's run manifests; manifest.json lists the shards' runs.
- summary.csv, charts, comparisons, the report and the manifest: written as a run writes them
  (evaluate.pipeline.outputs), from the merged results.
Shards that overlap (an item in two of them) are refused, and so are save paths made from other
data (an answer file's sha256), another config (its effective configuration, the save path and
the judge's transport settings aside) or another judge, unless `force` (each difference is named).
A save path that holds `shard-*` folders (what `--shard I/N` runs write into) stands for them.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any, Callable

from ..core.errors import InputError
from ..core.io import clean_json
from ..savepath import layout, read
from ..savepath.log import write_run_log
from ..savepath.manifest import iso, model_entry, new_manifest, new_run_id
from ..savepath.records import ManifestCopy, SagevalSummary
from .outputs import write_outputs
from .results import ModelResults, load_all
from .savedir import SaveDir


def _answer_order(path: str) -> list[str]:
    """Record ids in the order of an answer file (JSON list or JSON Lines); [] when unreadable."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError:
        return []
    try:
        data = json.loads(text)
        rows = data if isinstance(data, list) else []
    except json.JSONDecodeError:
        rows = []
        for line in text.splitlines():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                return []
    return [str(r["id"]) for r in rows if isinstance(r, dict) and "id" in r]


def _ordered(items: dict[str, Any], order: list[str]) -> list[str]:
    pos = {k: i for i, k in enumerate(order)}
    return sorted(items, key=lambda k: (k not in pos, pos.get(k, 0)))


def _manifest(d: Path) -> dict[str, Any]:
    """The shard's manifest ({} when it has none); a newer layout is refused (LayoutError)."""
    p = layout.manifest_file(d)
    if not p.is_file():
        return {}
    data = read.read_json(p)
    layout.check_layout(d, data)
    return data


def _recompute_corpus(res: ModelResults, keys: dict[str, set[str]], config: dict[str, Any]) -> None:
    from ..metrics import METRICS, MetricInput, build

    language = config.get("language", "en")
    options = config.get("metric_options") or {}
    res.corpus = {}
    for cat, cat_keys in keys.items():
        items = [it for it in res.items.values() if it["category"] == cat]
        by_metric: dict[str, set[str]] = {}
        for key in cat_keys:
            sig = res.signatures.get(key, {})
            fam, _, sub = key.partition("/")
            if fam == "Metrics" and sig.get("metric") in METRICS:
                by_metric.setdefault(sig["metric"], set()).add(sub)
            else:
                res.signatures[key] = {**sig, "corpus_note": "corpus value not recomputed by merge; removed"}
        for name, subs in by_metric.items():
            canon = METRICS.canonical(name) or name
            metric = build(canon, language, **options.get(canon, options.get(name, {})))
            scored = [it for it in items if any(f"Metrics/{s}" in it["scores"] for s in metric.sub_scores)]
            inputs = [MetricInput(output=it["output"], references=it["targets"]) for it in scored]
            if not inputs:
                continue
            values = metric.aggregate(inputs, [])
            for sub in subs:
                if sub in values:
                    res.corpus.setdefault(cat, {})[f"Metrics/{sub}"] = values[sub]


def _battle_from_dict(data: dict[str, Any], items: list[dict[str, Any]]):
    from ..judges.battle import BattleItem, BattleResult

    out = [BattleItem.from_dict(it) for it in items]
    s = data["summary"]
    return BattleResult(model_a=s["model_a"], model_b=s["model_b"], items=out, both_orders=s.get("both_orders", True),
                        signature=data.get("signature", {}))


def _panel_battle_from_parts(name: str, parts: list[dict[str, Any]], first_order: list[str]):
    """A panel's battle from its shards: each judge's items gathered from every shard into that judge's own
    BattleResult (its calibration fitted on all of them, as in one run), then voted again
    (`judges.panel.combine_battle`): the panel's items are recomputed, not concatenated."""
    from ..judges.panel import combine_battle
    from ..judges.panel_config import PanelOptions

    head = parts[0]["panel"]
    per = {}
    for judge, first in head["judges"].items():
        items: dict[str, dict[str, Any]] = {}
        for part in parts:
            mine = ((part.get("panel") or {}).get("judges") or {}).get(judge)
            if not isinstance(mine, dict):
                raise InputError(f"merge: battles/{name}: judge {judge} of the panel is missing from a shard's battle "
                                 "file (were the shards run with the same config?)")
            for it in mine.get("items") or []:
                items[str(it["id"])] = it
        summary = {**parts[0]["summary"], "both_orders": (first.get("summary") or {}).get("both_orders", True)}
        per[judge] = _battle_from_dict({"summary": summary, "signature": first.get("signature") or {}},
                                       [items[k] for k in _ordered(items, first_order)])
    policy = PanelOptions(rating=head.get("rating") or "mean", weights=head.get("weights"))
    return combine_battle(per, policy, parts[0].get("signature") or {})


def _merge_cache(out: Path, sources: list[Path]) -> int:
    from ..backends.cache import CACHE_SCHEMA

    target = layout.judge_cache_file(out)
    conn = sqlite3.connect(target, isolation_level=None)
    try:
        conn.execute(CACHE_SCHEMA)
        for src in sources:
            conn.execute("ATTACH DATABASE ? AS s", (str(src),))
            try:
                conn.execute("INSERT OR IGNORE INTO completions SELECT key, judge, request, completion, created "
                             "FROM s.completions")
            except sqlite3.DatabaseError as exc:
                raise InputError(f"{src}: cannot read the judge cache ({exc})") from exc
            finally:
                conn.execute("DETACH DATABASE s")
        return conn.execute("SELECT COUNT(*) FROM completions").fetchone()[0]
    finally:
        conn.close()


# judge settings that change how requests travel, not what the judge answers
_TRANSPORT = ("base_url", "endpoints", "concurrency", "timeout", "max_retries", "price", "endpoint_failures",
              "endpoint_cooldown", "batch_poll", "cache")


def expand_shards(dirs: list[Path], log: Callable[[str], None] = lambda s: None) -> list[Path]:
    """Each folder that holds `shard-*` save paths stands for them (the save path the --shard runs
    were given); any other folder stands for itself."""
    out: list[Path] = []
    for d in dirs:
        shards = layout.shard_dirs(d)
        if shards:
            log(f"merge: {d}: {len(shards)} shard folders ({', '.join(p.name for p in shards)})")
            out.extend(shards)
        else:
            out.append(d)
    return out


def differences(dirs: list[Path], manifests: list[dict[str, Any]]) -> list[str]:
    """What the save paths do not share: answer files (sha256), config, judge. [] when they agree
    (a manifest without a field is not compared on it)."""
    problems: list[str] = []
    first: dict[str, tuple[str, Any]] = {}
    for d, m in zip(dirs, manifests):
        for entry in m.get("models") or []:
            if not isinstance(entry, dict) or not entry.get("sha256"):
                continue
            seen = first.setdefault(f"answers of {entry.get('name')}", (str(d), entry["sha256"]))
            if seen[1] != entry["sha256"]:
                problems.append(f"the answer file of {entry.get('name')} differs ({seen[0]}: sha256 {seen[1][:12]}, "
                                f"{d}: sha256 {entry['sha256'][:12]})")
        cfg = dict(m.get("config") or {})
        if not cfg:
            continue
        block = cfg.pop("judge", None) or {}
        if isinstance(block, list):  # a panel: each judge's block by its name
            judge = {str(b.get("name")): {k: v for k, v in b.items() if k not in _TRANSPORT}
                     for b in block if isinstance(b, dict)}
        else:
            judge = {k: v for k, v in block.items() if k not in _TRANSPORT}
        cfg.pop("save_path", None)
        cfg.pop("answers", None)  # compared by content above; paths may differ between machines
        for what, value in (("judge", judge), ("config", cfg)):
            seen = first.setdefault(what, (str(d), value))
            if seen[1] != value:
                keys = sorted(k for k in set(seen[1]) | set(value) if seen[1].get(k) != value.get(k))
                problems.append(f"the {what} differs ({', '.join(keys)}: {seen[0]} vs {d})")
    return list(dict.fromkeys(problems))


def summed_usage(manifests: list[dict[str, Any]]) -> dict[str, Any]:
    """The shards' judge usage added up per family (requests, tokens, cost; a number none of them
    knows stays None); each shard's own usage is in its manifest under runs/."""
    out: dict[str, dict[str, Any]] = {}
    for m in manifests:
        for family, counts in (m.get("usage") or {}).items():
            if family.startswith("(") or not isinstance(counts, dict):
                continue  # the judges' own totals: per judge process, not added across shards
            fam = out.setdefault(family, {})
            for k, v in counts.items():
                if isinstance(v, (int, float)) and not isinstance(v, bool):
                    fam[k] = (fam.get(k) or 0) + v
                else:
                    fam.setdefault(k, None)
    return out


def merge(out: Path, dirs: list[Path], *, charts: bool = True, force: bool = False,
          log: Callable[[str], None] = lambda s: None) -> dict[str, Any]:
    if not dirs:
        raise InputError("merge: give the output folder and at least one shard folder: eval.py merge OUT DIR...")
    dirs = expand_shards(dirs, log)
    for d in dirs:
        if not layout.results_dir(d).is_dir() and not layout.manifest_file(d).is_file():
            raise InputError(f"merge: {d}: not a save path of a run (no results/ and no manifest.json)")
        if d.resolve() == out.resolve():
            raise InputError(f"merge: {d}: the output folder cannot be one of the inputs")
    manifests = [_manifest(d) for d in dirs]
    diff = differences(dirs, manifests)
    if diff and not force:
        raise InputError("merge: these save paths were not made from the same data, config and judge: "
                         + "; ".join(diff) + " (--force merges them anyway)")
    for line in diff:
        log(f"warning: merge --force: {line}")
    config = next((m.get("config") for m in manifests if m.get("config")), {}) or {}
    started = iso()
    out.mkdir(parents=True, exist_ok=True)

    # ---------------------------------------------------------------- results
    merged: dict[str, ModelResults] = {}
    corpus_keys: dict[str, dict[str, set[str]]] = {}
    orders: dict[str, list[str]] = {}
    for d in dirs:
        unreadable: list[read.Unreadable] = []
        shard_results = load_all(d, unreadable)
        if unreadable:
            raise InputError("merge: " + "; ".join(map(str, unreadable)) + " (a merge without it would lose that "
                             "model's items of this shard; fix or move the file away)")
        for res in shard_results:
            m = merged.get(res.model)
            if m is None:
                m = merged[res.model] = ModelResults(model=res.model, answer_file=res.answer_file)
                orders[res.model] = _answer_order(res.answer_file)
            for key, sig in res.signatures.items():
                if key in m.signatures and m.signatures[key] != sig:
                    raise InputError(f"merge: {d}: {res.model}: {key} was made differently than in another shard "
                                     "(signatures differ); merge shards of one config and one version only")
                m.signatures[key] = sig
            for item_id, item in res.items.items():
                if item_id in m.items:
                    raise InputError(f"merge: {d}: {res.model}: item {item_id} is in two shards; merge the shards "
                                     "of one --shard I/N split, each once")
                m.items[item_id] = item
            for cat, n in res.skipped_categories.items():
                m.skipped_categories[cat] = m.skipped_categories.get(cat, 0) + n
            m.runs += [r for r in res.runs if r not in m.runs]
            for cat, vals in res.corpus.items():
                corpus_keys.setdefault(res.model, {}).setdefault(cat, set()).update(vals)
    save = SaveDir(out, log=log, run_id=new_run_id("merge"), started=started)
    for model, m in merged.items():
        m.items = {k: m.items[k] for k in _ordered(m.items, orders[model])}
        m.skipped_categories = dict(sorted(m.skipped_categories.items()))
        _recompute_corpus(m, corpus_keys.get(model, {}), config)
        save.models[model] = m
    first_order = next(iter(orders.values()), [])

    # ---------------------------------------------------------------- battles
    from ..judges.battle_summary import battle_ranking, by_category, controlled

    outputs = {model: {i: it.get("output", "") for i, it in m.items.items()} for model, m in merged.items()}

    battles: dict[str, list[dict[str, Any]]] = {}
    for d in dirs:
        for name, data in read.battle_files(d):
            battles.setdefault(name, []).append(data)
    results = []
    for name, parts in sorted(battles.items()):
        items: dict[str, dict[str, Any]] = {}
        for part in parts:
            for it in part["items"]:
                if str(it["id"]) in items:
                    raise InputError(f"merge: battles/{name}: item {it['id']} is in two shards")
                items[str(it["id"])] = it
        if isinstance((parts[0].get("panel") or {}).get("judges"), dict):  # a panel of judges
            res = _panel_battle_from_parts(name, parts, first_order)
        else:
            res = _battle_from_dict(parts[0], [items[k] for k in _ordered(items, first_order)])
        data = res.to_dict()
        data["summary"] = clean_json(res.summary())
        data["by_category"] = by_category(res)
        data["controlled"] = controlled(data, outputs.get(res.model_a, {}), outputs.get(res.model_b, {}))
        save.add_battle(res.model_a, res.model_b, data)
        results.append(res)
    if len(merged) > 2 and results:
        ranking = battle_ranking(results, outputs)
        if ranking is None:
            log("merge: ranking: fewer than two decided battle verdicts")
        else:
            save.set_ranking(ranking)

    # ---------------------------------------------------------------- other per-shard folders
    notes = []
    sage = [layout.sageval_dir(d) for d in dirs if layout.sageval_dir(d).is_dir()]
    if sage:  # SAGEval's run summaries are per category of each shard: kept per shard, not recomputed
        by_model: dict[str, dict[str, Any]] = {}
        for d in dirs:
            for fname, data in read.sageval_files(d):
                entry = by_model.setdefault(fname, {"shards": {}})
                entry["shards"][str(d)] = data
        for fname, entry in by_model.items():
            entry["note"] = "per-shard SAGEval summaries (categories split across shards are not recomputed)"
            write_run_log(out, [SagevalSummary.from_dict(entry, name=Path(fname).stem)])
        notes.append("sageval summaries kept per shard")

    # ---------------------------------------------------------------- caches and manifests
    caches = [layout.judge_cache_file(d) for d in dirs if layout.judge_cache_file(d).is_file()]
    cache_rows = _merge_cache(out, caches) if caches else 0
    for d in dirs:  # every shard's run manifests, byte for byte
        for p in read.run_manifest_files(d):
            write_run_log(out, [ManifestCopy(source=p)])
    errors = [dict(e, shard=str(d)) for d, m in zip(dirs, manifests) for e in m.get("errors", [])]
    manifest = new_manifest(
        run_id=save.run_id,
        status="ok" if all(m.get("status") == "ok" for m in manifests) else "merged shards with problems",
        first={"merged_from": [{"path": str(d), "run_id": m.get("run_id"), "status": m.get("status"),
                                "shard": m.get("shard")} for d, m in zip(dirs, manifests)]},
        config=config, config_hash=next((m.get("config_hash") for m in manifests if m.get("config_hash")), None),
        config_file=next((m.get("config_file") for m in manifests if m.get("config_file")), None),
        started=save.started, finished=iso(),
        models=[model_entry(name, merged[name].answer_file, len(merged[name].items)) for name in sorted(merged)],
        errors=errors, usage=summed_usage(manifests),
        judge_cache_rows=cache_rows, notes=notes, forced_over=diff)
    write_outputs(save, manifest, charts=charts)
    return manifest
