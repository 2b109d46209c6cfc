"""Battle verdicts of one judge against human labels, every way the project can read them, from a
meta-eval report: agreement and Cohen's kappa of the parsed, probability-weighted and
position-calibrated verdicts, the calibration a judge without log-probabilities would get (from its
parsed scores; from its verdicts alone), and the trivial rules on the same items.

    python eval.py meta-eval --data ../shared/data/metaeval/hhh_alignment.jsonl \\
        --config bench/configs/battle_qwen.yaml --evaluator GPT:battle Length --output hhh.json
    python bench/battle_calibration.py hhh.json [pandalm.json ...] [--band-from OTHER.json]

Nothing here is fitted on the labels: every calibration is fitted on the report's own two-order
pairs (evaluate/stats/position.py). `--band-from` checks the one threshold the calibration ever had
(a tie band) the honest way: the band (of 0, logit .525, logit .55) that agrees best with the labels
of the OTHER set is applied to this one, beside the band-free rule the code uses.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from evaluate.metaeval.run import RULE_LABELS, VERDICT_NAMES  # noqa: E402
from evaluate.stats.label_agreement import verdict_agreement  # noqa: E402
from evaluate.stats.position import TIE_BAND, calibrate  # noqa: E402

BANDS = {"none (balanced evidence only)": TIE_BAND, "logit .525": math.log(0.525 / 0.475),
         "logit .55 (the first choice)": math.log(0.55 / 0.45)}


def judgments(items: list[dict]) -> list[list[tuple]]:
    """Each item's orders as the calibration reads them, from meta-eval's per-item output."""
    out = []
    for it in items:
        orders = []
        for (order, verdict, _), sc in zip(it["orders"], it["order_scores"]):
            s = sc.get("scores")
            points = None if not s else (s[0] - s[1] if order == "AB" else s[1] - s[0])
            orders.append((order, verdict, sc.get("p_first"), points))
        out.append(orders)
    return out


def rows_of(report: dict, band: float | None = None) -> list[tuple[str, dict, str]]:
    acc = report["pairwise"]["GPT/battle"]
    items = acc["items"]
    labels = [it["label"] for it in items]
    js = judgments(items)
    out = [(VERDICT_NAMES[k], acc["verdicts"][k], "") for k in ("raw", "weighted", "calibrated")]
    for method, what in (("scores", "calibrated from the parsed scores alone (no log-probabilities)"),
                         ("verdicts", "calibrated from the parsed verdicts alone (first / second / tie)")):
        cal = calibrate(js, method=method)
        out.append((f"judge, {what}", verdict_agreement(cal.verdicts, labels), cal.text()))
    first = calibrate(js, tie_band=BANDS["logit .55 (the first choice)"])
    out.append(("judge, position-calibrated with the first choice of tie band, logit .55 (dropped)",
                verdict_agreement(first.verdicts, labels), ""))
    if band is not None:
        cal = calibrate(js, tie_band=band)
        out.append((f"judge, position-calibrated, tie band {band:.3f} from the other set",
                    verdict_agreement(cal.verdicts, labels), ""))
    out += [(RULE_LABELS[k], b, "") for k, b in acc["trivial_rules"].items()]
    return out


def best_band(report: dict) -> tuple[str, float]:
    """The band that agrees best with this report's labels (to be applied to the other set)."""
    items = report["pairwise"]["GPT/battle"]["items"]
    labels = [it["label"] for it in items]
    js = judgments(items)
    scored = [(verdict_agreement(calibrate(js, tie_band=b).verdicts, labels)["accuracy"], name, b)
              for name, b in BANDS.items()]
    best = max(scored, key=lambda x: x[0])
    return best[1], best[2]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("reports", nargs="+", type=Path, help="meta-eval --output files with GPT:battle")
    p.add_argument("--band-from", type=Path, help="choose the tie band on this (other) report's labels")
    args = p.parse_args()
    band = None
    if args.band_from:
        name, band = best_band(json.loads(args.band_from.read_text()))
        print(f"tie band chosen on {args.band_from.name}: {name} ({band:.3f})")
    for path in args.reports:
        report = json.loads(path.read_text())
        acc = report["pairwise"]["GPT/battle"]
        print(f"\n{report['data']}: {acc['n']} pairs ({acc['invalid']} invalid); order flips "
              f"{acc['order_flip_rate']:.3f}, first position wins {acc['first_position_win_rate']:.3f}")
        print("| verdicts | agreement (95% CI) | Cohen's kappa (95% CI) | ties | n |\n|---|---|---|---|---|")
        notes = []
        for name, b, note in rows_of(report, band):
            ci = f" ({b['ci'][0]:.3f}-{b['ci'][1]:.3f})" if b.get("ci") else ""
            kci = f" ({b['kappa_ci'][0]:.2f} to {b['kappa_ci'][1]:.2f})" if b.get("kappa_ci") else ""
            kap = "-" if b.get("kappa") is None else f"{b['kappa']:.3f}{kci}"
            print(f"| {name} | {b['accuracy']:.3f}{ci} | {kap} | {b['ties']} | {b['n']} |")
            if note:
                notes.append(f"{name}: {note}")
        prior = acc.get("position_prior")
        print("\nposition prior: " + (prior["text"] if prior else "none"))
        for n in notes:
            print(n)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
