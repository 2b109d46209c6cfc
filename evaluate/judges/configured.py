"""The rating and battle judges a run config asks for, built from a family context (anything with
`cfg`, `memo` and `judge()`): the GPT family, meta-eval, the judge check and the judge-check store
all build them here, so none of them reaches into another's module."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable


def eval_prompt_path(cfg: Any) -> Path:
    return cfg.evaluation_prompt or cfg.default_prompt("evaluation")


def battle_prompt_path(cfg: Any) -> Path:
    return cfg.battle_prompt or cfg.default_prompt("battle")


def _memo_load(ctx: Any, kind: str, path: Path, loader: Callable[[Path], Any]) -> Any:
    key = (kind, str(path))
    if key not in ctx.memo:
        ctx.memo[key] = loader(path)
    return ctx.memo[key]


def eval_prompts(ctx: Any):
    from .prompts import load_evaluation_prompts

    return _memo_load(ctx, "evaluation prompts", eval_prompt_path(ctx.cfg), load_evaluation_prompts)


def battle_prompt(ctx: Any):
    from .prompts import load_battle_prompt

    return _memo_load(ctx, "battle prompt", battle_prompt_path(ctx.cfg), load_battle_prompt)


def reference_use(ctx: Any):
    """What the judges are shown of the references (`evaluate.judges.references`): `true` / `false` as
    set; `auto` decided once per run over every model's records of the categories that list GPT
    metrics, so every model is judged the same way. A context without records (meta-eval, the judge
    check's own pairs) leaves `auto` to each judge call."""
    from .references import decide

    cfg = ctx.cfg
    setting = cfg.gpt_with_reference
    if setting != "auto" or not ctx.sets:
        return setting
    key = ("reference use", str(eval_prompt_path(cfg)))
    if key not in ctx.memo:
        prompts = eval_prompts(ctx)
        metrics = {cat: list(entry["GPT"]) for cat, entry in cfg.categories.items() if entry.get("GPT")}
        ctx.memo[key] = decide(setting, metrics, ctx.records, lambda c, m: prompts.entry_for(c).why_no_reference(m))
    return ctx.memo[key]


def battle_judge(ctx: Any):
    """The BattleJudge the config asks for (run-wide battles; meta-eval's pairwise accuracy; judge-check)."""
    from .battle import BattleJudge

    cfg = ctx.cfg
    return BattleJudge(ctx.judge(), battle_prompt(ctx), both_orders=cfg.judge.both_orders,
                       with_reference=reference_use(ctx), language=cfg.language,
                       max_tokens=cfg.judge.max_tokens, explain=cfg.judge.explain)


def rating_judge(ctx: Any):
    from .rating import RatingJudge

    cfg = ctx.cfg
    return RatingJudge(ctx.judge(), eval_prompts(ctx), mode=cfg.judge.mode, with_reference=reference_use(ctx),
                       language=cfg.language, max_tokens=min(cfg.judge.max_tokens, 384), log=ctx.log)
