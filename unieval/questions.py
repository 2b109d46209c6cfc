"""Boolean-question inputs, independent of any model.

`build_inputs` turns items into the exact texts a UniEval checkpoint reads, one per scored
unit (the whole output, or each of its sentences), each tagged with the index of its item.
Kept model-free so the same questions can be asked to another model (e.g. a causal LM) and
the answers put back together with `unieval.scoring.combine`.
"""

from __future__ import annotations

from typing import Sequence

from evaluate.core.errors import InputError

from .dimensions import ARGUMENT, Dimension, field_meaning, get_dimension
from .sentences import split_sentences

SEPARATOR = " </s> "


def render(spec: Dimension, values: dict[str, str]) -> str:
    """'question: Q </s> label: value </s> label: value', the release's input layout."""
    parts = [f"question: {spec.question}"]
    parts += [f"{label}: {values[field]}" for label, field in spec.parts]
    return SEPARATOR.join(parts)


def render_for_lm(spec: Dimension, values: dict[str, str], instruction: str) -> str:
    """The same question for a causal LM: the context fields first (document, dialogue history,
    fact, reference; in the release's order), then the scored text, then the question. Ending on
    the question makes the next token the answer; putting the long, shared fields first lets a
    backend that reuses a cached prompt prefix compute a document once for all its units."""
    parts = [f"{label}: {values[field]}" for label, field in spec.parts if field != "output"]
    parts += [f"{label}: {values[field]}" for label, field in spec.parts if field == "output"]
    parts.append(f"question: {spec.question}\n{instruction}")
    return "\n\n".join(parts)


def check_inputs(
    spec: Dimension,
    outputs: Sequence[str],
    sources: Sequence[str] | None = None,
    references: Sequence[str] | None = None,
    contexts: Sequence[str] | None = None,
) -> dict[str, Sequence[str]]:
    """The columns `spec` needs, checked: present, same length as `outputs`, strings only.

    Runs before any model work so that a missing field fails at once, naming the dimension.
    """
    given = {"output": outputs, "source": sources, "reference": references, "context": contexts}
    columns: dict[str, Sequence[str]] = {}
    for field in ("output", *spec.needs):
        column = given[field]
        arg = ARGUMENT[field]
        if column is None:
            raise InputError(f"UniEval {spec.full_name} needs `{arg}` ({field_meaning(spec.task, field)}), "
                             f"but none were given")
        if isinstance(column, str):
            raise InputError(f"UniEval {spec.full_name}: `{arg}` must be a list of strings, one per item, "
                             f"not a single string")
        if len(column) != len(outputs):
            raise InputError(f"UniEval {spec.full_name}: {len(column)} {arg} for {len(outputs)} outputs "
                             f"(expected one per output)")
        for i, value in enumerate(column):
            if not isinstance(value, str):
                raise InputError(f"UniEval {spec.full_name}: {arg}[{i}] is {type(value).__name__}, "
                                 f"expected a string")
        columns[field] = column
    return columns


def output_units(spec: Dimension, output: str) -> list[str]:
    """The pieces of one output that get a question each.

    A sentence-level dimension whose output has no sentence (blank text) still gets one unit,
    the output as it is, so every item has a score and no average divides by zero.
    """
    if spec.unit == "sentence":
        return split_sentences(output) or [output]
    return [output]


def build_inputs(
    task: str,
    dimension: str,
    outputs: Sequence[str],
    sources: Sequence[str] | None = None,
    references: Sequence[str] | None = None,
    contexts: Sequence[str] | None = None,
    *,
    lm_instruction: str | None = None,
) -> list[tuple[str, int]]:
    """[(question text, item index), ...] in item order, one entry per scored unit.

    With `lm_instruction`, the texts are laid out for a causal LM (`render_for_lm`) instead of
    the checkpoint's T5 layout.

    `sources` is the source document (summarization, fact) or the dialogue history (dialogue);
    `contexts` the fact a dialogue response should use. Raises InputError for an unknown
    task/dimension or a missing input before building anything.
    """
    spec = get_dimension(task, dimension)
    columns = check_inputs(spec, outputs, sources, references, contexts)
    inputs: list[tuple[str, int]] = []
    for i, output in enumerate(outputs):
        values = {field: columns[field][i] for field in spec.needs}
        for unit in output_units(spec, output):
            filled = {**values, "output": unit}
            text = render(spec, filled) if lm_instruction is None else render_for_lm(spec, filled, lm_instruction)
            inputs.append((text, i))
    return inputs
