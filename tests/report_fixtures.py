"""Save paths for the report tests: a real run of the pipeline (Metrics and the GPT judge against
the fake OpenAI-compatible server, three models, one of them answering with hostile HTML), plus
a hand-written comparisons/ file in the llm-eval-comparison/2 schema."""

from __future__ import annotations

import json
import math
from pathlib import Path

from evaluate.cli import main

try:
    from tests.fake_openai_server import Reply
except ImportError:  # pytest run from tests/
    from fake_openai_server import Reply

REPO = Path(__file__).resolve().parents[1]
EN = REPO / "examples" / "en"
HOSTILE = [
    "</script><script>window.__pwned = 1; alert(1)</script>",
    '<img src=x onerror="window.__pwned = 2">',
    "<!-- <script> --> ]]> \u2028 \"quotes\" & 'apostrophes' https://example.com/x.png",
]
A = {str(r["id"]): r["output"] for r in json.loads((EN / "answers_model_a.json").read_text())}


def judge(rec) -> Reply:
    text = rec.user_text
    if "[Assistant 1's answer]" in text:  # battle: model_a wins whichever position it is shown in
        first = text.split("[Assistant 1's answer]", 1)[1].split("[Assistant 2's answer]", 1)[0]
        first_is_a = any(a and a in first for a in A.values())
        if "onerror" in text:  # one unparseable reply, kept as an invalid verdict with its raw text
            return Reply(content="Both answers <b>look</b> fine to me.</script>")
        return Reply(content="9 2\nThe first answer is better." if first_is_a else "2 9\nThe second is better.",
                     top_logprobs=[{"9": -0.1, "8": -2.4}, {" ": -0.01}, {"2": -0.2, "3": -1.7}])
    good = any(a and a in text for a in A.values())
    probs = {"5": 0.7, "4": 0.3} if good else {"2": 0.6, "1": 0.4}
    return Reply(content=max(probs, key=probs.get), top_logprobs=[{k: math.log(v) for k, v in probs.items()}])


def hostile_answers(tmp: Path) -> Path:
    recs = json.loads((EN / "answers_model_b.json").read_text())
    for i, r in enumerate(recs):
        if r["category"] in ("closed_qa", "classification"):
            r["output"] = HOSTILE[i % len(HOSTILE)] + " " + r["output"]
    path = tmp / "answers_model_c.json"
    path.write_text(json.dumps(recs), encoding="utf-8")
    return path


def run_pipeline(tmp: Path, server, *, models: int = 3) -> Path:
    """A real save path: Metrics + GPT ratings + battles (+ ranking with three models)."""
    answers = [{"name": "model_a", "path": str(EN / "answers_model_a.json")},
               {"name": "model_b", "path": str(EN / "answers_model_b.json")},
               {"name": "model_c", "path": str(hostile_answers(tmp))}][:models]
    cfg = {"language": "en", "save_path": str(tmp / "save"), "answers": answers,
           "target_file": str(EN / "targets.json"),
           "category": {"closed_qa": {"GPT": ["relevance", "correctness"], "Metrics": ["BLEU", "ROUGE"]},
                        "classification": {"GPT": ["correctness"], "Metrics": ["F1 score"]},
                        "open_qa": {"Metrics": ["Distinct"]}},
           "judge": {"backend": "openai", "model": "fake-judge", "base_url": server.url, "api_key_env": "REPORT_KEY",
                     "mode": "logprobs", "max_retries": 1, "timeout": 5, "price": {"prompt": 0.15, "completion": 0.6}}}
    path = tmp / "config.json"
    path.write_text(json.dumps(cfg))
    server.reply_fn = judge
    code = main(["--config", str(path)])
    assert code in (0, 3), code
    return tmp / "save"


def comparison_row(category, score, n, mean_a, mean_b, interval, p_adj, role="exploratory", m=1, scale=(0, 1)):
    """A row of the llm-eval-comparison/2 schema whose verdict agrees with its interval (or, below 10
    items, with its exact test)."""
    diff = mean_a - mean_b
    if interval is not None:
        sig = interval[0] > 0 or interval[1] < 0
    else:
        sig = p_adj < 0.05
    verdict = ("A better" if diff > 0 else "B better") if sig else "no detectable difference"
    level = 1 - 0.05 / m if role == "confirmatory" else 0.95
    note = None if interval is not None else f"too few items (n = {n} < 10) for a bootstrap interval"
    detectable = (f"n = {n} detects |A − B| of about 0.4 or more (80% power, alpha = 0.05)" if n >= 10 else
                  f"n = {n}: too few pairs for any test at alpha = 0.05 (smallest attainable p = {2 / 2 ** n:.3g})")
    return {"category": category, "score": score, "role": role, "signature": f"{score}|fixture",
            "scale": list(scale) if scale else None, "n": n, "dropped": 0, "mean_a": mean_a, "mean_b": mean_b,
            "diff": diff, "interval": interval, "level": level, "simultaneous": role == "confirmatory" and m > 1,
            "interval_note": note, "p": min(1.0, p_adj / m), "p_adj": p_adj, "m": m if role == "confirmatory" else 1,
            "test": "fixture", "detectable": detectable, "effect_size": diff / 0.2, "verdict": verdict,
            "better": None}


def write_comparisons(save: Path, a: str = "model_a", b: str = "model_b") -> Path:
    rows = [comparison_row("(all)", "GPT/correctness", 12, 4.7, 1.6, [2.6, 3.5], 0.004, "confirmatory", 2, (1, 5)),
            comparison_row("(all)", "Metrics/BLEU-4", 12, 0.3, 0.28, [-0.05, 0.09], 0.8, "confirmatory", 2),
            comparison_row("closed_qa", "Metrics/BLEU-4", 2, 0.5, 0.1, None, 0.5),
            comparison_row("closed_qa", "GPT/relevance", 10, 4.7, 1.6, [1.9, 4.1], 0.03, scale=(1, 5)),
            comparison_row("classification", "Metrics/F1", 12, 1.0, 0.0, [0.6, 1.0], 0.02),
            comparison_row("open_qa", "Metrics/Distinct-2", 3, 0.95, 0.97, None, 1.0),
            comparison_row("open_qa", "Metrics/Distinct-1", 12, 0.9, 0.88, [-0.05, 0.08], 0.9, scale=None)]
    for r in rows:
        r["better"] = a if r["verdict"] == "A better" else b if r["verdict"] == "B better" else None
    from evaluate.stats.family import family_method

    data = {"schema": "llm-eval-comparison/2", "model_a": a, "model_b": b,
            "method": {**family_method(2), "primary": ["GPT/correctness", "Metrics/BLEU-4"], "primary_from": "config",
                       "resamples": 2000, "seed": 0, "power": 0.8},
            "rows": rows}
    path = save / "comparisons" / f"{a}__vs__{b}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1))
    return path


def add_length_control(save: Path, name: str = "model_a__vs__model_b") -> None:
    path = save / "battles" / f"{name}.json"
    data = json.loads(path.read_text())
    data["controlled"] = {"lc_win_rate": 0.71, "lc_ci": [0.55, 0.84], "length_coef": 0.42, "method": "fixture"}
    path.write_text(json.dumps(data))


def built_save(tmp: Path, key: str = "sk-report-test") -> Path:
    """A save path from a real pipeline run against the fake judge, plus the hand-made extras the
    report shows (a comparisons file, a length-controlled battle)."""
    import pytest

    try:
        from tests.fake_openai_server import FakeOpenAIServer
    except ImportError:  # pytest run from tests/
        from fake_openai_server import FakeOpenAIServer

    mp = pytest.MonkeyPatch()
    mp.setenv("REPORT_KEY", key)
    try:
        with FakeOpenAIServer() as server:
            path = run_pipeline(tmp, server)
    finally:
        mp.undo()
    write_comparisons(path)
    add_length_control(path)
    return path
