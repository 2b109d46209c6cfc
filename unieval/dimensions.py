"""What UniEval can judge: one `Dimension` per (task, dimension) pair, and config-name parsing.

Each dimension is data: the Boolean question the checkpoint was trained on, the labelled
fields that follow it, the inputs it needs, and how an output is cut into scored units and
the unit scores put back together. The questions and field labels are those of the UniEval
release (Zhong et al. 2022); a checkpoint only answers well when they match byte for byte.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from evaluate.core.errors import InputError
from evaluate.core.registry import suggest

Field = Literal["output", "source", "reference", "context"]
Unit = Literal["whole", "sentence"]
Combine = Literal["single", "mean", "sum"]

#: What each input field means, for error messages; `source` depends on the task.
FIELD_MEANING: dict[str, str] = {
    "output": "the text being judged",
    "source": "the source document",
    "reference": "a reference text",
    "context": "the fact, i.e. the knowledge the response should use",
}


def field_meaning(task: str, field: str) -> str:
    """What `field` holds for `task`: in dialogue the source is the dialogue history."""
    if task == "dialogue" and field == "source":
        return "the dialogue history"
    return FIELD_MEANING[field]

#: The plural argument name of `score` / `build_inputs` for each field.
ARGUMENT: dict[str, str] = {
    "output": "outputs",
    "source": "sources",
    "reference": "references",
    "context": "contexts",
}


@dataclass(frozen=True)
class Dimension:
    """One Boolean question.

    `parts` are (label, field) pairs rendered as " </s> label: value" after the question.
    `unit` says whether the output is judged whole or sentence by sentence; `combine` how
    sentence scores make the item's score ("mean" for consistency/fluency, "sum" for dialogue
    engagingness, as in the original evaluator).
    """

    task: str
    name: str
    question: str
    parts: tuple[tuple[str, Field], ...]
    unit: Unit = "whole"
    combine: Combine = "single"

    @property
    def full_name(self) -> str:
        return f"{self.task}-{self.name}"

    @property
    def needs(self) -> tuple[Field, ...]:
        """Input fields besides the output that the question uses."""
        return tuple(f for _, f in self.parts if f != "output")


_SPECS = (
    # Summarization (checkpoint: unieval-sum)
    Dimension("summarization", "coherence", "Is this a coherent summary to the document?",
              (("summary", "output"), ("document", "source"))),
    Dimension("summarization", "consistency", "Is this claim consistent with the document?",
              (("claim", "output"), ("document", "source")), unit="sentence", combine="mean"),
    Dimension("summarization", "fluency", "Is this a fluent paragraph?",
              (("paragraph", "output"),), unit="sentence", combine="mean"),
    Dimension("summarization", "relevance", "Is this summary relevant to the reference?",
              (("summary", "output"), ("reference", "reference"))),
    # Dialogue response generation (checkpoint: unieval-dialog)
    Dimension("dialogue", "naturalness", "Is this a natural response in the dialogue?",
              (("response", "output"),)),
    Dimension("dialogue", "coherence", "Is this a coherent response given the dialogue history?",
              (("response", "output"), ("dialogue history", "source"))),
    Dimension("dialogue", "engagingness",
              "Is this an engaging and informative response according to the dialogue history and fact?",
              (("response", "output"), ("dialogue history", "source"), ("fact", "context")),
              unit="sentence", combine="sum"),
    Dimension("dialogue", "groundedness", "Is this response consistent with knowledge in the fact?",
              (("response", "output"), ("fact", "context"))),
    Dimension("dialogue", "understandability", "Is this an understandable response in the dialogue?",
              (("response", "output"),)),
    # Data-to-text (the release scores it with the unieval-sum checkpoint)
    Dimension("data2text", "naturalness", "Is this a fluent utterance?",
              (("utterance", "output"),)),
    Dimension("data2text", "informativeness", "Is this sentence informative according to the reference?",
              (("sentence", "output"), ("reference", "reference"))),
    # Factual consistency detection (checkpoint: unieval-fact)
    Dimension("fact", "consistency", "Is this claim consistent with the document?",
              (("claim", "output"), ("document", "source")), unit="sentence", combine="mean"),
)

SPECS: dict[tuple[str, str], Dimension] = {(d.task, d.name): d for d in _SPECS}

#: task -> its dimensions, in the order of the UniEval release.
DIMENSIONS: dict[str, tuple[str, ...]] = {}
for _d in _SPECS:
    DIMENSIONS.setdefault(_d.task, ())
    DIMENSIONS[_d.task] += (_d.name,)

#: task -> the Hugging Face repository whose checkpoint the release uses for it.
CHECKPOINTS: dict[str, str] = {
    "summarization": "MingZhong/unieval-sum",
    "dialogue": "MingZhong/unieval-dialog",
    "data2text": "MingZhong/unieval-sum",
    "fact": "MingZhong/unieval-fact",
}

ALL_NAMES: tuple[str, ...] = tuple(d.full_name for d in _SPECS)


def parse_name(name: str) -> tuple[str, str]:
    """"summarization-fluency" -> ("summarization", "fluency"); InputError with the closest names otherwise."""
    text = str(name).strip().lower()
    task, sep, dim = text.partition("-")
    if sep and (task, dim) in SPECS:
        return task, dim
    raise InputError(
        f'unknown UniEval metric "{name}"{suggest(str(name), list(ALL_NAMES))} '
        f"(names are task-dimension; known: {', '.join(ALL_NAMES)})"
    )


def get_dimension(task: str, dimension: str) -> Dimension:
    """The spec for (task, dimension); InputError naming the known ones otherwise."""
    spec = SPECS.get((str(task).lower(), str(dimension).lower()))
    if spec is None:
        if str(task).lower() not in DIMENSIONS:
            raise InputError(f'unknown UniEval task "{task}"{suggest(str(task), list(DIMENSIONS))} '
                             f"(known: {', '.join(DIMENSIONS)})")
        known = DIMENSIONS[str(task).lower()]
        raise InputError(f'UniEval task "{task}" has no dimension "{dimension}"'
                         f"{suggest(str(dimension), list(known))} (known: {', '.join(known)})")
    return spec
