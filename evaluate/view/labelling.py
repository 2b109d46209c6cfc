"""What the viewer does with a person's labels beyond storing them (issue 44): a label checked against
the run it names (its item, pair, metric and scale) before it is written, the annotator it carries,
whether the label queue handed its item out, `Label next`, and the label-corrected verdicts for the
labels panel.

Why the queue decides, not the page: the corrected estimate is unbiased only over items the tool drew.
A label is on the queue when the queue (`judgecheck.queue`) handed that item out; the page cannot make
a label it chose itself count as drawn, whatever it sends.
"""

from __future__ import annotations

import math
from typing import Any

from ..core.errors import InputError
from ..savepath.labels import MAX_FIELD, VERDICTS, LabelError
from .catalog import Refused
from .items import Entry, RunView, label_in_pair

ANONYMOUS = "anonymous"
KINDS = ("battle", "rating")
DESIGNS = ("uniform", "active")


def annotator(value: Any) -> str:
    """The name a label is given by: "anonymous" when none was typed."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return ANONYMOUS
    if not isinstance(value, str):
        raise LabelError(f'"annotator": expected a name (a string), got {value!r:.40}')
    if len(value) > MAX_FIELD:
        raise LabelError(f'"annotator": {len(value)} characters, at most {MAX_FIELD}')
    return value.strip()


def rating_keys(view: RunView) -> list[str]:
    """The GPT metrics of the run a person may score (a rating with a scale of its own)."""
    return [k for k in view.keys if k.split("/", 1)[0] == "GPT" and "@" not in k and view.scales.get(k)]


def metric_name(key: str) -> str:
    """`GPT/correctness` -> `correctness`: how a rating label names its metric."""
    return key.split("/", 1)[1] if "/" in key else key


def battle_payload(body: dict[str, Any], view: RunView, entry: Entry, pair: tuple[int, int]) -> dict[str, Any]:
    """The battle label to store, from the page's {verdict, note, annotator} on the pair shown."""
    if len(view.models) < 2:
        raise LabelError('"pair": this run has one model, no pair to label')
    if body.get("verdict") not in VERDICTS:
        raise LabelError(f'"verdict": expected one of {", ".join(VERDICTS)}, got {body.get("verdict")!r:.40}')
    note = body.get("note")
    return {"id": entry.id, "category": entry.category, "model_a": view.models[pair[0]],
            "model_b": view.models[pair[1]], "verdict": body["verdict"],
            "note": note if isinstance(note, str) else "", "annotator": annotator(body.get("annotator")),
            "run_id": (view.data.manifest or {}).get("run_id")}


def rating_payload(body: dict[str, Any], view: RunView, entry: Entry) -> dict[str, Any]:
    """The rating label to store: a score on one of the run's GPT metrics for one model's answer, on that
    metric's scale."""
    model = body.get("model")
    if isinstance(model, int) and not isinstance(model, bool) and 0 <= model < len(view.models):
        name = view.models[model]
    elif isinstance(model, str) and model in view.models:
        name = model
    else:
        raise LabelError(f'"model": expected one of the run\'s models ({", ".join(view.models)}) or its index, '
                         f"got {model!r:.60}")
    item = entry.items[view.models.index(name)]
    if item is None:
        raise LabelError(f'"model": {name} has no answer to item {entry.id}')
    keys = rating_keys(view)
    metric = body.get("metric")
    key = next((k for k in keys if metric in (k, metric_name(k))), None)
    if key is None:
        raise LabelError(f'"metric": expected one of the run\'s GPT metrics ({", ".join(keys) or "none"}), '
                         f"got {metric!r:.60}")
    judged = (item.get("scores") or {}).get(key)
    if isinstance(judged, bool) or not isinstance(judged, (int, float)):  # as `eval.py label` checks it
        raise LabelError(f'"metric": {name}\'s answer to item {entry.id} has no judge score on {key} to correct')
    lo, hi = view.scales[key]
    score = body.get("score")
    if isinstance(score, bool) or not isinstance(score, (int, float)) or not math.isfinite(score) \
            or not lo <= score <= hi:
        raise LabelError(f'"score": expected a number on {key}\'s scale, {lo:g} to {hi:g}, got {score!r:.40}')
    note = body.get("note")
    return {"kind": "rating", "id": entry.id, "category": entry.category, "model": name,
            "metric": metric_name(key), "score": score, "note": note if isinstance(note, str) else "",
            "annotator": annotator(body.get("annotator")), "run_id": (view.data.manifest or {}).get("run_id")}


def on_queue(root: Any, payload: dict[str, Any]) -> dict[str, Any] | None:
    """The queue draw of this label's item when the queue handed it out, else None (off the queue)."""
    from ..judgecheck.queue import queue_for

    draw = queue_for(root, payload)
    return draw.to_dict() if draw is not None else None


def ratings_of(root: Any, entry: Entry) -> list[dict[str, Any]]:
    """Every rating label of this item, in file order (the latest of an annotator, model and metric counts)."""
    from ..savepath.labels import read_labels

    return [r.to_dict() for r in read_labels(root).ratings if r.id == entry.id and r.category == entry.category]


def shown(label: Any, view: RunView, pair: tuple[int, int] | None) -> dict[str, Any]:
    """A stored label as the page shows it: a battle label's verdict also with the pair shown as A, B."""
    out = label.to_dict()
    if pair is not None and getattr(label, "verdict", None) in VERDICTS:
        out["verdict_here"] = label_in_pair(label, view.models[pair[0]])
    return out


def next_unit(root: Any, view: RunView, query: dict[str, str]) -> dict[str, Any]:
    """`Label next`: the next item of the queue this annotator has not labelled, with the pair (model
    indices) or the model and metric to open it at; {"unit": None, "why": ...} when the queue is done."""
    from ..judgecheck.queue import hand_out

    kind = query.get("kind") or "battle"
    if kind not in KINDS:
        raise Refused(400, f'"kind": expected one of {", ".join(KINDS)}, got {kind!r:.40}')
    design = query.get("design") or None
    if design is not None and design not in DESIGNS:
        raise Refused(400, f'"design": expected one of {", ".join(DESIGNS)}, got {design!r:.40}')
    seed = query.get("seed") or None
    if seed is not None:
        try:
            seed = int(seed)
        except ValueError:
            raise Refused(400, f'"seed": expected a whole number, got {seed!r:.40}') from None
    metric = None
    if kind == "rating":
        keys = rating_keys(view)
        key = next((k for k in keys if query.get("metric") in (k, metric_name(k))), None)
        if key is None:
            raise Refused(400, f'"metric": expected one of the run\'s GPT metrics ({", ".join(keys) or "none"}), '
                               f"got {query.get('metric')!r:.60}")
        metric = metric_name(key)
    elif len(view.models) < 2:
        raise Refused(400, '"kind": this run has one model, no pair to label')
    who = annotator(query.get("annotator"))
    try:
        unit = hand_out(root, kind=kind, design=design, seed=seed, annotator=who, metric=metric)
    except (InputError, ValueError) as exc:
        raise Refused(400, str(exc)) from None
    if unit is None:
        return {"unit": None, "annotator": who,
                "why": f"{who} has labelled every item of this queue" if kind == "battle"
                else f"{who} has scored every item of this queue on {metric}"}
    out = {k: getattr(unit, k, None) for k in ("id", "category", "model_a", "model_b", "model", "metric", "draw",
                                                "p", "seed", "design")}
    out["kind"] = kind
    if kind == "battle":
        if out["model_a"] not in view.models or out["model_b"] not in view.models:
            raise Refused(409, f"the queue handed out item {out['id']} of {out['model_a']} vs {out['model_b']}, "
                               f"not a pair of this run ({', '.join(view.models)})")
        out["pair"] = [view.models.index(out["model_a"]), view.models.index(out["model_b"])]
    else:
        out["model_index"] = view.models.index(out["model"]) if out["model"] in view.models else None
    return {"unit": out, "annotator": who}


def after_label(root: Any, view: RunView) -> dict[str, Any]:
    """The corrected verdicts once a label is stored, also written to the save path
    (`labels/corrected.json`, as `eval.py label` rewrites it), so a script reading it sees the viewer's
    labels too."""
    from ..savepath.labels import write_corrected

    out = corrected_or_why(root, view)
    if "error" not in out:
        write_corrected(root, out)
    return out


def corrected_or_why(root: Any, view: RunView) -> dict[str, Any]:
    """`judgecheck.corrected` of the save path on the run already loaded (`corrected_from`: the labels and
    the queue read afresh, the run not), or {"error": why} when it cannot be computed: the panel says why
    instead of failing the label that was just stored."""
    from ..judgecheck.corrected import corrected_from
    from ..savepath.labels import read_labels, read_queues

    try:
        found = read_labels(root)
        problems = list(found.problems)
        out = corrected_from(view.data, found.labels, found.ratings, read_queues(root, problems))
    except (InputError, ValueError) as exc:
        return {"error": str(exc)}
    out["problems"] = problems
    return out
