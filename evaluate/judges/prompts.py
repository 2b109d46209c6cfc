"""Judge prompt files (ColossalAI's JSON format) and safe template filling.

Two kinds of file, read unchanged from ColossalAI (`prompt/evaluation_prompt/*.json`,
`prompt/battle_prompt/*.json`) or from this project's `evaluate/prompts/`:

*Evaluation prompts*: ``{category: {"metrics": {metric: definition}, "CoT": {metric: steps},
"prompt": template, ["reference_prompt": template], ["system_prompt": text], ...}}``.
The template's placeholders are ``{question} {answer} {metric} {steps}``; a
``reference_prompt`` may also use ``{reference}`` (alias ``{target}``). For conversations an entry
may add ``conversation_prompt`` (``{conversation}``: the setup and the earlier turns, rendered by
``render_history``; ``{question}``: the user's last message; ``{answer}``: the reply rated) and
``conversation_reference_prompt`` (the same plus ``{reference}``). An entry may also say which
of its metrics a reference helps, with their wording for a judge that is shown one:
``"reference_metrics": {metric: definition}`` and ``"reference_CoT": {metric: steps}`` (the same
keys; each a metric of ``metrics``). ``gpt_with_reference: auto`` shows the reference to those
metrics only (`evaluate.judges.references`); a metric rated with a reference uses these texts in
place of its plain ones, so the judge is never told to check "the passage given in the question"
when it is shown a reference answer instead. An entry without the keys (ColossalAI's files) marks
none: ``auto`` then shows no reference, as ColossalAI does by default, and the plan says so
(``gpt_with_reference: true`` shows it to every metric, as ColossalAI's ``--gpt_with_reference``).

*Battle prompt*: ``{"system_prompt": text, "prompt_template": template, "prompt": text,
["reference_template": block]}`` with placeholders ``{question} {answer_1} {answer_2} {prompt}``;
the optional reference block has ``{reference}`` and is added after the question (battle with
a reference). For conversations: ``conversation_template`` with ``{conversation_1}
{conversation_2}`` (each assistant's own earlier turns), ``{question}`` (the user's last message,
the same for both), ``{answer_1} {answer_2}`` (the replies compared) and ``{prompt}``, which is
then the file's ``conversation_prompt``.

Public API
----------
- ``load_evaluation_prompts(path) -> EvaluationPrompts``
    - ``.entry_for(category) -> PromptEntry`` (falls back to ``general``; ``entry.fallback`` says so)
    - ``.metric_definition(category, metric)``, ``.steps(category, metric)``
    - ``.missing_metrics(category, metrics) -> list[str]`` for config validation
- ``load_battle_prompt(path) -> BattlePrompt``
- ``render_history(setup, turns, language) -> str``: a conversation's setup and turns as the judge
  reads them (``{conversation}``, ``{conversation_1}``, ``{conversation_2}``)
- ``fill(template, **values) -> str``: one-pass placeholder substitution (see below).

Why one pass: an answer is user data. ``str.format`` or chained ``str.replace`` would let an
answer that contains ``{question}`` or a stray ``{`` change or break the prompt. ``fill``
scans the *template* once for ``{name}`` (known names only), ``{{`` and ``}}`` (turned into
single braces, as ``str.format`` would) and inserts each value verbatim; inserted text is
never scanned again.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

from ..core.errors import InputError
from ..core.io import read_structured
from ..core.templates import fill, placeholders  # noqa: F401  (re-exported)

log = logging.getLogger(__name__)

EVAL_PLACEHOLDERS = ("question", "answer", "metric", "steps")
REFERENCE_PLACEHOLDERS = EVAL_PLACEHOLDERS + ("reference", "target")
CONVERSATION_PLACEHOLDERS = EVAL_PLACEHOLDERS + ("conversation",)
CONVERSATION_REFERENCE_PLACEHOLDERS = CONVERSATION_PLACEHOLDERS + ("reference", "target")
BATTLE_PLACEHOLDERS = ("question", "answer_1", "answer_2", "prompt")
BATTLE_CONVERSATION_PLACEHOLDERS = BATTLE_PLACEHOLDERS + ("conversation_1", "conversation_2")
FALLBACK_CATEGORY = "general"

HISTORY_LABELS = {
    "en": {"setup": "[Setup given to the assistant]", "user": "[Turn {k}: user]", "assistant": "[Turn {k}: assistant]",
           "none": "(nothing yet: the user's last message opens the conversation)"},
    "cn": {"setup": "【助手收到的设定】", "user": "【第{k}轮：用户】", "assistant": "【第{k}轮：助手】",
           "none": "（还没有：用户的最后一条消息就是对话的开头）"},
}


def render_history(setup: str, turns: Iterable[Any], language: str = "en") -> str:
    """The setup and the turns (objects with `user` and `assistant`) as labelled blocks, each turn
    numbered, so a message that itself contains "User:" cannot pass for another turn."""
    labels = HISTORY_LABELS[language]
    blocks = [f"{labels['setup']}\n{setup}"] if setup.strip() else []
    for k, turn in enumerate(turns, 1):
        blocks.append(f"{labels['user'].replace('{k}', str(k))}\n{turn.user}")
        blocks.append(f"{labels['assistant'].replace('{k}', str(k))}\n{turn.assistant}")
    return "\n\n".join(blocks) if blocks else labels["none"]



def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _read_json(path: Path) -> tuple[Any, str]:
    """The prompt file's JSON (UTF-8, a BOM accepted, duplicate keys refused) and the sha256 of its bytes."""
    data = read_structured(path, "prompt")
    return data, _sha256(Path(path).read_bytes())


def _keypath(*keys: str) -> str:
    return " -> ".join(json.dumps(k, ensure_ascii=False) for k in keys)


def _check_template(path: Path, keys: tuple[str, ...], template: Any, allowed: Iterable[str],
                    required: Iterable[str]) -> str:
    where = f"{path}: {_keypath(*keys)}"
    if not isinstance(template, str):
        raise InputError(f"{where}: expected a string template, got {type(template).__name__}")
    found = placeholders(template)
    unknown = sorted(found - set(allowed))
    if unknown:
        raise InputError(f"{where}: unknown placeholder(s) {', '.join('{' + u + '}' for u in unknown)}"
                         f" (allowed: {', '.join('{' + a + '}' for a in allowed)})")
    missing = [r for r in required if r not in found]
    if missing:
        raise InputError(f"{where}: template lacks {', '.join('{' + m + '}' for m in missing)}")
    return template


def _str_map(path: Path, keys: tuple[str, ...], value: Any) -> dict[str, str]:
    where = f"{path}: {_keypath(*keys)}"
    if not isinstance(value, dict):
        raise InputError(f"{where}: expected an object of metric -> text, got {type(value).__name__}")
    for k, v in value.items():
        if not isinstance(v, str):
            raise InputError(f"{path}: {_keypath(*keys, k)}: expected a string, got {type(v).__name__}")
    return dict(value)


@dataclass(frozen=True)
class PromptEntry:
    """One category's rubric. `category` is the entry's own key; `requested` the category asked
    for; `fallback` is True when the entry is `general` standing in for a missing category."""

    category: str
    metrics: Mapping[str, str]
    cot: Mapping[str, str]
    prompt: str
    reference_prompt: str | None = None
    system_prompt: str | None = None
    requested: str = ""
    fallback: bool = False
    conversation_prompt: str | None = None
    conversation_reference_prompt: str | None = None
    reference_metrics: Mapping[str, str] | None = None  # None: the file marks no metric (ColossalAI's files)
    reference_cot: Mapping[str, str] | None = None

    def has_metric(self, metric: str) -> bool:
        return metric in self.metrics and metric in self.cot

    def why_no_reference(self, metric: str) -> str | None:
        """None when the entry marks `metric` as using a reference answer (its `reference_metrics`),
        else why not, in the words the plan shows."""
        if self.reference_metrics is None:
            return (f'the prompt file\'s "{self.category}" entry has no reference_metrics (gpt_with_reference: true '
                    "shows it anyway)")
        if metric not in self.reference_metrics:
            return f'not in the reference_metrics of the prompt file\'s "{self.category}" entry'
        return None

    def texts(self, metric: str, with_reference: bool) -> tuple[str, str]:
        """(definition, steps) of `metric`: the reference wording where the judge is shown a
        reference and the entry has one, else the plain wording."""
        if with_reference and self.reference_metrics and metric in self.reference_metrics:
            return self.reference_metrics[metric], (self.reference_cot or {})[metric]
        return self.metrics[metric], self.cot[metric]


@dataclass
class EvaluationPrompts:
    """A loaded evaluation prompt file: category -> PromptEntry, with its path and sha256."""

    path: Path
    sha256: str
    entries: dict[str, PromptEntry] = field(default_factory=dict)

    def categories(self) -> list[str]:
        return list(self.entries)

    def entry_for(self, category: str) -> PromptEntry:
        """The category's entry, else the `general` entry marked `fallback=True` (logged once)."""
        if category in self.entries:
            return self.entries[category]
        general = self.entries.get(FALLBACK_CATEGORY)
        if general is None:
            raise InputError(f'{self.path}: no entry for category "{category}" and no "{FALLBACK_CATEGORY}"'
                             f" entry to fall back to (categories: {', '.join(self.entries)})")
        if (self.path, category) not in _warned:
            _warned.add((self.path, category))
            log.warning('%s: no entry for category "%s"; using the "%s" entry', self.path, category,
                        FALLBACK_CATEGORY)
        return PromptEntry(category=general.category, metrics=general.metrics, cot=general.cot,
                           prompt=general.prompt, reference_prompt=general.reference_prompt,
                           system_prompt=general.system_prompt, requested=category, fallback=True,
                           conversation_prompt=general.conversation_prompt,
                           conversation_reference_prompt=general.conversation_reference_prompt,
                           reference_metrics=general.reference_metrics, reference_cot=general.reference_cot)

    def metric_definition(self, category: str, metric: str) -> str:
        entry = self.entry_for(category)
        if metric not in entry.metrics:
            raise InputError(self._missing_message(entry, metric, "metrics"))
        return entry.metrics[metric]

    def steps(self, category: str, metric: str) -> str:
        entry = self.entry_for(category)
        if metric not in entry.cot:
            raise InputError(self._missing_message(entry, metric, "CoT"))
        return entry.cot[metric]

    def missing_metrics(self, category: str, metrics: Iterable[str]) -> list[str]:
        """Metrics that this file cannot rate for `category` (no definition or no CoT steps).
        A category with neither an entry nor a `general` fallback misses every metric."""
        try:
            entry = self.entry_for(category)
        except InputError:
            return list(metrics)
        return [m for m in metrics if not entry.has_metric(m)]

    def missing_reason(self, category: str, metric: str) -> str:
        """Why `metric` cannot be rated for `category`, naming the key that is missing and, for a key
        present in only one of "metrics" and "CoT", the closest key of the other (a misspelt key)."""
        entry = self.entry_for(category)
        in_m, in_c = metric in entry.metrics, metric in entry.cot
        if in_m and not in_c:
            return (f'{self.path}: {_keypath(entry.category, "metrics", metric)} has no evaluation steps: '
                    f'"CoT" has no key "{metric}"'
                    + _closest(metric, [k for k in entry.cot if k not in entry.metrics] or list(entry.cot)))
        if in_c and not in_m:
            return (f'{self.path}: {_keypath(entry.category, "CoT", metric)} has no definition: '
                    f'"metrics" has no key "{metric}"'
                    + _closest(metric, [k for k in entry.metrics if k not in entry.cot] or list(entry.metrics)))
        return (f'{self.path}: {_keypath(entry.category)} defines no metric "{metric}" (in neither "metrics" nor '
                f'"CoT"){_closest(metric, [k for k in entry.metrics if k in entry.cot])}'
                f"; it rates: {', '.join(k for k in entry.metrics if k in entry.cot) or 'nothing'}")

    def _missing_message(self, entry: PromptEntry, metric: str, section: str) -> str:
        via = f' (category "{entry.requested}" falls back to it)' if entry.fallback else ""
        return (f"{self.path}: {_keypath(entry.category, section, metric)} is missing{via};"
                f" known metrics: {', '.join(entry.metrics)}")


_warned: set[tuple[Path, str]] = set()  # warn once per file and category


def _closest(name: str, keys: list[str]) -> str:
    """'; did you mean "X"?' with the closest of `keys` (a misspelt key), or ''."""
    from ..core.registry import suggest

    return suggest(name, keys)


def load_evaluation_prompts(path: str | Path) -> EvaluationPrompts:
    """Read and validate an evaluation prompt file; every error names the file and key path."""
    path = Path(path)
    data, digest = _read_json(path)
    if not isinstance(data, dict) or not data:
        raise InputError(f"{path}: expected a JSON object of category -> prompt entry")
    out = EvaluationPrompts(path=path, sha256=digest)
    for category, raw in data.items():
        if not isinstance(raw, dict):
            raise InputError(f"{path}: {_keypath(category)}: expected an object, got {type(raw).__name__}")
        for key in ("metrics", "CoT", "prompt"):
            if key not in raw:
                raise InputError(f'{path}: {_keypath(category)}: missing key "{key}"')
        metrics = _str_map(path, (category, "metrics"), raw["metrics"])
        cot = _str_map(path, (category, "CoT"), raw["CoT"])
        prompt = _check_template(path, (category, "prompt"), raw["prompt"], EVAL_PLACEHOLDERS,
                                 ("question", "answer"))
        ref = raw.get("reference_prompt")
        if ref is not None:
            ref = _check_template(path, (category, "reference_prompt"), ref, REFERENCE_PLACEHOLDERS,
                                  ("question", "answer"))
            if not placeholders(ref) & {"reference", "target"}:
                raise InputError(f"{path}: {_keypath(category, 'reference_prompt')}: template lacks"
                                 " {reference} (or {target})")
        system = raw.get("system_prompt")
        if system is not None and not isinstance(system, str):
            raise InputError(f"{path}: {_keypath(category, 'system_prompt')}: expected a string")
        conv = raw.get("conversation_prompt")
        if conv is not None:
            conv = _check_template(path, (category, "conversation_prompt"), conv, CONVERSATION_PLACEHOLDERS,
                                   ("conversation", "question", "answer"))
        conv_ref = raw.get("conversation_reference_prompt")
        if conv_ref is not None:
            conv_ref = _check_template(path, (category, "conversation_reference_prompt"), conv_ref,
                                       CONVERSATION_REFERENCE_PLACEHOLDERS, ("conversation", "question", "answer"))
            if not placeholders(conv_ref) & {"reference", "target"}:
                raise InputError(f"{path}: {_keypath(category, 'conversation_reference_prompt')}: template lacks"
                                 " {reference} (or {target})")
        ref_metrics, ref_cot = _reference_texts(path, category, raw, metrics)
        out.entries[category] = PromptEntry(category=category, metrics=metrics, cot=cot, prompt=prompt,
                                            reference_prompt=ref, system_prompt=system or None,
                                            requested=category, conversation_prompt=conv,
                                            conversation_reference_prompt=conv_ref,
                                            reference_metrics=ref_metrics, reference_cot=ref_cot)
    return out


def _reference_texts(path: Path, category: str, raw: dict[str, Any], metrics: Mapping[str, str]
                     ) -> tuple[dict[str, str] | None, dict[str, str] | None]:
    """`reference_metrics` and `reference_CoT` of an entry: both or neither, with the same keys, each
    a metric the entry defines (a misspelt key is named with the closest metric)."""
    has_m, has_c = "reference_metrics" in raw, "reference_CoT" in raw
    if not has_m and not has_c:
        return None, None
    if has_m != has_c:
        given, lacking = ("reference_metrics", "reference_CoT") if has_m else ("reference_CoT", "reference_metrics")
        raise InputError(f'{path}: {_keypath(category)}: "{given}" without "{lacking}"; give both (the definition '
                         "and the evaluation steps of each metric rated with a reference)")
    ref_m = _str_map(path, (category, "reference_metrics"), raw["reference_metrics"])
    ref_c = _str_map(path, (category, "reference_CoT"), raw["reference_CoT"])
    for key, this, other in (("reference_metrics", ref_m, ref_c), ("reference_CoT", ref_c, ref_m)):
        for metric in this:
            if metric not in metrics:
                raise InputError(f'{path}: {_keypath(category, key, metric)}: the entry defines no metric "{metric}"'
                                 f'{_closest(metric, list(metrics))} (its metrics: {", ".join(metrics)})')
            if metric not in other:
                other_key = "reference_CoT" if key == "reference_metrics" else "reference_metrics"
                raise InputError(f'{path}: {_keypath(category, key, metric)} has no counterpart in "{other_key}"')
    return ref_m, ref_c


@dataclass(frozen=True)
class BattlePrompt:
    """A loaded battle prompt file."""

    path: Path
    sha256: str
    system_prompt: str
    prompt_template: str
    prompt: str
    reference_template: str | None = None
    conversation_template: str | None = None
    conversation_prompt: str | None = None

    def render(self, question: str, answer_1: str, answer_2: str) -> str:
        return fill(self.prompt_template, question=question, answer_1=answer_1, answer_2=answer_2,
                    prompt=self.prompt)

    def render_conversation(self, conversation_1: str, conversation_2: str, question: str, answer_1: str,
                            answer_2: str) -> str:
        """One turn of two conversations: each assistant's earlier turns, the user's last message, both replies."""
        if self.conversation_template is None:
            raise InputError(f"{self.path}: no conversation_template; a conversation needs one "
                             "(see evaluate/prompts/README.md)")
        return fill(self.conversation_template, conversation_1=conversation_1, conversation_2=conversation_2,
                    question=question, answer_1=answer_1, answer_2=answer_2,
                    prompt=self.conversation_prompt or self.prompt)


def load_battle_prompt(path: str | Path) -> BattlePrompt:
    """Read and validate a battle prompt file; every error names the file and key."""
    path = Path(path)
    data, digest = _read_json(path)
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected a JSON object with prompt_template, prompt, system_prompt")
    for key in ("prompt_template", "prompt"):
        if key not in data:
            raise InputError(f'{path}: missing key "{key}"')
    template = _check_template(path, ("prompt_template",), data["prompt_template"], BATTLE_PLACEHOLDERS,
                               ("question", "answer_1", "answer_2"))
    for key in ("prompt", "system_prompt"):
        if key in data and not isinstance(data[key], str):
            raise InputError(f"{path}: {_keypath(key)}: expected a string, got {type(data[key]).__name__}")
    ref = data.get("reference_template")
    if ref is not None:
        ref = _check_template(path, ("reference_template",), ref, ("reference",), ("reference",))
    conv = data.get("conversation_template")
    if conv is not None:
        conv = _check_template(path, ("conversation_template",), conv, BATTLE_CONVERSATION_PLACEHOLDERS,
                               ("conversation_1", "conversation_2", "question", "answer_1", "answer_2"))
    conv_prompt = data.get("conversation_prompt")
    if conv_prompt is not None and not isinstance(conv_prompt, str):
        raise InputError(f"{path}: {_keypath('conversation_prompt')}: expected a string, "
                         f"got {type(conv_prompt).__name__}")
    return BattlePrompt(path=path, sha256=digest, system_prompt=data.get("system_prompt", ""),
                        prompt_template=template, prompt=data["prompt"], reference_template=ref,
                        conversation_template=conv, conversation_prompt=conv_prompt)
