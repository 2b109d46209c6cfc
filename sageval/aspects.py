"""The aspects SAGEval judges, read from an editable JSON file (`aspects.json`).

An aspect is data (name, definition, evaluation steps), so changing what is judged never
needs a code change. A category's config names the aspects it wants; `validate_aspects`
checks those names before any model is loaded, with did-you-mean suggestions.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from evaluate.core.errors import InputError
from evaluate.core.io import read_structured
from evaluate.core.registry import suggest

ASPECTS_FILE = Path(__file__).with_name("aspects.json")
KINDS = ("score", "label")
SCORE_MIN, SCORE_MAX = 1, 5


def normalise_name(name: str) -> str:
    """The matching key of an aspect name: lower case, runs of non-alphanumerics -> '_'.

    "Semantic Diversity", "semantic-diversity" and "semantic_diversity" are one aspect.
    """
    return re.sub(r"[^0-9a-z\u4e00-\u9fff]+", "_", str(name).lower()).strip("_")


@dataclass(frozen=True)
class Aspect:
    """One thing to judge. `kind` "score" is judged on 1-5; "label" picks one of `labels`."""

    id: str
    name: str
    definition: str
    steps: tuple[str, ...] = ()
    kind: str = "score"
    labels: tuple[str, ...] = ()
    aliases: tuple[str, ...] = field(default=(), compare=False)

    @property
    def is_score(self) -> bool:
        return self.kind == "score"

    def with_definition(self, definition: str) -> "Aspect":
        return Aspect(self.id, self.name, definition, self.steps, self.kind, self.labels, self.aliases)


def _aspect_from_dict(key: str, d: Any, where: str) -> Aspect:
    if not isinstance(d, dict):
        raise InputError(f"{where}: aspect {key!r} must be an object, got {type(d).__name__}")
    problems = []
    for name in ("name", "definition"):
        if not isinstance(d.get(name), str) or not d.get(name).strip():
            problems.append(f"aspect {key!r}: {name!r} must be a non-empty string")
    kind = d.get("kind", "score")
    if kind not in KINDS:
        problems.append(f"aspect {key!r}: 'kind' must be one of {list(KINDS)}, got {kind!r}")
    steps = d.get("steps", [])
    if not isinstance(steps, list) or not all(isinstance(s, str) for s in steps):
        problems.append(f"aspect {key!r}: 'steps' must be a list of strings")
    labels = d.get("labels", [])
    if kind == "label" and (not isinstance(labels, list) or len(labels) < 2
                            or not all(isinstance(x, str) and x.strip() for x in labels)):
        problems.append(f"aspect {key!r}: a 'label' aspect needs 'labels', a list of at least two strings")
    aliases = d.get("aliases", [])
    if not isinstance(aliases, list) or not all(isinstance(a, str) for a in aliases):
        problems.append(f"aspect {key!r}: 'aliases' must be a list of strings")
    if problems:
        raise InputError(f"{where}: " + "; ".join(problems))
    return Aspect(
        id=normalise_name(key),
        name=d["name"].strip(),
        definition=d["definition"].strip(),
        steps=tuple(s.strip() for s in steps),
        kind=kind,
        labels=tuple(x.strip().lower() for x in labels) if kind == "label" else (),
        aliases=tuple(aliases),
    )


def load_aspects(path: str | Path | None = None, language: str = "en") -> dict[str, Aspect]:
    """All aspects of `language` in the file (default: the packaged `aspects.json`), by id."""
    path = Path(path) if path else ASPECTS_FILE
    data = read_structured(path, "aspects")
    if not isinstance(data, dict) or not isinstance(data.get(language), dict):
        langs = [k for k, v in data.items() if isinstance(v, dict)] if isinstance(data, dict) else []
        raise InputError(f"{path}: no aspects for language {language!r} (found: {langs})")
    out: dict[str, Aspect] = {}
    for key, d in data[language].items():
        aspect = _aspect_from_dict(key, d, f"{path} [{language}]")
        if aspect.id in out:
            raise InputError(f"{path} [{language}]: aspect {key!r} is defined twice")
        out[aspect.id] = aspect
    return out


def file_hash(path: str | Path | None = None) -> str:
    """sha256 (first 12 hex digits) of an aspects/prompts file, for the result's signature."""
    path = Path(path) if path else ASPECTS_FILE
    return hashlib.sha256(path.read_bytes()).hexdigest()[:12]


def _lookup(known: dict[str, Aspect]) -> dict[str, str]:
    """Every accepted spelling (normalised id, display name, alias) -> aspect id."""
    table: dict[str, str] = {}
    for aid, a in known.items():
        for spelling in (aid, a.name, *a.aliases):
            table.setdefault(normalise_name(spelling), aid)
    return table


def validate_aspects(names: Any, where: str = "", known: dict[str, Aspect] | None = None) -> list[str]:
    """Problems with a config's `SAGEval: [...]` list; empty when it can be used.

    Each problem names `where` (e.g. "config.json: category 'survey'") and, for an unknown
    name, the closest known aspects.
    """
    known = known if known is not None else load_aspects()
    prefix = f"{where}: " if where else ""
    if not isinstance(names, (list, tuple)):
        return [f"{prefix}SAGEval must be a list of aspect names, got {type(names).__name__}"]
    if not names:
        return [f"{prefix}SAGEval lists no aspect (known: {', '.join(known)})"]
    table = _lookup(known)
    problems: list[str] = []
    seen: dict[str, str] = {}
    for name in names:
        if not isinstance(name, str) or not name.strip():
            problems.append(f"{prefix}aspect names must be non-empty strings, got {name!r}")
            continue
        aid = table.get(normalise_name(name))
        if aid is None:
            problems.append(f'{prefix}unknown SAGEval aspect "{name}"{suggest(name, list(known))}'
                            f" (known: {', '.join(known)})")
        elif aid in seen:
            problems.append(f'{prefix}aspect "{name}" is listed twice (as "{seen[aid]}")')
        else:
            seen[aid] = name
    return problems


def resolve_aspects(aspects: Sequence[str | Aspect] | None, known: dict[str, Aspect] | None = None,
                    where: str = "run_sage") -> list[Aspect]:
    """Aspect objects for names (or objects passed through); None: every known aspect."""
    known = known if known is not None else load_aspects()
    if aspects is None:
        return list(known.values())
    names = [a for a in aspects if not isinstance(a, Aspect)]
    if names:
        problems = validate_aspects(names, where, known)
        if problems:
            raise InputError("\n".join(problems))
    table = _lookup(known)
    out = [a if isinstance(a, Aspect) else known[table[normalise_name(a)]] for a in aspects]
    ids = [a.id for a in out]
    if len(set(ids)) != len(ids):
        raise InputError(f"{where}: an aspect is listed twice: {ids}")
    return out
