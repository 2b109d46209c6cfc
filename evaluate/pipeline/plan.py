"""What a run will do, decided before any model is loaded or any call is paid: the families and
the names each category lists, validated; the records per model and category; the work and the
resolved options (printed by --dry-run, stored in the manifest)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields, is_dataclass
from typing import Any

from ..core.errors import ConfigError, InputError
from ..families import Context, Family, family_names, get_family
from .answers import AnswerSet
from .config import RunConfig, check_model_names, judge_shown


@dataclass
class Plan:
    """What a run will do; printed by --dry-run and stored in the manifest."""

    families: list[str]
    categories: dict[str, dict[str, list[str]]]  # used category -> family -> names
    items: dict[str, dict[str, int]]  # model -> category -> records
    skipped: dict[str, int]  # category without a config entry -> records (per model)
    work: dict[str, dict[str, int]] = field(default_factory=dict)  # family -> {"scores": n, "judge_calls": n}
    options: dict[str, dict[str, Any]] = field(default_factory=dict)  # family -> its resolved options
    notes: list[dict[str, Any]] = field(default_factory=list)  # the families' plan_notes: {"text", "scores"}

    def to_dict(self) -> dict[str, Any]:
        return {"families": self.families, "categories": self.categories, "items": self.items,
                "skipped_categories": self.skipped, "work": self.work, "options": self.options,
                "notes": self.notes}

    def score_keys(self) -> list[str]:
        """The score keys (`Family/name`) the plan will produce, sorted: what a gate or a config's score
        names are checked against before the run."""
        return sorted({key for fams in self.categories.values() for fam, names in fams.items()
                       for name in names for key in score_keys_of(fam, name)})

    def describe(self) -> str:
        lines = [f"families: {', '.join(self.families) or '(none)'}"]
        models = list(self.items)
        lines.append(f"models: {', '.join(models)}")
        lines.append("categories:")
        for cat, fams in self.categories.items():
            counts = ", ".join(f"{m}={self.items[m].get(cat, 0)}" for m in models)
            lines.append(f"  {cat} ({counts} records)")
            for fam, names in fams.items():
                lines.append(f"    {fam}: {', '.join(names)}")
        if self.skipped:
            lines.append("skipped (no config entry for the category): "
                         + ", ".join(f"{c} ({n} records)" for c, n in self.skipped.items()))
        for fam, work in self.work.items():
            lines.append(f"work {fam}: " + ", ".join(f"{k}={v}" for k, v in work.items()))
        lines.extend(n["text"] for n in self.notes)
        for fam, opts in self.options.items():
            lines.append(f"options {fam}: " + ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}"
                                                        for k, v in opts.items()))
        return "\n".join(lines)


def score_keys_of(family: str, name: str) -> list[str]:
    """The score keys a planned name gives: an automatic metric's own sub-scores (`BLEU` -> `BLEU-1`
    ... `BLEU-4`, `F1 score` -> `F1`); any other family scores under the name itself."""
    if family == "Metrics":
        from ..metrics import METRICS

        try:
            subs = getattr(METRICS.get(name), "sub_scores", ())
        except Exception:  # an unknown name is the config check's to report
            subs = ()
        if subs:
            return [f"Metrics/{sub}" for sub in subs]
    return [f"{family}/{name}"]


def misspelt_categories(cfg: RunConfig, used: set[str], skipped: dict[str, int]) -> list[str]:
    """A config category that matches no record while a record category close to it has no entry is a
    typo (`factul:` for `factual`): those records would be dropped silently. A config category with no
    close uncovered record category is left alone (ColossalAI's configs list 20 categories, most absent),
    and so is a shard's (`--shard I/N` holds some records only; the whole run is checked unsharded)."""
    import difflib

    if getattr(cfg, "shard", None):
        return []
    out = []
    lowered = {c.lower(): c for c in skipped}
    for cat in cfg.categories:
        if cat in used:
            continue
        close = [lowered[c] for c in difflib.get_close_matches(cat.lower(), list(lowered), n=2, cutoff=0.75)]
        if close:
            out.append(f'category.{cat}: no record has category "{cat}"; did you mean '
                       + " or ".join(f'"{c}"' for c in close) + "? (records in categories no entry covers: "
                       + ", ".join(f"{c} ({n})" for c, n in skipped.items()) + ")")
    return out


def near_miss_notes(cfg: RunConfig, used: set[str]) -> list[dict[str, Any]]:
    """A config category that matches no record while a covered record category is close to it
    (`clsed_qa:` beside `closed_qa:`) is likely a typo whose scores were meant for that category: they
    are not run there. Not refused (the records are all scored by the other entry), but said in the plan
    and the closing lines (issue 39: it passed unremarked)."""
    import difflib

    if getattr(cfg, "shard", None):
        return []
    covered = {c.lower(): c for c in used if c in cfg.categories}
    out = []
    for cat, entry in cfg.categories.items():
        if cat in used:
            continue
        close = [covered[c] for c in difflib.get_close_matches(cat.lower(), list(covered), n=2, cutoff=0.75)]
        if close:
            names = "; ".join(f"{fam}: {', '.join(map(str, v))}" for fam, v in entry.items()
                              if isinstance(v, list) and v)
            out.append({"text": f'warning: category.{cat}: no record has category "{cat}", so its scores '
                                f"({names or 'none'}) run nowhere; did you mean "
                                + " or ".join(f'"{c}"' for c in close)
                                + " (which has its own entry)? Move them there or rename the entry",
                        "scores": []})
    return out


def select_families(only: list[str] | None, skip: list[str] | None) -> list[str]:
    from ..core.registry import suggest

    known = family_names()
    for flag, names in (("--only", only), ("--skip", skip)):
        for name in names or []:
            if name not in known:
                raise InputError(f'{flag}: unknown evaluator family "{name}"{suggest(name, known)} '
                                 f"(known: {', '.join(known)})")
    chosen = list(only) if only else known
    return [f for f in known if f in chosen and f not in (skip or [])]


def family_context(cfg: RunConfig, fam: str, sets: list[AnswerSet], **kw: Any) -> Context:
    """The context a family's calls get: config, its options, every model's records (and, in a run,
    the judge pool, the save path and the per-run memo)."""
    return Context(cfg=cfg, options=cfg.family_options(fam), sets=sets, family=fam, **kw)


def build_plan(cfg: RunConfig, sets: list[AnswerSet], families: list[str],
               contexts: dict[str, Context] | None = None) -> tuple[Plan, dict[str, Family]]:
    """Validate every name the run will use and count the work. Raises ConfigError with all problems."""
    used = {r.category for s in sets for r in s.records}
    problems: list[str] = []
    fam_objs: dict[str, Family] = {}
    contexts = {} if contexts is None else contexts
    for fam in families:
        if any(entry.get(fam) for entry in cfg.categories.values()):
            try:
                fam_objs[fam] = get_family(fam)
            except KeyError:
                problems.append(f"{fam}: this evaluator family is not available in this version; "
                                f"run with --skip {fam}")
    for fam in fam_objs:
        contexts.setdefault(fam, family_context(cfg, fam, sets))
    categories: dict[str, dict[str, list[str]]] = {}
    for cat, entry in cfg.categories.items():
        for fam, obj in fam_objs.items():
            names = entry.get(fam) or []
            if names:
                problems.extend(obj.validate(contexts[fam], cat, names, f"category.{cat}.{fam}", used=cat in used))
        if cat in used:
            active = {f: entry[f] for f in fam_objs if entry.get(f)}
            categories[cat] = active
    items = {s.name: {} for s in sets}
    for s in sets:
        for r in s.records:
            items[s.name][r.category] = items[s.name].get(r.category, 0) + 1
    skipped: dict[str, int] = {}
    for cat in sorted(used - set(cfg.categories)):
        skipped[cat] = max(items[s.name].get(cat, 0) for s in sets)
    problems.extend(misspelt_categories(cfg, used, skipped))
    problems.extend(conversation_refusals(sets, categories, fam_objs))
    for fam, obj in fam_objs.items():
        problems.extend(obj.validate_run(contexts[fam], categories))
    problems.extend(panel_refusals(cfg, categories, fam_objs, contexts))
    if problems:
        raise ConfigError(problems, str(cfg.source) if cfg.source else None)
    work: dict[str, dict[str, int]] = {}
    for fam, obj in fam_objs.items():
        total: dict[str, int] = {}
        for s in sets:
            for cat, fams in categories.items():
                if fam in fams:
                    ctx = contexts[fam].for_model(s.name)
                    for k, v in obj.plan(ctx, cat, fams[fam], items[s.name].get(cat, 0)).items():
                        total[k] = total.get(k, 0) + v
        for k, v in obj.plan_run(contexts[fam], categories).items():
            total[k] = total.get(k, 0) + v
        work[fam] = total
    options = {f: asdict(contexts[f].options) for f in fam_objs if is_dataclass(contexts[f].options)
               and fields(contexts[f].options)}
    if any(w.get("judge_calls") or w.get("battle_calls") for w in work.values()):  # the resolved judge block
        shown = judge_shown(cfg)  # a panel's: {judge name: its block}, and how the judges combine
        options["judge"] = {b.pop("name"): b for b in shown} if isinstance(shown, list) else shown
        if getattr(cfg, "panel", None) is not None:
            options["panel"] = cfg.panel.policy.to_dict()
    if "Metrics" in fam_objs and cfg.metric_options:
        options["metric_options"] = cfg.metric_options
    notes = near_miss_notes(cfg, used)
    notes += [note for fam, obj in fam_objs.items() for note in obj.plan_notes(contexts[fam], categories)]
    plan = Plan(families=[f for f in families if f in fam_objs], categories=categories, items=items,
                skipped=skipped, work=work, options=options, notes=notes)
    return plan, fam_objs


def panel_refusals(cfg: RunConfig, categories: dict[str, dict[str, list[str]]], fam_objs: dict[str, Family],
                   contexts: dict[str, Context]) -> list[str]:
    """A panel of judges reaches the families that say they take one (`takes_panel`: GPT); another family
    that asks the judge (SAGEval, UniEval's judge variant) is refused rather than silently given the
    panel's first judge."""
    panel = getattr(cfg, "panel", None)
    if panel is None:
        return []
    out = []
    for fam, obj in fam_objs.items():
        cats = [c for c, fams in categories.items() if fam in fams]
        if cats and not obj.takes_panel and obj.uses_judge(contexts[fam]):
            out.append(f"judge: a panel of judges ({', '.join(panel.names)}) rates and battles for the GPT family "
                       f"only; {fam} (category.{cats[0]}.{fam}) asks one judge: run it with a single judge block "
                       f"(judge: {{backend: ..., model: ...}}) in a config of its own, or leave {fam} out here "
                       f"(--skip {fam})")
    return out


def conversation_refusals(sets: list[AnswerSet], categories: dict[str, dict[str, list[str]]],
                          fam_objs: dict[str, Family]) -> list[str]:
    """A family that does not say what it scores for a conversation (`Family.conversations`) is not
    given one: each category that lists it and holds conversations is named, with its first
    conversation's file and record."""
    first: dict[str, tuple[AnswerSet, Any]] = {}
    for s in sets:
        for r in s.records:
            if r.turns and r.category in categories and r.category not in first:
                first[r.category] = (s, r)
    problems = []
    for cat, (s, r) in first.items():
        for fam in categories[cat]:
            if fam in fam_objs and not fam_objs[fam].conversations:
                problems.append(f'category.{cat}.{fam}: {fam} scores one question and one answer, and category "{cat}" '
                                f"holds conversations ({s.path}: record {r.id}, {len(r.turns)} turns); it would have "
                                f"to join the turns into one text. Score this category with GPT (each turn) or "
                                f"Metrics (the last turn), or move the conversations to a category without {fam}")
    return problems


def with_scale(signatures: dict[str, dict[str, Any]], family: Family) -> dict[str, dict[str, Any]]:
    """Every signature says the range of its score (charts and comparisons read it from there): the
    family's declared `scale` where the evaluator did not state one (null: unbounded)."""
    scale = list(family.scale) if family.scale else None
    return {k: sig if "scale" in sig else {**sig, "scale": scale} for k, sig in signatures.items()}


def limit_records(sets: list[AnswerSet], n: int) -> None:
    """Keep the first `n` records of each category, in the first file's order; every other model
    keeps the same ids (answer files hold the same ids, which loading has checked)."""
    keep: set[str] = set()
    counts: dict[str, int] = {}
    for r in sets[0].records:
        if counts.get(r.category, 0) < n:
            counts[r.category] = counts.get(r.category, 0) + 1
            keep.add(r.id)
    for s in sets:
        s.records = [r for r in s.records if r.id in keep]
        s.empty_output_ids = [i for i in s.empty_output_ids if i in keep]


@dataclass
class Prepared:
    """A run's inputs, loaded once (`load_inputs`): the answer files loaded, limited and sharded, the
    plan built. The run, `--dry-run`'s estimate, `--export-requests`, `--import-results` and batch
    prefetch all work from this object; none loads the answers or builds the plan again."""

    cfg: RunConfig
    sets: list[AnswerSet]
    plan: Plan
    fam_objs: dict[str, Family]
    contexts: dict[str, Context]


def load_inputs(cfg: RunConfig, families: list[str]) -> Prepared:
    """The answer files (limited to `limit`, this `--shard`'s part) and the plan. Raises
    InputError/ConfigError on bad input; nothing is loaded or paid for."""
    from ..harness.entries import describe, expand
    from .answers import load_entries
    from .shard import apply_shard

    if not cfg.answers:
        raise InputError("no answer files: list them under `answers:` in the config or pass --answer_file_list")
    cfg.answers = expand(cfg.answers)  # another harness's file: one entry per model it holds, named by it
    check_model_names([a.name for a in cfg.answers], str(cfg.source or "config"))
    sets = load_entries(cfg.answers, cfg.target_file, cfg.missing)
    if cfg.limit:
        limit_records(sets, cfg.limit)
    apply_shard(sets, getattr(cfg, "shard", None))
    contexts: dict[str, Context] = {}
    plan, fam_objs = build_plan(cfg, sets, families, contexts)
    plan.notes[:0] = [{"text": line, "scores": []} for line in describe(cfg.answers)]
    return Prepared(cfg, sets, plan, fam_objs, contexts)

