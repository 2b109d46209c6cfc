"""The viewer's one door to save paths: every file the viewer reads or writes under a save path goes
through this module, and this module only asks `evaluate.savepath` (its typed run log, `RunLog`, and
the run comparison, which reads run logs in turn).

Why a header apart from the run: a folder of nightly runs may hold hundreds of save paths and some
of them 10,000 items; the list of runs is made from each manifest alone, and a run's result files are
read only when the person opens it (and then cached by `catalog`).
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.errors import InputError
from ..savepath import layout, read
from ..savepath.log import NoResults, RunLog, read_run_log
from ..savepath.labels import Label, LabelFile, append_label, read_labels

# the folders of a save path that hold its own files: never searched for further save paths
INSIDE = {"results", "battles", "comparisons", "charts", "runs", "judge_checks", "sageval", "answers",
          "model_answer", "model_judgment", "reference_answer"}
SKIP = {".git", "__pycache__", "node_modules", ".venv", ".venv-vllm", ".cache", ".mypy_cache", ".pytest_cache"}
# the files of a save path the viewer may hand to the browser as they are (the report and its charts)
SERVED_SUFFIXES = {".html": "text/html; charset=utf-8", ".png": "image/png", ".csv": "text/csv; charset=utf-8",
                   ".json": "application/json; charset=utf-8", ".jsonl": "text/plain; charset=utf-8"}


def is_save_path(folder: Path) -> bool:
    """A folder with manifest.json and/or results/ (a finished, running or half-written run)."""
    return layout.manifest_file(folder).is_file() or layout.results_dir(folder).is_dir()


def find_save_paths(root: Path, max_depth: int = 12) -> list[Path]:
    """Every save path under `root` (itself included), real folders only: a link to a folder is not
    followed, so nothing reached through a link leading out is listed. Shards of a sharded run
    (`shard-<i>-of-<n>/`) are save paths like any other."""
    root = Path(root)
    out: list[Path] = []
    base = len(root.parts)
    for here, dirs, _files in os.walk(root, followlinks=False):
        folder = Path(here)
        if is_save_path(folder):
            out.append(folder)
        depth = len(folder.parts) - base
        dirs[:] = sorted(d for d in dirs if d not in SKIP and d not in INSIDE and not d.startswith(".")
                         and depth < max_depth and not os.path.islink(os.path.join(here, d)))
    return out


def links_out(save_path: Path, roots: list[Path]) -> list[str]:
    """The files and folders of a save path (its own folders, two levels down) that are links resolving
    outside every root folder: such a run is not read at all (its "result file" could be any file of
    the machine)."""
    resolved = [r.resolve() for r in roots]
    bad = []
    base = len(save_path.parts)
    for here, dirs, files in os.walk(save_path, followlinks=False):
        for name in dirs + files:
            p = os.path.join(here, name)
            if os.path.islink(p) and not _inside(Path(p).resolve(), resolved):
                bad.append(p)
        top = len(Path(here).parts) == base
        dirs[:] = [d for d in dirs if (d in INSIDE if top else len(Path(here).parts) - base < 2)]
    return sorted(bad)


def _inside(path: Path, roots: list[Path]) -> bool:
    return any(path == r or r in path.parents for r in roots)


def stamp(save_path: Path) -> tuple[int, ...]:
    """What changes when a run is written again (its files' modification times): the cache key of a
    loaded run. Labels are not in it: they are read again on each request (another tab may add some)."""
    out = []
    for p in (layout.manifest_file(save_path), layout.results_dir(save_path), layout.battles_dir(save_path),
              layout.comparisons_dir(save_path), layout.judge_check_file(save_path)):
        try:
            out.append(p.stat().st_mtime_ns)
        except OSError:
            out.append(0)
    folder = layout.results_dir(save_path)
    if folder.is_dir():
        out += sorted(e.stat().st_mtime_ns for e in os.scandir(folder))
    return tuple(out)


@dataclass
class Header:
    """What the list of runs shows, from the manifest alone where there is one."""

    path: Path
    run_id: str | None = None
    status: str | None = None
    started: str | None = None
    finished: str | None = None
    models: list[str] = field(default_factory=list)
    categories: list[str] = field(default_factory=list)
    items: int | None = None
    judge: str | None = None
    trust: dict[str, Any] | None = None  # {"trustworthy": bool | None, "verdict": str[, "source": "labels", "note"]}
    battles: bool = False
    labels: int = 0
    problems: list[str] = field(default_factory=list)
    modified: float = 0.0
    # how its scores were made (manifest config: language, categories' lists, metric options, prompts, judge):
    # runs of the same models are a trend only when this agrees (runs.trend_groups)
    basis: str = ""
    language: str | None = None


def read_header(save_path: Path) -> Header:
    """The header of one save path: manifest.json (models, plan, status, times, judge and its check),
    else the names of its result files (a save path with no manifest yet): never a result file's content."""
    h = Header(path=save_path)
    try:
        h.modified = max(p.stat().st_mtime for p in (save_path, layout.results_dir(save_path)) if p.exists())
    except (OSError, ValueError):
        pass
    try:
        head = read_run_log(save_path, header_only=True)  # the run log's header alone: never a result file
    except InputError as exc:  # a newer layout
        h.problems.append(str(exc))
        return h
    manifest = head.manifest
    h.problems.extend(head.problems)
    if manifest:
        h.run_id, h.status = manifest.get("run_id"), manifest.get("status")
        h.started, h.finished = manifest.get("started"), manifest.get("finished")
        h.models = [str(m.get("name")) for m in manifest.get("models") or [] if isinstance(m, dict)]
        plan = manifest.get("plan") or {}
        counts = plan.get("items") or {}
        h.categories = sorted(plan.get("categories") or {c for per in counts.values() if isinstance(per, dict)
                                                          for c in per})
        totals = [sum(v for v in per.values() if isinstance(v, int))
                  for per in counts.values() if isinstance(per, dict)]
        h.items = max(totals) if totals else None
        judge = (manifest.get("config") or {}).get("judge")
        if isinstance(judge, dict) and "GPT" in (plan.get("families") or []):
            h.judge = f"{judge.get('backend', 'local')} {judge.get('model', '?')}"
        check = manifest.get("judge_check")
        if isinstance(check, dict):
            h.trust = {"trustworthy": check.get("trustworthy"), "verdict": check.get("verdict")}
        h.basis, h.language = scoring_basis(manifest.get("config") or {}), (manifest.get("config") or {}).get("language")
    if not h.models:  # no manifest yet (a run in progress, models run one at a time): the result files' names,
        folder = layout.results_dir(save_path)  # not their content, which may be large
        h.models = sorted(p.stem for p in folder.glob("*.json")) if folder.is_dir() else []
    if h.trust is None:
        check = read.read_judge_check(save_path, h.problems)
        if check:
            h.trust = {"trustworthy": check.get("trustworthy"), "verdict": check.get("verdict_text")}
    folder = layout.battles_dir(save_path)  # whether there are battles: their names, not their content
    h.battles = folder.is_dir() and any(folder.glob("*__vs__*.json"))
    h.labels = len(read_labels(save_path).labels) if layout.labels_file(save_path).is_file() else 0
    if (h.trust is None or h.trust.get("trustworthy") is None) and h.battles and h.labels:
        # no check stored (the manifest may say "not checked"): the labels' verdict, as the run page says it
        h.trust = labels_trust(save_path, h.problems) or h.trust
    return h


def labels_trust(save_path: Path, problems: list[str]) -> dict[str, Any] | None:
    """The verdict of the person's labels on the run's battles (`judgecheck.labels.label_check_shown`, the one
    the run page and the report show through `report.analysis.labels_check`), for the runs list; None when they
    give none. The only place a header reads the run's content: only a run with labels and no stored check pays
    for it."""
    from ..judgecheck.labels import label_check_shown

    try:
        check = label_check_shown(load_run(save_path))
    except InputError as exc:
        problems.append(str(exc))
        return None
    if check is None:
        return None
    return {"trustworthy": check["trustworthy"], "verdict": check["verdict_text"], "source": "labels",
            "note": check["note"]}


BASIS_KEYS = ("language", "category", "metric_options", "gpt_with_reference", "battle", "panel", "unieval",
              "repeval", "sageval")  # what decides how a score is made; not where the answers or results are


def scoring_basis(config: dict[str, Any]) -> str:
    """A short hash of what makes two runs' scores comparable: the config's language, the categories with
    their families' lists, metric options, the families' blocks, the prompt files (by name) and the judge
    (its backend and model, not its server's address). The English and Chinese examples share their models'
    names and categories; they differ here (issue 47: the viewer's trend put them in one group, empty)."""
    judge = config.get("judge")
    judges = judge if isinstance(judge, list) else [judge]
    basis = {k: config.get(k) for k in BASIS_KEYS}
    basis["judge"] = [(j.get("name"), j.get("backend"), j.get("model")) if isinstance(j, dict) else None for j in judges]
    basis["prompts"] = {k: Path(str(v)).name for k, v in (config.get("prompts") or {}).items() if v}
    text = json.dumps(basis, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def load_run(save_path: Path) -> RunLog:
    """Everything a run holds (results, battles, comparisons, judge check, manifest): its run log;
    InputError when there is no readable result file."""
    try:
        return read_run_log(save_path)
    except NoResults as exc:
        raise InputError(str(exc)) from None


def labels_of(save_path: Path) -> LabelFile:
    return read_labels(save_path)


def add_label(save_path: Path, data: dict[str, Any]) -> Label:
    """Append one label (evaluate.savepath.labels: one write under a lock)."""
    return append_label(save_path, data)


def compare_two(path_a: Path, path_b: Path) -> list[dict[str, Any]]:
    """The paired comparison of two runs of the same models (`eval.py compare`), one per shared model."""
    from ..compare.runs import compare_runs

    return compare_runs(path_a, path_b)


def has_report(save_path: Path) -> bool:
    return layout.report_file(save_path).is_file()


def change_mark(save_path: Path) -> tuple[int, ...]:
    """`stamp` and the labels file's modification time: when the list of runs must read a header again."""
    try:
        labels = layout.labels_file(save_path).stat().st_mtime_ns
    except OSError:
        labels = 0
    return stamp(save_path) + (labels,)


def run_file(save_path: Path, rel: str) -> tuple[bytes, str] | None:
    """A file of the save path the browser may open as it is (report.html, a chart), with its content
    type; None for any other. The caller has checked that `rel` stays inside the save path."""
    path = save_path / rel
    ctype = SERVED_SUFFIXES.get(path.suffix.lower())
    if ctype is None or not path.is_file():
        return None
    return path.read_bytes(), ctype
