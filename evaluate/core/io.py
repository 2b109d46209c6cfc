"""File I/O shared by every layer: reading UTF-8 text, JSON Lines and JSON/YAML files with errors
that name the file, and writing files atomically.

Writes go to a temporary file in the target's folder, then `os.replace` it over the target, so a
reader never sees half a file and an interrupted run keeps the previous version. The temporary
file is created with `os.open(..., 0o666)`, so the result gets the mode a normal write would
(the umask applies); it is removed when the write fails.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import uuid
from pathlib import Path
from typing import Any

from .errors import InputError

_BOMS = ((b"\xff\xfe\x00\x00", "UTF-32 LE"), (b"\x00\x00\xfe\xff", "UTF-32 BE"),
         (b"\xff\xfe", "UTF-16 LE"), (b"\xfe\xff", "UTF-16 BE"))


def read_text(path: Path, what: str = "file") -> str:
    """The file's text, decoded as UTF-8 (a UTF-8 byte-order mark is dropped).

    Raises InputError naming the file when it is missing, a folder, unreadable or not UTF-8
    (saying which encoding its byte-order mark suggests, when it has one)."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise InputError(f"{path}: {what} file not found") from None
    except IsADirectoryError:
        raise InputError(f"{path}: expected a {what} file, found a folder") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read the {what} file ({exc.strerror or exc})") from None
    for bom, name in _BOMS:
        if data.startswith(bom):
            raise InputError(f"{path}: the {what} file is not UTF-8: it starts with a {name} byte-order mark; "
                             "save it as UTF-8")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[:exc.start].count(b"\n") + 1
        raise InputError(f"{path}: the {what} file is not UTF-8 (byte 0x{data[exc.start]:02x} on line {line}); "
                         "save it as UTF-8") from None
    return text[1:] if text.startswith("\ufeff") else text


def read_jsonl(path: Path, what: str = "data") -> list[tuple[int, Any]]:
    """(line number, parsed value) for each non-blank line of a JSON Lines file."""
    return parse_jsonl(read_text(path, what), path)


def parse_jsonl(text: str, path: Path, hint: str = "") -> list[tuple[int, Any]]:
    rows = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            rows.append((n, json.loads(line)))
        except json.JSONDecodeError as exc:
            raise InputError(f"{path}: line {n}: not valid JSON ({exc.msg}){hint}") from None
    return rows


def read_structured(path: Path, what: str = "config") -> Any:
    """Parse a JSON or YAML file (by extension; .yaml/.yml are YAML, everything else JSON)."""
    path = Path(path)
    text = read_text(path, what)
    if path.suffix.lower() in (".yaml", ".yml"):
        import yaml

        try:
            return yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise InputError(f"{path}: not valid YAML: {exc}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None


def atomic_write_bytes(path: Path, data: bytes) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.{uuid.uuid4().hex[:8]}.tmp"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        if tmp.exists():
            tmp.unlink()
        raise


def atomic_write_text(path: Path, text: str) -> None:
    # surrogates (a lone "\ud800" from JSON input) cannot be encoded; write them escaped, not crash
    atomic_write_bytes(path, text.encode("utf-8", errors="backslashreplace"))


def atomic_write_json(path: Path, data: Any) -> None:
    atomic_write_text(path, json.dumps(clean_json(data), ensure_ascii=False, indent=2, default=json_default) + "\n")


def json_default(obj: Any) -> Any:
    if isinstance(obj, Path):
        return str(obj)
    if hasattr(obj, "to_dict"):
        return obj.to_dict()
    if hasattr(obj, "tolist"):
        return obj.tolist()
    if hasattr(obj, "item"):
        return obj.item()
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def clean_json(obj: Any) -> Any:
    """NaN and infinities -> None, so the JSON written is standard."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: clean_json(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [clean_json(v) for v in obj]
    return obj


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", errors="surrogatepass")).hexdigest()


def safe_name(name: str) -> str:
    """A model name as a file name (keeps letters, digits, '.', '_', '-')."""
    cleaned = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._")
    return cleaned or "model"
