"""Answer and target files: ColossalAI's records `{category, instruction, input, output, target, id}`,
and conversations.

A file is a JSON list or JSON Lines (one object per line). Every problem names the file and the
record (its id, or its position when the id itself is the problem), and for a conversation the turn.

A conversation record carries, instead of `input` and `output`, one of (never both):
- `turns`: `[{"user": text, "assistant": text}, ...]`, one object per round;
- `messages`: OpenAI's chat list `[{"role": "system"|"user"|"assistant", "content": text}, ...]`:
  an optional system message first, then user and assistant strictly alternating, user first.
Its `instruction` (optional) is the setup shown before the first turn; a system message fills it.
Every turn needs a non-empty user message and, in an answer file, a non-empty reply: a missing,
extra or empty turn would make the judge grade a conversation that never happened. In a target
file the replies may be left out (they are not read). `target` is the last reply's reference (a
string), or a list with one entry per turn, each a string, a list of alternatives or null.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.errors import ConfigError, InputError
from ..core.records import Record, Turn
from ..core.io import parse_jsonl, read_text

REQUIRED = {"category": str, "instruction": str, "output": str}
MAX_LISTED = 10


@dataclass
class AnswerSet:
    """One model's records, in file order, plus what loading noticed."""

    name: str
    path: Path
    records: list[Record]
    empty_output_ids: list[str] = field(default_factory=list)
    missing_ids: list[str] = field(default_factory=list)  # `missing: common`: ids this model did not answer

    def by_id(self) -> dict[str, Record]:
        return {r.id: r for r in self.records}


def read_records_raw(path: Path) -> list[tuple[str, Any]]:
    """(location, object) pairs from a JSON list or a JSONL file; location is "record 3" or "line 7"."""
    text = read_text(path, "answer")
    stripped = text.lstrip()
    if not stripped:
        raise InputError(f"{path}: the file is empty; expected a JSON list of records or JSON Lines")
    if stripped[0] == "[":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InputError(f"{path}: not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
        return [(f"record {i}", obj) for i, obj in enumerate(data)]
    if stripped[0] == "{" and path.suffix.lower() == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError:
            data = None
        if isinstance(data, dict):
            raise InputError(f"{path}: expected a JSON list of records (or JSON Lines), found a single object")
    hint = "; expected one record per line (JSON Lines) or a JSON list"
    return [(f"line {n}", obj) for n, obj in parse_jsonl(text, path, hint)]


def _record_id(value: Any) -> str | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str) and value.strip():
        return value
    return None


def _targets(value: Any) -> tuple[str, ...] | None:
    """A string or a list of strings as a tuple of the non-blank ones; None when it is neither."""
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,) if value.strip() else ()
    if isinstance(value, list) and all(isinstance(t, str) for t in value):
        return tuple(t for t in value if t.strip())
    return None


def _encodable(text: str) -> str | None:
    """Why `text` cannot be written as UTF-8 (a lone surrogate), or None."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return (f"a lone surrogate {text[exc.start]!r} at character {exc.start} is not valid Unicode text "
                "(an unpaired \\uD800-\\uDFFF escape)")
    return None


TURN_KEYS = ("user", "assistant")
ROLES = ("system", "user", "assistant")


def _turns_shape(value: Any, label: str, need_output: bool) -> tuple[list[tuple[str, str | None]], list[str]]:
    """(user, reply) pairs of a `turns` list; the reply is None where a target file leaves it out."""
    if not isinstance(value, list) or not value:
        return [], [f'{label}: field "turns" must be a non-empty list of {{"user": ..., "assistant": ...}} objects']
    pairs: list[tuple[str, str | None]] = []
    problems: list[str] = []
    for i, turn in enumerate(value):
        where = f"{label}: turns[{i}] (turn {i + 1})"
        if not isinstance(turn, dict):
            problems.append(f'{where}: expected an object {{"user": ..., "assistant": ...}}, got {type(turn).__name__}')
            continue
        unknown = sorted(set(turn) - set(TURN_KEYS))
        if unknown:
            problems.append(f"{where}: unknown key(s) {', '.join(map(repr, unknown))} (a turn has "
                            f'"user" and "assistant"; references go in the record\'s "target")')
        user, reply = turn.get("user"), turn.get("assistant")
        if "user" not in turn:
            problems.append(f'{where}: missing "user" (the user\'s message of this turn)')
        elif not isinstance(user, str):
            problems.append(f'{where}: "user" must be a string, got {type(user).__name__}')
        if "assistant" not in turn:
            if need_output:
                problems.append(f'{where}: missing "assistant" (the model\'s reply to this turn)')
        elif not isinstance(reply, str):
            problems.append(f'{where}: "assistant" must be a string, got {type(reply).__name__}')
        if isinstance(user, str) and (isinstance(reply, str) or ("assistant" not in turn and not need_output)):
            pairs.append((user, reply if isinstance(reply, str) else None))
    return pairs, problems


def _messages_shape(value: Any, label: str, need_output: bool) -> tuple[str, list[tuple[str, str | None]], list[str]]:
    """(system text, (user, reply) pairs, problems) of an OpenAI-style `messages` list."""
    if not isinstance(value, list) or not value:
        return "", [], [f'{label}: field "messages" must be a non-empty list of {{"role": ..., "content": ...}} objects']
    system: list[str] = []
    pairs: list[tuple[str, str | None]] = []
    problems: list[str] = []
    expect = "user"  # the role the next message must have (after the leading system messages)
    for i, msg in enumerate(value):
        where = f"{label}: messages[{i}] (turn {len(pairs) + (expect == 'user')})"
        if not isinstance(msg, dict):
            problems.append(f'{where}: expected an object {{"role": ..., "content": ...}}, got {type(msg).__name__}')
            return "", pairs, problems
        role, content = msg.get("role"), msg.get("content")
        if msg.get("tool_calls") or msg.get("function_call") or role in ("tool", "function"):
            what = "a tool call (tool_calls)" if role not in ("tool", "function") else f'a "{role}" message'
            problems.append(f"{where}: {what}: tool calls and tool messages are not supported; give each turn as "
                            "user text and the assistant's final text reply (drop the tool_calls and tool "
                            "messages, or fold the tool's result into the assistant's reply)")
            return "", pairs, problems
        if role not in ROLES:
            problems.append(f"{where}: role {role!r} is not read (expected one of {', '.join(ROLES)})")
            return "", pairs, problems
        if not isinstance(content, str):
            problems.append(f'{where}: "content" must be a string, got '
                            f"{'nothing' if content is None else type(content).__name__}")
            return "", pairs, problems
        if role == "system":
            if pairs or expect != "user":
                problems.append(f"{where}: a system message after the conversation started; only leading "
                                "system messages are read (as the record's setup)")
                return "", pairs, problems
            system.append(content)
        elif role != expect:
            what = ("more assistant than user turns: the conversation starts with an assistant message"
                    if role == "assistant" and not pairs else
                    "two assistant messages in a row (more assistant than user turns)" if role == "assistant" else
                    "two user messages in a row: the turn before has no assistant reply")
            problems.append(f"{where}: {what}; expected user and assistant messages to alternate, user first")
            return "", pairs, problems
        elif role == "user":
            pairs.append((content, None))
            expect = "assistant"
        else:
            pairs[-1] = (pairs[-1][0], content)
            expect = "user"
    if not pairs:
        problems.append(f"{label}: messages: no user message")
    elif expect == "assistant" and need_output:
        problems.append(f"{label}: messages[{len(value) - 1}] (turn {len(pairs)}): the last user message has no "
                        "assistant reply")
    return "\n\n".join(system), pairs, problems


def _conversation(obj: dict[str, Any], label: str, need_output: bool) -> tuple[str, tuple[Turn, ...], list[str]]:
    """The setup text and the turns of a conversation record, or the problems with them."""
    problems: list[str] = []
    if "turns" in obj and "messages" in obj:
        return "", (), [f'{label}: both "turns" and "messages"; give the conversation once']
    for key in ("output", "input"):
        if key in obj and obj[key] not in (None, ""):
            problems.append(f'{label}: field "{key}" beside a conversation; a conversation\'s '
                            + ("replies are its assistant turns" if key == "output" else
                               'setup goes in "instruction" and its messages in the turns'))
    instruction = obj.get("instruction", "")
    if instruction is None:
        instruction = ""
    if not isinstance(instruction, str):
        problems.append(f'{label}: field "instruction" must be a string, got {type(instruction).__name__}')
        instruction = ""
    if "turns" in obj:
        pairs, probs = _turns_shape(obj["turns"], label, need_output)
        key = "turns"
    else:
        system, pairs, probs = _messages_shape(obj["messages"], label, need_output)
        key = "messages"
        if system and instruction:
            probs.append(f'{label}: both "instruction" and a system message; give the setup once')
        instruction = instruction or system
    problems.extend(probs)
    for k, (user, reply) in enumerate(pairs, 1):
        where = f"{label}: {key}: turn {k}"
        if not user.strip():
            problems.append(f"{where}: the user message is empty")
        if reply is not None and not reply.strip():
            problems.append(f"{where}: the assistant reply is empty; a conversation's next turns were asked "
                            "after it, so an empty reply is refused (fix the answer file or leave the record out)")
        for role, text in (("user", user), ("assistant", reply or "")):
            bad = _encodable(text)
            if bad:
                problems.append(f"{where}: {role}: {bad}; fix or remove it")
    refs, ref_problems = _turn_targets(obj.get("target"), len(pairs), label)
    problems.extend(ref_problems)
    if problems:
        return instruction, (), problems
    turns = tuple(Turn(user=u, assistant=a or "", references=r) for (u, a), r in zip(pairs, refs))
    return instruction, turns, []


def _turn_targets(value: Any, n_turns: int, label: str) -> tuple[list[tuple[str, ...]], list[str]]:
    """Per-turn references: a string is the last turn's; a list has one entry per turn."""
    empty: list[tuple[str, ...]] = [() for _ in range(n_turns)]
    if value is None or isinstance(value, str):
        last = _targets(value) or ()
        return empty[:-1] + [last] if n_turns else empty, []
    if not isinstance(value, list):
        return empty, [f'{label}: field "target" must be a string (the last turn\'s reference) or a list with '
                       f"one entry per turn, got {type(value).__name__}"]
    if len(value) != n_turns:
        return empty, [f'{label}: field "target" has {len(value)} entries for {n_turns} turns; a list target of a '
                       "conversation has one entry per turn (a string, a list of alternatives, or null)"]
    refs, problems = [], []
    for k, entry in enumerate(value, 1):
        got = _targets(entry)
        if got is None:
            problems.append(f'{label}: target[{k - 1}] (turn {k}): expected a string, a list of strings or null')
            got = ()
        refs.append(got)
    return refs, problems


def parse_record(obj: Any, where: str, *, need_output: bool) -> tuple[Record | None, list[str]]:
    """One record, or the problems with it (each prefixed by `where`)."""
    if not isinstance(obj, dict):
        return None, [f"{where}: expected an object with category, instruction, input, output, target, id"]
    rid = _record_id(obj.get("id"))
    label = f'{where} (id {rid})' if rid is not None else where
    problems = []
    if "id" not in obj:
        problems.append(f"{where}: missing field \"id\" (expected an integer or a non-empty string)")
    elif rid is None:
        problems.append(f"{where}: field \"id\" must be an integer or a non-empty string, got {obj.get('id')!r}")
    conversation = "turns" in obj or "messages" in obj
    for key, typ in REQUIRED.items():
        if conversation and key != "category":
            continue
        if key == "output" and not need_output and key not in obj:
            continue
        if key not in obj:
            problems.append(f'{label}: missing field "{key}" (expected a string)')
        elif not isinstance(obj[key], typ):
            problems.append(f'{label}: field "{key}" must be a string, got {type(obj[key]).__name__}')
    if isinstance(obj.get("category"), str) and not obj["category"].strip():
        problems.append(f'{label}: field "category" is empty')
    if conversation:
        instruction, turns, probs = _conversation(obj, label, need_output)
        problems.extend(probs)
        if problems:
            return None, problems
        extra = {k: v for k, v in obj.items() if k not in ("id", "category", "instruction", "target", "turns",
                                                            "messages", "input", "output")}
        return Record(id=rid, category=obj["category"], instruction=instruction, output=turns[-1].assistant,
                      targets=turns[-1].references, extra=extra, turns=turns), []
    inp = obj.get("input", "")
    if inp is None:
        inp = ""
    if not isinstance(inp, str):
        problems.append(f'{label}: field "input" must be a string, got {type(inp).__name__}')
    targets = _targets(obj.get("target", ""))
    if targets is None:
        problems.append(f'{label}: field "target" must be a string or a list of strings')
        targets = ()
    if problems:
        return None, problems
    extra = {k: v for k, v in obj.items() if k not in ("id", "category", "instruction", "input", "output", "target")}
    return Record(id=rid, category=obj["category"], instruction=obj["instruction"], input=inp,
                  output=obj.get("output", ""), targets=targets, extra=extra), []


def load_records(path: Path, *, need_output: bool = True) -> list[Record]:
    """All records of one file; raises ConfigError with every problem found (file and id named)."""
    problems: list[str] = []
    records: list[Record] = []
    for where, obj in read_records_raw(path):
        rec, probs = parse_record(obj, where, need_output=need_output)
        problems.extend(probs)
        if rec is not None:
            records.append(rec)
    dupes = [rid for rid, n in Counter(r.id for r in records).items() if n > 1]
    if dupes:
        problems.append(f"duplicate ids: {_list(dupes)}")
    if not records and not problems:
        problems.append("no records")
    if problems:
        raise ConfigError(problems, str(path))
    return records


def _list(ids: list[str]) -> str:
    shown = ", ".join(ids[:MAX_LISTED])
    return shown + (f" and {len(ids) - MAX_LISTED} more" if len(ids) > MAX_LISTED else "")


def load_entries(entries: list[Any], target_file: Path | None, missing: str = "refuse") -> list[AnswerSet]:
    """The config's `answers:` entries loaded: another harness's output as its reader's records
    (evaluate.harness; the entries expanded there, one per model), else this tool's own records."""
    from ..harness.entries import records_for

    return load_answer_sets([(a.name, a.path, records_for(a)) for a in entries], target_file, missing)


def load_answer_sets(answers: list[tuple[str, Path]] | list[tuple[str, Path, list[Record] | None]],
                     target_file: Path | None, missing: str = "refuse") -> list[AnswerSet]:
    """Load each model's answers and merge the targets in, checking the files agree.

    The target file (when given) is the source of the references; ids and categories must agree
    between it and every answer file. Without a target file each record's own `target` is used.
    `missing`: "refuse" (an id some model did not answer is an error) or "common" (every model keeps
    only the ids every model answered; each set names the ids it did not answer in `missing_ids`).
    """
    common = missing == "common"
    targets: dict[str, Record] | None = None
    if target_file is not None:
        targets = {r.id: r for r in load_records(target_file, need_output=False)}
    sets: list[AnswerSet] = []
    problems: list[str] = []
    names = [entry[0] for entry in answers]
    dup_names = [n for n, c in Counter(names).items() if c > 1]
    if dup_names:
        raise InputError(f"model names must be unique; repeated: {', '.join(dup_names)}")
    for name, path, *read in answers:  # a third element: the records a harness's reader gave (None: read here)
        records = read[0] if read and read[0] is not None else load_records(path)
        if targets is not None:
            ids = {r.id for r in records}
            missing_here = [i for i in targets if i not in ids]
            extra = [r.id for r in records if r.id not in targets]
            if missing_here and not common:
                problems.append(f"{path}: no answer for ids in the target file {target_file}: {_list(missing_here)}")
            if extra:
                problems.append(f"{path}: ids not in the target file {target_file}: {_list(extra)}")
            wrong_cat = [f"{r.id} ({r.category!r} vs {targets[r.id].category!r})" for r in records
                         if r.id in targets and r.category != targets[r.id].category]
            if wrong_cat:
                problems.append(f"{path}: category differs from the target file for ids: {_list(wrong_cat)}")
            problems.extend(_conversation_mismatches(path, records, target_file, targets))
            records = [_with_targets(r, targets[r.id]) for r in records if r.id in targets]
        empty = [r.id for r in records if not r.output.strip()]
        sets.append(AnswerSet(name=name, path=path, records=records, empty_output_ids=empty))
    if targets is None and len(sets) > 1:
        first = {r.id: r.category for r in sets[0].records}
        for s in sets[1:]:
            other = {r.id: r.category for r in s.records}
            if set(other) != set(first) and not common:
                diff = sorted(set(other) ^ set(first))
                problems.append(f"{s.path}: ids differ from {sets[0].path}: {_list(diff)}")
            wrong = [i for i in other if i in first and other[i] != first[i]]
            if wrong:
                problems.append(f"{s.path}: category differs from {sets[0].path} for ids: {_list(wrong)}")
            problems.extend(_conversation_mismatches(s.path, s.records, sets[0].path, sets[0].by_id()))
    if problems:
        raise ConfigError(problems)
    if common:
        _keep_common(sets, list(targets) if targets is not None else None)
    check_encodable(sets)
    return sets


def missing_lines(sets: list[AnswerSet]) -> list[str]:
    """`missing: common`, in words: per model the ids it did not answer, and what was scored."""
    if not any(s.missing_ids for s in sets):
        return []
    n = len(sets[0].records) if sets else 0
    lines = [f"missing: common: {s.name} did not answer {len(s.missing_ids)} ids: {_list(s.missing_ids)}"
             for s in sets if s.missing_ids]
    return lines + [f"missing: common: every model is scored on the {n} items all {len(sets)} models answered; "
                    "the ids above are left out for every model"]


def _keep_common(sets: list[AnswerSet], all_ids: list[str] | None) -> None:
    """`missing: common`: each set keeps the ids every set answered, in its own order, and names the
    ids it did not answer (of the target file's, else of every set's). Never an empty run."""
    if all_ids is None:
        all_ids = list(dict.fromkeys(r.id for s in sets for r in s.records))
    answered = [{r.id for r in s.records} for s in sets]
    keep = set.intersection(*answered) if answered else set()
    if not keep:
        raise InputError("missing: common: no item was answered by every model ("
                         + "; ".join(f"{s.path}: {len(a)} ids" for s, a in zip(sets, answered)) + ")")
    for s, ids in zip(sets, answered):
        s.missing_ids = [i for i in all_ids if i not in ids]
        s.records = [r for r in s.records if r.id in keep]
        s.empty_output_ids = [i for i in s.empty_output_ids if i in keep]


def check_encodable(sets: list[AnswerSet]) -> None:
    """Refuse text that cannot be written as UTF-8 (a lone surrogate such as a JSON "\\ud800"): it
    would be read and scored, then fail every file written from it (results, report), after the
    judge was paid. (A conversation's turns are checked as they are parsed.)"""
    problems = []
    for s in sets:
        for r in s.records:
            for fld, text in (("instruction", r.instruction), ("input", r.input), ("output", r.output),
                              *((f"target[{i}]", t) for i, t in enumerate(r.targets))):
                bad = _encodable(text)
                if bad:
                    problems.append(f"{s.path}: record {r.id}: {fld}: {bad}; fix or remove it")
                    break
    if problems:
        more = f" (and {len(problems) - 10} more)" if len(problems) > 10 else ""
        raise InputError("; ".join(problems[:10]) + more)


def _conversation_mismatches(path: Path, records: list[Record], other_path: Path | None,
                             others: dict[str, Record]) -> list[str]:
    """Where a conversation of `path` is not the same conversation in `other_path`: one of them is a
    conversation and the other is not, or the setup, the number of turns or a user message differ.
    Models are compared on the same user turns; their own replies may differ."""
    out = []
    for r in records:
        o = others.get(r.id)
        if o is None or not (r.turns or o.turns):
            continue
        where = f"{path}: record {r.id}"
        if bool(r.turns) != bool(o.turns):
            which = "a conversation" if r.turns else "one question and answer"
            out.append(f"{where}: is {which} here but not in {other_path}")
        elif len(r.turns) != len(o.turns):
            out.append(f"{where}: {len(r.turns)} turns here, {len(o.turns)} in {other_path}")
        elif r.instruction != o.instruction:
            out.append(f"{where}: the setup (instruction / system message) differs from {other_path}")
        else:
            k = next((k for k, (a, b) in enumerate(zip(r.turns, o.turns), 1) if a.user != b.user), None)
            if k is not None:
                out.append(f"{where}: turn {k}: the user message differs from {other_path} "
                           f"({r.turns[k - 1].user[:60]!r} vs {o.turns[k - 1].user[:60]!r})")
    return out


def _with_targets(answer: Record, target: Record) -> Record:
    if answer.turns and len(answer.turns) == len(target.turns):  # per turn: the target file's, else the answer's
        turns = tuple(Turn(user=a.user, assistant=a.assistant, references=t.references or a.references)
                      for a, t in zip(answer.turns, target.turns))
        return Record(id=answer.id, category=answer.category, instruction=answer.instruction, output=answer.output,
                      targets=turns[-1].references, extra=answer.extra, turns=turns)
    if answer.turns:  # not the same conversation: reported by _conversation_mismatches
        return answer
    return Record(id=answer.id, category=answer.category, instruction=answer.instruction, input=answer.input,
                  output=answer.output, targets=target.targets or answer.targets, extra=answer.extra)
