"""Both agents' prompts, read from an editable JSON file, and the requests built from them.

Templates use `{name}` placeholders. Filling is one regex pass over the *template*: the values
are inserted verbatim and never scanned again, so an item that contains `{output}` or any
other brace cannot break or inject into the prompt. Only the names listed in `PLACEHOLDERS`
are placeholders; a template that uses another `{name}` fails at load time, every other brace
(e.g. the JSON in an example) is literal text.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from evaluate.backends.base import JudgeRequest
from evaluate.core.errors import InputError
from evaluate.core.io import read_structured
from evaluate.core.records import Record
from evaluate.core.templates import fill, placeholders

from .aspects import Aspect, file_hash

PROMPTS_FILE = Path(__file__).with_name("prompts.json")

# template path -> (placeholders it may use, required?)
PLACEHOLDERS: dict[str, tuple[frozenset[str], bool]] = {
    "item": (frozenset({"instruction", "input", "output"}), True),
    "item_no_input": (frozenset({"instruction", "output"}), False),
    "aspect_entry": (frozenset({"id", "aspect_name", "definition", "steps"}), True),
    "step_entry": (frozenset({"n", "step"}), True),
    "hints.score": (frozenset(), True),
    "hints.reason": (frozenset(), True),
    "hints.label": (frozenset({"labels"}), True),
    "hints.sage_reason": (frozenset(), True),
    "hints.definition": (frozenset(), True),
    "hints.new_name": (frozenset(), True),
    "hints.new_definition": (frozenset(), True),
    "evaluator.system": (frozenset(), True),
    "evaluator.user": (frozenset({"item", "aspects", "exemplars", "format"}), True),
    "evaluator.exemplar": (frozenset({"instruction", "input", "output", "reply"}), False),
    "evaluator.retry": (frozenset({"error"}), True),
    "evaluator.cut": (frozenset({"error", "max_tokens"}), False),
    "evaluator.score_user": (frozenset({"item", "aspect_name", "definition", "steps"}), True),
    "sage.system": (frozenset({"max_new_aspects"}), True),
    "sage.user": (frozenset({"item", "aspects", "evaluation", "format", "max_new_aspects"}), True),
    "sage.evaluation_entry": (frozenset({"id", "aspect_name", "score", "reason"}), True),
    "sage.evaluation_missing": (frozenset({"id", "aspect_name"}), True),
    "sage.retry": (frozenset({"error"}), True),
    "sage.cut": (frozenset({"error", "max_tokens"}), False),
    "sage.score_user": (frozenset({"item", "aspect_name", "definition", "steps",
                                   "evaluator_score", "evaluator_reason"}), True),
}


def _get(data: dict[str, Any], dotted: str) -> Any:
    node: Any = data
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


@dataclass(frozen=True)
class Prompts:
    """The templates of one language, checked: every template present and using known placeholders."""

    templates: dict[str, str]
    exemplars: tuple[dict[str, Any], ...]
    source: str
    sha: str
    language: str

    def t(self, name: str) -> str:
        return self.templates[name]


def load_prompts(path: str | Path | None = None, language: str = "en") -> Prompts:
    path = Path(path) if path else PROMPTS_FILE
    data = read_structured(path, "prompts")
    if not isinstance(data, dict) or not isinstance(data.get(language), dict):
        raise InputError(f"{path}: no prompts for language {language!r}")
    lang = data[language]
    templates: dict[str, str] = {}
    problems: list[str] = []
    for name, (allowed, required) in PLACEHOLDERS.items():
        text = _get(lang, name)
        if text is None:
            if required:
                problems.append(f"{language}.{name}: missing (a string is expected)")
            continue
        if not isinstance(text, str):
            problems.append(f"{language}.{name}: must be a string, got {type(text).__name__}")
            continue
        unknown = sorted(placeholders(text) - allowed)
        if unknown:
            problems.append(f"{language}.{name}: unknown placeholder(s) {unknown}; "
                            f"allowed here: {sorted(allowed) or 'none'}")
        templates[name] = text
    exemplars = _get(lang, "evaluator.exemplars") or []
    if not isinstance(exemplars, list) or not all(
            isinstance(e, dict) and isinstance(e.get("output"), str) and isinstance(e.get("reply"), dict)
            for e in exemplars):
        problems.append(f"{language}.evaluator.exemplars: must be a list of objects with 'output' (string) "
                        "and 'reply' (object)")
        exemplars = []
    if exemplars and "evaluator.exemplar" not in templates:
        problems.append(f"{language}.evaluator.exemplar: needed when evaluator.exemplars is not empty")
    if problems:
        raise InputError(f"{path}: " + "; ".join(problems))
    return Prompts(templates, tuple(exemplars), str(path), file_hash(path), language)


# ---- rendering -------------------------------------------------------------------------------

def render_item(p: Prompts, record: Record) -> str:
    values = {"instruction": record.instruction, "input": record.input, "output": record.output}
    if not record.input.strip() and "item_no_input" in p.templates:
        return fill(p.t("item_no_input"), values)
    return fill(p.t("item"), values)


def render_steps(p: Prompts, aspect: Aspect) -> str:
    return "\n".join(fill(p.t("step_entry"), {"n": i, "step": s}) for i, s in enumerate(aspect.steps, 1))


def render_aspects(p: Prompts, aspects: Sequence[Aspect]) -> str:
    return "\n".join(
        fill(p.t("aspect_entry"), {"id": a.id, "aspect_name": a.name, "definition": a.definition,
                                   "steps": render_steps(p, a)})
        for a in aspects)


def _value_hint(p: Prompts, a: Aspect) -> tuple[str, str]:
    if a.is_score:
        return "score", p.t("hints.score")
    return "label", fill(p.t("hints.label"), {"labels": ", ".join(a.labels)})


def evaluator_format(p: Prompts, aspects: Sequence[Aspect]) -> str:
    """The reply's shape, one line per aspect (the formatting exemplar every request carries)."""
    lines = []
    for a in aspects:
        key, hint = _value_hint(p, a)
        lines.append(f'  "{a.id}": {{"{key}": {hint}, "reason": {p.t("hints.reason")}}}')
    return "{\n" + ",\n".join(lines) + "\n}"


def sage_format(p: Prompts, aspects: Sequence[Aspect]) -> str:
    lines = []
    for a in aspects:
        key, hint = _value_hint(p, a)
        lines.append(f'    "{a.id}": {{"{key}": {hint}, "reason": {p.t("hints.sage_reason")}, '
                     f'"definition": {p.t("hints.definition")}}}')
    new = (f'[{{"name": {p.t("hints.new_name")}, "definition": {p.t("hints.new_definition")}, '
           f'"score": {p.t("hints.score")}}}]')
    return '{\n  "aspects": {\n' + ",\n".join(lines) + f'\n  }},\n  "new_aspects": {new}\n}}'


def render_exemplars(p: Prompts, aspects: Sequence[Aspect]) -> str:
    """Worked examples, their replies cut down to the aspects being judged."""
    out = []
    for ex in p.exemplars:
        reply = {a.id: ex["reply"][a.id] for a in aspects if a.id in ex["reply"]}
        if not reply:
            continue
        out.append(fill(p.t("evaluator.exemplar"), {
            "instruction": ex.get("instruction", ""), "input": ex.get("input", ""), "output": ex["output"],
            "reply": json.dumps(reply, ensure_ascii=False)}))
    return "".join(out)


def evaluator_request(p: Prompts, record: Record, aspects: Sequence[Aspect], max_tokens: int) -> JudgeRequest:
    user = fill(p.t("evaluator.user"), {
        "item": render_item(p, record), "aspects": render_aspects(p, aspects),
        "exemplars": render_exemplars(p, aspects), "format": evaluator_format(p, aspects)})
    return JudgeRequest.chat(p.t("evaluator.system"), user, max_tokens=max_tokens, temperature=0.0)


def format_score(score: float | None) -> str:
    if score is None:
        return "none"
    return str(int(score)) if float(score).is_integer() else f"{score:.2f}"


def sage_request(p: Prompts, record: Record, aspects: Sequence[Aspect], evaluation: Mapping[str, Any],
                 max_tokens: int, max_new_aspects: int) -> JudgeRequest:
    """`evaluation`: aspect id -> (score or label, reason), or None when the evaluator gave none."""
    entries = []
    for a in aspects:
        ev = evaluation.get(a.id)
        if ev is None:
            entries.append(fill(p.t("sage.evaluation_missing"), {"id": a.id, "aspect_name": a.name}))
        else:
            value, reason = ev
            shown = format_score(value) if a.is_score else str(value)
            entries.append(fill(p.t("sage.evaluation_entry"),
                                {"id": a.id, "aspect_name": a.name, "score": shown, "reason": reason or "no reason given"}))
    values = {"max_new_aspects": max_new_aspects}
    user = fill(p.t("sage.user"), {
        **values, "item": render_item(p, record), "aspects": render_aspects(p, aspects),
        "evaluation": "\n".join(entries), "format": sage_format(p, aspects)})
    return JudgeRequest.chat(fill(p.t("sage.system"), values), user, max_tokens=max_tokens, temperature=0.0)


def retry_request(p: Prompts, agent: str, previous: JudgeRequest, reply: str, error: str) -> JudgeRequest:
    """The same conversation, the unusable reply, and a turn that says what was wrong with it."""
    messages = previous.messages + (("assistant", reply), ("user", fill(p.t(f"{agent}.retry"), {"error": error})))
    return JudgeRequest(messages=messages, max_tokens=previous.max_tokens, temperature=previous.temperature,
                        top_logprobs=previous.top_logprobs, stop=previous.stop, seed=previous.seed)


def score_request(p: Prompts, agent: str, record: Record, aspect: Aspect, top_logprobs: int,
                  evaluator: tuple[float | None, str] | None = None) -> JudgeRequest:
    """A one-token request whose next-token distribution over "1".."5" gives the weighted score."""
    values = {"item": render_item(p, record), "aspect_name": aspect.name, "definition": aspect.definition,
              "steps": render_steps(p, aspect)}
    if agent == "sage":
        score, reason = evaluator if evaluator is not None else (None, "")
        values.update(evaluator_score=format_score(score), evaluator_reason=reason or "no reason given")
    # No system prompt: both agents' system prompts ask for JSON, and this request wants one digit.
    return JudgeRequest.chat(None, fill(p.t(f"{agent}.score_user"), values),
                             max_tokens=1, temperature=0.0, top_logprobs=top_logprobs)
