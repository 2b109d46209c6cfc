"""Prompt templates (data, not code): ``templates.json`` maps a criterion to a format string."""

from __future__ import annotations

from pathlib import Path

from evaluate.core.errors import InputError
from evaluate.core.io import read_structured
from evaluate.core.registry import suggest
from evaluate.core.templates import fill, placeholders

TEMPLATES_FILE = Path(__file__).with_name("templates.json")
PLACEHOLDERS = {"hyp", "src", "question", "a", "b"}


def load_templates(path: Path = TEMPLATES_FILE) -> dict[str, str]:
    data = read_structured(Path(path), "templates")
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected a mapping name -> template string")
    return {k: v for k, v in data.items() if not k.startswith("_")}


def fields(template: str) -> set[str]:
    """The placeholders a template uses; unknown ones -> InputError."""
    names = placeholders(template)
    unknown = names - PLACEHOLDERS
    if unknown:
        raise InputError(f"template {template[:60]!r}: unknown placeholder(s) {sorted(unknown)}; "
                         f"allowed: {sorted(PLACEHOLDERS)}")
    return names


def template_for(criterion: str, template: str | None = None) -> str:
    """The user's template if given, else the packaged one for `criterion` (unknown -> InputError)."""
    if template is not None:
        fields(template)
        return template
    known = load_templates()
    if criterion not in known:
        raise InputError(f'unknown RepEval criterion "{criterion}"{suggest(criterion, list(known))} '
                         f"(known: {', '.join(known)}; or pass template=...)")
    return known[criterion]


def render(template: str, *, hyp: str = "", src: str | None = None, question: str | None = None,
           a: str = "", b: str = "", where: str = "") -> str:
    """Fill a template; a placeholder it needs but that was not given -> InputError naming `where`."""
    values = {"hyp": hyp, "src": src, "question": question, "a": a, "b": b}
    for name in fields(template):
        if values[name] is None:
            raise InputError(f"{where or 'item'}: the template needs {{{name}}} but none was given")
    return fill(template, {k: ("" if v is None else v) for k, v in values.items()})
