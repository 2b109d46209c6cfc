"""What an evaluator family is, and the registry of families.

A family is the key of a category's config entry (`GPT`, `Metrics`, `UniEval`, `RepEval`,
`SAGEval`, or one of your own). It declares itself in one file:

    @register_family
    class Length(Family):
        name = "Length"                 # the key in a category entry
        options_key = "length"          # its top-level config block (optional)
        Options = LengthOptions         # a dataclass of typed options (evaluate.core.options)
        scale = None                    # (low, high) of its scores, or None when unbounded

        def validate(self, ctx, category, names, where, *, used): ...   # -> problems
        def score(self, ctx, category, names, records): ...             # -> FamilyOutput

The contract is stateless: everything a call needs comes in `ctx` (a `Context`: the config, the
family's parsed options, all records of the run, the model being scored, the judge pool and a
per-run memo the runner owns). No family keeps run data on itself, so the runner, meta-eval and
tests all drive a family the same way.

The hooks, in the order the runner calls them:
- `validate(ctx, category, names, where, used)`: problems with the names a category lists;
  `used` says whether any answer record has this category (file checks only matter then).
- `validate_run(ctx, categories)`: problems that involve the whole run (all models).
- `plan(ctx, category, names, n_items)` / `plan_run(ctx, categories)`: the work, for --dry-run
  (`plan` gets the model's context: `ctx.model` names the model whose `n_items` these are).
- `plan_notes(ctx, categories)`: lines the plan prints and the closing lines repeat (what the
  judge is shown, what a rule decides before it), each `{"text", "scores"}`: the line and the score
  keys it is about (the closing lines show it when they show one of those scores).
- `score(ctx, category, names, records)`: one model's records of one category.
- `score_run(ctx, categories)`: run-wide work after every model was scored (battles); returns
  the files it wrote.

A family says what it does with a conversation record (several user turns, each with the model's
reply) in `conversations`, one line shown in the plan and the README: the GPT family judges each
turn, Metrics scores the last reply. A family that leaves it empty never sees one: a category that
lists it and holds conversations is refused at load, so no family joins the turns silently.

A family that asks the judge says so (`uses_judge(ctx)`): the judge's requests are then collected
for `--dry-run`'s cost, `--export-requests` and batch prefetch without any list of family names.

Two optional declarations let the runner work on units side by side when the judge is an HTTP
server (evaluate/pipeline/schedule.py): `judge_bound(ctx)` says that `score` only asks the judge (it may
then run in a thread beside other units; it must not depend on their order), and
`run_independent = True` that `score_run` reads only the answers, not what `score` produced (it
may then start with the first units instead of after the last).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Sequence

from ..backends.cache_path import judge_cache_path
from ..core.records import Record
from ..core.registry import Registry
from ..core.scores import ItemScores

if TYPE_CHECKING:  # the config is the app layer's; a family only reads it
    from ..backends.base import Backend


@dataclass
class FamilyOutput:
    items: list[ItemScores]
    signatures: dict[str, dict[str, Any]] = field(default_factory=dict)  # score name -> signature
    corpus: dict[str, float] = field(default_factory=dict)  # score name -> corpus-level value, where defined


@dataclass
class NoOptions:
    """A family without a config block."""


@dataclass
class Context:
    """Everything a family call may use. Built by the runner (and by meta-eval) for each family."""

    cfg: Any  # the RunConfig: language, paths (cfg.resolve), judge options, prompt files
    options: Any  # this family's parsed options (its `Options` dataclass)
    sets: Sequence[Any] = ()  # every model's answers (AnswerSet: name, path, records)
    model: str | None = None  # the model `score` is scoring
    judges: Any = None  # the run's JudgePool (None while validating)
    memo: dict[str, Any] = field(default_factory=dict)  # per-run store for loaded models, fitted directions
    save_path: Path | None = None
    save: Any = None  # the run's SaveDir: battles and rankings go through it (add_battle, set_ranking)
    log: Callable[[str], None] = lambda s: None
    family: str = ""

    def for_model(self, model: str) -> "Context":
        return replace(self, model=model)  # the memo dict is shared, not copied

    @property
    def records(self) -> list[Record]:
        """All records of the run, every model's."""
        return [r for s in self.sets for r in s.records]

    def judge(self) -> "Backend":
        """The run's judge, metered for this family (its calls, tokens and cost reach the manifest)."""
        if self.judges is None:
            raise RuntimeError(f"{self.family}: no judge pool in this context")
        return self.judges.for_family(self.family, self.cfg.judge, judge_cache_path(self.cfg),
                                      judge=getattr(self.cfg, "judge_name", None))


class Family:
    name: ClassVar[str] = ""
    options_key: ClassVar[str | None] = None  # the top-level config block of its options, if any
    Options: ClassVar[type] = NoOptions
    scale: ClassVar[tuple[float, float] | None] = None  # the range of its scores (None: unbounded)
    run_independent: ClassVar[bool] = False  # score_run reads only the answers, not score's outputs
    conversations: ClassVar[str] = ""  # what it scores for a conversation; "" refuses categories that hold one
    takes_panel: ClassVar[bool] = False  # asks every judge of a panel (`judge:` as a list); else refused with one

    def uses_judge(self, ctx: Context) -> bool:
        """Whether this family sends requests to the run's judge (with these options)."""
        return False

    def judge_bound(self, ctx: Context) -> bool:
        """Whether `score` only asks the run's judge (safe in a thread beside other units)."""
        return False

    def validate(self, ctx: Context, category: str, names: list[str], where: str, *, used: bool) -> list[str]:
        return []

    def validate_run(self, ctx: Context, categories: dict[str, dict[str, list[str]]]) -> list[str]:
        return []

    def plan(self, ctx: Context, category: str, names: list[str], n_items: int) -> dict[str, int]:
        return {"scores": n_items * len(names)}

    def plan_run(self, ctx: Context, categories: dict[str, dict[str, list[str]]]) -> dict[str, int]:
        return {}

    def plan_notes(self, ctx: Context, categories: dict[str, dict[str, list[str]]]) -> list[dict[str, Any]]:
        return []

    def score(self, ctx: Context, category: str, names: list[str], records: Sequence[Record]) -> FamilyOutput:
        raise NotImplementedError

    def score_run(self, ctx: Context, categories: dict[str, dict[str, list[str]]]) -> dict[str, Any] | None:
        return None


FAMILY_REGISTRY: Registry[type[Family]] = Registry("evaluator family")


def register_family(cls: type[Family]) -> type[Family]:
    """Class decorator: make `cls` a family the config, the CLI and meta-eval know by `cls.name`."""
    if not cls.name:
        raise ValueError(f"{cls.__name__}: a family needs a name")
    existing = FAMILY_REGISTRY.canonical(cls.name)
    if existing is not None:  # re-registering the same class (a module imported twice) is harmless
        FAMILY_REGISTRY._items[existing] = cls
        return cls
    FAMILY_REGISTRY.add(cls.name, cls)
    return cls
