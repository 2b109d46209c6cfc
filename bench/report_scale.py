"""How big and how fast is the HTML report of a large run?

Generates a synthetic save path (10,000 items x 3 models by default: Metrics and GPT scores,
judge details, some invalid scores, battles in both orders with raw replies, a Bradley-Terry-
style ranking, comparisons for every pair as a run computes them, the charts), writes the report, and loads it in
headless Chromium from file://: navigationStart -> load event, and -> the item browser's first
render (the page's "browser-rendered" performance mark). Prints the numbers and the machine.

    .venv/bin/python bench/report_scale.py [--items 10000] [--models 3] [--runs 3] [--keep DIR]
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from itertools import combinations
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from evaluate.pipeline.results import ModelResults, write_summary_csv
from evaluate.savepath.write import write_json

CATS = ["brainstorming", "chat", "classification", "closed_qa", "extraction", "generation", "open_qa",
        "rewriting", "roleplay", "summarization"]
WORDS = ["the", "model", "answer", "question", "because", "data", "result", "value", "people", "city", "river", "report", "system", "water", "energy", "design", "market", "policy", "health", "school", "music", "garden", "window", "travel", "history", "science"]


def text(rng: random.Random, n_words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n_words)).capitalize() + "."


def generate(save: Path, n_items: int, n_models: int, seed: int = 0) -> None:
    rng = random.Random(seed)
    models = [f"model_{chr(ord('a') + i)}" for i in range(n_models)]
    questions = [(str(i), CATS[i % len(CATS)], text(rng, 25), text(rng, 15) if i % 3 == 0 else "", text(rng, 35))
                 for i in range(n_items)]
    quality = {m: 0.6 - 0.1 * k for k, m in enumerate(models)}
    for m in models:
        res = ModelResults(model=m, answer_file=f"{m}.json")
        for iid, cat, q, inp, tgt in questions:
            qual = min(1.0, max(0.0, rng.gauss(quality[m], 0.2)))
            scores = {"Metrics/BLEU-4": round(qual * 0.5, 4), "Metrics/ROUGE-L": round(qual * 0.8, 4),
                      "Metrics/BERTScore-F1": round(0.7 + qual * 0.25, 4)}
            invalid, details = {}, {}
            for metric in ("relevance", "correctness"):
                if rng.random() < 0.02:
                    invalid[f"GPT/{metric}"] = {"reason": "no score token in the reply", "raw": text(rng, 12)}
                else:
                    scores[f"GPT/{metric}"] = round(1 + 4 * qual, 4)
                    details[f"GPT/{metric}"] = {"mode": "logprobs", "score_token_mass": round(rng.uniform(.8, 1), 3)}
            res.items[iid] = {"id": iid, "category": cat, "instruction": q, "input": inp, "output": text(rng, 70),
                              "targets": [tgt], "output_sha256": "", "flags": [], "scores": scores,
                              "invalid": invalid, "details": details}
        res.signatures = {k: {"metric": k, "scale": "0-1" if k.startswith("Metrics") else "1-5"}
                          for k in ("Metrics/BLEU-4", "Metrics/ROUGE-L", "Metrics/BERTScore-F1")}
        res.signatures.update({f"GPT/{x}": {"judge": {"backend": "openai", "model": "synthetic-judge"},
                                            "prompt_sha256": "0" * 64, "mode": "logprobs"}
                               for x in ("relevance", "correctness")})
        write_json(ModelResults.path_for(save, res.model), res.to_dict("synthetic"))
    for a, b in combinations(models, 2):
        items, counts = [], {"A": 0, "B": 0, "tie": 0, "invalid": 0}
        for iid, cat, *_ in questions:
            orders = []
            for order in ("AB", "BA"):
                sa, sb = rng.randint(5, 9), rng.randint(4, 9)
                first, second = (sa, sb) if order == "AB" else (sb, sa)
                v = "A" if sa > sb else "B" if sb > sa else "tie"
                orders.append({"order": order, "verdict": v, "scores": [sa, sb], "weighted_scores": [sa + .1, sb - .1],
                               "raw": f"{first} {second}", "reason": "", "request": "0" * 16})
            verdicts = {o["verdict"] for o in orders}
            v = orders[0]["verdict"] if len(verdicts) == 1 else "tie"
            counts[v] += 1
            items.append({"id": iid, "category": cat, "verdict": v, "weighted_verdict": v, "weighted_margin": 0.5,
                          "inconsistent": len(verdicts) > 1, "flipped": verdicts == {"A", "B"}, "orders": orders})
        decided = counts["A"] + counts["B"] + counts["tie"]
        wr = (counts["A"] + counts["tie"] / 2) / decided
        summary = {"model_a": a, "model_b": b, "items": n_items, "wins": counts["A"], "ties": counts["tie"],
                   "losses": counts["B"], "invalid": counts["invalid"], "win_rate": wr,
                   "win_rate_ci95": [wr - 0.01, wr + 0.01], "both_orders": True, "both_orders_valid": n_items,
                   "inconsistent": 0, "flips": 0, "flip_rate": 0.1, "inconsistency_rate": 0.2,
                   "one_order_invalid": 0, "first_position_win_rate": 0.52, "weighted": None}
        write_json(save / "battles" / f"{a}__vs__{b}.json",
                          {"summary": summary, "signature": {"evaluator": "battle"}, "items": items,
                           "by_category": {}, "controlled": {"lc_win_rate": wr, "lc_ci": [wr - .02, wr + .02],
                                                             "length_coef": 0.1}})
    write_json(save / "manifest.json", {"run_id": "synthetic", "status": "ok", "config": {"synthetic": True},
                                               "config_hash": "0" * 64, "versions": {}, "errors": [], "usage": {}})
    from evaluate.pipeline.comparisons import write_comparisons

    write_comparisons(save)  # every pair decided as a run decides it, from the result files
    from evaluate.report.charts import write_charts
    from evaluate.pipeline.results import load_all

    results = load_all(save)
    write_summary_csv(save, results)
    write_charts(save, results)


def load_times(page: Path, runs: int) -> list[tuple[float, float]]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.support.ui import WebDriverWait

    out = []
    for _ in range(runs):
        opts = webdriver.ChromeOptions()
        opts.binary_location = "/usr/bin/chromium"
        for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                    "--window-size=1280,1000"):
            opts.add_argument(arg)
        driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=opts)
        try:
            driver.get(page.resolve().as_uri())
            WebDriverWait(driver, 60).until(lambda d: d.execute_script(
                "return performance.timing.loadEventEnd > 0 && document.body.getAttribute('data-browser-ready') === '1'"))
            load, render = driver.execute_script(
                "var t = performance.timing, m = performance.getEntriesByName('browser-rendered')[0];"
                "return [t.loadEventEnd - t.navigationStart, m ? m.startTime : null];")
            out.append((load / 1000, render / 1000 if render is not None else float("nan")))
        finally:
            driver.quit()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--items", type=int, default=10000)
    ap.add_argument("--models", type=int, default=3)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--keep", type=Path, help="generate into this folder and keep it")
    args = ap.parse_args()
    save = args.keep or Path(tempfile.mkdtemp(prefix="report_scale_"))
    try:
        t0 = time.time()
        generate(save, args.items, args.models)
        t_gen = time.time() - t0
        from evaluate.report import closing_summary, write_report

        t0 = time.time()
        page = write_report(save)
        t_write = time.time() - t0
        t0 = time.time()
        closing_summary(save, width=100, color=False)
        t_term = time.time() - t0
        size = page.stat().st_size
        times = load_times(page, args.runs)
        try:
            chromium = subprocess.run(["/usr/bin/chromium", "--version"], capture_output=True, text=True, check=False).stdout.strip()
        except OSError:
            chromium = "?"
        cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                    if line.startswith("model name")), platform.processor())
        print(f"machine: {os.cpu_count()} cores, {cpu}; {platform.system()} {platform.release()}; {chromium}")
        print(f"data: {args.items} items x {args.models} models, {args.models * (args.models - 1) // 2} battles "
              f"(both orders), comparisons per pair; results/ {sum(f.stat().st_size for f in (save / 'results').glob('*.json')) / 1e6:.1f} MB"
              f", battles/ {sum(f.stat().st_size for f in (save / 'battles').glob('*.json')) / 1e6:.1f} MB (generated in {t_gen:.1f} s)")
        print(f"report: {size / 1e6:.1f} MB, written in {t_write:.1f} s; closing summary in {t_term:.2f} s")
        for i, (load, render) in enumerate(times, 1):
            print(f"load {i}: navigationStart -> load event {load:.2f} s; -> item browser rendered {render:.2f} s")
        print(f"median: load {statistics.median(t[0] for t in times):.2f} s, "
              f"browser rendered {statistics.median(t[1] for t in times):.2f} s (target < 3 s, < 25 MB)")
    finally:
        if not args.keep:
            shutil.rmtree(save, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
