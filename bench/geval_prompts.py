"""Build an evaluation-prompt file from G-Eval's four SummEval prompts, at run time, by path.

G-Eval's prompts (nlpyang/geval, MIT) live in ../shared/data/geval/prompts/summeval/*_detailed.txt
and are not copied into the project: this script turns them into the pipeline's prompt-file format
under results/ (git-ignored) together with a meta-eval config, so the local judge can be measured
with G-Eval's exact wording next to our own (bench/prompts/summeval_en.json):

    python bench/geval_prompts.py            # writes results/bench/geval/{prompts.json,config.yaml}
    python eval.py meta-eval --data ../shared/data/metaeval/summeval.jsonl --docs 5 \\
        --config results/bench/geval/config.yaml --evaluator GPT:coherence GPT:consistency GPT:fluency GPT:relevance

Each G-Eval prompt is "task, criteria, steps, Example:" + source + summary + "Evaluation Form
(scores ONLY): - Coherence:". The part before the source becomes the metric's definition, the form
label its "steps", and one shared template puts the article and summary in between. Deviations:
the article arrives as the record's question ("Summarize the following article." + article), and
fluency (which G-Eval shows without the article, on a 1-3 scale) gets the article too and is read on
the pipeline's 1-5 scale (Spearman only needs the order).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / ".." / "shared" / "data" / "geval" / "prompts" / "summeval"
NAMES = {"coherence": "coh", "consistency": "con", "fluency": "flu", "relevance": "rel"}
TEMPLATE = ("{metric}\n\n\nSource Text:\n\n{question}\n\nSummary:\n\n{answer}\n\n\n"
            "Evaluation Form (scores ONLY):\n\n- {steps}")


def main() -> int:
    if not SRC.is_dir():
        print(f"{SRC}: not found (G-Eval's prompts come from ../shared/data)", file=sys.stderr)
        return 2
    metrics, steps = {}, {}
    for name, short in NAMES.items():
        text = (SRC / f"{short}_detailed.txt").read_text(encoding="utf-8")
        head, sep, _ = text.partition("Example:")
        if not sep:
            print(f"{short}_detailed.txt: no 'Example:' line", file=sys.stderr)
            return 2
        form = text.rsplit("- ", 1)[1].strip()  # "Coherence:", "Fluency (1-3):", ...
        metrics[name] = (head + sep).strip()
        steps[name] = form
    entry = {"id": 1, "category": "summarization", "prompt": TEMPLATE, "metrics": metrics, "CoT": steps}
    out = ROOT / "results" / "bench" / "geval"
    out.mkdir(parents=True, exist_ok=True)
    (out / "prompts.json").write_text(json.dumps({"summarization": entry, "general": {**entry, "category": "general"}},
                                                 indent=1), encoding="utf-8")
    (out / "config.yaml").write_text(
        "prompts:\n  evaluation: prompts.json\n"
        "judge:\n  backend: local\n  model: Qwen2.5-Coder-1.5B-Instruct\n  mode: logprobs\n"
        "  cache: ../judge_cache.sqlite\n", encoding="utf-8")
    print(f"wrote {out / 'prompts.json'} and {out / 'config.yaml'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
