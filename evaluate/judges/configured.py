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


def member_backend(ctx: Any, name: str, opts: Any):
    """A panel judge's backend, metered under `<family>@<judge>` so that its calls, tokens, cache hits
    and cost reach the manifest on their own line; its cache is its own block's `cache`."""
    from ..backends.cache_path import cache_file

    if ctx.judges is None:
        raise RuntimeError(f"{ctx.family}: no judge pool in this context")
    return ctx.judges.for_family(f"{ctx.family}@{name}", opts, cache_file(opts.cache, ctx.cfg.save_path,
                                                                           ctx.cfg.resolve), judge=name)


def battle_judge(ctx: Any):
    """The BattleJudge the config asks for (run-wide battles; meta-eval's pairwise accuracy; judge-check);
    for a panel, a PanelBattleJudge over one BattleJudge per judge."""
    from .battle import BattleJudge

    cfg = ctx.cfg

    def one(backend: Any, opts: Any) -> BattleJudge:
        return BattleJudge(backend, battle_prompt(ctx), both_orders=opts.both_orders,
                           with_reference=reference_use(ctx), language=cfg.language,
                           max_tokens=opts.max_tokens, explain=opts.explain)

    if getattr(cfg, "panel", None) is None:
        return one(ctx.judge(), cfg.judge)
    from .panel import PanelBattleJudge

    return PanelBattleJudge({m.name: one(member_backend(ctx, m.name, m.options), m.options)
                             for m in cfg.panel.members}, cfg.panel.policy)


def rating_judge(ctx: Any):
    """The RatingJudge the config asks for; for a panel, a PanelRatingJudge over one per judge."""
    from .rating import RatingJudge

    cfg = ctx.cfg

    def one(backend: Any, opts: Any) -> RatingJudge:
        return RatingJudge(backend, eval_prompts(ctx), mode=opts.mode, with_reference=reference_use(ctx),
                           language=cfg.language, max_tokens=min(opts.max_tokens, 384), log=ctx.log)

    if getattr(cfg, "panel", None) is None:
        return one(ctx.judge(), cfg.judge)
    from .panel import PanelRatingJudge

    return PanelRatingJudge({m.name: one(member_backend(ctx, m.name, m.options), m.options)
                             for m in cfg.panel.members}, cfg.panel.policy)
