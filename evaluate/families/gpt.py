"""The `GPT` family: the LLM judge (any OpenAI-compatible server, or a local model).

- Rating: per category, each metric of the config with its definition and evaluation steps from
  the evaluation prompt file (the project's `evaluate/prompts/` by default, ColossalAI's files work too);
  `judge.mode` logprobs (G-Eval expected score), generate (strict parsed reply) or auto.
  `gpt_with_reference` (auto by default) gives the target to the judge as the reference answer where
  the category's records have one and the metric uses one (`evaluate.judges.references`); the plan
  and the closing lines say per category where it is shown and where it is not, and why.
- Rules before the judge: `category.<name>.cascade: {metric: RuleCheck}` runs a rule check (ExactMatch,
  Contains, Regex, ...; options from `metric_options`) on each answer first; an item it passes gets
  the scale's top without a judge call, the others go to the judge (`evaluate.judges.cascade` says
  what "decided" means and how the numbers combine). The plan counts the calls saved.
- Battle: with two or more answer files (unless `battle: false`), every pair of models on every
  question of the categories that list GPT metrics, in both orders by default; written to
  `battles/` with win/tie/loss/invalid counts, win rate and CI, order-flip rate, per category, and
  a Bradley-Terry ranking when there are more than two models. The charts of `battles/` are drawn
  from those files (`evaluate/report/charts.py`).
- Conversations: rated and battled turn by turn (`evaluate.judges.rating`, `.battle`): the judge of
  turn k sees the setup and turns 1..k-1 and grades (or compares) the turn-k reply. Scores are
  `GPT/<metric>@turn<k>` and `GPT/<metric>` for the whole conversation (the mean of its turns,
  invalid when any turn is). A category with conversations needs the prompt files' conversation
  templates; without them it is refused at load.
- A panel of judges (`judge:` as a list of named blocks, evaluate.judges.panel): every judge rates and
  battles every item; each judge's scores are `GPT/<metric>@<judge>` (a turn: `GPT/<metric>@<judge>@turn<k>`),
  the panel's `GPT/<metric>` (the mean, median or weighted mean of the judges' valid ratings), the
  panel's battle verdict the judges' vote. The plan counts every judge's calls.
"""

from __future__ import annotations

from typing import Any

from ..core.errors import ConfigError, InputError
from ..core.io import clean_json
from ..core.records import TURN_MARK, Record, split_judge_key
from ..core.registry import suggest
from ..judges import cascade
from ..judges.battle_summary import battle_ranking, by_category, controlled
from ..judges.configured import battle_judge, battle_prompt, eval_prompts, rating_judge, reference_use
from ..judges.rating import SCALE as RATING_SCALE
from ..judges.references import ReferenceUse
from ..metrics import METRICS, MetricInput, build
from ..metrics.rule import RuleCheck
from .base import Context, Family, FamilyOutput, register_family

PER_TURN = ("each turn: the judge sees the setup and the earlier turns and grades (or compares) that turn's reply; "
            "GPT/<metric>@turn<k> per turn, GPT/<metric> the mean of the turns (invalid when any turn is)")


def judged_units(record: Record) -> int:
    """Judge requests per metric (rating) or per order (battle): one per turn of a conversation."""
    return len(record.turns) or 1


def all_replies(record: Record) -> str:
    """Everything the model wrote for a record (a conversation's replies one after the other): what
    the length and style controls of a battle measure, since its verdict is over every turn."""
    return "\n\n".join(t.assistant for t in record.turns) if record.turns else record.output


def _conversation_in(ctx: Context, category: str) -> Record | None:
    return next((r for s in ctx.sets[:1] for r in s.records if r.category == category and r.turns), None)


def panel_size(ctx: Context) -> int:
    """How many judges each request goes to: a panel's judges, else 1."""
    panel = getattr(ctx.cfg, "panel", None)
    return len(panel.members) if panel is not None else 1


def wants_battle(ctx: Context) -> bool:
    return len(ctx.sets) >= 2 and ctx.cfg.battle is not False


# keys of a category entry besides the family names (evaluate.pipeline.config checks their shape here)
CATEGORY_KEYS = ("cascade",)


def rule_check_names() -> list[str]:
    """The rule checks a cascade may name (the pass/fail metrics: ExactMatch, Contains, Regex, ...)."""
    return [n for n in METRICS.names() if issubclass(METRICS.get(n), RuleCheck)]


def check_cascade(block: Any, gpt_names: list[str], where: str) -> tuple[dict[str, str], list[str]]:
    """`category.<name>.cascade`: a mapping GPT metric -> rule check. Returns (metric -> the rule's
    canonical name, problems with their key paths); the rule's options are checked with the category."""
    if not isinstance(block, dict):
        return {}, [f"{where}: expected a mapping GPT metric -> rule check (e.g. {{correctness: ExactMatch}}), "
                    f"got {type(block).__name__}"]
    rules, problems = {}, []
    known = rule_check_names()
    for metric, rule in block.items():
        at = f"{where}.{metric}"
        if metric not in gpt_names:
            problems.append(f'{at}: "{metric}" is not a GPT metric of this category{suggest(str(metric), gpt_names)} '
                            f"(its GPT metrics: {', '.join(gpt_names) or 'none'}); a cascade decides a GPT rating")
            continue
        canon = METRICS.canonical(rule) if isinstance(rule, str) and rule in METRICS else None
        if canon is None or canon not in known:
            what = "a rule check" if isinstance(rule, str) else "a rule check name"
            got = f'"{rule}"' if isinstance(rule, str) else f"{type(rule).__name__} {rule!r}"
            hint = suggest(rule, known) if isinstance(rule, str) else ""
            problems.append(f"{at}: expected {what} (pass/fail), got {got}{hint} (rule checks: {', '.join(known)})")
            continue
        rules[str(metric)] = canon
    return rules, problems


def _rule(ctx: Context, name: str) -> RuleCheck:
    key = ("cascade rule", name, ctx.cfg.language)
    if key not in ctx.memo:
        options = ctx.cfg.metric_options
        ctx.memo[key] = build(name, ctx.cfg.language, **options.get(name, {}))
    return ctx.memo[key]


def _rule_fn(check: RuleCheck, category: str) -> cascade.RuleFn:
    """The rule over records: a record it needs a reference for and that has none is not checked."""
    def run(records):
        out: list[cascade.RuleOutcome | None] = []
        for r in records:
            if check.needs_reference and not r.targets:
                out.append(None)
                continue
            passed, why = check.check(MetricInput(output=r.output, references=r.targets, source=r.question,
                                                  category=category))
            out.append(cascade.RuleOutcome(passed=passed, details=why))
        return out
    return run


def cascade_split(ctx: Context, category: str, names: list[str], records: list[Record]) -> cascade.Split | None:
    """The category's cascade over `records` (None when it has none)."""
    rules = ctx.cfg.cascade.get(category) or {}
    if not rules:
        return None
    return cascade.split(records, names, {m: (r, _rule_fn(_rule(ctx, r), category)) for m, r in rules.items()})


def _model_records(ctx: Context, model: str | None, category: str) -> list[Record]:
    s = next((s for s in ctx.sets if s.name == model), ctx.sets[0] if ctx.sets else None)
    return [r for r in s.records if r.category == category] if s is not None else []


@register_family
class GPTFamily(Family):
    name = "GPT"
    scale = (1.0, 5.0)
    run_independent = True  # battles read the answers only
    conversations = PER_TURN
    takes_panel = True

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
        problems = self._validate_cascade(ctx, category, where.rpartition(".")[0] + ".cascade", conv)
        if not missing and conv is None:
            return problems
        entry = prompts.entry_for(category)
        which = f'its entry "{category}"' if not getattr(entry, "fallback", False) else \
            f'the "general" entry (the file has no entry for "{category}")'
        via = "" if not getattr(entry, "fallback", False) else \
            f' (the file has no entry for "{category}"; its "general" entry stands in)'
        problems += [f'{where}: GPT metric "{m}": {prompts.missing_reason(category, m)}{via}' for m in missing]
        if conv is not None and entry.conversation_prompt is None:
            problems.append(f'{where}: category "{category}" holds conversations ({ctx.sets[0].path}: record '
                            f'{conv.id}, {len(conv.turns)} turns) and {which} of {prompts.path} has no '
                            '"conversation_prompt" to rate a turn with; add one with {conversation} {question} '
                            "{answer} {metric} {steps} (see evaluate/prompts/README.md), or leave prompts: out for "
                            "the project's own")
        return problems

    def _validate_cascade(self, ctx: Context, category: str, where: str, conv: Record | None) -> list[str]:
        rules = ctx.cfg.cascade.get(category) or {}
        if not rules:
            return []
        if conv is not None:
            return [f'{where}: category "{category}" holds conversations ({ctx.sets[0].path}: record {conv.id}, '
                    f"{len(conv.turns)} turns); a rule checks one answer, not a turn: leave the cascade out here"]
        problems = []
        for metric, name in rules.items():
            try:
                check = _rule(ctx, name)
            except (InputError, ConfigError) as exc:
                problems.extend(f"{where}.{metric} ({name}): {msg}" for msg in getattr(exc, "problems", None) or [str(exc)])
                continue
            problems.extend(f"{where}.{metric} ({name}): {msg}" for msg in check.check_category(category))
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
                                    "{question} {answer_1} {answer_2} {prompt} (see evaluate/prompts/README.md), leave "
                                    "prompts: out for the project's own, or set battle: false")
        if ctx.cfg.gpt_with_reference is True:
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
        recs = _model_records(ctx, ctx.model, category)
        judges = panel_size(ctx)
        if len(recs) != n_items:
            return {"scores": n_items * len(names), "judge_calls": n_items * len(names) * judges}
        calls = sum(judged_units(r) for r in recs) * len(names)
        out = {"scores": calls + sum(1 for r in recs if r.turns) * len(names), "judge_calls": calls * judges}
        split = cascade_split(ctx, category, names, recs)
        if split is not None:
            out["judge_calls"] -= split.saved() * judges
            out["rule_decided"] = split.saved()
        return out

    def plan_notes(self, ctx, categories):
        """Where the judge is shown the references and where not (and why); what each cascade decides
        and the calls it saves, per category and metric (summed over the models, named per model)."""
        gpt = {c: f["GPT"] for c, f in categories.items() if f.get("GPT")}
        lines: list[dict[str, Any]] = []
        use = reference_use(ctx)
        if not isinstance(use, ReferenceUse):  # true or false: said per category all the same
            from ..judges.references import decide

            use = decide(use, gpt, ctx.records)
        lines += use.lines(wants_battle(ctx))
        counts: list[dict[str, Any]] = []
        for cat, names in gpt.items():
            rules = ctx.cfg.cascade.get(cat) or {}
            per_metric: dict[str, dict[str, tuple[int, int]]] = {}
            for s in ctx.sets:
                recs = [r for r in s.records if r.category == cat]
                split = cascade_split(ctx, cat, names, recs) if recs else None
                for m in split.rules if split is not None else ():
                    per_metric.setdefault(m, {})[s.name] = (len(recs), split.decided(m))
            counts += [{"text": "  " + cascade.count_line(cat, m, rules[m], by_model), "scores": [f"GPT/{m}"]}
                       for m, by_model in per_metric.items()]
        if counts:
            keys = sorted({k for c in counts for k in c["scores"]})
            lines += [{"text": "cascade (rules before the judge):", "scores": keys}, *counts]
            if wants_battle(ctx):
                lines.append({"text": f"  {cascade.BATTLE}", "scores": keys})
        return lines

    def plan_run(self, ctx, categories):
        if not wants_battle(ctx):
            return {}
        n = sum(judged_units(r) for r in ctx.sets[0].records if "GPT" in categories.get(r.category, {}))
        pairs = len(ctx.sets) * (len(ctx.sets) - 1) // 2
        panel = getattr(ctx.cfg, "panel", None)
        blocks = [m.options for m in panel.members] if panel is not None else [ctx.cfg.judge]
        return {"battle_calls": sum(n * pairs * (2 if b.both_orders else 1) for b in blocks)}

    def score(self, ctx, category, names, records):
        judge = rating_judge(ctx)
        split = cascade_split(ctx, category, names, list(records))
        items = judge.rate(records, names, per_record=split.per_record if split is not None else None)
        if split is not None:
            cascade.apply(items, split, float(RATING_SCALE[1]))
            for m, rule in split.rules.items():
                k = split.decided(m)
                ctx.log(f"{ctx.model} / {category} / GPT/{m}: {len(records)} items, {k} decided by {rule}, "
                        f"{len(records) - k} to the judge")
        sig = judge.signature()
        signatures = {n: {**sig, "metric": n, **self._signature_extras(ctx, n)} for n in names}
        for key in sorted({k for it in items for k in (*it.scores, *it.invalid)} - set(names)):
            base, by = split_judge_key(key)  # a panel judge's own score: that judge's signature
            own = judge.member_signature(by) if by is not None and hasattr(judge, "member_signature") else sig
            metric, mark, turn = base.rpartition(TURN_MARK)
            if not (mark and turn.isdigit()):
                metric, turn = base, ""
            signatures[key] = {**own, "metric": metric, **({"turn": int(turn), "conversation": PER_TURN} if turn else {}),
                               **self._signature_extras(ctx, metric)}
        return FamilyOutput(items=items, signatures=signatures)

    def _signature_extras(self, ctx: Context, metric: str) -> dict[str, Any]:
        """Run-wide facts of how `metric` was made, the same in every category's unit (a signature is
        per score, not per category): where its judge saw the reference, and its cascade's rules."""
        out: dict[str, Any] = {}
        use = reference_use(ctx)
        if isinstance(use, ReferenceUse):
            out["reference_shown_in"] = use.rated_with(metric)
        rules = {c: r[metric] for c, r in sorted(ctx.cfg.cascade.items()) if metric in r and c in ctx.cfg.categories}
        if rules:
            out["cascade"] = {"rules": {c: _rule(ctx, r).signature().get("text", r) for c, r in rules.items()},
                              "decides": cascade.DECIDES, "top": float(RATING_SCALE[1]),
                              "aggregate": cascade.AGGREGATE}
        return out

    def score_run(self, ctx, categories) -> dict[str, Any] | None:
        """Battles between every pair of models, per category and overall."""
        if not wants_battle(ctx):
            return None

        answers = {s.name: [r for r in s.records if "GPT" in categories.get(r.category, {})] for s in ctx.sets}
        if not any(answers.values()):
            return None
        judge = battle_judge(ctx)
        ctx.log(f"battle: {len(answers)} models, {len(next(iter(answers.values())))} questions, "
                f"{'both orders' if judge.both_orders else 'one order'}"
                + (f", a panel of {len(judge.names)} judges ({', '.join(judge.names)})" if hasattr(judge, "names") else ""))
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
            agree = (data.get("panel") or {}).get("agreement")
            if agree:
                ctx.log(f"  panel: Fleiss' kappa {_fmt(agree.get('fleiss_kappa'))} ({agree.get('strength')}) on "
                        f"{agree.get('items')} items; effective judges {_fmt(agree.get('effective_judges'))} of "
                        f"{agree.get('judges')}")
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


def _fmt(x: float | None) -> str:
    return "-" if x is None or x != x else f"{x:.3f}"
