"""Generated answers kept in a save path: `answers/<name>.<ext>` (JSON Lines by default, one
record per line; `.json` for a JSON list). Written through the one writer, read back in order."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable

from ..core.io import clean_json, json_default, parse_jsonl, read_text
from .layout import answers_dir, answers_file
from .write import write_text


def write_answers(root: Path, name: str, records: Iterable[dict[str, Any]], ext: str = "jsonl") -> Path:
    """Write the answers of `name` (one dict per record) to `answers/<name>.<ext>`; returns the path."""
    rows = [clean_json(r) for r in records]
    path = answers_file(root, name, ext)
    if path.suffix == ".json":
        text = json.dumps(rows, ensure_ascii=False, indent=2, default=json_default) + "\n"
    else:
        text = "".join(json.dumps(r, ensure_ascii=False, default=json_default) + "\n" for r in rows)
    return write_text(path, text)


def read_answers(root: Path, name: str, ext: str = "jsonl") -> list[dict[str, Any]]:
    """The answers `write_answers` wrote; InputError (naming the file and line) when one is not JSON."""
    path = answers_file(root, name, ext)
    text = read_text(path, "answer file")
    if path.suffix == ".json":
        return list(json.loads(text))
    return [row for _, row in parse_jsonl(text, path)]


def answer_names(root: Path) -> list[str]:
    folder = answers_dir(root)
    return sorted(p.stem for p in folder.iterdir() if p.is_file()) if folder.is_dir() else []
