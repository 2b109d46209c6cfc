"""Rating: a judge scores each answer on each metric of its category (1-5), with or without
the reference answer.

Public API
----------
``rate(backend, prompts, records, metrics, *, mode="auto", with_reference=False, language="en",
...) -> list[ItemScores]``. ``with_reference``: true, false, ``"auto"`` or a run-wide
``ReferenceUse`` (`evaluate.judges.references`: which category and metric the judge is shown the
reference for; ``"auto"`` decides it from the records of the call). A metric rated with a reference
uses the entry's reference wording (`reference_metrics`, `reference_CoT`) where it has one. — one ItemScores per record, in order:
``scores {metric: value}``, ``invalid {metric: Invalid}``,
``details {metric: {"mode", "raw", "request", "prompt_category", ...}}``.

``RatingJudge(backend, prompts, ...)`` holds the same options; ``.rate(records, metrics)`` and
``.signature()`` (judge, prompt file and sha256, mode, options) — what makes two runs comparable.

Aggregates (means, intervals, best and worst items) are made in one place for every family:
``evaluate.pipeline.results.summarize``, once per model when its result file is written.

Modes
-----
- ``logprobs`` (``auto`` picks it when ``backend.supports_logprobs``): one generated token with
  its top-20 alternatives; score = G-Eval expectation over "1".."5" (see parsing.py). The
  probability mass on the score tokens is kept in the details as ``score_token_mass``.
- ``generate``: the judge writes its score on the first line (``parse_rating``), with up to
  ``max_tokens`` tokens for an explanation.
- ``auto`` against an HTTP judge: the first request is sent alone; when the server answers it
  without log-probabilities (many OpenAI-compatible servers never send them), the judge rates in
  ``generate`` mode instead, said once per judge (model and endpoints) and remembered for the
  process, so a server without log-probabilities gives parsed ratings, not a run of invalid ones.

Conversations
-------------
A record with turns is rated turn by turn: turn k's request fills the entry's
``conversation_prompt`` (``conversation_reference_prompt`` with a reference) with the setup and
turns 1..k-1 as ``{conversation}`` (the model's own earlier replies, ``render_history``), the
user's turn-k message as ``{question}`` and the turn-k reply as ``{answer}``. Scores go under
``metric@turnK``; ``metric`` itself is the whole conversation: the mean of its turns, invalid when
any turn is (the turn and its reason named; an invalid turn is never averaged in). An entry without
``conversation_prompt`` is refused before any call: a template written for one question would show
the judge a conversation it was not worded for.

Both modes send the same messages (so a mode switch changes only the decoding): the filled
template as the user message; as the system message the entry's or caller's system prompt, then
a short instruction of the reply format (first line: only the score).

``metrics`` is a list (the same metrics for every record) or a mapping category -> list
(ColossalAI's config; a category missing from it uses the ``general`` key, else it is an
error). Missing metrics, missing references (where the judge is to be shown one) and an unknown
mode are reported before any judge call. ``RatingJudge.rate(..., per_record=...)`` gives each record
its own metrics (a cascade leaves out those a rule decided: `evaluate.judges.cascade`).
"""

from __future__ import annotations

import json
import math
import sys
from typing import Any, Callable, Mapping, Sequence

from ..backends.base import Backend, Completion, JudgeRequest, ProgressFn
from ..backends.registry import capabilities
from ..core.errors import InputError
from ..core.records import Record, Turn, turn_key
from ..core.scores import Invalid, ItemScores
from .dispatch import _sort_key, complete_all
from .parsing import loop_in, metric_labels, parse_rating, repetition_reason, score_from_top_logprobs
from .prompts import EvaluationPrompts, PromptEntry, fill, render_history
from .references import ReferenceUse, decide

MODES = ("auto", "logprobs", "generate")
NO_LOGPROBS = ("the judge returned no top log-probabilities (this server sends none: set judge.mode: generate, "
               "or auto, to rate with a parsed reply)")
# judges (their signature) that answered `auto`'s first request without log-probabilities: told once
_WITHOUT_LOGPROBS: set[str] = set()


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)
LANGUAGES = ("en", "cn")
SCALE = (1, 5)

FORMAT_INSTRUCTION = {
    "en": "Reply in this format: the first line holds only the score, an integer from {low} to {high},"
          " and nothing else. You may explain your rating on the lines after it.",
    "cn": "请按以下格式回复：第一行只写分数（{low}到{high}之间的整数），不写其他内容；之后的行可以解释你的评分。",
}
REFERENCE_BLOCK = {
    "en": "\n\nThe reference answer, which is correct and can serve as an example, is as follows:\n\n{reference}",
    "cn": "\n\n参考答案如下（该答案是正确的，可作为范例）：\n\n{reference}",
}


def _references(record: Record) -> str:
    return references_text(record.targets)


def references_text(targets: Sequence[str]) -> str:
    """One reference as it is; several numbered, each on its own."""
    if len(targets) == 1:
        return targets[0]
    return "\n\n".join(f"[{i}] {t}" for i, t in enumerate(targets, 1))


WHOLE_RULE = "mean of the turns' scores; invalid when any turn is invalid"


class RatingJudge:
    """Options of a rating run (nothing happens in __init__ but checks); see the module docstring.

    mode: "auto" | "logprobs" | "generate".  with_reference: give the judge the target answer: true,
    false, "auto" (decided from the records of each call) or a run-wide ReferenceUse.
    language: "en" | "cn", for the format instruction and the reference block.
    system_prompt: overrides the entry's system prompt.  format_instruction: append the reply-format
    instruction to the system message.  min_mass: least score-token probability in logprobs mode.
    max_tokens: budget in generate mode.  top_logprobs: alternatives asked for in logprobs mode.
    """

    def __init__(self, backend: Backend, prompts: EvaluationPrompts, *, mode: str = "auto",
                 with_reference: bool | str | ReferenceUse = False, language: str = "en",
                 system_prompt: str | None = None,
                 format_instruction: bool = True, min_mass: float = 0.05, max_tokens: int = 384,
                 top_logprobs: int = 20, log: Callable[[str], None] | None = None):
        if mode not in MODES:
            raise InputError(f'rating: unknown mode "{mode}" (expected one of {", ".join(MODES)})')
        if language not in LANGUAGES:
            raise InputError(f'rating: unknown language "{language}" (expected one of {", ".join(LANGUAGES)})')
        if mode == "logprobs" and not backend.supports_logprobs:
            raise InputError(f'rating: mode "logprobs" needs a backend with log-probabilities;'
                             f" {backend.kind} backend for {backend.model} has none (use mode \"generate\")")
        self.backend = backend
        self.prompts = prompts
        self.mode = ("logprobs" if backend.supports_logprobs else "generate") if mode == "auto" else mode
        self.requested_mode = mode
        self.log = log or _stderr
        if mode == "auto" and self._judge_key() in _WITHOUT_LOGPROBS:
            self.mode = "generate"
        self.with_reference = with_reference
        self._use: ReferenceUse | None = with_reference if isinstance(with_reference, ReferenceUse) else \
            ReferenceUse(setting=with_reference) if isinstance(with_reference, bool) else None
        self.language = language
        self.system_prompt = system_prompt
        self.format_instruction = format_instruction
        self.min_mass = min_mass
        self.max_tokens = max_tokens
        self.top_logprobs = top_logprobs

    def _judge_key(self) -> str:
        return json.dumps(self.backend.signature(), sort_keys=True, default=str)

    def signature(self) -> dict[str, Any]:
        sig: dict[str, Any] = {
            "evaluator": "rating",
            "judge": self.backend.signature(),
            "prompt_file": str(self.prompts.path),
            "prompt_sha256": self.prompts.sha256,
            "mode": self.mode,
            "scale": list(SCALE),
            "with_reference": self._use.setting if self._use is not None else self.with_reference,
            "language": self.language,
            "format_instruction": self.format_instruction,
            "system_prompt": self.system_prompt,
        }
        if self.mode == "logprobs":
            sig.update(top_logprobs=self.top_logprobs, min_mass=self.min_mass, aggregation="G-Eval expectation")
        else:
            sig.update(max_tokens=self.max_tokens, parser="first-line score, or last line 'Score: N'")
        return sig

    # -- building ---------------------------------------------------------------------------

    def _metrics_for(self, category: str, metrics: Sequence[str] | Mapping[str, Sequence[str]]) -> list[str]:
        if isinstance(metrics, Mapping):
            if category in metrics:
                return list(metrics[category])
            if "general" in metrics:
                return list(metrics["general"])
            raise InputError(f'rating: no metrics configured for category "{category}"'
                             f" (configured: {', '.join(metrics)})")
        if isinstance(metrics, str):
            return [metrics]
        return list(metrics)

    def _system(self, entry: PromptEntry) -> str | None:
        parts = [self.system_prompt if self.system_prompt is not None else entry.system_prompt]
        if self.format_instruction:
            parts.append(FORMAT_INSTRUCTION[self.language].format(low=SCALE[0], high=SCALE[1]))
        text = "\n\n".join(p for p in parts if p)
        return text or None

    def reference_use(self, records: Sequence[Record], per_record: Sequence[Sequence[str]]) -> ReferenceUse:
        """Which (category, metric) of these records the judge is shown the reference for."""
        if self._use is not None:
            return self._use
        metrics: dict[str, list[str]] = {}
        for record, ms in zip(records, per_record):
            have = metrics.setdefault(record.category, [])
            have.extend(m for m in ms if m not in have)
        return decide(self.with_reference, metrics, records,
                      lambda c, m: self.prompts.entry_for(c).why_no_reference(m))

    def _shows(self, record: Record, metric: str) -> bool:
        use = self._call_use or self.reference_use([record], [[metric]])
        return use.rating(record.category, metric)

    _call_use: ReferenceUse | None = None  # the decision of the `rate` call in progress

    def build_prompt(self, entry: PromptEntry, record: Record, metric: str, turn: int | None = None) -> str:
        """The user message for one record and metric (for a conversation: for one turn, the last
        by default)."""
        if record.turns:
            return self._conversation_prompt(entry, record, metric, turn or len(record.turns))
        shown = self._shows(record, metric)
        definition, steps = entry.texts(metric, shown)
        values = {"question": record.question, "metric": definition, "steps": steps}
        if not shown:
            return fill(entry.prompt, answer=record.output, **values)
        reference = _references(record)
        if entry.reference_prompt is not None:
            return fill(entry.reference_prompt, answer=record.output, reference=reference, target=reference,
                        **values)
        block = fill(REFERENCE_BLOCK[self.language], reference=reference)
        return fill(entry.prompt, answer=record.output + block, **values)

    def _conversation_prompt(self, entry: PromptEntry, record: Record, metric: str, k: int) -> str:
        """Turn k: the setup and turns 1..k-1 as the judge's context, turn k's message and reply rated."""
        if entry.conversation_prompt is None:
            raise InputError(_no_conversation_prompt(self.prompts, entry, record))
        turn = record.turns[k - 1]
        shown = self._shows(record, metric)
        definition, steps = entry.texts(metric, shown)
        values = {"conversation": render_history(record.instruction, record.turns[:k - 1], self.language),
                  "question": turn.user, "metric": definition, "steps": steps}
        if not shown:
            return fill(entry.conversation_prompt, answer=turn.assistant, **values)
        reference = references_text(turn.references)
        if entry.conversation_reference_prompt is not None:
            return fill(entry.conversation_reference_prompt, answer=turn.assistant, reference=reference,
                        target=reference, **values)
        block = fill(REFERENCE_BLOCK[self.language], reference=reference)
        return fill(entry.conversation_prompt, answer=turn.assistant + block, **values)

    def _request(self, entry: PromptEntry, record: Record, metric: str, turn: int | None = None) -> JudgeRequest:
        user = self.build_prompt(entry, record, metric, turn)
        if self.mode == "logprobs":
            return JudgeRequest.chat(self._system(entry), user, max_tokens=1, temperature=0.0,
                                     top_logprobs=self.top_logprobs)
        return JudgeRequest.chat(self._system(entry), user, max_tokens=self.max_tokens, temperature=0.0)

    def _check(self, records: Sequence[Record], per_record: list[list[str]]) -> None:
        problems: list[str] = []
        seen: set[tuple[str, str]] = set()
        for record, metrics in zip(records, per_record):
            for m in self.prompts.missing_metrics(record.category, metrics):
                if (record.category, m) not in seen:
                    seen.add((record.category, m))
                    problems.append(f'{self.prompts.path}: no definition and CoT steps for metric "{m}"'
                                    f' of category "{record.category}"')
        for record, metrics in zip(records, per_record):
            entry = self.prompts.entry_for(record.category) if record.turns and metrics else None
            if entry is not None and entry.conversation_prompt is None and (record.category, "") not in seen:
                seen.add((record.category, ""))
                problems.append(_no_conversation_prompt(self.prompts, entry, record))
        use = self._call_use
        shown_to = [(r, ms) for r, ms in zip(records, per_record)
                    if use is not None and any(use.rating(r.category, m) for m in ms)]
        lacking = [r.id for r, ms in shown_to if not r.turns and not any(t.strip() for t in r.targets)]
        if lacking:
            shown = ", ".join(lacking[:10]) + (f" and {len(lacking) - 10} more" if len(lacking) > 10 else "")
            problems.append(f"rating with reference: record(s) {shown} have no target answer")
        problems.extend(turns_without_reference([r for r, ms in shown_to if r.turns], "rating with reference"))
        if problems:
            raise InputError("\n".join(problems))

    # -- running ----------------------------------------------------------------------------

    def rate(self, records: Sequence[Record], metrics: Sequence[str] | Mapping[str, Sequence[str]],
             progress: ProgressFn | None = None, *, per_record: Sequence[Sequence[str]] | None = None
             ) -> list[ItemScores]:
        """One ItemScores per record. `per_record`: each record's own metrics (default: `metrics`
        for its category); a record with none gets no request and an empty ItemScores."""
        if per_record is None:
            per_record = [self._metrics_for(r.category, metrics) for r in records]
        else:
            per_record = [list(ms) for ms in per_record]
            if len(per_record) != len(records):
                raise ValueError(f"rating: {len(per_record)} metric lists for {len(records)} records")
        self._call_use = self.reference_use(records, per_record)
        try:
            return self._rate(records, per_record, progress)
        finally:
            self._call_use = None

    def _rate(self, records: Sequence[Record], per_record: list[list[str]], progress: ProgressFn | None
              ) -> list[ItemScores]:
        self._check(records, per_record)
        jobs = self._jobs(records, per_record)
        completions = self._complete(records, per_record, jobs, progress)
        out = [ItemScores() for _ in records]
        for (i, metric, k, entry, request), comp in zip(jobs, completions):
            key = metric if k is None else turn_key(metric, k)
            self._score(out[i], metric, entry, request, comp, _shown(records[i], k), key=key)
        for record, ms, item in zip(records, per_record, out):
            if record.turns:
                for m in ms:
                    whole_conversation(item, m, len(record.turns))
        return out

    def _jobs(self, records: Sequence[Record], per_record: list[list[str]]
              ) -> list[tuple[int, str, int | None, PromptEntry, JudgeRequest]]:
        jobs: list[tuple[int, str, int | None, PromptEntry, JudgeRequest]] = []
        for i, (record, ms) in enumerate(zip(records, per_record)):
            entry = self.prompts.entry_for(record.category)
            for m in ms:
                for k in range(1, len(record.turns) + 1) if record.turns else (None,):
                    jobs.append((i, m, k, entry, self._request(entry, record, m, k)))
        return jobs

    def _complete(self, records: Sequence[Record], per_record: list[list[str]],
                  jobs: list[tuple[int, str, int | None, PromptEntry, JudgeRequest]],
                  progress: ProgressFn | None) -> list[Completion]:
        """The completions of `jobs`; in `auto` mode against an HTTP judge, the first request goes alone
        and decides the mode (see the module docstring); `jobs` is rebuilt in place when it changes."""
        requests = [job[4] for job in jobs]
        if self.requested_mode != "auto" or self.mode != "logprobs" or not requests \
                or not capabilities(self.backend).http:
            return complete_all(self.backend, requests, progress)
        first = min(requests, key=_sort_key)
        got = complete_all(self.backend, [first])[0]
        if got.ok and not got.top_logprobs:
            key = self._judge_key()
            if key not in _WITHOUT_LOGPROBS:
                _WITHOUT_LOGPROBS.add(key)
                self.log(f"judge {self.backend.model}: the server returned no log-probabilities; mode auto rates "
                         "with a parsed reply instead (as mode: generate) for the rest of this run")
            self.mode = "generate"
            jobs[:] = self._jobs(records, per_record)
            return complete_all(self.backend, [job[4] for job in jobs], progress)
        rest = complete_all(self.backend, [r for r in requests if r != first], progress)
        by_request = {r: c for r, c in zip((r for r in requests if r != first), rest)}
        by_request[first] = got
        return [by_request[r] for r in requests]

    def _score(self, item: ItemScores, metric: str, entry: PromptEntry, request: JudgeRequest,
               comp: Completion, shown: Sequence[str] = (), key: str | None = None) -> None:
        """Parse one reply into `item` under `key` (the metric, or the metric of one turn)."""
        key = key or metric
        details: dict[str, Any] = {"mode": self.mode, "request": request.key(), "prompt_category": entry.category,
                                   "cached": comp.cached}
        if entry.fallback:
            details["fallback_from"] = entry.requested
        item.details[key] = details
        if not comp.ok:
            details["raw"] = comp.error
            item.invalid[key] = Invalid(reason=f"judge call failed: {comp.error}", raw=comp.error or "")
            return
        if self.mode == "logprobs":
            top = comp.top_logprobs[0] if comp.top_logprobs else {}
            shown = {t: round(math.exp(lp), 6) for t, lp in sorted(top.items(), key=lambda kv: -kv[1])}
            details["raw"] = shown
            result = score_from_top_logprobs(top, low=SCALE[0], high=SCALE[1], min_mass=self.min_mass)
            details["score_token_mass"] = result.mass
            if result.ok:
                item.scores[key] = result.value
            else:
                reason = result.reason if top else NO_LOGPROBS
                item.invalid[key] = Invalid(reason=reason, raw=repr(shown))
            return
        details["raw"] = comp.text
        labels = metric_labels(metric, entry.metrics.get(metric, ""))
        loop = loop_in(comp.text, comp.finish_reason)  # a looping reply is read up to its loop's first copy
        parsed = parse_rating(loop.before(comp.text) if loop else comp.text, low=SCALE[0], high=SCALE[1],
                              labels=labels, quoted=shown)
        if loop:
            details["repetition"] = loop.describe()
        if parsed.ok:
            item.scores[key] = parsed.value
            details["parsed_by"] = parsed.rule
        else:
            reason = repetition_reason(loop, comp.finish_reason, "score") if loop else parsed.reason
            item.invalid[key] = Invalid(reason=reason, raw=comp.text)


def whole_conversation(item: ItemScores, metric: str, n_turns: int) -> None:
    """`metric` of a conversation from its turns' scores (WHOLE_RULE): a conversation whose second
    turn could not be judged has no whole score; the mean of the other turns would be another quantity."""
    keys = [turn_key(metric, k) for k in range(1, n_turns + 1)]
    bad = [(k, item.invalid[key]) for k, key in enumerate(keys, 1) if key in item.invalid]
    item.details[metric] = {"turns": n_turns, "aggregation": WHOLE_RULE, "derived": True}
    if bad:
        k, inv = bad[0]
        more = f" (and {len(bad) - 1} more turn(s))" if len(bad) > 1 else ""
        item.invalid[metric] = Invalid(reason=f"turn {k} of {n_turns} is invalid{more}: {inv.reason}", raw=inv.raw)
        return
    item.scores[metric] = sum(item.scores[key] for key in keys) / n_turns


def turns_without_reference(records: Sequence[Record], what: str) -> list[str]:
    """One problem per conversation with a turn that has no reference: judging with a reference means
    every turn's judge sees one (give `target` as a list with one entry per turn)."""
    out = []
    for r in records:
        missing = [k for k, t in enumerate(r.turns, 1) if not any(x.strip() for x in t.references)]
        if missing:
            out.append(f"{what}: record {r.id}: turn(s) {', '.join(map(str, missing))} of {len(r.turns)} have no "
                       "reference; give the record's target as a list with one reference per turn")
    return out


def _no_conversation_prompt(prompts: EvaluationPrompts, entry: PromptEntry, record: Record) -> str:
    via = f' (category "{record.category}" falls back to it)' if entry.fallback else ""
    return (f'{prompts.path}: entry "{entry.category}"{via} has no "conversation_prompt", and category '
            f'"{record.category}" holds conversations (record {record.id}: {len(record.turns)} turns); add a '
            "conversation_prompt with {conversation} {question} {answer} {metric} {steps} to that entry "
            "(see evaluate/prompts/README.md), or leave prompts: out for the project's own")


def _shown(record: Record, turn: int | None = None) -> tuple[str, ...]:
    """The texts a rating prompt shows the judge: a score line found in them is a quotation."""
    if record.turns:
        k = turn or len(record.turns)
        seen: list[Turn] = list(record.turns[:k])
        return (record.instruction, *(t.user for t in seen), *(t.assistant for t in seen),
                *record.turns[k - 1].references)
    return (record.output, record.instruction, record.input, *record.targets)


def rate(backend: Backend, prompts: EvaluationPrompts, records: Sequence[Record],
         metrics: Sequence[str] | Mapping[str, Sequence[str]], *, mode: str = "auto",
         with_reference: bool | str | ReferenceUse = False, language: str = "en",
         progress: ProgressFn | None = None,
         **options: Any) -> list[ItemScores]:
    """Rate every record on its metrics with one batched judge call; see the module docstring.
    `options` go to RatingJudge (system_prompt, format_instruction, min_mass, max_tokens, top_logprobs)."""
    judge = RatingJudge(backend, prompts, mode=mode, with_reference=with_reference, language=language, **options)
    return judge.rate(records, metrics, progress)
