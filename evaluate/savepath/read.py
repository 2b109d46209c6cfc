"""The one reader of a save path, file by file: every file a command, the report, merge or a run reads
back (`log.RunLog` gathers them into the run log).

Result files are the input every output is made from: one that cannot be read (cut short, not
JSON, no "model") is never dropped silently; it comes back as an `Unreadable` naming the file and
why, and each caller decides (a run refuses to overwrite it, the report and `eval.py summary`
show what they have and exit 3). The other files are optional: an unreadable one is a line in
`problems`, so a half-finished or older save path still gets a report.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .layout import (battles_dir, charts_dir, check_layout, comparisons_dir, judge_check_file, judge_checks_dir,
                     labels_file, manifest_file, results_dir, runs_dir, sageval_dir)

COMPARISON_SCHEMA = "llm-eval-comparison/2"


@dataclass
class Unreadable:
    path: Path
    reason: str

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"


def read_json(path: Path) -> Any:
    """A JSON file of the save path; raises OSError / ValueError (UnicodeDecodeError, JSONDecodeError)."""
    return json.loads(Path(path).read_text(encoding="utf-8"))


def read_optional(path: Path, problems: list[str]) -> Any:
    """A JSON file, or None with the reason added to `problems`."""
    try:
        return read_json(path)
    except (OSError, ValueError) as exc:
        problems.append(f"{path}: {type(exc).__name__}: {exc}")
        return None


def _why(exc: Exception) -> str:
    """Why a file could not be read; "cut short" when its JSON stops before it is complete (an
    interrupted copy, a full disk), which is what a truncated result file looks like."""
    if isinstance(exc, json.JSONDecodeError):
        ended = exc.pos >= len(exc.doc.rstrip()) or exc.msg.startswith("Unterminated string")
        if ended:
            return (f"cut short: the JSON stops before it is complete ({exc.msg}: line {exc.lineno} column "
                    f"{exc.colno}, of {len(exc.doc)} characters)")
        return f"not JSON ({exc.msg}: line {exc.lineno} column {exc.colno})"
    return f"{type(exc).__name__}: {str(exc)[:200]}"


def read_result_file(path: Path) -> dict[str, Any] | Unreadable:
    try:
        data = read_json(path)
    except (OSError, ValueError) as exc:
        return Unreadable(Path(path), _why(exc))
    if not isinstance(data, dict) or "model" not in data:
        return Unreadable(Path(path), 'not a result file (no "model")')
    return data


def read_results(root: Path) -> tuple[list[tuple[Path, dict[str, Any]]], list[Unreadable]]:
    """Every `results/*.json`, in file-name order, each parsed once: (the files read with their content,
    the ones that could not be read)."""
    found: list[tuple[Path, dict[str, Any]]] = []
    bad: list[Unreadable] = []
    folder = results_dir(root)
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        got = read_result_file(path)
        if isinstance(got, Unreadable):
            bad.append(got)
        else:
            found.append((path, got))
    return found, bad


def result_file_count(root: Path) -> int:
    folder = results_dir(root)
    return len(list(folder.glob("*.json"))) if folder.is_dir() else 0


def read_manifest(root: Path, problems: list[str] | None = None) -> dict[str, Any] | None:
    """manifest.json (None when absent or unreadable); raises LayoutError for a newer layout."""
    path = manifest_file(root)
    if not path.is_file():
        return None
    data = read_optional(path, problems if problems is not None else [])
    if not isinstance(data, dict):
        return None
    check_layout(root, data)
    return data


def check(root: Path) -> None:
    """Refuse a save path of a newer layout (LayoutError); an absent or unreadable manifest passes."""
    read_manifest(root)


def read_battles(root: Path, problems: list[str]) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """(every battles/<a>__vs__<b>.json, battles/ranking.json or None)."""
    battles, ranking = [], None
    for f in sorted(battles_dir(root).glob("*.json")):
        data = read_optional(f, problems)
        if not isinstance(data, dict):
            continue
        if f.name == "ranking.json":
            ranking = data
        elif "summary" in data:
            battles.append(data)
    return battles, ranking


def battle_files(root: Path, problems: list[str] | None = None) -> list[tuple[str, Any]]:
    """(file name, content) of every pair's battle file, in name order. An unreadable one raises, or
    with `problems` is named there and left out."""
    out = []
    for p in sorted(battles_dir(root).glob("*__vs__*.json")):
        if problems is None:
            out.append((p.name, read_json(p)))
        elif (data := read_optional(p, problems)) is not None:
            out.append((p.name, data))
    return out


def read_comparisons(root: Path, problems: list[str]) -> list[dict[str, Any]]:
    """comparisons/*.json of the current schema (an older one is a problem, not shown)."""
    out = []
    for f in sorted(comparisons_dir(root).glob("*.json")):
        data = read_optional(f, problems)
        if isinstance(data, dict) and isinstance(data.get("rows"), list):
            if data.get("schema") != COMPARISON_SCHEMA:
                problems.append(f"{f}: schema {data.get('schema')!r} of an older version, not shown; "
                                f"`eval.py report {root}` writes it again as {COMPARISON_SCHEMA}")
                continue
            out.append(data)
    return out


def comparisons_stale(root: Path) -> bool:
    """The comparison files are missing (two or more models) or were written under another schema."""
    folder = comparisons_dir(root)
    files = sorted(folder.glob("*.json")) if folder.is_dir() else []
    if not files:
        return result_file_count(root) >= 2
    for f in files:
        try:
            if read_json(f).get("schema") != COMPARISON_SCHEMA:
                return True
        except (OSError, ValueError, AttributeError):
            return True
    return False


def read_judge_check(root: Path, problems: list[str]) -> dict[str, Any] | None:
    path = judge_check_file(root)
    if not path.is_file():
        return None
    jc = read_optional(path, problems)
    return jc if isinstance(jc, dict) else None


def read_stored_check(root: Path, key: str) -> dict[str, Any] | None:
    """judge_checks/<key>.json, or None when absent or unreadable."""
    try:
        data = read_json(judge_check_file(root, key))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def stored_checks(root: Path) -> list[tuple[Path, dict[str, Any]]]:
    """Every judge check stored under judge_checks/ (file, record), in name order; an unreadable one is left out."""
    folder = judge_checks_dir(root)
    out = []
    for p in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            data = read_json(p)
        except (OSError, ValueError):
            continue
        if isinstance(data, dict):
            out.append((p, data))
    return out


def read_sageval(root: Path, problems: list[str]) -> dict[str, dict[str, Any]]:
    """model -> sageval/<model>.json."""
    out: dict[str, dict[str, Any]] = {}
    for f in sorted(sageval_dir(root).glob("*.json")):
        data = read_optional(f, problems)
        if isinstance(data, dict):
            out[data.get("model", f.stem)] = data
    return out


def sageval_files(root: Path) -> list[tuple[str, Any]]:
    """(file name, content) of every SAGEval summary; raises on an unreadable one."""
    folder = sageval_dir(root)
    return [(p.name, read_json(p)) for p in sorted(folder.glob("*.json"))] if folder.is_dir() else []


def read_labels(root: Path, problems: list[str]) -> list[Any]:
    """labels.jsonl as typed labels (`savepath.labels.Label`), in file order ([] when absent); a line
    that is not a label (cut short by a killed writer, edited by hand, a field missing) is named in
    `problems` and left out, never guessed at (`savepath.labels.read_labels`)."""
    from .labels import read_labels as read_label_file

    found = read_label_file(root)
    problems.extend(found.problems)
    return found.labels


def chart_files(root: Path) -> dict[str, dict[str, Path]]:
    """family -> png stem -> path."""
    out: dict[str, dict[str, Path]] = {}
    for png in sorted(charts_dir(root).glob("*/*.png")):
        out.setdefault(png.parent.name, {})[png.stem] = png
    return out


def run_manifest_files(root: Path) -> list[Path]:
    folder = runs_dir(root)
    return sorted(folder.glob("*.json")) if folder.is_dir() else []
