"""Label-corrected verdicts: what people would say about each pair of models (and each model's mean on a
GPT metric), from a person's labels on the queue's draws and every item's judge verdict, by PPI++
(`stats.ppi.corrected_mean`; its docstring gives the statistics).

Per pair of models (oriented as its battle file is), three rows, each the win rate of model_a with ties
half and its interval at `level`:

- *label-corrected*: the judge's mean over every item, corrected by its mistakes measured on the
  labelled draws, with PPI++'s power-tuning weight (never materially wider than labels alone);
- *labels only*: the labelled draws alone;
- *judge only*: today's figure, "if the judge were right" (the judge's valid verdicts, with the items'
  sampling noise only).

The judge's value on an item is its probability that model_a wins where the run has probabilities,
else its verdict over both orders (1, 0.5, 0; an invalid verdict 0.5, `queue.judge_value`). A person's
value is the verdict (1, 0.5, 0); several annotators' labels of one item are averaged (each annotator's
latest label of it counts). Only labels of items the label queue handed out count (`queue`): a label
given off the queue, on another queue than the one used (the queue with most labels), or on an item or
pair the run does not have is left out of the estimate, counted in `left_out` with the reason (and the
last named in `not_in_run`). Off-queue labels still count for each annotator's agreement with the judge
and for the kappa between annotators. Uniform draws are a sample without replacement; active draws are
weighted by the inverse of their probability (given the pair: p_j / P(pair)), each draw counted.

Per category where a category has at least MIN_CATEGORY_LABELS labels; ratings the same way on each GPT
metric's scale, with each pair's paired difference of means (uniform queue only: a draw of the active
design picks one model's answer, which does not pair).
"""

from __future__ import annotations

import math
from collections import defaultdict
from itertools import combinations
from pathlib import Path
from typing import Any, Iterable, Mapping

import numpy as np

from ..core.errors import InputError
from ..savepath import read
from ..savepath.labels import AnyLabel, Label, QueueState, RatingLabel, read_labels, read_queues
from ..savepath.log import NoResults, RunLog, read_run_log
from ..stats.agreement import cohen_kappa, fleiss_kappa_labels
from ..stats.ppi import LEVEL, Corrected, corrected_mean, judge_only, rating_error
from .queue import VERDICT_VALUE, battle_units, gpt_metrics, judge_value, label_unit, rating_units, unit_key

MIN_CATEGORY_LABELS = 10
SWAP = {"A": "B", "B": "A", "tie": "tie"}
OFF_QUEUE = "off the queue"
NOT_IN_RUN = "not in the run"
OTHER_QUEUE = "another queue"
ROWS = ("label_corrected", "labels_only", "judge_only")


def _latest(labels: Iterable[AnyLabel]) -> list[AnyLabel]:
    """Each annotator's latest label of each unit (a person may change their mind), in file order."""
    last: dict[tuple[Any, ...], AnyLabel] = {}
    for lab in labels:
        key = (lab.annotator, label_unit(lab))
        last.pop(key, None)
        last[key] = lab
    return list(last.values())


def _on_queue(lab: AnyLabel, queues: Mapping[str, QueueState]) -> str | None:
    """The key of the queue a label was drawn from when its draw is real (the queue exists, the draw was
    handed out and is this label's unit), else None."""
    q = lab.queue
    if q is None or q.key not in queues:
        return None
    state = queues[q.key]
    if q.draw >= len(state.draws) or q.draw not in state.handed:
        return None
    return q.key if unit_key(state.kind, state.units[state.draws[q.draw]]) == label_unit(lab) else None


def _estimate(y: list[float], f_lab: list[float], f_all: list[float], f_valid: list[float], *,
              weights: list[float] | None, level: float, bounds: tuple[float, float],
              null: float | None, error: float | None = None) -> dict[str, Any]:
    c: Corrected = corrected_mean(y, f_lab, f_all, weights=weights, level=level, bounds=bounds, null=null,
                                  error=error)
    out = c.to_dict()
    out["judge_only"] = judge_only(np.asarray(f_valid, dtype=float), level=level, bounds=bounds).to_dict()
    return out


class _Battles:
    """The run's battle items by pair (as the files orient them) and the labels resolved onto them."""

    def __init__(self, log: RunLog):
        self.items: dict[tuple[str, str], dict[tuple[str, str], Mapping[str, Any]]] = defaultdict(dict)
        for unit, item in battle_units(log):
            self.items[(unit[2], unit[3])][(unit[0], unit[1])] = item

    def resolve(self, lab: Label) -> tuple[tuple[str, str], float] | None:
        """(the pair as its battle file orients it, the label's value for that pair's model_a) or None."""
        for pair, swapped in (((lab.model_a, lab.model_b), False), ((lab.model_b, lab.model_a), True)):
            if (lab.id, lab.category) in self.items.get(pair, {}):
                verdict = SWAP[lab.verdict] if swapped else lab.verdict
                return pair, VERDICT_VALUE[verdict]
        return None


def _why_not_in_run(lab: Label, battles: _Battles) -> str:
    pairs = {frozenset(p) for p in battles.items}
    models = {m for p in battles.items for m in p}
    missing = [m for m in (lab.model_a, lab.model_b) if m not in models]
    if missing:
        return f"no model {', '.join(repr(m) for m in missing)} in the run's battles"
    if frozenset((lab.model_a, lab.model_b)) not in pairs:
        return f"no battle of {lab.model_a!r} and {lab.model_b!r}"
    return f"no item {lab.id!r} (category {lab.category!r}) in the battle of {lab.model_a!r} and {lab.model_b!r}"


def _sample(units: list[tuple[str, ...]], values: dict[tuple[str, ...], float], queue: QueueState | None,
            labelled: dict[tuple[str, ...], list[float]]) -> tuple[list[tuple[str, ...]], list[float] | None]:
    """The labelled draws among `units` (one group: a pair, a category, a model on a metric): the units in
    draw order, once each (uniform) or once per draw handed out (active), with the active draws' weights
    1 / (N p_j / P(group)); `values`: each unit's probability p_j."""
    group = set(units)
    if queue is None or queue.design == "uniform":
        return [u for u in units if u in labelled], None
    total = sum(values[u] for u in group)
    draws = []
    for d in sorted(queue.handed):
        u = unit_key(queue.kind, queue.units[queue.draws[d]])
        if u in group and u in labelled:
            draws.append(u)
    n_group = len(group)
    return draws, [total / (n_group * values[u]) for u in draws]


def _group(units: list[tuple[str, ...]], judge: dict[tuple[str, ...], tuple[float, bool]],
           labelled: dict[tuple[str, ...], list[float]], queue: QueueState | None,
           p_of: dict[tuple[str, ...], float], *, level: float, bounds: tuple[float, float],
           null: float | None, error: float | None = None) -> dict[str, Any]:
    drawn, weights = _sample(units, p_of, queue, labelled)
    y = [float(np.mean(labelled[u])) for u in drawn]
    f_lab = [judge[u][0] for u in drawn]
    f_all = [judge[u][0] for u in units]
    f_valid = [judge[u][0] for u in units if judge[u][1]]
    return _estimate(y, f_lab, f_all, f_valid, weights=weights, level=level, bounds=bounds, null=null, error=error)


def _choose(counts: Mapping[str, int], kind: str, queues: Mapping[str, QueueState]) -> QueueState | None:
    """The queue of this kind with the most labels (the first defined on a tie); None without labels."""
    best = max(((n, -i, k) for i, (k, n) in enumerate(counts.items()) if queues[k].kind == kind), default=None)
    return queues[best[2]] if best else None


def _battle_pairs(log: RunLog, battle_labels: list[Label], queues: Mapping[str, QueueState], level: float,
                  left_out: dict[str, int], not_in_run: list[dict[str, str]]) -> tuple[list[dict[str, Any]],
                                                                                       QueueState | None]:
    battles = _Battles(log)
    resolved: list[tuple[Label, tuple[str, str], float, str | None]] = []
    for lab in battle_labels:
        hit = battles.resolve(lab)
        if hit is None:
            left_out[NOT_IN_RUN] = left_out.get(NOT_IN_RUN, 0) + 1
            not_in_run.append({"kind": "battle", "id": lab.id, "category": lab.category, "model_a": lab.model_a,
                               "model_b": lab.model_b, "annotator": lab.annotator,
                               "why": _why_not_in_run(lab, battles)})
            continue
        resolved.append((lab, hit[0], hit[1], _on_queue(lab, queues)))
    counts: dict[str, int] = {}
    for _, _, _, key in resolved:
        if key is not None:
            counts[key] = counts.get(key, 0) + 1
    queue = _choose(counts, "battle", queues)
    p_of = {}
    if queue is not None:
        p_of = {unit_key("battle", u): p for u, p in zip(queue.units, queue.p)}
    pairs = []
    for pair, items in battles.items.items():
        labelled: dict[tuple[str, ...], list[float]] = defaultdict(list)
        pair_left: dict[str, int] = {}
        for lab, lab_pair, value, key in resolved:
            if lab_pair != pair:
                continue
            if key is None:
                pair_left[OFF_QUEUE] = pair_left.get(OFF_QUEUE, 0) + 1
            elif queue is None or key != queue.key:
                pair_left[OTHER_QUEUE] = pair_left.get(OTHER_QUEUE, 0) + 1
            else:
                labelled[unit_key("battle", [lab.id, lab.category, *pair])].append(value)
        for reason, n in pair_left.items():
            left_out[reason] = left_out.get(reason, 0) + n
        pair_missing = sum(1 for x in not_in_run if {x.get("model_a"), x.get("model_b")} == set(pair))
        if pair_missing:
            pair_left[NOT_IN_RUN] = pair_missing
        units = [unit_key("battle", [i, c, *pair]) for i, c in items]
        judge = {u: judge_value(items[(u[0], u[1])]) for u in units}
        # a unit's selection probability, in the stored queue's units (absent: the run changed since)
        probs = {u: p_of.get(u, 0.0) for u in units}
        if queue is not None and queue.design == "active" and any(probs[u] <= 0 for u in units):
            units = [u for u in units if probs[u] > 0]  # items the queue never knew cannot be drawn
        row = _group(units, judge, labelled, queue, probs, level=level, bounds=(0.0, 1.0), null=0.5)
        row.update(model_a=pair[0], model_b=pair[1], left_out=pair_left,
                   labelled_items=len(labelled), annotators=sorted({lab.annotator for lab, p, _, k in resolved
                                                                     if p == pair}))
        cats = []
        by_cat: dict[str, list[tuple[str, ...]]] = defaultdict(list)
        for u in units:
            by_cat[u[1]].append(u)
        for cat, cat_units in sorted(by_cat.items()):
            if sum(1 for u in cat_units if u in labelled) < MIN_CATEGORY_LABELS:
                continue
            c = _group(cat_units, judge, labelled, queue, probs, level=level, bounds=(0.0, 1.0), null=0.5)
            cats.append({"category": cat, **c})
        row["categories"] = cats
        pairs.append(_ordered(row))
    return pairs, queue


def _ordered(row: dict[str, Any]) -> dict[str, Any]:
    first = ("model_a", "model_b", "metric", "model", "labels_used", "effective_labels", "labels_to_decide", "items",
             *ROWS)
    return {**{k: row[k] for k in first if k in row}, **{k: v for k, v in row.items() if k not in first}}


def _ratings(log: RunLog, rating_labels: list[RatingLabel], queues: Mapping[str, QueueState], level: float,
             left_out: dict[str, int], not_in_run: list[dict[str, str]]) -> list[dict[str, Any]]:
    scales = gpt_metrics(log)
    judged = {unit_key("rating", u): v for u, v in rating_units(log)}
    good = []
    for lab in rating_labels:
        if label_unit(lab) not in judged:
            left_out[NOT_IN_RUN] = left_out.get(NOT_IN_RUN, 0) + 1
            not_in_run.append({"kind": "rating", "id": lab.id, "category": lab.category, "model": lab.model,
                               "metric": lab.metric, "annotator": lab.annotator,
                               "why": f"no GPT/{lab.metric} score of {lab.model!r} on item {lab.id!r}"})
            continue
        good.append((lab, _on_queue(lab, queues)))
    counts: dict[str, int] = {}
    for _, key in good:
        if key is not None:
            counts[key] = counts.get(key, 0) + 1
    queue = _choose(counts, "rating", queues)
    labelled: dict[tuple[str, ...], list[float]] = defaultdict(list)
    for lab, key in good:
        if key is None:
            left_out[OFF_QUEUE] = left_out.get(OFF_QUEUE, 0) + 1
        elif queue is None or key != queue.key:
            left_out[OTHER_QUEUE] = left_out.get(OTHER_QUEUE, 0) + 1
        else:
            labelled[label_unit(lab)].append(lab.score)
    if not good:
        return []
    p_of = {unit_key("rating", u): p for u, p in zip(queue.units, queue.p)} if queue else {}
    out = []
    for metric, (lo, hi) in sorted(scales.items()):
        models: dict[str, list[tuple[str, ...]]] = defaultdict(list)
        for u in judged:
            if u[3] == metric and (queue is None or queue.metric in (None, metric)):
                models[u[2]].append(u)
        if not any(u in labelled for us in models.values() for u in us):
            continue
        judge = {u: (judged[u], True) for us in models.values() for u in us}
        for model, units in models.items():
            probs = {u: p_of.get(u, 0.0) for u in units}
            row = _group(units, judge, labelled, queue, probs, level=level, bounds=(lo, hi), null=None,
                         error=rating_error((lo, hi)))
            out.append(_ordered({"metric": metric, "model": model, **row}))
        if queue is not None and queue.design == "uniform":
            for ma, mb in combinations(sorted(models), 2):
                out.append(_difference(metric, ma, mb, judged, labelled, lo, hi, level))
    return out


def _difference(metric: str, ma: str, mb: str, judged: Mapping[tuple[str, ...], float],
                labelled: Mapping[tuple[str, ...], list[float]], lo: float, hi: float, level: float) -> dict[str, Any]:
    """The paired difference of two models' means on a metric: items both were scored on by the judge,
    labelled where a person scored both answers."""
    items = sorted({(u[0], u[1]) for u in judged if u[3] == metric and u[2] == ma}
                   & {(u[0], u[1]) for u in judged if u[3] == metric and u[2] == mb})
    key_a = {it: unit_key("rating", [it[0], it[1], ma, metric]) for it in items}
    key_b = {it: unit_key("rating", [it[0], it[1], mb, metric]) for it in items}
    f_all = [judged[key_a[it]] - judged[key_b[it]] for it in items]
    both = [it for it in items if key_a[it] in labelled and key_b[it] in labelled]
    y = [float(np.mean(labelled[key_a[it]]) - np.mean(labelled[key_b[it]])) for it in both]
    f_lab = [judged[key_a[it]] - judged[key_b[it]] for it in both]
    diff = _estimate(y, f_lab, f_all, f_all, weights=None, level=level, bounds=(lo - hi, hi - lo), null=0.0,
                     error=rating_error((lo, hi)))  # one model's score off by a typical error
    return {"metric": metric, "model_a": ma, "model_b": mb, "labels_used": diff["labels_used"],
            "effective_labels": diff["effective_labels"], "difference": {k: diff[k] for k in ROWS},
            "labels_to_decide": diff["labels_to_decide"], "items": diff["items"]}


def _annotators(battle_labels: list[Label], rating_labels: list[RatingLabel], log: RunLog) -> dict[str, Any]:
    """Cohen's kappa of each two annotators on the battle items both labelled (verdicts in one orientation),
    Fleiss' kappa over the items every annotator labelled (3 or more annotators), each annotator's
    agreement with the judge (a judge tie half; label ties and invalid verdicts left out)."""
    from .labels import _against_labels

    names = sorted({lab.annotator for lab in [*battle_labels, *rating_labels]})
    battles = _Battles(log)
    verdict: dict[str, dict[tuple[str, ...], str]] = defaultdict(dict)
    with_judge: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for lab in battle_labels:
        hit = battles.resolve(lab)
        if hit is None:
            continue
        pair, value = hit
        truth = {1.0: "A", 0.5: "tie", 0.0: "B"}[value]
        unit = unit_key("battle", [lab.id, lab.category, *pair])
        verdict[lab.annotator][unit] = truth
        judge = str(battles.items[pair][(lab.id, lab.category)].get("verdict") or "invalid")
        if judge in VERDICT_VALUE:
            with_judge[lab.annotator].append((truth, judge))
    kappas = []
    for a, b in combinations(names, 2):
        shared = sorted(set(verdict[a]) & set(verdict[b]))
        k = cohen_kappa([verdict[a][u] for u in shared], [verdict[b][u] for u in shared]) if shared else None
        kappas.append({"a": a, "b": b, "items": len(shared), "kappa": None if k is None else round(k, 6)})
    fleiss = None
    if len([n for n in names if verdict[n]]) >= 3:
        raters = [n for n in names if verdict[n]]
        units = set.intersection(*(set(verdict[n]) for n in raters))
        if units:
            value, _ = fleiss_kappa_labels([[verdict[n][u] for n in raters] for u in sorted(units)])
            fleiss = None if value is None else round(value, 6)
    agree = {}
    for name in names:
        scored, _ = _against_labels(with_judge[name]) if with_judge[name] else ({"accuracy": None, "n": 0}, 0)
        agree[name] = {"items": len(with_judge[name]), "agreement": scored["accuracy"], "decided": scored["n"]}
    return {"names": names, "kappa": kappas, "fleiss": fleiss, "agreement_with_judge": agree}


def corrected_from(log: RunLog, battle_labels: list[Label], rating_labels: list[RatingLabel],
                   queues: Mapping[str, QueueState], *, level: float = LEVEL) -> dict[str, Any]:
    """`corrected` on data already read (the viewer's and the report's door)."""
    battle_latest = [lab for lab in _latest(battle_labels) if isinstance(lab, Label)]
    rating_latest = [lab for lab in _latest(rating_labels) if isinstance(lab, RatingLabel)]
    left_out: dict[str, int] = {}
    not_in_run: list[dict[str, str]] = []
    pairs, queue = _battle_pairs(log, battle_latest, queues, level, left_out, not_in_run) if log.battles else ([], None)
    if not log.battles:
        for lab in battle_latest:
            left_out[NOT_IN_RUN] = left_out.get(NOT_IN_RUN, 0) + 1
            not_in_run.append({"kind": "battle", "id": lab.id, "category": lab.category, "model_a": lab.model_a,
                               "model_b": lab.model_b, "annotator": lab.annotator, "why": "the run has no battles"})
    ratings = _ratings(log, rating_latest, queues, level, left_out, not_in_run)
    return {"level": level, "pairs": pairs, "ratings": ratings,
            "annotators": _annotators(battle_latest, rating_latest, log),
            "labels": len(battle_labels) + len(rating_labels),
            "latest": len(battle_latest) + len(rating_latest),
            "left_out": left_out, "not_in_run": not_in_run,
            "queue": None if queue is None else {"kind": queue.kind, "design": queue.design, "seed": queue.seed,
                                                 "handed": len(queue.handed), "draws": len(queue.draws)},
            "note": ("each estimate is the win rate of model_a (ties half) at the stated level: label_corrected by "
                     "PPI++ from the labels on the queue and every item's judge verdict, labels_only from those "
                     "labels alone, judge_only from the judge's valid verdicts if the judge were right; "
                     "effective_labels: how many labels alone would give the corrected interval's width; "
                     "labels_to_decide: about how many more labels until the corrected interval excludes 0.5")}


def corrected(root: Path, *, level: float = LEVEL) -> dict[str, Any]:
    """The label-corrected estimates of a save path (module docstring; docs/labels.md gives the shape).
    InputError when the folder is not a run's save path."""
    root = Path(root)
    if not root.is_dir():
        raise InputError(f"{root}: no such folder (give the save path of a run)")
    read.check(root)
    try:
        log = read_run_log(root)
    except NoResults as exc:
        raise InputError(f"{root}: no run to correct: {exc}") from None
    found = read_labels(root)
    problems: list[str] = list(found.problems)
    queues = read_queues(root, problems)
    out = corrected_from(log, found.labels, found.ratings, queues, level=level)
    out["problems"] = problems
    return out


# --- words ---------------------------------------------------------------------------------------------
def _iv(block: Mapping[str, Any] | None) -> str:
    if not block or block.get("estimate") is None:
        return "-"
    lo, hi = block.get("low"), block.get("high")
    return f"{block['estimate']:.3f} [{lo:.3f}, {hi:.3f}]" if lo is not None and hi is not None \
        else f"{block['estimate']:.3f}"


def _left(left: Mapping[str, int]) -> str:
    return ", ".join(f"{n} {why}" for why, n in left.items() if n)


def pair_lines(p: Mapping[str, Any], level: float, indent: str = "  ") -> list[str]:
    """The three rows of one pair and what the labels were worth."""
    lvl = f"{level:.0%}"
    eff = p.get("effective_labels")
    lines = [f"{p['model_a']} vs {p['model_b']}: win rate of {p['model_a']} (ties half), {lvl} interval",
             f"{indent}label-corrected      {_iv(p['label_corrected'])}",
             f"{indent}labels only          {_iv(p['labels_only'])}",
             f"{indent}judge only           {_iv(p['judge_only'])}  (if the judge were right)",
             f"{indent}labels used {p['labels_used']} of {p['items']} items"
             + (f", worth {eff:.0f} labels alone" if isinstance(eff, (int, float)) and p["labels_used"] else "")
             + _decide(p.get("labels_to_decide"), p["labels_used"])]
    if p.get("left_out"):
        lines.append(f"{indent}left out of the estimate: {_left(p['left_out'])}")
    return lines


def _decide(n: Any, used: int) -> str:
    if used < 2 or n is None:
        return ""
    return "; decided (the interval excludes 0.5)" if n == 0 else f"; about {n} more labels would decide it"


def format_corrected(d: Mapping[str, Any]) -> str:
    """The corrected estimates for the terminal: per pair the three rows, the labels used and what they
    were worth, how many more would decide it, what was left out and why; ratings; annotators."""
    level = d.get("level", LEVEL)
    lines: list[str] = []
    q = d.get("queue")
    lines.append(f"label-corrected verdicts: {d.get('labels', 0)} labels"
                 + (f"; queue: {q['design']} draws, seed {q['seed']}" if q else "; no label drawn from the queue yet "
                    "(`eval.py label SAVE_PATH --next 10`)"))
    for p in d.get("pairs", []):
        if not p["labels_used"] and not p.get("left_out"):
            continue
        lines += pair_lines(p, level)
        for c in p.get("categories", []):
            lines.append(f"    {c['category']}: label-corrected {_iv(c['label_corrected'])}, labels only "
                         f"{_iv(c['labels_only'])}, judge only {_iv(c['judge_only'])} ({c['labels_used']} labels)")
    for r in d.get("ratings", []):
        if "difference" in r:
            diff = r["difference"]
            lines.append(f"{r['metric']}: {r['model_a']} - {r['model_b']} (mean difference): label-corrected "
                         f"{_iv(diff['label_corrected'])}, labels only {_iv(diff['labels_only'])}, judge only "
                         f"{_iv(diff['judge_only'])} ({r['labels_used']} items with both scored)")
        else:
            lines.append(f"{r['metric']}: {r['model']} mean: label-corrected {_iv(r['label_corrected'])}, labels only "
                         f"{_iv(r['labels_only'])}, judge only {_iv(r['judge_only'])} ({r['labels_used']} labels)")
    if d.get("left_out"):
        lines.append(f"left out of the estimates: {_left(d['left_out'])} (they still count for agreement and kappa;"
                     " docs/labels.md says why)")
    for x in d.get("not_in_run", [])[:10]:
        what = (f"{x['model_a']} vs {x['model_b']}" if x["kind"] == "battle" else f"{x['model']} on {x['metric']}")
        lines.append(f"  not in the run: item {x['id']} ({what}, by {x['annotator']}): {x['why']}")
    if len(d.get("not_in_run", [])) > 10:
        lines.append(f"  ... and {len(d['not_in_run']) - 10} more not in the run")
    ann = d.get("annotators") or {}
    if len(ann.get("names", [])) > 1:
        for k in ann["kappa"]:
            if not k["items"]:
                continue
            lines.append(f"annotators {k['a']} and {k['b']}: Cohen's kappa "
                         f"{'-' if k['kappa'] is None else format(k['kappa'], '.3f')} on {k['items']} shared items")
        if ann.get("fleiss") is not None:
            lines.append(f"annotators: Fleiss' kappa {ann['fleiss']:.3f} (items every annotator labelled)")
    for name, a in (ann.get("agreement_with_judge") or {}).items():
        if a["items"]:
            lines.append(f"annotator {name}: agreement with the judge "
                         f"{'-' if a['agreement'] is None else format(a['agreement'], '.3f')} ({a['items']} labels)")
    return "\n".join(lines)


def current(root: Path, *, level: float = LEVEL) -> dict[str, Any] | None:
    """The label-corrected estimates from the labels as they are now; None where the save path has no labels."""
    from ..savepath.layout import labels_file

    return corrected(root, level=level) if labels_file(root).is_file() else None
