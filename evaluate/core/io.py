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
import unicodedata
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
    """Parse a JSON or YAML file (by extension; .yaml/.yml are YAML, everything else JSON).

    Refused with the key path and both line numbers: a key written twice in one mapping (JSON and
    YAML would silently keep the last). Refused: YAML whose aliases expand past MAX_YAML_NODES nodes
    (an "alias bomb": a few hundred bytes that expand to billions of values)."""
    path = Path(path)
    text = read_text(path, what)
    if path.suffix.lower() in (".yaml", ".yml"):
        return _load_yaml(text, path)
    return _load_json(text, path)


MAX_YAML_NODES = 200_000


def _dup_message(path: Path, where: str, key: Any, first: int, second: int) -> str:
    return (f"{path}: {where}: key {json.dumps(str(key), ensure_ascii=False)} is given twice (line {first} and "
            f"line {second}); keep one")


def _key_path(parts: list[str]) -> str:
    return ".".join(parts) if parts else "(top level)"


def _load_yaml(text: str, path: Path) -> Any:
    import yaml

    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
        if root is None:
            return None
        budget = [MAX_YAML_NODES]

        def walk(node: Any, where: list[str]) -> None:
            budget[0] -= 1
            if budget[0] < 0:
                raise InputError(f"{path}: the YAML expands to more than {MAX_YAML_NODES} values through its aliases "
                                 f"(&anchor / *alias), e.g. at {_key_path(where)}; refused (an alias bomb?)")
            if isinstance(node, yaml.MappingNode):
                seen: dict[Any, int] = {}
                for k, v in node.value:
                    key = k.value if isinstance(k, yaml.ScalarNode) else None
                    if key is not None and key != "<<":
                        line = k.start_mark.line + 1
                        if key in seen:
                            raise InputError(_dup_message(path, _key_path(where), key, seen[key], line))
                        seen[key] = line
                    walk(v, where + [str(key)])
            elif isinstance(node, yaml.SequenceNode):
                for i, v in enumerate(node.value):
                    walk(v, where[:-1] + [f"{where[-1]}[{i}]"] if where else [f"[{i}]"])

        walk(root, [])
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise InputError(f"{path}: not valid YAML: {str(exc)[:500]}") from None
    except RecursionError:
        raise InputError(f"{path}: the YAML is nested too deeply") from None


def _load_json(text: str, path: Path) -> Any:
    """json.loads that refuses duplicate keys, naming the key path and both lines."""
    spans: list[tuple[int, int]] = []  # every object's (start, end) offsets, children first

    def line_of(pos: int) -> int:
        return text.count("\n", 0, pos) + 1

    class _Decoder(json.JSONDecoder):
        def __init__(self) -> None:
            super().__init__()
            original = json.decoder.JSONObject

            def parse_object(s_and_end, strict, scan_once, object_hook, object_pairs_hook, memo=None,
                             _w=json.decoder.WHITESPACE.match):
                start = s_and_end[1] - 1
                pairs, end = original(s_and_end, strict, scan_once, object_hook, lambda kv: kv, memo, _w)
                keys = [k for k, _ in pairs]
                if len(set(keys)) != len(keys):
                    dup = next(k for i, k in enumerate(keys) if k in keys[:i])
                    lines = _key_lines(dup, start, end)
                    raise _Duplicate(dup, start, lines)
                spans.append((start, end))
                return dict(pairs), end

            self.parse_object = parse_object
            self.scan_once = json.scanner.py_make_scanner(self)

    def _key_lines(key: str, start: int, end: int) -> list[int]:
        inner = [(a, b) for a, b in spans if start < a and b <= end]
        pat = re.compile(re.escape(json.dumps(key)) + r"\s*:")
        return [line_of(m.start()) for m in pat.finditer(text, start, end)
                if not any(a <= m.start() < b for a, b in inner)]

    try:
        return _Decoder().decode(text)
    except _Duplicate as dup:
        where = _json_path(text, dup.start)
        lines = dup.lines + [0, 0]
        raise InputError(_dup_message(path, where, dup.key, lines[0], lines[1])) from None
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except RecursionError:
        raise InputError(f"{path}: the JSON is nested too deeply") from None


class _Duplicate(Exception):
    def __init__(self, key: str, start: int, lines: list[int]):
        super().__init__(key)
        self.key, self.start, self.lines = key, start, lines


def _json_path(text: str, pos: int) -> str:
    """The key path of the JSON object that starts at `pos` (keys and list indexes above it)."""
    parts: list[Any] = []  # stack of [kind, key-or-index]
    i, key, in_str, esc, buf = 0, None, False, False, []
    while i < pos:
        c = text[i]
        if in_str:
            if esc:
                esc = False
            elif c == "\\":
                esc = True
            elif c == '"':
                in_str = False
                key = "".join(buf)
            else:
                buf.append(c)
        elif c == '"':
            in_str, buf = True, []
        elif c == "{":
            parts.append(["obj", None])
        elif c == "[":
            parts.append(["arr", 0])
        elif c in "}]":
            parts.pop()
        elif c == "," and parts and parts[-1][0] == "arr":
            parts[-1][1] += 1
        elif c == ":" and parts and parts[-1][0] == "obj":
            parts[-1][1] = key
        i += 1
    names: list[str] = []
    for kind, k in parts:
        if kind == "obj":
            if k is not None:
                names.append(str(k))
        elif names:
            names[-1] += f"[{k}]"
        else:
            names.append(f"[{k}]")
    return _key_path(names)


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


NAME_BYTES = 200  # the most UTF-8 bytes of a file name made from a name (file systems allow 255)


def safe_name(name: str) -> str:
    """A model name as a file name. An ASCII name keeps letters, digits, '.', '_', '-' (the rest becomes '_'),
    as it always has, so existing save paths keep their files. A name in another script keeps its letters and
    digits too (`模型-α` -> `模型-α`, NFC-normalised; issue 47: `模型-α` and `模型-β` both mapped to `-` and
    were refused); when anything else had to be replaced, or the name is too long for a file name, the first
    8 hex digits of the name's sha256 follow, so two such names never share a file."""
    if name.isascii():
        cleaned = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._")
        return cleaned or "model"
    given = unicodedata.normalize("NFC", name)
    cleaned = re.sub(r"[^\w.-]+", "_", given).strip("._")
    if cleaned == given and len(cleaned.encode("utf-8")) <= NAME_BYTES:
        return cleaned
    digest = hashlib.sha256(given.encode("utf-8")).hexdigest()[:8]
    while len(cleaned.encode("utf-8")) > NAME_BYTES - 9:
        cleaned = cleaned[:-1]
    return f"{cleaned}-{digest}" if cleaned else f"model-{digest}"


def check_output_dir(path: Path, what: str = "save_path", subdirs: tuple[str, ...] = ()) -> None:
    """Refuse, before any work, a folder that cannot be created or written: the path or a parent is a
    file, a symlink loop, no write permission, or one of `subdirs` (e.g. "results") exists as a file.
    Creates nothing."""
    path = Path(path)
    try:
        probe = path
        while not probe.exists() and not probe.is_symlink():
            if probe.parent == probe:
                break
            probe = probe.parent
        if probe.is_symlink() and not probe.exists():
            path.resolve(strict=True)  # a dangling link or a loop: raises
        if not probe.is_dir():
            raise InputError(f"{what} {path}: {probe} is a file, not a folder; choose another {what}")
        if not os.access(probe, os.W_OK | os.X_OK):
            raise InputError(f"{what} {path}: no permission to write in {probe}")
        for sub in subdirs:
            p = path / sub
            if p.exists() and not p.is_dir():
                raise InputError(f"{what} {path}: {p} is a file, but the results need a folder there; "
                                 "move it away")
    except RuntimeError as exc:  # symlink loop (Python < 3.13)
        raise InputError(f"{what} {path}: cannot be used ({exc})") from None
    except OSError as exc:
        raise InputError(f"{what} {path}: cannot be used ({exc.strerror or exc})") from None


def check_output_file(path: Path, what: str) -> None:
    """Refuse, before any work, a file that cannot be written: the path is a folder, or its folder cannot be
    made (a file in the way, no write permission). A folder that does not exist yet is made when the file is
    written. Creates nothing. `what` names it in the message (a flag, a key)."""
    p = Path(path).expanduser()
    if p.is_dir():
        raise InputError(f"{what} {path}: is a folder; give a file name")
    parent = p.resolve().parent
    existing = next(a for a in (parent, *parent.parents) if a.exists())
    if not existing.is_dir():
        raise InputError(f"{what} {path}: the folder {parent} cannot be made: {existing} is a file")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise InputError(f"{what} {path}: the folder {parent} cannot be made: {existing} is not writable"
                         if existing != parent else f"{what} {path}: no permission to write in {parent}")


def ensure_dir(path: Path, what: str = "save_path") -> None:
    """mkdir -p, with an InputError naming the folder instead of a raw OSError."""
    try:
        Path(path).mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise InputError(f"{what} {path}: exists as a file, not a folder") from None
    except OSError as exc:
        raise InputError(f"{what} {path}: cannot create the folder ({exc.strerror or exc})") from None
