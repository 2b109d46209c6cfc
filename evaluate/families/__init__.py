"""Evaluator families: the keys of a category's config entry.

ColossalAI's schema has `GPT`, `Metrics` and `UniEval`; this project adds `RepEval` and
`SAGEval`. Each family
- validates the names a category lists, before anything expensive runs (`validate`),
- says how much work a run would do, for --dry-run (`plan`),
- scores one model's records of one category (`run`), returning one ItemScores per record
  and a signature per score name (how each number was made).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Sequence

from ..scores import ItemScores

if TYPE_CHECKING:
    from ..config import RunConfig
    from ..records import Record

FAMILIES: tuple[str, ...] = ("GPT", "Metrics", "UniEval", "RepEval", "SAGEval")


@dataclass
class FamilyOutput:
    items: list[ItemScores]
    signatures: dict[str, dict[str, Any]] = field(default_factory=dict)  # score name -> signature
    corpus: dict[str, float] = field(default_factory=dict)  # score name -> corpus-level value, where defined


class Family:
    name: str = ""
    model: str | None = None  # the model whose records `run` is scoring; set by the runner

    def validate(self, cfg: "RunConfig", category: str, names: list[str], where: str, *, used: bool) -> list[str]:
        """Problems with `names` for `category` (each message starts with `where`).

        `used` says whether any answer record has this category: checks that depend on the data
        (a prompt entry, a checkpoint path) only matter then; unknown names are errors always."""
        return []

    def plan(self, cfg: "RunConfig", category: str, names: list[str], n_items: int) -> dict[str, int]:
        """What a run would do for one model's `n_items` records, e.g. {"scores": 30, "judge_calls": 0}."""
        return {"scores": n_items * len(names)}

    def run(self, cfg: "RunConfig", category: str, names: list[str], records: Sequence["Record"]) -> FamilyOutput:
        raise NotImplementedError

    def validate_run(self, cfg: "RunConfig", sets: Sequence[Any], categories: dict[str, dict[str, list[str]]]) -> list[str]:
        """Problems that involve the whole run (all models), e.g. a battle prompt file."""
        return []

    def plan_run(self, cfg: "RunConfig", sets: Sequence[Any], categories: dict[str, dict[str, list[str]]]) -> dict[str, int]:
        """Run-wide work beyond the per-category `plan`, e.g. battle calls."""
        return {}

    def run_all(self, cfg: "RunConfig", sets: Sequence[Any], categories: dict[str, dict[str, list[str]]],
                save: Any, log: Any) -> dict[str, Any] | None:
        """Run-wide work after every model was scored (battles, summaries); returns files written."""
        return None

    def usage(self) -> dict[str, Any]:
        """Judge usage (calls, tokens, cost) for the manifest."""
        return {}

    def close(self) -> None:
        """Free models or connections held between categories."""


def get_family(name: str) -> Family:
    if name == "Metrics":
        from .metrics import MetricsFamily

        return MetricsFamily()
    if name == "GPT":
        from .gpt import GPTFamily

        return GPTFamily()
    if name == "RepEval":
        from .repeval import RepEvalFamily

        return RepEvalFamily()
    if name == "SAGEval":
        from .sageval import SAGEvalFamily

        return SAGEvalFamily()
    if name == "UniEval":
        from .unieval import UniEvalFamily

        return UniEvalFamily()
    raise KeyError(name)
