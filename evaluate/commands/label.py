"""`eval.py label SAVE_PATH`: label a run's items from a script or a terminal, on the label queue that keeps
the label-corrected estimate unbiased (evaluate/judgecheck/queue.py says why; docs/labels.md).

    eval.py label SAVE_PATH --next 5 [--design uniform|active] [--seed S] [--annotator NAME] [--json]
    eval.py label SAVE_PATH --set 12=A --set 14=tie [--pair MODEL_A,MODEL_B] [--annotator NAME]
    eval.py label SAVE_PATH --set 12=4 --metric correctness --model model_a
    eval.py label SAVE_PATH --import labels.csv|labels.jsonl

Exit codes: 0 done; 2 bad input (a label naming an item, pair, model or metric the run does not have, a
score off the metric's scale, a verdict not A/B/tie, a broken line of an import file): the label, its
field and what was expected are named, and nothing is written.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ..core.errors import InputError
from ..judgecheck.corrected import format_corrected
from ..judgecheck.labelling import add_labels, import_labels
from ..judgecheck.queue import next_units
from ..savepath import read
from ..savepath.labels import DESIGNS, VERDICTS
from .common import EXIT_CODES, EXIT_OK, Parser


class _InOrder(argparse.Action):
    """--set and --pair in the order given: a --set is about the --pair given before it."""

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        getattr(namespace, self.dest).append(values)
        namespace.order = [*(getattr(namespace, "order", None) or []), (self.dest, values)]


def build_parser() -> Parser:
    p = Parser(prog="eval.py label", description="Label a run's items on the label queue (the items the tool "
               "draws, so the label-corrected verdicts stay unbiased), store labels, or import labels made "
               "elsewhere. Every change rewrites labels/corrected.json.", epilog=EXIT_CODES)
    p.add_argument("save_path", type=Path, help="the save_path of a run (holds results/ and battles/)")
    p.add_argument("--next", nargs="?", const=1, type=int, metavar="N",
                   help="print the next N items of the queue for this annotator (default 1), recorded as handed out")
    p.add_argument("--design", choices=DESIGNS, help="the queue's design: uniform (the default) or active (more "
                   "draws where the judge is unsure, weighted back); a queue once made keeps its design")
    p.add_argument("--seed", type=int, help="the queue's seed (default: the queue already made, else 0)")
    p.add_argument("--set", action=_InOrder, default=[], metavar="ID=A|B|tie or ID=SCORE",
                   help="store a label (repeatable): a battle verdict for model_a of --pair, or with --metric and "
                        "--model a score on the metric's scale")
    p.add_argument("--pair", action=_InOrder, default=[], metavar="MODEL_A,MODEL_B",
                   help="the pair the --set verdicts after it are about (needed when an item is in several "
                   "battles; repeatable); A means MODEL_A is better")
    p.add_argument("--category", help="the item's category, where an id is in several")
    p.add_argument("--metric", help="a GPT metric of the run: --set gives scores, --next draws rating items")
    p.add_argument("--model", help="the model a --set score is about")
    p.add_argument("--annotator", help="who labels (default: anonymous); kept with each label")
    p.add_argument("--import", dest="import_file", type=Path, metavar="FILE",
                   help="labels made elsewhere, CSV or JSONL (off the queue unless the file gives each label's draw)")
    p.add_argument("--brief", action="store_true", help="with --next: the items' lines only, without the question "
                   "and the answers")
    p.add_argument("--json", action="store_true", help="print JSON: the items (--next) or the stored labels and "
                   "the corrected estimates")
    return p


def _pairs(order: list[tuple[str, str]], rating: bool) -> list[list[str] | None]:
    """The pair of each --set: one --pair given: every --set's; several: the --pair written after it
    (before the next --set), else the last one before it; none: the run's only battle holding the item."""
    if sum(dest == "pair" for dest, _ in order) == 1:
        only = next(value for dest, value in order if dest == "pair")
        order = [("pair", only), *((d, v) for d, v in order if d == "set")]
    out: list[list[str] | None] = []
    after: list[bool] = []
    last = None
    for dest, value in order:
        if dest == "set":
            out.append(last)
            after.append(False)
            continue
        if rating:
            raise InputError("--pair: a score takes --model, not --pair")
        pair = [x.strip() for x in value.split(",")]
        if len(pair) != 2 or not all(pair):
            raise InputError(f"--pair {value!r}: expected MODEL_A,MODEL_B (two model names)")
        if out and not after[-1]:
            out[-1], after[-1] = pair, True
        last = pair
    return out


def _sets(args) -> list[dict]:
    """--set ID=VALUE as labels (InputError naming the --set and what was expected)."""
    out = []
    rating = args.metric is not None
    if rating and args.model is None:
        raise InputError("--metric: a score is about one model's answer; give --model M too")
    if args.model is not None and not rating:
        raise InputError("--model: a score needs --metric NAME; a battle verdict takes --pair MODEL_A,MODEL_B")
    pairs = _pairs(getattr(args, "order", None) or [], rating)
    for i, text in enumerate(args.set, 1):
        pair = pairs[i - 1]
        item, sep, value = text.partition("=")
        if not sep or not item.strip():
            raise InputError(f"--set {text!r} (label {i}): expected ID=A|B|tie, or ID=SCORE with --metric; "
                             "nothing was stored")
        data: dict = {"id": item.strip()}
        if args.category is not None:
            data["category"] = args.category
        if rating:
            try:
                score = float(value)
            except ValueError:
                raise InputError(f"--set {text!r} (label {i}, item {item.strip()!r}): \"score\": expected a number "
                                 f"on {args.metric}'s scale, got {value!r}; nothing was stored") from None
            data.update(kind="rating", metric=args.metric, model=args.model, score=score)
        else:
            if value not in VERDICTS:
                raise InputError(f"--set {text!r} (label {i}, item {item.strip()!r}): \"verdict\": expected one of "
                                 f"{', '.join(VERDICTS)}, got {value!r}; nothing was stored")
            data["verdict"] = value
            if pair:
                data["model_a"], data["model_b"] = pair
        out.append(data)
    return out


SHOWN = 700  # characters of each text --next shows (--brief: none)


def _texts(root: Path) -> dict[tuple[str, str, str], dict]:
    """(model, item id, category) -> the item as the run's result files hold it (its question and answer)."""
    from ..savepath.log import read_run_log

    return {(str(r.get("model")), str(it.get("id")), str(it.get("category", ""))): it
            for r in read_run_log(root).results for it in r.get("items", []) if isinstance(it, dict)}


def _clip(text: str) -> str:
    text = " ".join(str(text or "").split())
    return text if len(text) <= SHOWN else text[:SHOWN] + f" [... {len(text) - SHOWN} more characters]"


def _show(texts: dict[tuple[str, str, str], dict], u) -> None:
    """The question and the answers to judge, indented under the item's line (a person labels from the terminal)."""
    models = [u.model_a, u.model_b] if u.kind == "battle" else [u.model]
    items = [texts.get((str(m), u.id, u.category)) or {} for m in models]
    first = next((it for it in items if it), {})
    question = "\n".join(t for t in (first.get("instruction"), first.get("input")) if t)
    print(f"    question: {_clip(question) or '(not in the result files)'}")
    for label, m, it in zip("AB" if u.kind == "battle" else "-", models, items):
        head = f"{label} = {m}" if u.kind == "battle" else m
        print(f"    {head}: {_clip(it.get('output')) if it else '(no answer in the result files)'}")


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    root = args.save_path
    if not root.is_dir():
        raise InputError(f"{root}: no such folder (give the save path of a run)")
    read.check(root)
    actions = sum([args.next is not None, bool(args.set), args.import_file is not None])
    if actions != 1:
        raise InputError("label: give one of --next [N], --set ID=VALUE (repeatable) or --import FILE")
    if args.next is not None:
        if args.next < 1:
            raise InputError(f"--next {args.next}: expected a positive number of items")
        units = next_units(root, args.next, kind="rating" if args.metric else "battle", design=args.design,
                           seed=args.seed, annotator=args.annotator, metric=args.metric)
        if args.json:
            print(json.dumps({"items": [u.to_dict() for u in units]}, ensure_ascii=False, indent=2))
        elif not units:
            print("the queue has no item left for this annotator")
        texts = _texts(root) if units and not args.json and not args.brief else {}
        for u in ([] if args.json else units):
            what = (f"{u.model_a} vs {u.model_b}" if u.kind == "battle" else f"{u.model} on {u.metric}")
            print(f"{u.id}\t{u.category}\t{what}\t(draw {u.draw}, p {u.p:.4g})\tanswer: "
                  + u.to_dict()["answer"] + (f" --annotator {args.annotator}" if args.annotator else ""))
            if texts:
                _show(texts, u)
        return EXIT_OK
    if args.design is not None or args.seed is not None:
        raise InputError("--design and --seed choose the queue --next draws from; a stored label finds its queue "
                         "itself (the queue that handed its item out)")
    if args.import_file is not None:
        stored = import_labels(root, args.import_file, annotator=args.annotator)
    else:
        stored = add_labels(root, _sets(args), annotator=args.annotator, source="--set label")
    if args.json:
        print(json.dumps({"stored": [lab.to_dict() for lab in stored.labels], "corrected": stored.corrected},
                         ensure_ascii=False, indent=2))
        return EXIT_OK
    for line in stored.lines:
        print(line)
    off = len(stored.labels) - stored.on_queue
    print(f"{len(stored.labels)} label(s) stored, {stored.on_queue} on the queue, {off} off it"
          + (" (left out of the corrected estimate: docs/labels.md says why)" if off else ""))
    if stored.corrected is not None:
        print(format_corrected(stored.corrected))
    return EXIT_OK
