"""The `GPT` family: the LLM judge (any OpenAI-compatible server, or a local model).

- Rating: per category, each metric of the config with its definition and evaluation steps from
  the evaluation prompt file (the project's `prompts/` by default, ColossalAI's files work too);
  `judge.mode` logprobs (G-Eval expected score), generate (strict parsed reply) or auto.
  `gpt_with_reference` gives the target to the judge as the reference answer.
- Battle: with two or more answer files (unless `battle: false`), every pair of models on every
  question of the categories that list GPT metrics, in both orders by default; written to
  `battles/` with win/tie/loss/invalid counts, win rate and CI, order-flip rate, per category, and
  a Bradley-Terry ranking when there are more than two models. The charts of `battles/` are drawn
  from those files (`evaluate/charts.py`).
- Conversations: rated and battled turn by turn (`evaluate.judges.rating`, `.battle`): the judge of
  turn k sees the setup and turns 1..k-1 and grades (or compares) the turn-k reply. Scores are
  `GPT/<metric>@turn<k>` and `GPT/<metric>` for the whole conversation (the mean of its turns,
  invalid when any turn is). A category with conversations needs the prompt files' conversation
  templates; without them it is refused at load.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..core.errors import InputError
from ..core.io import clean_json
from ..core.records import TURN_MARK, Record
from .base import Context, Family, FamilyOutput, register_family

PER_TURN = ("each turn: the judge sees the setup and the earlier turns and grades (or compares) that turn's reply; "
            "GPT/<metric>@turn<k> per turn, GPT/<metric> the mean of the turns (invalid when any turn is)")


def eval_prompt_path(cfg) -> Path:
    return cfg.evaluation_prompt or cfg.default_prompt("evaluation")


def battle_prompt_path(cfg) -> Path:
    return cfg.battle_prompt or cfg.default_prompt("battle")


def _memo_load(ctx: Context, kind: str, path: Path, loader):
    key = (kind, str(path))
    if key not in ctx.memo:
        ctx.memo[key] = loader(path)
    return ctx.memo[key]


def eval_prompts(ctx: Context):
    from ..judges import load_evaluation_prompts

    return _memo_load(ctx, "evaluation prompts", eval_prompt_path(ctx.cfg), load_evaluation_prompts)


def battle_prompt(ctx: Context):
    from ..judges import load_battle_prompt

    return _memo_load(ctx, "battle prompt", battle_prompt_path(ctx.cfg), load_battle_prompt)


def judged_units(record: Record) -> int:
    """Judge requests per metric (rating) or per order (battle): one per turn of a conversation."""
    return len(record.turns) or 1


def all_replies(record: Record) -> str:
    """Everything the model wrote for a record (a conversation's replies one after the other): what
    the length and style controls of a battle measure, since its verdict is over every turn."""
    return "\n\n".join(t.assistant for t in record.turns) if record.turns else record.output


def _conversation_in(ctx: Context, category: str) -> Record | None:
    return next((r for s in ctx.sets[:1] for r in s.records if r.category == category and r.turns), None)


def wants_battle(ctx: Context) -> bool:
    return len(ctx.sets) >= 2 and ctx.cfg.battle is not False


def battle_judge(ctx: Context):
    """The BattleJudge the config asks for (run-wide battles; meta-eval's pairwise accuracy; judge-check)."""
    from ..judges import BattleJudge

    cfg = ctx.cfg
    return BattleJudge(ctx.judge(), battle_prompt(ctx), both_orders=cfg.judge.both_orders,
                       with_reference=cfg.gpt_with_reference, language=cfg.language,
                       max_tokens=cfg.judge.max_tokens, explain=cfg.judge.explain)


def rating_judge(ctx: Context):
    from ..judges import RatingJudge

    cfg = ctx.cfg
    return RatingJudge(ctx.judge(), eval_prompts(ctx), mode=cfg.judge.mode, with_reference=cfg.gpt_with_reference,
                       language=cfg.language, max_tokens=min(cfg.judge.max_tokens, 384), log=ctx.log)


@register_family
class GPTFamily(Family):
    name = "GPT"
    scale = (1.0, 5.0)
    run_independent = True  # battles read the answers only
    conversations = PER_TURN

    def uses_judge(self, ctx):
        return True

    def judge_bound(self, ctx):
        return True

    def validate(self, ctx, category, names, where, *, used):
        if not used:
            return []
        try:
            prompts = eval_prompts(ctx)
        except InputError as exc:
            return [f"{where}: {exc}"]
        missing = prompts.missing_metrics(category, names)
        conv = _conversation_in(ctx, category)
        if not missing and conv is None:
            return []
        entry = prompts.entry_for(category)
        which = f'its entry "{category}"' if not getattr(entry, "fallback", False) else \
            f'the "general" entry (the file has no entry for "{category}")'
        via = "" if not getattr(entry, "fallback", False) else \
            f' (the file has no entry for "{category}"; its "general" entry stands in)'
        problems = [f'{where}: GPT metric "{m}": {prompts.missing_reason(category, m)}{via}' for m in missing]
        if conv is not None and entry.conversation_prompt is None:
            problems.append(f'{where}: category "{category}" holds conversations ({ctx.sets[0].path}: record '
                            f'{conv.id}, {len(conv.turns)} turns) and {which} of {prompts.path} has no '
                            '"conversation_prompt" to rate a turn with; add one with {conversation} {question} '
                            "{answer} {metric} {steps} (see prompts/README.md), or use the project's prompts/")
        return problems

    def validate_run(self, ctx, categories):
        problems = []
        if wants_battle(ctx) and any("GPT" in f for f in categories.values()):
            try:
                prompt = battle_prompt(ctx)
            except InputError as exc:
                problems.append(f"battle prompt: {exc}")
            else:
                conv = next((r for r in ctx.sets[0].records if r.turns and "GPT" in categories.get(r.category, {})),
                            None)
                if conv is not None and prompt.conversation_template is None:
                    problems.append(f'battle prompt: {prompt.path}: no "conversation_template", and category '
                                    f'"{conv.category}" holds conversations ({ctx.sets[0].path}: record {conv.id}, '
                                    f"{len(conv.turns)} turns); add one with {{conversation_1}} {{conversation_2}} "
                                    "{question} {answer_1} {answer_2} {prompt} (see prompts/README.md), use the "
                                    "project's prompts/, or set battle: false")
        if ctx.cfg.gpt_with_reference:
            from ..judges.rating import turns_without_reference

            for s in ctx.sets:
                judged = [r for r in s.records if r.category in categories and "GPT" in categories[r.category]]
                no_ref = [r.id for r in judged if not r.turns and not r.targets]
                if no_ref:
                    problems.append(f"--gpt_with_reference: {s.path}: records without a target: "
                                    f"{', '.join(no_ref[:10])}{' ...' if len(no_ref) > 10 else ''}")
                problems.extend(turns_without_reference([r for r in judged if r.turns],
                                                        f"--gpt_with_reference: {s.path}"))
        return problems

    def plan(self, ctx, category, names, n_items):
        """Per model: a conversation asks one request per turn and metric, and has a score per turn
        and one for the whole (the models share the records' ids and turns, checked at load)."""
        recs = [r for r in ctx.sets[0].records if r.category == category] if ctx.sets else []
        if len(recs) != n_items:
            return {"scores": n_items * len(names), "judge_calls": n_items * len(names)}
        calls = sum(judged_units(r) for r in recs) * len(names)
        return {"scores": calls + sum(1 for r in recs if r.turns) * len(names), "judge_calls": calls}

    def plan_run(self, ctx, categories):
        if not wants_battle(ctx):
            return {}
        n = sum(judged_units(r) for r in ctx.sets[0].records if "GPT" in categories.get(r.category, {}))
        pairs = len(ctx.sets) * (len(ctx.sets) - 1) // 2
        return {"battle_calls": n * pairs * (2 if ctx.cfg.judge.both_orders else 1)}

    def score(self, ctx, category, names, records):
        judge = rating_judge(ctx)
        items = judge.rate(records, names)
        sig = judge.signature()
        signatures = {n: {**sig, "metric": n} for n in names}
        for key in sorted({k for it in items for k in (*it.scores, *it.invalid) if TURN_MARK in k}):
            metric, _, turn = key.rpartition(TURN_MARK)
            signatures[key] = {**sig, "metric": metric, "turn": int(turn), "conversation": PER_TURN}
        return FamilyOutput(items=items, signatures=signatures)

    def score_run(self, ctx, categories) -> dict[str, Any] | None:
        """Battles between every pair of models, per category and overall."""
        if not wants_battle(ctx):
            return None

        answers = {s.name: [r for r in s.records if "GPT" in categories.get(r.category, {})] for s in ctx.sets}
        if not any(answers.values()):
            return None
        judge = battle_judge(ctx)
        ctx.log(f"battle: {len(answers)} models, {len(next(iter(answers.values())))} questions, "
                f"{'both orders' if ctx.cfg.judge.both_orders else 'one order'}")
        results = judge.run(answers)
        outputs = {name: {r.id: all_replies(r) for r in recs} for name, recs in answers.items()}
        written = []
        for res in results:
            data = res.to_dict()
            data["summary"] = clean_json(res.summary())
            data["by_category"] = by_category(res)
            data["controlled"] = controlled(data, outputs[res.model_a], outputs[res.model_b])
            written.append(str(ctx.save.add_battle(res.model_a, res.model_b, data)))
            s = data["summary"]
            w = s.get("weighted")
            ctx.log(f"battle {res.model_a} vs {res.model_b}: {s['wins']} wins / {s['ties']} ties / {s['losses']} "
                    f"losses / {s['invalid']} invalid; win rate of {res.model_a} {_fmt(s['win_rate'])}"
                    + (f"; probability-weighted: {w['wins']} / {w['ties']} / {w['losses']}, win rate "
                       f"{_fmt(w['win_rate'])}" if w else ""))
        out: dict[str, Any] = {"battles": written}
        if len(ctx.sets) > 2:
            try:
                ranking = battle_ranking(results, outputs)
                if ranking is None:
                    raise InputError("ranking: fewer than two decided battle verdicts")
                out["ranking"] = str(ctx.save.set_ranking(ranking))
            except InputError as exc:
                out["ranking_error"] = str(exc)
        return out


def controlled(battle: dict[str, Any], outputs_a: dict[str, str], outputs_b: dict[str, str]) -> dict[str, Any]:
    """The battle's verdicts controlled for length and style (evaluate.stats.battle), with the
    headline numbers first: the length-controlled win rate of model A, its interval, the length coefficient."""
    from ..stats.battle import battle_analysis

    analysis = battle_analysis(battle, outputs_a, outputs_b)
    lc = analysis["overall"]["length_controlled"]
    return {"lc_win_rate": lc.get("lc_win_rate"), "lc_ci": lc.get("lc_interval"), "level": lc.get("level"),
            "length_coef": lc.get("beta"), "longer_wins": analysis["overall"]["judge_bias"].get("longer_wins"),
            **analysis}


RANKING_SCHEMA = "llm-eval-ranking/2"


def battle_ranking(results, outputs: dict[str, dict[str, str]], *, resamples: int = 200,
                   seed: int = 0) -> dict[str, Any] | None:
    """The one ranking of a run with more than two models: Bradley-Terry over every pair's verdicts,
    raw and controlled for length and markdown style (headers, list items, bold) as Chatbot Arena and
    Arena-Hard do, side by side from the same bootstrap over questions at one level (95%), with whether
    the top model is clearly first. None when fewer than two verdicts were decided."""
    from ..stats.battle import OUTCOME, STYLE_FEATURES, bradley_terry, style_features

    battles, groups = [], []
    for res in results:
        for it in res.items:
            if it.verdict in OUTCOME or it.p_a is not None:  # a soft verdict is the outcome when there is one
                battles.append((res.model_a, res.model_b, OUTCOME[it.verdict] if it.p_a is None else it.p_a,
                                style_features(outputs[res.model_a].get(it.id, "")),
                                style_features(outputs[res.model_b].get(it.id, ""))))
                groups.append(f"{it.category}\x00{it.id}")
    if len(battles) < 2:
        return None
    out = bradley_terry(battles, features=list(STYLE_FEATURES), resamples=resamples, seed=seed, groups=groups)
    return {"schema": RANKING_SCHEMA, "n_items": len(set(groups)), **out}


def by_category(res) -> dict[str, Any]:
    from ..judges import BattleResult

    cats: dict[str, list] = {}
    for it in res.items:
        cats.setdefault(it.category, []).append(it)
    return {cat: clean_json(BattleResult(res.model_a, res.model_b, items, res.both_orders).summary())
            for cat, items in sorted(cats.items())}


def _fmt(x: float | None) -> str:
    return "-" if x is None or x != x else f"{x:.3f}"
