"""One item set per save path, unless the user says otherwise (issue 39).

A model's results hold the items of its last run; the closing lines and the report put every model of
the save path side by side under "mean, all items". Two ways of running made those columns mean different
item sets without a word:

- `--limit N` into a save path that holds a fuller run of a model replaced that model's results with
  the N-per-category subset (the full results were gone);
- a run beside results kept from an earlier run (a model this config does not score) compared item
  sets of different sizes when one of the two runs was limited.

Both are refused before any work (exit 2), naming the models and the item counts, unless `--force`
(`RunConfig.force`): give the quick look a save path of its own.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from ..core.errors import InputError
from ..savepath import layout, read


def _limit_of(save_path: Path, result: dict[str, Any]) -> int | None:
    """The `--limit` of the run that last wrote this result file (its run manifest in runs/), or None."""
    runs = result.get("runs") or []
    if not runs:
        return None
    path = layout.run_manifest_file(save_path, str(runs[-1]))
    try:
        limit = ((read.read_json(path) or {}).get("config") or {}).get("limit")
    except Exception:  # an unreadable run manifest: nothing known about that run's limit
        return None
    return limit if isinstance(limit, int) else None


def _scored_ids(result: dict[str, Any]) -> set[str]:
    return {str(it.get("id")) for it in result.get("items") or [] if isinstance(it, dict)
            and (it.get("scores") or it.get("invalid"))}


def check_item_sets(save_path: Path, files: Sequence[tuple[Path, dict[str, Any]]], sets: Sequence[Any],
                    limit: int | None, force: bool) -> None:
    """InputError when this run (its answer sets `sets`, after `--limit`) would replace a fuller run's
    results or sit beside results of another item set made with or without a limit (module docstring).
    `files`: the save path's earlier result files as the run read them (`SaveDir.earlier_files`)."""
    if force or not files:
        return
    now = {s.name: {str(r.id) for r in s.records} for s in sets}
    ids_now = set().union(*now.values()) if now else set()
    how = "give this run another --save_path, or --force to"
    for _path, data in files:
        model = data.get("model")
        if model in now:
            dropped = _scored_ids(data) - now[model]
            if limit is not None and dropped:
                kept = len(_scored_ids(data) & now[model])
                raise InputError(f"--limit {limit}: {save_path} holds fuller results of {model} ({len(_scored_ids(data))} "
                                 f"scored items); this run would keep {kept} and drop {len(dropped)} of them. To take "
                                 f"a quick look, {how} replace them")
            continue
        old_ids = {str(it.get("id")) for it in data.get("items") or [] if isinstance(it, dict)}
        earlier = _limit_of(save_path, data)
        if old_ids and old_ids != ids_now and (limit is not None or earlier is not None):
            said = f"--limit {earlier}" if earlier is not None else "no --limit"
            raise InputError(f"{save_path} holds results of {model} from an earlier run ({len(old_ids)} items, {said}) "
                             f"that this run would show beside its own {len(ids_now)} items"
                             f"{f' (--limit {limit})' if limit is not None else ''} under \"mean, all items\": "
                             f"{how} show them together")
