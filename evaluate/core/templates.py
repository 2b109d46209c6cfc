"""Filling prompt templates: one function for the judge's, SAGEval's and RepEval's templates.

`{name}` is replaced for the names given, in one pass (a value that itself holds `{other}` is
never filled again), `{{` and `}}` become single braces, and any other `{word}` or lone brace
is kept as written: answers and prompts are full of braces (code, JSON) that must survive.
"""

from __future__ import annotations

import re
from typing import Any, Mapping

_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


def fill(template: str, values: Mapping[str, Any] | None = None, **kw: Any) -> str:
    """The template with `{name}` replaced by `str(value)` for each name given."""
    vals = {**(values or {}), **kw}
    if not vals:
        return template.replace("{{", "{").replace("}}", "}")
    names = "|".join(re.escape(k) for k in sorted(vals, key=len, reverse=True))
    pattern = re.compile(r"\{\{|\}\}|\{(" + names + r")\}")

    def sub(m: re.Match[str]) -> str:
        if m.group(1) is None:
            return m.group(0)[0]
        return str(vals[m.group(1)])

    return pattern.sub(sub, template)


def placeholders(template: str) -> set[str]:
    """Names of the `{name}` placeholders in a template (escaped `{{name}}` excluded)."""
    unescaped = template.replace("{{", "\0").replace("}}", "\0")
    return set(_PLACEHOLDER.findall(unescaped))
