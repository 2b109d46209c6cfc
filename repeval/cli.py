"""Command line: ``repeval fit`` learns a direction into a JSON file, ``repeval score`` /
``repeval compare`` apply it to a JSONL file.

    python -m repeval fit --criterion fluency --synthetic texts.jsonl -k 20 --output flu.json
    python -m repeval score --direction flu.json --input answers.jsonl --output scores.jsonl

The project's ``eval.py`` can mount the same commands with ``add_subparser(subparsers)``.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Sequence

from evaluate.core.errors import InputError

from .estimator import RepEval
from .pairs import (as_pairs, load_pairs_jsonl, pairs_from_pairwise, pairs_from_scored, read_rows,
                    synthetic_pairs)


DEVICE_HELP = "where the model runs: auto (a CUDA GPU when torch sees one, else the CPU), cpu, cuda, cuda:N, mps"


def _field(row: dict, names: Sequence[str], where: str, required: bool = True) -> str | None:
    for name in names:
        if row.get(name) is not None:
            return row[name]
    if required:
        raise InputError(f"{where}: missing field, expected one of {list(names)}")
    return None


def _training_pairs(args: argparse.Namespace) -> list:
    chosen = [x for x in (args.pairs, args.from_metaeval, args.synthetic) if x is not None]
    if len(chosen) != 1:
        raise InputError("repeval fit: give exactly one of --pairs, --from-metaeval, --synthetic")
    if args.pairs:
        pairs = load_pairs_jsonl(args.pairs)
        return pairs if args.k is None else pairs[: args.k]
    if args.from_metaeval:
        rows = read_rows(args.from_metaeval)
        if rows and "response_a" in rows[0]:
            return pairs_from_pairwise(rows, args.k, args.seed, where=str(args.from_metaeval))
        if not args.dimension:
            raise InputError(f"{args.from_metaeval}: --dimension is required for human-scored rows")
        return pairs_from_scored(rows, args.dimension, args.k, args.seed, where=str(args.from_metaeval))
    rows = read_rows(args.synthetic)
    texts = [_field(r, ("text", "output", "good"), f"{args.synthetic}:{i + 1}") for i, r in enumerate(rows)]
    srcs = [_field(r, ("src", "source"), f"{args.synthetic}:{i + 1}", required=False) for i, r in enumerate(rows)]
    kind = args.corruption or args.criterion
    return synthetic_pairs(texts, kind, args.k, args.seed, sources=srcs if all(s is not None for s in srcs) else None)


def cmd_fit(args: argparse.Namespace) -> int:
    _device(args)
    pairs = as_pairs(_training_pairs(args))
    template = args.template.read_text(encoding="utf-8") if args.template else None
    rep = RepEval(model=args.model, criterion=args.criterion, layer=args.layer, token=args.token,
                  method=args.method, n_components=args.n_components, template=template, seed=args.seed,
                  dtype=args.dtype, device=args.device).fit(pairs)
    path = rep.save(args.output)
    print(f"{path}: {rep.method} direction from {rep.n_pairs_} pairs, layer {rep.layer_}, token {rep.token_}, "
          f"training pairs ordered right: {rep.train_accuracy_:.0%}")
    return 0


def _write_rows(rows: list[dict], output: Path | None) -> None:
    text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    if output is None:
        sys.stdout.write(text)
    else:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(text, encoding="utf-8")


def _device(args: argparse.Namespace) -> str:
    """--device checked before the model loads (exit 2 naming what torch sees)."""
    from evaluate.models.device import device_problem

    bad = device_problem(args.device)
    if bad:
        raise InputError(f"--device: {bad}")
    return args.device


def cmd_score(args: argparse.Namespace) -> int:
    rep = RepEval.load(args.direction, model=args.model, device=_device(args))
    rows = read_rows(args.input)
    where = lambda i: f"{args.input}:{i + 1}"  # noqa: E731
    texts = [_field(r, ("output", "text", "hyp"), where(i)) for i, r in enumerate(rows)]
    needs_src = "{src}" in rep.template_
    needs_q = "{question}" in rep.template_
    srcs = [_field(r, ("source", "src"), where(i)) for i, r in enumerate(rows)] if needs_src else None
    qs = [_field(r, ("question", "instruction"), where(i)) for i, r in enumerate(rows)] if needs_q else None
    scores = rep.score(texts, sources=srcs, questions=qs)
    _write_rows([{"id": r.get("id", i), "repeval": float(s)} for i, (r, s) in enumerate(zip(rows, scores))],
                args.output)
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    rep = RepEval.load(args.direction, model=args.model, device=_device(args))
    rows = read_rows(args.input)
    where = lambda i: f"{args.input}:{i + 1}"  # noqa: E731
    a = [_field(r, ("a", "response_a"), where(i)) for i, r in enumerate(rows)]
    b = [_field(r, ("b", "response_b"), where(i)) for i, r in enumerate(rows)]
    q = [_field(r, ("question", "instruction"), where(i), required=False) or "" for i, r in enumerate(rows)]
    margin = rep.compare_margin(a, b, q)
    _write_rows([{"id": r.get("id", i), "winner": "a" if m > 0 else "b", "margin": float(m)}
                 for i, (r, m) in enumerate(zip(rows, margin))], args.output)
    return 0


def add_subparser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Mount ``repeval {fit,score,compare}`` on a parent CLI; each sets ``func(args) -> exit code``."""
    parser = subparsers.add_parser("repeval", help="RepEval: quality directions in an LLM's hidden states")
    sub = parser.add_subparsers(dest="repeval_command", required=True)

    fit = sub.add_parser("fit", help="learn a direction from (good, bad) pairs")
    fit.add_argument("--model", default="SmolLM2-135M-Instruct")
    fit.add_argument("--criterion", default="fluency", help="key of repeval/templates.json")
    fit.add_argument("--template", type=Path, help="file holding a prompt template (overrides the criterion's)")
    src = fit.add_argument_group("training pairs (one of)")
    src.add_argument("--pairs", type=Path, help='JSONL of {"good", "bad"[, "src"][, "question"]}')
    src.add_argument("--from-metaeval", type=Path, help="human-scored or pairwise-labelled metaeval JSONL")
    src.add_argument("--synthetic", type=Path, help='JSONL of {"text"[, "src"]}: good texts to corrupt')
    fit.add_argument("--dimension", help="human score to rank by (with --from-metaeval)")
    fit.add_argument("--corruption", choices=["fluency", "coherence", "consistency", "relevance"],
                     help="corruption for --synthetic (default: the criterion)")
    fit.add_argument("-k", type=int, default=None, help="number of pairs (default: all)")
    fit.add_argument("--layer", type=int, default=-13, help="decoder layer, 1..N or -1..-N (default -13: 18 of 30 in SmolLM2)")
    fit.add_argument("--token", type=int, default=-1)
    fit.add_argument("--method", choices=["pca", "mean", "svm"], default="pca")
    fit.add_argument("--n-components", type=int, default=1)
    fit.add_argument("--seed", type=int, default=0)
    fit.add_argument("--dtype", default="auto", choices=["auto", "bfloat16", "float16", "float32"])
    fit.add_argument("--device", default="auto", help=DEVICE_HELP)
    fit.add_argument("--output", type=Path, required=True, help="direction file to write (.json)")
    fit.set_defaults(func=cmd_fit)

    for name, func, help_ in (("score", cmd_score, "score texts ({output|text}[, source][, question])"),
                              ("compare", cmd_compare, "compare answer pairs ({a|response_a, b|response_b[, question]})")):
        p = sub.add_parser(name, help=help_)
        p.add_argument("--direction", type=Path, required=True, help="file written by repeval fit")
        p.add_argument("--input", type=Path, required=True)
        p.add_argument("--output", type=Path, help="JSONL to write (default: stdout)")
        p.add_argument("--model", default=None, help="override the model named in the direction file")
        p.add_argument("--device", default="auto", help=DEVICE_HELP)
        p.set_defaults(func=func)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m")  # sub-commands then read "python -m repeval fit"
    subs = parser.add_subparsers(dest="command", required=True)
    add_subparser(subs)
    args = parser.parse_args(["repeval", *(sys.argv[1:] if argv is None else argv)])
    try:
        return args.func(args)
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
