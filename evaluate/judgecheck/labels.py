"""The judge check on a person's own labels (`eval.py judge-check --labels SAVE_PATH`, and the viewer's
labels panel): the battle verdicts the judge already gave in the run against the verdicts a person gave
in `eval.py view` (`labels.jsonl`). No judge request: the judge's verdicts are read from battles/.

Why this exists: the labelled check needs a pairwise file with labels, and a user's own data has none;
labelling a few dozen of the run's own items in the viewer makes one. The numbers and the verdict are
those of the labelled check (`labelled.baselines`, `labelled.decide`, `store.verdict_of`): agreement
on the decided labels (a judge tie counts half; label ties left out of it and counted) with a 95% Wilson
interval beside every trivial rule, and Cohen's kappa (`stats.agreement`) over every label, ties
included, so agreement that the label frequencies alone would give counts for nothing.

A label names its two models as the person saw them; it is matched to the battle of that pair in
either orientation and read in the battle file's (so "A" is one model throughout, as kappa needs). The
latest label of an item and pair counts (a person may change their mind). Below MIN_LABELS labels with
a judge verdict there is no verdict: "not checked", with how many more are needed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable, Mapping

from ..core.errors import InputError
from ..core.numbers import ci_text, fmt3
from .store import verdict_of
from ..savepath import read
from ..savepath.labels import Label, LabelFile, read_labels
from ..savepath.log import NoResults, read_run_log
from ..stats.agreement import cohen_kappa, cohen_kappa_interval, strength
from ..stats.battle import judge_bias
from .labelled import baselines, decide
from .report import table
from .rules import RULES, _wilson
from ..report.analysis import use_label_verdicts

MIN_LABELS = 10  # labels with a judge verdict before agreement, kappa and a verdict are shown
SWAP = {"A": "B", "B": "A"}
RULE_WORDS = {"longer": "the longer answer", "shorter": "the shorter answer",
              "first": "always A (the battle's model_a)", "second": "always B (the battle's model_b)",
              "tie": "always a tie"}


def latest(labels: Iterable[Label]) -> tuple[list[Label], int]:
    """The last label of each item and pair of models (either orientation), in file order of their
    last writing, and how many earlier labels they replace."""
    last: dict[tuple[str, str, frozenset[str]], Label] = {}
    total = 0
    for lab in labels:
        total += 1
        key = (lab.id, lab.category, frozenset((lab.model_a, lab.model_b)))
        last.pop(key, None)  # re-inserted: the order is that of the latest writing
        last[key] = lab
    return list(last.values()), total - len(last)


BattleIndex = dict[tuple[str, str], dict[tuple[str, str], Mapping[str, Any]]]


def battle_index(battles: Iterable[Mapping[str, Any]]) -> BattleIndex:
    """(model_a, model_b) of each battle file -> (item id, category) -> its item."""
    out: BattleIndex = {}
    for bt in battles:
        s = bt.get("summary") or {}
        if not s.get("model_a") or not s.get("model_b"):
            continue
        out[(s["model_a"], s["model_b"])] = {(str(it.get("id")), str(it.get("category", ""))): it
                                             for it in bt.get("items", []) if isinstance(it, Mapping)}
    return out


JudgeIndex = dict[tuple[str, str], dict[str, dict[tuple[str, str], Mapping[str, Any]]]]


def judges_index(battles: Iterable[Mapping[str, Any]]) -> JudgeIndex:
    """A panel's battle files: (model_a, model_b) -> judge -> (item id, category) -> that judge's own item
    (`panel.judges.<name>.items`, with its probability-weighted and calibrated verdicts); {} for one judge."""
    out: JudgeIndex = {}
    for bt in battles:
        s = bt.get("summary") or {}
        own = (bt.get("panel") or {}).get("judges") if isinstance(bt.get("panel"), Mapping) else None
        if not s.get("model_a") or not s.get("model_b") or not isinstance(own, Mapping):
            continue
        out[(s["model_a"], s["model_b"])] = {
            str(n): {(str(it.get("id")), str(it.get("category", ""))): it for it in (j or {}).get("items", [])
                     if isinstance(it, Mapping)} for n, j in own.items() if isinstance(j, Mapping)}
    return out


def judge_verdict(index: BattleIndex, lab: Label) -> tuple[str | None, Mapping[str, Any] | None, bool]:
    """The judge's verdict on a label's item as its battle file holds it ("A", "B", "tie", "invalid" for
    the file's model_a and model_b), the battle item, and whether the file holds the pair the other way
    round from the label; (None, None, False) when the run has no battle verdict on that item."""
    for pair, swapped in (((lab.model_a, lab.model_b), False), ((lab.model_b, lab.model_a), True)):
        item = (index.get(pair) or {}).get((lab.id, lab.category))
        if item is not None:
            return str(item.get("verdict") or "invalid"), item, swapped
    return None, None, False


def _longer(la: int, lb: int) -> str:
    return "tie" if la == lb else "A" if la > lb else "B"


RULE_PREDICT = {"longer": lambda la, lb: _longer(la, lb),
                "shorter": lambda la, lb: SWAP.get(_longer(la, lb), "tie"),
                "first": lambda la, lb: "A", "second": lambda la, lb: "B", "tie": lambda la, lb: "tie"}


def agreement(labels: list[Label], battles: list[Mapping[str, Any]], outputs: Mapping[tuple[str, str, str], str], *,
              source: str = "labels.jsonl") -> dict[str, Any]:
    """The check's record on in-memory data: `labels` as read (every one; the latest per item and pair
    counts), the run's battle files, `outputs`: (model, item id, category) -> answer text (for the
    length rules). The record has the labelled check's shape (`labelled_check`), so `verdict_of` words
    it, plus Cohen's kappa of the judge and of each trivial rule."""
    kept, replaced = latest(labels)
    index = battle_index(battles)
    matched, no_battle, missing = [], 0, []
    models = {m for pair in index for m in pair}
    for lab in kept:  # every verdict in the orientation of the battle file: "A" is always the same model
        verdict, item, swapped = judge_verdict(index, lab)
        if verdict is None:
            no_battle += 1
            unknown = [m for m in (lab.model_a, lab.model_b) if m not in models]
            missing.append({"id": lab.id, "category": lab.category, "model_a": lab.model_a, "model_b": lab.model_b,
                            "why": (f"no model {', '.join(map(repr, unknown))} in the run's battles" if unknown
                                    else "no battle of this pair holds this item")})
            continue
        a, b = (lab.model_b, lab.model_a) if swapped else (lab.model_a, lab.model_b)
        lengths = (len(outputs.get((a, lab.id, lab.category), "")), len(outputs.get((b, lab.id, lab.category), "")))
        truth = SWAP.get(lab.verdict, lab.verdict) if swapped else lab.verdict
        matched.append({"label": lab, "truth": truth, "judge": verdict, "item": item, "lengths": lengths,
                        "pair": (a, b)})
    valid = [m for m in matched if m["judge"] in ("A", "B", "tie")]
    decided = [m for m in valid if m["truth"] in ("A", "B")]
    label_ties = sum(m["truth"] == "tie" for m in valid)
    scored, k = _against_labels([(m["truth"], m["judge"]) for m in valid])
    n, accuracy, right, judge_ties = scored["n"], scored["accuracy"], scored["right"], scored["judge_ties"]
    rows = [{"response_a": "x" * m["lengths"][0], "response_b": "x" * m["lengths"][1],
             "label": m["truth"].lower()} for m in decided]
    base = baselines(rows, ties_labelled=label_ties > 0)
    truth = [m["truth"] for m in valid]
    for name, b in base.items():
        b["kappa"] = cohen_kappa(truth, [RULE_PREDICT[name](*m["lengths"]) for m in valid])
    # the biases on the labelled items, each in its battle's own orientation (ids made unique across pairs)
    items = [{**m["item"], "id": str(i)} for i, m in enumerate(matched)]
    lengths = {str(i): m["lengths"] for i, m in enumerate(matched)}
    bias = judge_bias(items, lengths)
    decided_rules = decide(k, n, accuracy, base, bias, valid=len(valid), total=len(matched),
                           chance={"kappa": scored["kappa"], "kappa_strength": scored["kappa_strength"],
                                   "kappa_ci": scored["kappa_ci95"]})
    record: dict[str, Any] = {
        "data": source, "labels": len(labels), "items_labelled": len(kept), "relabelled": replaced,
        "with_judge_verdict": len(matched), "without_battle": no_battle, "not_in_run": missing,
        "pairs": n, "label_ties_left_out": label_ties,
        "agreement": {"accuracy": accuracy, "n": n, "ci95": decided_rules["ci95"], "right": right,
                      "wrong": n - right - judge_ties, "judge_ties": judge_ties,
                      "invalid": len(matched) - len(valid),
                      **{key: scored[key] for key in ("kappa", "kappa_ci95", "kappa_n", "kappa_strength")},
                      "note": "agreement: a judge tie counts half, label ties and invalid verdicts left out of n; "
                              "95% Wilson interval. Cohen's kappa: every label with a valid verdict, ties "
                              "included (A / B / tie), 95% percentile bootstrap interval (none below 10)"},
        "baselines": base,
        "position": {"flip_rate": bias["flip_rate"], "p_first": bias["first_position_wins"]},
        "p_longer": bias["longer_wins"], "invalid_rate": bias["invalid_rate"],
        "rule": RULES["labelled"], "min_labels": MIN_LABELS,
        "items": [{"id": m["label"].id, "category": m["label"].category, "model_a": m["pair"][0],
                   "model_b": m["pair"][1], "label": m["truth"], "judge": m["judge"],
                   "weighted": m["item"].get("weighted_verdict"), "calibrated": m["item"].get("calibrated_verdict")}
                  for m in matched],
    }
    record.update({k2: decided_rules[k2] for k2 in ("beats_length_baseline", "best_trivial_rule",
                                                    "beats_trivial_rules", "decides_by_position",
                                                    "above_chance")})
    record["agreement"]["verdicts"] = kinds_against_labels(matched, lambda m: m["item"])
    per_judge = judges_agreement(valid)
    own = judges_index(battles)
    for name, j in per_judge.items():  # each judge's own weighted and calibrated verdicts, as the panel's
        j["verdicts"] = kinds_against_labels(
            valid,
            lambda m, name=name: ((own.get(m["pair"]) or {}).get(name) or {}).get((m["label"].id, m["label"].category)),
            parsed=j)
    if per_judge:  # a panel's battles: each judge's own verdicts on the same labels, beside the panel's
        record["judges"] = per_judge
    if len(valid) < MIN_LABELS:
        record["trustworthy"] = None
        record["reasons"] = [f"too few labels: {len(valid)} with a valid judge verdict, {MIN_LABELS} needed"]
        record["verdict_text"] = (f"not checked: {len(valid)} of the {MIN_LABELS} labels with a judge verdict "
                                  f"needed ({MIN_LABELS - len(valid)} more)")
    else:
        record["trustworthy"], record["reasons"] = decided_rules["trustworthy"], decided_rules["reasons"]
        record["verdict_text"] = verdict_of({"labelled": record})[1]
    return record


def _against_labels(pairs: list[tuple[str, str]]) -> tuple[dict[str, Any], float]:
    """Verdicts against labels, one (label, verdict) pair per label with a valid verdict (A / B / tie), in
    the same orientation: agreement over the labels that decide (a verdict tie counts half, label ties
    left out) with its 95% Wilson interval, and Cohen's kappa over every pair, ties included. Also the
    credit k (right + ties / 2) that the agreement is k / n of."""
    decided = [(t, v) for t, v in pairs if t in ("A", "B")]
    n = len(decided)
    right = sum(v == t for t, v in decided)
    ties = sum(v == "tie" for _, v in decided)
    k = right + 0.5 * ties
    kappa = cohen_kappa_interval([t for t, _ in pairs], [v for _, v in pairs])
    return {"accuracy": round(k / n, 4) if n else None, "n": n, "ci95": _wilson(k, n), "right": right,
            "judge_ties": ties, "kappa": kappa.kappa,
            "kappa_ci95": [kappa.low, kappa.high] if kappa.low is not None else None,
            "kappa_n": kappa.n, "kappa_strength": strength(kappa.kappa)}, k


KINDS = {"raw": "parsed", "weighted": "probability-weighted", "calibrated": "position-calibrated"}
MISSING = {
    "weighted": "no probabilities in the run: its battle verdicts carry no probability-weighted verdict (the judge "
                "returned no log-probabilities; a backend that returns them, e.g. an OpenAI-compatible server, gives "
                "them)",
    "calibrated": "no position-calibrated verdicts in the run's battle files (the calibration needs items judged "
                  "validly in both orders: both_orders true)"}


SHORT_MISSING = {"weighted": "the run has no probabilities", "calibrated": "no calibrated verdicts in the run"}


def kinds_against_labels(matched: list[dict[str, Any]], item_of: Any, parsed: dict[str, Any] | None = None
                         ) -> dict[str, dict[str, Any]]:
    """The parsed, probability-weighted and position-calibrated verdicts (a battle item's `verdict`,
    `weighted_verdict`, `calibrated_verdict`, as the battle file holds them; the calibration fitted when
    the run saved the battle, on all its items' two orders, no labels) each against the labels
    (`_against_labels`: agreement with its n and Wilson interval, Cohen's kappa with its n and interval),
    over the labels whose item carries that kind of verdict. `item_of(m)`: the battle item a matched label
    is held against (a panel's judge's own). A kind no label's item carries is {"n": 0, "missing": why},
    so a reader is told why it is absent rather than find it left out. `parsed`: the raw block when the
    caller has it already."""
    out: dict[str, dict[str, Any]] = {}
    for kind, field_name in (("raw", "verdict"), ("weighted", "weighted_verdict"), ("calibrated", "calibrated_verdict")):
        if kind == "raw" and parsed is not None:
            out[kind] = {k: v for k, v in parsed.items() if k != "verdicts"}
            continue
        pairs = []
        for m in matched:
            v = (item_of(m) or {}).get(field_name)
            if v in ("A", "B", "tie"):
                pairs.append((m["truth"], str(v)))
        if not pairs and kind in MISSING:
            out[kind] = {"accuracy": None, "n": 0, "ci95": None, "kappa": None, "kappa_ci95": None, "kappa_n": 0,
                         "missing": MISSING[kind]}
            continue
        scored, _ = _against_labels(pairs)
        out[kind] = {**scored, "labels": len(pairs), "missing": None}
    return out


def judges_agreement(valid: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """A panel's judges each against the labels the panel's verdicts were matched to (`valid`: the labels
    with a valid panel verdict, in the battle file's orientation), as the panel is (`_against_labels`, over
    the labels the judge gave a valid verdict on). {} when the battle items hold no judges' verdicts (one judge)."""
    names = list(dict.fromkeys(n for m in valid for n in ((m["item"] or {}).get("judges") or {})))
    out = {}
    for name in names:
        mine = [(m["truth"], str(((m["item"] or {}).get("judges") or {}).get(name) or "invalid")) for m in valid]
        rated = [(t, v) for t, v in mine if v in ("A", "B", "tie")]
        scored, _ = _against_labels(rated)
        del scored["right"]  # the record's keys per judge, as before
        out[name] = {**scored, "invalid": len(mine) - len(rated)}
    return out


def outputs_of(results: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str, str], str]:
    """(model, item id, category) -> answer text, from result files."""
    return {(str(r.get("model")), str(it.get("id")), str(it.get("category", ""))): str(it.get("output") or "")
            for r in results for it in r.get("items", []) if isinstance(it, Mapping)}


def check_labels(save_path: Path) -> tuple[dict[str, Any], LabelFile]:
    """`judge-check --labels SAVE_PATH`: the record, and the label file as read (its problems named).
    InputError when there are no labels or no battle verdicts to hold them against."""
    save_path = Path(save_path)
    if not save_path.is_dir():
        raise InputError(f"--labels {save_path}: no such folder (give the save path of a run)")
    read.check(save_path)
    found = read_labels(save_path)
    if not found.labels:
        why = "; ".join(found.problems) if found.problems else "no labels.jsonl (label items with `eval.py view`)"
        raise InputError(f"--labels {save_path}: no label to check the judge against: {why}")
    try:
        log = read_run_log(save_path)
    except NoResults as exc:
        raise InputError(f"--labels {save_path}: no battle verdicts to hold the labels against: {exc}") from None
    battles = log.battles
    if not battles:
        problems = [p for p in log.problems if "battles" in p]
        raise InputError(f"--labels {save_path}: no battle verdicts (battles/<a>__vs__<b>.json) to hold the labels "
                         "against; the judge's verdicts come from a run with GPT battles"
                         + (f" ({'; '.join(problems)})" if problems else ""))
    record = agreement(found.labels, battles, outputs_of(log.results), source=str(found.path))
    record["judge"] = sorted({_judge_name(bt.get("signature") or {}) for bt in battles})
    return record, found


def label_check_shown(log: Any, labels: list[Label] | None = None) -> dict[str, Any] | None:
    """The verdict a person's labels give on a run's judge, for the places that say "Judge check:" (the
    report, the viewer's runs list and run page) where no label-free check is stored: `agreement` on the
    run log's labels, battles and answers, as `judge-check --labels` and the viewer's labels panel compute
    it. `labels`: the labels as read now (the viewer keeps a run log while its results do not change, and
    labels come after), else the log's. None when there are no labels, no battles, or too few labels for a
    verdict (MIN_LABELS)."""
    labels = list(getattr(log, "labels", None) or []) if labels is None else labels
    if not labels or not getattr(log, "battles", None):
        return None
    rec = agreement(labels, log.battles, outputs_of(log.results), source="labels.jsonl")
    if rec["trustworthy"] is None:
        return None
    a = rec["agreement"]
    used = a["n"] + rec["label_ties_left_out"]
    return {"trustworthy": rec["trustworthy"], "verdict_text": rec["verdict_text"], "source": "labels",
            "labels": used, "accuracy": a["accuracy"], "n": a["n"], "kappa": a["kappa"],
            "note": f"from your {used} labels with a judge verdict (labels.jsonl; eval.py judge-check --labels "
                    "SAVE_PATH): no label-free check (judge_check.json) is stored"}


def _judge_name(sig: Mapping[str, Any]) -> str:
    """A battle's judge as a person reads it: backend and model, or a panel and its judges'."""
    def one(s: Mapping[str, Any]) -> str:
        j = s.get("judge") or {}
        return f"{j.get('backend', '?')} {j.get('model', '?')}"

    if "panel" in sig and isinstance(sig.get("judges"), Mapping):
        return (f"a panel of {len(sig['judges'])} judges (" + ", ".join(f"{n}: {one(s)}" for n, s in sig["judges"].items())
                + ")")
    return one(sig)


def format_labels_report(record: dict[str, Any]) -> str:
    """The record in aligned columns, as the other judge checks print theirs."""
    a = record["agreement"]
    lines = [f"labels: {record['data']}: {record['labels']} labels on {record['items_labelled']} items"
             + (f" ({record['relabelled']} relabelled: the latest counts)" if record["relabelled"] else "")
             + f"; {record['with_judge_verdict']} with a judge verdict"
             + (f", {record['without_battle']} without (no battle verdict on that item)" if record["without_battle"]
                else ""),
             f"judge: {', '.join(record.get('judge') or ['?'])} (its battle verdicts in the run; no new request)"]
    for x in (record.get("not_in_run") or [])[:10]:  # named, not silently dropped
        lines.append(f"  not in the run: item {x['id']!r} ({x['category'] or 'no category'}) of {x['model_a']} vs "
                     f"{x['model_b']}: {x['why']}")
    if len(record.get("not_in_run") or []) > 10:
        lines.append(f"  ... and {len(record['not_in_run']) - 10} more labels not in the run")
    lines.append("")

    def kap(value: Any, ci: Any = None) -> str:
        if value is None:
            return "undefined"
        return f"{value:.3f}" + (f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else "") + f" {strength(value)}"

    def kinds(who: str, block: dict[str, Any]) -> list[list[Any]]:
        """The probability-weighted and position-calibrated rows under a parsed one; a kind the run lacks
        says so on its line (records written before these were kept have none)."""
        out = []
        for kind in ("weighted", "calibrated"):
            b = (block.get("verdicts") or {}).get(kind)
            if b is None:
                continue
            if b.get("missing"):
                out.append([f"{who}, {KINDS[kind]}", "-", "-", 0, "none: " + SHORT_MISSING[kind]])
            else:
                out.append([f"{who}, {KINDS[kind]}", fmt3(b["accuracy"]), ci_text(b["ci95"]), b["n"],
                            kap(b["kappa"], b["kappa_ci95"])])
        return out

    who = "panel" if record.get("judges") else "judge"
    rows = [[f"{who} (ties half)", fmt3(a["accuracy"]), ci_text(a["ci95"]), a["n"], kap(a["kappa"], a["kappa_ci95"])],
            *kinds(who, a)]
    for name, j in (record.get("judges") or {}).items():
        rows.append([f"  judge {name}", fmt3(j["accuracy"]), ci_text(j["ci95"]), j["n"], kap(j["kappa"], j["kappa_ci95"])])
        rows += kinds(f"  judge {name}", j)
    for name, b in record["baselines"].items():
        best = " (best rule)" if name == record.get("best_trivial_rule") else ""
        rows.append([RULE_WORDS.get(name, name) + best, fmt3(b["accuracy"]), ci_text(b["ci95"]), b["n"], kap(b.get("kappa"))])
    lines += table(["who", "agreement", "95% Wilson CI", "n", "Cohen's kappa"], rows,
                   right=[False, True, False, True, False])
    flip = (record["position"]["flip_rate"] or {}).get("rate")
    first = (record["position"]["p_first"] or {}).get("rate")
    lines += ["", f"label ties {record['label_ties_left_out']} (in kappa, left out of agreement); judge ties "
                  f"{a['judge_ties']}, invalid {a['invalid']}; flip rate {fmt3(flip)}, P(first) {fmt3(first)}",
              "agreement: a judge tie counts half; kappa: every label with a valid verdict (A / B / tie), 95% "
              "bootstrap interval (none below 10)",
              "probability-weighted: the sign of the mean over both orders of the judge's expected-score difference "
              "(from its log-probabilities); position-calibrated: its preference with its lean to a position taken "
              "out (fitted on the battle's own two orders, no labels); each over the labels whose item has one"]
    missing = {KINDS[k]: b["missing"] for k, b in (a.get("verdicts") or {}).items() if b.get("missing")}
    lines += [f"{kind}: {why}" for kind, why in missing.items()]
    lines.append("")
    if record["trustworthy"] is None:
        lines.append(record["verdict_text"])
    else:
        lines.append(("TRUSTWORTHY" if record["trustworthy"] else "NOT TRUSTWORTHY") + ": "
                     + record["verdict_text"].split(": ", 1)[1])
    lines.append("rules: " + RULES["labelled"])
    return "\n".join(lines)


use_label_verdicts(label_check_shown)  # the report's "Judge check:" line falls back to the labels' verdict
