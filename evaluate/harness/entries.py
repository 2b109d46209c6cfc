"""`answers:` entries in a harness's format: which format (named or detected), one entry per model
the file holds, the records of each, and the checks that make two models' files a pair.

An entry is the config's `AnswerFile` (name, path, format, model, default_name); this module reads
its fields and returns copies (`dataclasses.replace`), so it needs nothing of the config module.
`format:` is one of FORMATS (did-you-mean at load); without it, `detect` looks at the file: `.eval`
is Inspect's, a `samples_*.jsonl` whose lines are lm-eval samples is lm-eval's, a `.json` object is
Inspect's or promptfoo's by its first keys; anything else (a JSON list, JSON Lines of records) is
ColossalAI's records, read as before. Each file is read once per process (keyed by its size and
modification time).

Files of one harness are a pair only when they are the same task, have the same epochs for each
sample and gave each shared sample the same input (Inspect's input, lm-eval's document, promptfoo's
variables); anything else is refused (exit 2) naming both files, the sample and what was expected.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Sequence, TypeVar

from ..core.errors import ConfigError, InputError
from ..core.records import Record
from ..core.registry import Registry
from . import inspect_log, lm_eval_log, promptfoo_log
from .base import HarnessFile, scores_of

RECORDS = "colossalai"  # this tool's own answer files (ColossalAI's records)
FORMATS: Registry[Any] = Registry("answer file format")
FORMATS.add(RECORDS, None, "records")
FORMATS.add("inspect", inspect_log, "inspect_ai", "inspect-ai")
FORMATS.add("lm-eval", lm_eval_log, "lm_eval", "lm-evaluation-harness")
FORMATS.add("promptfoo", promptfoo_log)
HEAD = 4096  # characters read to detect a format

E = TypeVar("E")
_CACHE: dict[tuple[str, str, int, int], HarnessFile] = {}


def detect(path: Path) -> str | None:
    """The harness format of `path` when its name and first characters say it, else None (records)."""
    path = Path(path)
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            head = f.read(HEAD) if path.suffix.lower() != ".eval" else ""
    except OSError:
        return None  # the records reader names the problem
    for name in ("inspect", "lm-eval", "promptfoo"):
        if FORMATS.get(name).looks_like(path, head):
            return name
    return None


def read_file(path: Path, fmt: str) -> HarnessFile:
    """The harness file at `path`, read by `fmt`'s reader once per process and version of the file."""
    path = Path(path)
    try:
        st = path.stat()
    except FileNotFoundError:
        raise InputError(f"{path}: answer file not found") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot read the answer file ({exc.strerror or exc})") from None
    key = (str(path), fmt, st.st_mtime_ns, st.st_size)
    if key not in _CACHE:
        _CACHE[key] = FORMATS.get(fmt).read(path)
    return _CACHE[key]


def harness_format(entry: Any) -> str | None:
    """The entry's harness format (named, else detected); None for this tool's own records or a generated entry."""
    if getattr(entry, "generate", None) is not None:
        return None
    fmt = FORMATS.canonical(entry.format) if getattr(entry, "format", None) else detect(entry.path)
    return None if fmt in (None, RECORDS) else fmt


def expand(entries: Sequence[E]) -> list[E]:
    """Each harness file's entry as one entry per model it holds (named by the file unless `name:` was
    written), checked to pair with the other files of its harness. Idempotent: an expanded entry names
    its model and stays one entry."""
    out: list[E] = []
    read: list[tuple[int, Any, HarnessFile, str]] = []
    for i, entry in enumerate(entries):
        fmt = harness_format(entry)
        if fmt is None:
            out.append(entry)
            continue
        hf = read_file(entry.path, fmt)
        chosen = getattr(entry, "model", None)
        if chosen is not None and chosen not in hf.models:
            raise InputError(f"{entry.path}: no model {chosen!r} in this {hf.harness} file (it holds "
                             f"{', '.join(hf.models)})")
        models = [chosen] if chosen is not None else list(hf.models)
        if len(models) > 1 and not getattr(entry, "default_name", False):
            raise ConfigError([f"answers[{i}].name: {entry.name!r} names one model, and {entry.path} holds "
                               f"{len(models)} ({', '.join(models)}): leave name out, each is named by the file"])
        for m in models:
            name = m if getattr(entry, "default_name", False) else entry.name
            out.append(dataclasses.replace(entry, name=name, format=fmt, model=m))
            read.append((i, out[-1], hf, m))
    _check_names(read)
    check_pairs([(entry, hf, m) for _, entry, hf, m in read])
    return out


def records_for(entry: Any) -> list[Record] | None:
    """An expanded harness entry's records (a copy of the list), or None for this tool's own answer file."""
    fmt = harness_format(entry)
    if fmt is None:
        return None
    hf = read_file(entry.path, fmt)
    model = getattr(entry, "model", None) or next(iter(hf.models))
    return list(hf.models[model])


def describe(entries: Sequence[Any]) -> list[str]:
    """The plan's lines: each harness file, its format and whether it was named or detected."""
    lines, seen = [], set()
    for entry in entries:
        fmt = harness_format(entry)
        if fmt is None or str(entry.path) in seen:
            continue
        seen.add(str(entry.path))
        named = getattr(entry, "format", None) and getattr(entry, "format_given", True)
        lines.append(read_file(entry.path, fmt).describe("format: given" if named else "detected"))
    return lines


def _check_names(read: list[tuple[int, Any, HarnessFile, str]]) -> None:
    first: dict[str, tuple[int, Any]] = {}
    problems = []
    for i, entry, hf, _ in read:
        if entry.name in first:
            j, other = first[entry.name]
            problems.append(f"answers[{i}] ({entry.path}): model name {entry.name!r} is also answers[{j}]'s "
                            f"({other.path}); give each its own name (answers[].name)")
        else:
            first[entry.name] = (i, entry)
    if problems:
        raise ConfigError(problems)


def check_pairs(models: list[tuple[Any, HarnessFile, str]]) -> None:
    """Files of one harness pair up: the same task, the same epochs per sample, the same input per
    sample. InputError naming both files, the sample and what was expected."""
    base: dict[str, tuple[HarnessFile, dict[str, Record]]] = {}
    for entry, hf, model in models:
        recs = {r.id: r for r in hf.models[model]}
        if hf.format not in base:
            base[hf.format] = (hf, recs)
            continue
        ref, ref_recs = base[hf.format]
        if hf.task != ref.task:
            raise InputError(f"{hf.path}: task {hf.task!r}, but {ref.path} (its pair) is task {ref.task!r}; "
                             "expected logs of the same task, so that the models answered the same samples "
                             "(a run per task)")
        if hf.epochs != ref.epochs:
            sample, n, m = _epoch_mismatch(hf.models[model], ref_recs.values())
            raise InputError(f"{hf.path}: sample {sample} has {n} epoch{'s' if n != 1 else ''}, and {ref.path} "
                             f"(its pair) has {m} of it; expected the same epochs in both logs ({hf.epochs} vs "
                             f"{ref.epochs}): run both with the same --epochs")
        for rid, rec in recs.items():
            other = ref_recs.get(rid)
            a, b = scores_of(rec), scores_of(other) if other is not None else None
            if a is not None and b is not None and a.fingerprint != b.fingerprint:
                what = {"inspect": "input", "lm-eval": "document (doc_hash)", "promptfoo": "test variables"}[hf.format]
                raise InputError(f"{hf.path}: sample {a.sample}{f' epoch {a.epoch}' if a.epoch else ''}: its "
                                 f"{what} differs from {ref.path}'s (its pair); expected the same {what} for the "
                                 f"same sample id: were the two made from different datasets? ({rec.instruction[:60]!r} "
                                 f"vs {other.instruction[:60]!r})")


def _epoch_mismatch(recs: Sequence[Record], ref: Any) -> tuple[str, int, int]:
    """The first sample whose number of epochs differs between two logs: (sample, epochs here, epochs there)."""
    def count(rs: Any) -> dict[str, int]:
        out: dict[str, int] = {}
        for r in rs:
            s = scores_of(r)
            if s is not None:
                out[s.sample] = out.get(s.sample, 0) + 1
        return out

    here, there = count(recs), count(ref)
    for sample in list(here) + list(there):
        if here.get(sample, 0) != there.get(sample, 0):
            return sample, here.get(sample, 0), there.get(sample, 0)
    first = next(iter(here), "?")
    return first, here.get(first, 0), there.get(first, 0)
