"""Coverage and width of the label-corrected estimate (evaluate/stats/ppi.py) on real human labels (issue 44).

    .venv/bin/python bench/ppi_coverage.py [--sets 1000] [--quick] [--markdown FILE] [--judge-report REPORT.json ...]

The finite population is a meta-evaluation file's items (N); each item's human value is its label (HHH,
PandaLM: 1 when response_a is preferred, 0.5 a tie, 0 response_b, so the mean is response_a's human win
rate with ties half; SummEval: the experts' mean score on each dimension, 1-5). The target is that value
over the whole file. A judge gives every item a value f on the same scale; a label set is n items drawn
by the label queue's design (uniform: without replacement; active: with replacement at probabilities
rising with the judge's uncertainty, each draw weighted 1 / (N p)), and per set the bench computes the
corrected interval, the labels-only interval of the same draws and the judge-only interval.

Simulated judges, redrawn for every label set (so the judge-only coverage is a frequency too):
- acc .55 / .75 / .95: the human value with that probability, else a wrong one (a battle: the other side;
  a rating: one point-ish off, up or down at random);
- biased .75: errors mostly (90%) in one direction: toward response_a / upward;
- uncertain errors (battles): sure and right on most items (f .05 / .95), near one half on the rest
  (.45 / .55, wrong half the time): the judge whose errors fall where it is uncertain, which the active
  design is for. Also on a constructed population (N 1000, win rate .62) where the uncertain items are
  mostly ones people gave to response_b.
A real rule too, with real errors and nothing simulated: the longer answer wins (meta-eval's trivial rule),
uncertain where the two lengths are close; fixed for every set, so its judge-only coverage is 0 or 1.
`--judge-report` (repeatable) adds the packaged judge: a `meta-eval --evaluator GPT:battle` report on HHH
or PandaLM (both orders; a `--limit` run's first rows are then the population), where f is the mean over
both orders of its probability that response_a is preferred (p_first), else its verdict; or a `meta-eval
--docs K --evaluator GPT:coherence ...` report on SummEval, where f is its probability-weighted score of
each summary of the first K documents (the population). Fixed for every set (its judge-only coverage is
then 0 or 1).

Printed per (dataset, judge, n, design): coverage of the 95% corrected interval; of the judge-only one;
of the reference code's design on the same draws (`superpopulation=True, quantile="z", guard=False`, as
ppi_py computes it: the unlabelled items a sample, the normal quantile, no guard); of the labels-only one;
the median over sets of width(corrected) / width(labels only); the median corrected width and lam.
Targets (issue 44): coverage >= 0.93; width ratio <= 1.05, with the .95 judge <= 0.75; at 50 labels the
active design's median width below the uniform one's for the uncertain-errors judge (constructed and HHH).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from evaluate.metaeval.run import read_metaeval_rows, select_rows, trivial_verdicts  # noqa: E402
from evaluate.stats.ppi import active_probabilities, corrected_mean, rating_error  # noqa: E402

DATA = REPO.parent / "shared" / "data" / "metaeval"
LABEL_VALUE = {"a": 1.0, "tie": 0.5, "b": 0.0}
SIZES = (20, 50, 100)
DIMS = ("coherence", "consistency", "fluency", "relevance")


@dataclass(frozen=True)
class Population:
    """A file's items: the human value per item, the scale, battle or rating."""

    name: str
    y: np.ndarray
    bounds: tuple[float, float]
    kind: str  # "battle" | "rating"
    rows: tuple[dict, ...] = ()

    @property
    def error(self) -> float | None:
        """One judge error's size for the guard: a battle's default (the whole range), a rating's quarter."""
        return rating_error(self.bounds) if self.kind == "rating" else None


# A judge: (human values, rng) -> (f per item, uncertainty per item or None for "from f")
Judge = Callable[[np.ndarray, np.random.Generator], tuple[np.ndarray, np.ndarray | None]]


def battle_population(path: Path, name: str) -> Population:
    rows = read_metaeval_rows(path)  # the project's own reader: checks every row, a/b/tie labels
    return Population(name, np.array([LABEL_VALUE[r["label"]] for r in rows]), (0.0, 1.0), "battle", tuple(rows))


def summeval_population(path: Path, dim: str) -> Population:
    rows = read_metaeval_rows(path)
    return Population(f"SummEval {dim}", np.array([float(r["human"][dim]) for r in rows]), (1.0, 5.0), "rating")


def constructed_population(seed: int = 44, big: int = 1000) -> tuple[Population, np.ndarray]:
    """Win rate .6; a fixed 30% of the items (mostly ones people gave to B) are the judge's uncertain ones."""
    rng = np.random.default_rng(seed)
    y = (rng.random(big) < 0.6).astype(float)
    uncertain = rng.random(big) < np.where(y == 1, 0.15, 0.5)
    return Population("constructed", y, (0.0, 1.0), "battle"), uncertain


def battle_judge(acc: float, toward_a: float = 0.5) -> Judge:
    """Hard verdicts, right with probability `acc`; of the errors a share `toward_a` say A (where a label is
    not A), the rest B (where a label is not B): error rates per side set so the overall accuracy is acc."""
    def judge(y: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, None]:
        not_a, not_b = y < 1.0, y > 0.0
        errors = (1 - acc) * len(y)
        pa = min(1.0, toward_a * errors / max(1, not_a.sum()))
        pb = min(1.0, (1 - toward_a) * errors / max(1, not_b.sum()))
        r = rng.random(len(y))
        f = y.copy()
        ties = y == 0.5
        # a tie label: wrong toward A with pa, toward B with pb; a decided label: the other side
        f = np.where(~ties & not_a & (r < pa), 1.0, f)
        f = np.where(~ties & not_b & (r < pb), 0.0, f)
        f = np.where(ties & (r < pa), 1.0, np.where(ties & (r >= pa) & (r < pa + pb), 0.0, f))
        return f, None
    return judge


def uncertain_judge(fixed: np.ndarray | None = None, share: float = 0.3) -> Judge:
    """Sure and right (f .05 / .5 / .95) on most items; .45 or .55 at random on the uncertain ones (a fixed
    set, or a fresh `share` of the items per draw)."""
    def judge(y: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        unsure = fixed if fixed is not None else rng.random(len(y)) < share
        near = np.where(rng.random(len(y)) < 0.5, 0.55, 0.45)
        f = np.where(unsure, near, 0.05 + 0.9 * y)
        return f, 1.0 - 2.0 * np.abs(f - 0.5)
    return judge


def rating_judge(acc: float, up: float = 0.5) -> Judge:
    """The experts' mean score with probability `acc`, else 1 to 2 points off (up with probability `up`,
    down otherwise; reflected at the scale's ends)."""
    def judge(y: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, None]:
        wrong = rng.random(len(y)) >= acc
        step = rng.uniform(1.0, 2.0, len(y)) * np.where(rng.random(len(y)) < up, 1.0, -1.0)
        off = y + step
        off = np.where((off > 5) | (off < 1), y - step, off)
        return np.where(wrong, np.clip(off, 1, 5), y), None
    return judge


def longer_judge(pop: Population) -> Judge:
    """A real rule with real errors, no simulation: the longer answer wins (meta-eval's trivial rule), uncertain
    where the two lengths are close (1 - |len a - len b| / (len a + len b))."""
    f = np.array([{"A": 1.0, "B": 0.0, "tie": 0.5}[v] for v in trivial_verdicts(list(pop.rows))["longer"]])
    la = np.array([len(r["response_a"]) for r in pop.rows], dtype=float)
    lb = np.array([len(r["response_b"]) for r in pop.rows], dtype=float)
    u = 1.0 - np.abs(la - lb) / np.maximum(1.0, la + lb)

    def judge(y: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        return f, u
    return judge


NAMES = {"hhh_alignment.jsonl": "HHH", "pandalm.jsonl": "PandaLM", "summeval.jsonl": "SummEval"}


def report_populations(path: Path, data_dir: Path) -> list[tuple[Population, Judge]]:
    """The packaged judge's values from a meta-eval report, with the population it judged (its data file
    found by name in `data_dir`). A GPT:battle report on HHH or PandaLM: f per item, the mean over both
    orders of its probability that response_a is preferred; the population is the rows the report has (meta-eval
    leaves out tie labels; a `--limit` run's first rows). A GPT:<dimension> report on SummEval (`--docs K`):
    per dimension, f is the judge's probability-weighted score of each summary of the first K documents."""
    report = json.loads(path.read_text())
    data = Path(str(report.get("data", ""))).name
    if data not in NAMES:
        raise SystemExit(f"{path}: a report on {data or 'an unnamed file'}; expected one of {', '.join(NAMES)}")
    rows = read_metaeval_rows(data_dir / data)
    if data == "summeval.jsonl":
        return _summeval_report(path, report, rows)
    try:
        items = {str(it["id"]): it for it in report["pairwise"]["GPT/battle"]["items"]}
    except (KeyError, TypeError):
        raise SystemExit(f"{path}: no pairwise.GPT/battle.items; expected an `eval.py meta-eval --evaluator "
                         "GPT:battle` report") from None
    keep = [(str(r.get("id", i)), r) for i, r in enumerate(rows) if str(r.get("id", i)) in items]
    if len(keep) < len(items):
        raise SystemExit(f"{path}: {len(items) - len(keep)} of its items are not rows of {data_dir / data}")
    name = NAMES[data] + ("" if len(keep) == len(rows) else f" first {len(keep)} non-tie")
    pop = Population(name, np.array([LABEL_VALUE[r["label"]] for _, r in keep]), (0.0, 1.0), "battle",
                     tuple(r for _, r in keep))
    f = np.array([_soft_verdict(items[i]) for i, _ in keep])
    if np.isnan(f).any():
        print(f"note: {int(np.isnan(f).sum())} items without a valid verdict count as a tie (0.5)")
        f = np.where(np.isnan(f), 0.5, f)

    def judge(y: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        return f, 1.0 - 2.0 * np.abs(f - 0.5)
    return [(pop, judge)]


def _summeval_report(path: Path, report: dict, rows: list[dict]) -> list[tuple[Population, Judge]]:
    sel = report.get("selection") or {}
    docs = sel.get("docs")
    if docs is None or any(sel.get(k) for k in ("limit", "sample")):
        raise SystemExit(f"{path}: expected a SummEval report of `--docs K` (no --limit or --sample)")
    kept = select_rows(rows, docs=docs)  # the rows meta-eval judged, chosen as it chose them
    scores = report.get("scores") or {}
    out = []
    for dim in DIMS:
        values = scores.get(f"GPT/{dim}")
        if values is None:
            continue
        if len(values) != len(kept):
            raise SystemExit(f"{path}: GPT/{dim} has {len(values)} scores for {len(kept)} rows of {docs} documents")
        y = np.array([float(r["human"][dim]) for r in kept])
        f = np.array([np.nan if v is None else float(v) for v in values])
        if np.isnan(f).any():
            print(f"note: GPT/{dim}: {int(np.isnan(f).sum())} summaries without a valid score count as 3")
            f = np.where(np.isnan(f), 3.0, f)
        pop = Population(f"SummEval {dim} first {docs} docs", y, (1.0, 5.0), "rating")

        def judge(y_: np.ndarray, rng: np.random.Generator, f: np.ndarray = f) -> tuple[np.ndarray, None]:
            return f, None
        out.append((pop, judge))
    if not out:
        raise SystemExit(f"{path}: no GPT/<dimension> scores; expected `--evaluator GPT:coherence ...`")
    return out


def _soft_verdict(item: dict) -> float:
    """P(response_a preferred), averaged over the orders; an order without log-probs gives its verdict."""
    values = []
    for sc, (order, verdict, _) in zip(item["order_scores"], item["orders"]):
        p = sc.get("p_first")
        if p is not None:
            values.append(p if order == "AB" else 1.0 - p)
        elif verdict in ("A", "B", "tie"):
            values.append({"A": 1.0, "B": 0.0, "tie": 0.5}[verdict])
    return float(np.mean(values)) if values else math.nan


@dataclass
class Row:
    dataset: str
    judge: str
    n: int
    design: str
    coverage: float
    judge_coverage: float
    reference_coverage: float
    labels_coverage: float
    width_ratio: float
    width: float
    labels_width: float
    lam: float


def simulate(pop: Population, judge_name: str, judge: Judge, n: int, design: str, sets: int, seed: int,
             mix: float = 0.5, warmup: int = 0) -> Row:
    rng = np.random.default_rng([seed, n, design == "active", sum(map(ord, pop.name + judge_name))])
    truth = float(pop.y.mean())
    big = len(pop.y)
    hit = jhit = rhit = lhit = 0
    ratios, widths, lwidths, lams = [], [], [], []
    for _ in range(sets):
        f, u = judge(pop.y, rng)
        if design == "uniform":
            idx, w = rng.choice(big, size=n, replace=False), None
        else:
            unc = u if u is not None else (1.0 - 2.0 * np.abs(f - 0.5) if pop.kind == "battle" else np.zeros(big))
            p = active_probabilities(unc, mix=mix)
            first = min(n, warmup)  # the uniform warm-up (draws with replacement at 1 / N), then active
            idx = np.concatenate([rng.choice(big, size=first, replace=True),
                                  rng.choice(big, size=n - first, replace=True, p=p)])
            w = np.concatenate([np.ones(first), 1.0 / (big * p[idx[first:]])])
        c = corrected_mean(pop.y[idx], f[idx], f, weights=w, bounds=pop.bounds, error=pop.error)
        lc, lo, jo = c.label_corrected, c.labels_only, c.judge_only
        hit += lc.low <= truth <= lc.high
        jhit += jo.low <= truth <= jo.high
        lhit += lo.low <= truth <= lo.high
        # the reference code's design (ppi_py): the unlabelled items a sample, z, no guard
        rest = np.delete(f, idx) if design == "uniform" else f
        ref = corrected_mean(pop.y[idx], f[idx], rest, weights=w, bounds=pop.bounds, superpopulation=True,
                             quantile="z", guard=False).label_corrected
        rhit += ref.low <= truth <= ref.high
        width, lwidth = lc.high - lc.low, lo.high - lo.low
        widths.append(width)
        lwidths.append(lwidth)
        ratios.append(width / lwidth if lwidth > 0 else math.nan)
        lams.append(c.lam)
    return Row(pop.name, judge_name, n, design, hit / sets, jhit / sets, rhit / sets, lhit / sets,
               float(np.nanmedian(ratios)),
               float(np.median(widths)), float(np.median(lwidths)), float(np.median(lams)))


def plan(args: argparse.Namespace) -> list[tuple[Population, str, Judge, tuple[str, ...]]]:
    hhh = battle_population(Path(args.data) / "hhh_alignment.jsonl", "HHH")
    pandalm = battle_population(Path(args.data) / "pandalm.jsonl", "PandaLM")
    summeval = [summeval_population(Path(args.data) / "summeval.jsonl", dim) for dim in args.dims]
    constructed, unsure = constructed_population()
    both = ("uniform", "active")
    sims = [("acc .55", battle_judge(0.55)), ("acc .75", battle_judge(0.75)), ("acc .95", battle_judge(0.95)),
            ("acc .75 biased to A", battle_judge(0.75, toward_a=0.9))]
    out: list[tuple[Population, str, Judge, tuple[str, ...]]] = [
        (constructed, "uncertain errors", uncertain_judge(unsure), both)]
    for pop in (hhh, pandalm):
        out += [(pop, name, j, both) for name, j in sims]
        out.append((pop, "uncertain errors", uncertain_judge(), both))
        out.append((pop, "longer answer (a real rule)", longer_judge(pop), both))
    for report in args.judge_report or []:
        for pop, judge in report_populations(Path(report), Path(args.data)):
            out.append((pop, "packaged (Qwen-1.5B)", judge, both if pop.kind == "battle" else ("uniform",)))
    out += [(pop, name, j, ("uniform",)) for pop in summeval for name, j in
            (("acc .55", rating_judge(0.55)), ("acc .75", rating_judge(0.75)), ("acc .95", rating_judge(0.95)),
             ("acc .75 biased up", rating_judge(0.75, up=0.9)))]
    return out


def _target(what: str, rows: list[Row], failed: list[Row], value: Callable[[Row], float]) -> str:
    line = f"{what}: {'met' if not failed else 'NOT met'} in {len(rows) - len(failed)}/{len(rows)} rows"
    return line + "".join(f"; {r.dataset}/{r.judge}/n={r.n}/{r.design} {value(r):.3f}" for r in failed)


def verdicts(rows: list[Row]) -> list[str]:
    """Each target of the issue, met or not, from the rows."""
    good = [r for r in rows if r.judge == "acc .95"]
    out = [_target("coverage >= 0.93", rows, [r for r in rows if r.coverage < 0.93], lambda r: r.coverage),
           _target("median width ratio <= 1.05", rows, [r for r in rows if r.width_ratio > 1.05],
                   lambda r: r.width_ratio),
           _target("acc .95 judge, ratio <= 0.75", good, [r for r in good if r.width_ratio > 0.75],
                   lambda r: r.width_ratio)]
    for r in rows:
        if (r.judge == "uncertain errors" or r.judge in REAL) and r.n == 50 and r.design == "active":
            u = next(x for x in rows if (x.dataset, x.judge, x.n, x.design) == (r.dataset, r.judge, 50, "uniform"))
            target = "" if r.judge == "uncertain errors" else " (no target: reported)"
            out.append(f"active < uniform at 50 labels, {r.dataset} / {r.judge}: "
                       f"{'met' if r.width < u.width else 'NOT met'} ({r.width:.3f} vs {u.width:.3f}){target}")
    return out


REAL = ("longer answer (a real rule)", "packaged (Qwen-1.5B)")  # judges with their own uncertainty signal

HEADER = ("| dataset (N, human value) | judge | labels | design | coverage, corrected | coverage, judge only | "
          "coverage, ppi_py's design | coverage, labels only | "
          "median width ratio corrected / labels only | median width, corrected | median lam |")


def markdown(rows: list[Row], pops: dict[str, Population]) -> list[str]:
    lines = [HEADER, "|" + "---|" * 11]
    for r in rows:
        pop = pops[r.dataset]
        lines.append(f"| {r.dataset} ({len(pop.y)}, {pop.y.mean():.3f}) | {r.judge} | {r.n} | {r.design} | "
                     f"{r.coverage:.3f} | {r.judge_coverage:.3f} | {r.reference_coverage:.3f} | "
                     f"{r.labels_coverage:.3f} | "
                     f"{r.width_ratio:.3f} | {r.width:.3f} | {r.lam:.2f} |")
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=str(DATA), help="folder with hhh_alignment.jsonl, pandalm.jsonl, summeval.jsonl")
    ap.add_argument("--sets", type=int, default=1000, help="random label sets per row")
    ap.add_argument("--quick", action="store_true", help="200 sets per row")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--dims", nargs="+", default=list(DIMS), choices=DIMS,
                    help="SummEval's human dimensions (each a ratings population: its mean score)")
    ap.add_argument("--mix", type=float, default=0.5, help="the active design's uniform share (active_probabilities)")
    ap.add_argument("--warmup", type=int, default=0,
                    help="the active design's first draws uniform (measured: a warm-up of 20 lost the active "
                         "design's advantage on HHH at 50 labels; the default is none)")
    ap.add_argument("--judge-report", action="append",
                    help="a meta-eval GPT:battle report on HHH or PandaLM (the packaged judge; repeatable)")
    ap.add_argument("--markdown", help="write the table and the targets' results here")
    args = ap.parse_args()
    if not (Path(args.data) / "hhh_alignment.jsonl").is_file():
        print(f"{args.data}: no hhh_alignment.jsonl here (../shared/data/metaeval beside the checkout)",
              file=sys.stderr)
        return 2
    sets = 200 if args.quick else args.sets
    started = time.time()
    rows: list[Row] = []
    pops: dict[str, Population] = {}
    print(HEADER)
    for pop, name, judge, designs in plan(args):
        pops[pop.name] = pop
        for n in SIZES:
            for design in designs:
                r = simulate(pop, name, judge, n, design, sets, args.seed, args.mix, args.warmup)
                rows.append(r)
                print(markdown([r], pops)[-1], flush=True)
    results = verdicts(rows)
    print(f"\n{sets} label sets per row, {time.time() - started:.0f} s")
    print("\n".join(results))
    if args.markdown:
        note = f"{sets} label sets per row; seed {args.seed}; active mix {args.mix}; warm-up {args.warmup}."
        text = markdown(rows, pops) + ["", note, ""] + [f"- {v}" for v in results]
        Path(args.markdown).write_text("\n".join(text) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
