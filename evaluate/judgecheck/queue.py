"""The label queue: which item a person labels next, so that the labelled items are a sample the tool
drew and the label-corrected estimate (`judgecheck.corrected`) stays unbiased.

Why a queue: the corrected estimate subtracts the judge's mistakes as measured on the labelled items;
that measurement is unbiased only when the items were drawn at random. A person who labels what looks
interesting (the long answers, the items the judge got obviously wrong) measures a biased sample. So
`eval.py label --next`, the viewer's *Label next* and the Python API hand out items from one seeded
sequence per save path, and a label counts in the corrected estimate only when its item was handed out.

A queue is named by its kind (battle: an item of a pair of models; rating: one model's answer on a GPT
metric), its design and its seed (and, for ratings, a metric filter). Its units and drawn sequence are
written to the save path the first time it is asked for (`labels/queue.jsonl`), so every caller (the
CLI, the viewer, a script, a second person) draws the same sequence even if the run changes later; each
draw handed out is appended there too.

- uniform (the default): a seeded permutation of every unit, drawn without replacement, each draw
  stored with its selection probability 1/N.
- active (Zrnic and Candes, ICML 2024): draws with replacement, unit j with probability rising with the
  judge's uncertainty on it (`uncertainty`: the verdict flips between the two orders or the orders
  disagree, the judge's probability near one half, a panel split, an invalid verdict), mixed at least
  half and half with the uniform draw (`ppi.active_probabilities`) so no weight 1/(N p) exceeds 2, and
  more uniform where the uncertainty sits on a few items (the weights' design effect at most 1.2). The
  corrected estimate weights each draw by its inverse probability, which keeps it unbiased; a unit drawn again
  that the person already labelled on this queue counts as a second draw with the same label.

Each person walks the same sequence (two annotators label the same items, which gives their kappa);
`hand_out` returns the next draw this annotator has not been handed and has not labelled on this queue.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping

from ..core.errors import InputError
from ..savepath.labels import (ANONYMOUS, DESIGNS, AnyLabel, Label, QueueDraw, QueueState, RatingLabel,
                               read_labels, read_queues, record_handed, write_queue)
from ..savepath.log import NoResults, RunLog, read_run_log
from ..stats.ppi import active_probabilities, draw_sequence

DEFAULT_SEED = 0
GPT_PREFIX = "GPT/"


@dataclass(frozen=True)
class Unit:
    """One item of the queue as handed out: the item (id, category), the pair of models (battle) or the
    model and metric (rating), and the draw that handed it out."""

    id: str
    category: str
    kind: str
    model_a: str | None
    model_b: str | None
    model: str | None
    metric: str | None
    draw: int
    p: float
    seed: int
    design: str
    queue_metric: str | None = None  # the queue's metric filter (None: every metric)

    def queue(self) -> QueueDraw:
        return QueueDraw(seed=self.seed, design=self.design, draw=self.draw, p=self.p, kind=self.kind,
                         metric=self.queue_metric)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "category": self.category, "kind": self.kind}
        if self.kind == "battle":
            out.update(model_a=self.model_a, model_b=self.model_b,
                       answer=f"--set {self.id}=A|B|tie --pair {self.model_a},{self.model_b}")
        else:
            out.update(model=self.model, metric=self.metric,
                       answer=f"--set {self.id}=SCORE --metric {self.metric} --model {self.model}")
        out["queue"] = self.queue().to_dict()
        return out


# --- what the judge said on each unit ---------------------------------------------------------------------
def _p_first_a(order: Mapping[str, Any]) -> float | None:
    """P(A preferred) from one order's `p_first` (the first-shown answer's probability)."""
    p = order.get("p_first")
    if not isinstance(p, (int, float)):
        return None
    return float(p) if order.get("order") == "AB" else 1.0 - float(p)


def judge_probability(item: Mapping[str, Any]) -> float | None:
    """The judge's probability that model_a wins the item: the item's soft verdict `p_a` where it has one,
    else the mean over its orders of P(A preferred) from log-probabilities where every order has one."""
    if isinstance(item.get("p_a"), (int, float)):
        return float(item["p_a"])
    orders = item.get("orders") or []
    ps = [_p_first_a(o) for o in orders if isinstance(o, Mapping) and o.get("verdict") != "invalid"]
    if orders and ps and len(ps) == len(orders) and all(p is not None for p in ps):
        return sum(ps) / len(ps)  # type: ignore[arg-type]
    return None


VERDICT_VALUE = {"A": 1.0, "tie": 0.5, "B": 0.0}


def judge_value(item: Mapping[str, Any]) -> tuple[float, bool]:
    """The judge's value of a battle item on the win-rate scale (1 model_a better, 0.5 a tie, 0 model_b),
    and whether the judge gave a valid verdict: probability-weighted where the run has probabilities,
    else the verdict over both orders; an invalid verdict is 0.5 (it says nothing either way; the
    corrected estimate stays unbiased for any judge value, only less sharp)."""
    verdict = str(item.get("verdict") or "invalid")
    if verdict not in VERDICT_VALUE:
        return 0.5, False
    p = judge_probability(item)
    return (p if p is not None else VERDICT_VALUE[verdict]), True


def uncertainty(item: Mapping[str, Any]) -> float:
    """How unsure the judge was of a battle item, in [0, 1]: 1 for an invalid verdict or orders that
    disagree (the verdict flips with the order), 1 - |2p - 1| for its probability, the minority's share
    times two for a panel's split; the largest of these."""
    verdict = str(item.get("verdict") or "invalid")
    if verdict not in VERDICT_VALUE or item.get("flipped") or item.get("inconsistent"):
        return 1.0
    u = 0.0
    p = judge_probability(item)
    if p is not None:
        u = max(u, 1.0 - abs(2.0 * p - 1.0))
    votes = [str(v) for v in (item.get("judges") or {}).values() if str(v) in VERDICT_VALUE]
    if len(votes) > 1:
        top = max(votes.count(v) for v in set(votes))
        u = max(u, 2.0 * (1.0 - top / len(votes)))
    return min(1.0, u)


# --- the units of a run ---------------------------------------------------------------------------------
def battle_units(log: RunLog) -> list[tuple[list[str], Mapping[str, Any]]]:
    """([id, category, model_a, model_b], battle item) for every item of every battle file, in file order."""
    out = []
    for bt in log.battles:
        s = bt.get("summary") or {}
        if not s.get("model_a") or not s.get("model_b"):
            continue
        for it in bt.get("items", []):
            if isinstance(it, Mapping):
                out.append(([str(it.get("id")), str(it.get("category", "")), str(s["model_a"]), str(s["model_b"])], it))
    return out


def gpt_metrics(log: RunLog) -> dict[str, tuple[float, float]]:
    """The run's GPT metrics (name without "GPT/") and each one's scale (from its signature; 1-5 without one)."""
    out: dict[str, tuple[float, float]] = {}
    for r in log.results:
        for key, sig in (r.get("signatures") or {}).items():
            if key.startswith(GPT_PREFIX) and key[len(GPT_PREFIX):] not in out:
                scale = (sig or {}).get("scale") or [1, 5]
                out[key[len(GPT_PREFIX):]] = (float(scale[0]), float(scale[1]))
    return out


def rating_units(log: RunLog, metric: str | None = None) -> list[tuple[list[str], float]]:
    """([id, category, model, metric], the judge's score) for every scored answer on a GPT metric (the
    one named, or every one), in result-file order."""
    out = []
    for r in log.results:
        model = str(r.get("model"))
        for it in r.get("items", []):
            if not isinstance(it, Mapping):
                continue
            for key, value in (it.get("scores") or {}).items():
                name = key[len(GPT_PREFIX):]
                if key.startswith(GPT_PREFIX) and (metric is None or name == metric) \
                        and isinstance(value, (int, float)):
                    out.append(([str(it.get("id")), str(it.get("category", "")), model, name], float(value)))
    return out


def _log(root: Path) -> RunLog:
    try:
        return read_run_log(root)
    except NoResults as exc:
        raise InputError(f"{root}: no run to label: {exc}") from None


def build_queue(log: RunLog, *, kind: str, design: str, seed: int, metric: str | None) -> QueueState:
    """A new queue over the run's units (module docstring)."""
    if design not in DESIGNS:
        raise InputError(f"--design: expected one of {', '.join(DESIGNS)}, got {design!r}")
    if kind == "battle":
        found = battle_units(log)
        units = [u for u, _ in found]
        u_values = [uncertainty(it) for _, it in found]
        if not units:
            raise InputError(f"{log.path}: no battle verdicts (battles/<a>__vs__<b>.json) to label; "
                             "a run with GPT battles has them")
    elif kind == "rating":
        if metric is not None and metric not in gpt_metrics(log):
            raise InputError(f"--metric: {metric!r} is not a GPT metric of this run "
                             f"(it has {', '.join(sorted(gpt_metrics(log))) or 'none'})")
        units = [u for u, _ in rating_units(log, metric)]
        u_values = [0.0] * len(units)  # no uncertainty of a rating is stored: the active design draws uniformly
        if not units:
            raise InputError(f"{log.path}: no GPT rating to label (results hold no GPT/<metric> score)")
    else:
        raise InputError(f"kind: expected battle or rating, got {kind!r}")
    p = active_probabilities(u_values) if design == "active" else [1.0 / len(units)] * len(units)
    draws, _ = draw_sequence(len(units), seed=seed, design=design, p=p)
    return QueueState(kind=kind, design=design, seed=seed, metric=metric, units=units,
                      p=[float(x) for x in p], draws=[int(d) for d in draws])


def open_queue(root: Path, *, kind: str = "battle", design: str | None = None, seed: int | None = None,
               metric: str | None = None, log: RunLog | None = None) -> QueueState:
    """The queue of this kind, design and seed: the stored one, else a new one (written). Without a design
    or seed: the first stored queue of the kind (and metric filter), else uniform with seed 0."""
    root = Path(root)
    queues = read_queues(root)
    if design is None or seed is None:
        for q in queues.values():
            if q.kind == kind and q.metric == metric and (design is None or q.design == design) \
                    and (seed is None or q.seed == seed):
                return q
    design = design or "uniform"
    seed = DEFAULT_SEED if seed is None else int(seed)
    key = QueueState(kind, design, seed, metric, [], [], []).key
    if key in queues:
        return queues[key]
    queue = build_queue(log or _log(root), kind=kind, design=design, seed=seed, metric=metric)
    write_queue(root, queue)
    return read_queues(root).get(key, queue)  # another writer's definition, when it came first


def unit_key(kind: str, unit: Iterable[str]) -> tuple[str, ...]:
    """A unit's identity: a battle's pair in either orientation, a rating's model and metric."""
    u = list(unit)
    if kind == "battle":
        return (u[0], u[1], *sorted(u[2:4]))
    return tuple(u)


def label_unit(label: AnyLabel) -> tuple[str, ...]:
    if isinstance(label, RatingLabel):
        return unit_key("rating", [label.id, label.category, label.model, label.metric])
    return unit_key("battle", [label.id, label.category, label.model_a, label.model_b])


def _as_unit(queue: QueueState, draw: int) -> Unit:
    u = queue.units[queue.draws[draw]]
    battle = queue.kind == "battle"
    return Unit(id=u[0], category=u[1], kind=queue.kind, model_a=u[2] if battle else None,
                model_b=u[3] if battle else None, model=None if battle else u[2], metric=None if battle else u[3],
                draw=draw, p=queue.p[queue.draws[draw]], seed=queue.seed, design=queue.design,
                queue_metric=queue.metric)


def _labelled_on(queue: QueueState, labels: Iterable[AnyLabel], annotator: str) -> set[tuple[str, ...]]:
    return {label_unit(lab) for lab in labels
            if lab.annotator == annotator and lab.queue is not None and lab.queue.key == queue.key}


def next_units(root: Path, n: int = 1, *, kind: str = "battle", design: str | None = None, seed: int | None = None,
               annotator: str | None = None, metric: str | None = None, record: bool = True) -> list[Unit]:
    """The next `n` draws of the queue for this annotator (module docstring), recorded as handed out unless
    `record` is False (a preview). A draw of a unit this annotator already labelled on this queue (the
    active design draws with replacement) is recorded as handed and passed over: it counts with that label."""
    root = Path(root)
    who = annotator or ANONYMOUS
    queue = open_queue(root, kind=kind, design=design, seed=seed, metric=metric)
    found = read_labels(root)
    done = _labelled_on(queue, [*found.labels, *found.ratings], who)
    mine = {d for d, names in queue.handed.items() if who in names}
    out: list[Unit] = []
    repeats: list[int] = []
    chosen: set[tuple[str, ...]] = set()
    for draw in range(len(queue.draws)):
        if len(out) >= n:
            break
        if draw in mine:
            continue
        key = unit_key(queue.kind, queue.units[queue.draws[draw]])
        if key in done:
            repeats.append(draw)
            continue
        if key in chosen:  # drawn again within this batch: handed with its first draw, passed over now
            continue
        chosen.add(key)
        out.append(_as_unit(queue, draw))
    if record:
        record_handed(root, queue, [*repeats, *(u.draw for u in out)], who)
    return out


def hand_out(root: Path, *, kind: str = "battle", design: str | None = None, seed: int | None = None,
             annotator: str | None = None, metric: str | None = None) -> Unit | None:
    """The next item of the queue this annotator has not labelled (recorded as handed out), None at its end."""
    units = next_units(root, 1, kind=kind, design=design, seed=seed, annotator=annotator, metric=metric)
    return units[0] if units else None


def queue_for(root: Path, label: AnyLabel | Mapping[str, Any], *, queues: Mapping[str, QueueState] | None = None
              ) -> QueueDraw | None:
    """The queue draw a label belongs to: the first draw of a stored queue that handed this label's item
    (and pair, or model and metric) out to this annotator; None when no queue did (the label is off the
    queue). A label that names its queue already is checked against it."""
    if isinstance(label, Mapping):
        from ..savepath.labels import check_label

        label = check_label({**label, "queue": None})
    queues = read_queues(Path(root)) if queues is None else queues
    key = label_unit(label)
    kind = "rating" if isinstance(label, RatingLabel) else "battle"
    for q in queues.values():
        if q.kind != kind:
            continue
        for draw in sorted(q.handed):
            if label.annotator in q.handed[draw] and unit_key(kind, q.units[q.draws[draw]]) == key:
                return _as_unit(q, draw).queue()
    return None


def is_battle(label: AnyLabel) -> bool:
    return isinstance(label, Label)
