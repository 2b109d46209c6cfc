"""The label-free judge check on SummEval's references: does the judge prefer an intact reference summary to a corrupted copy?

    .venv/bin/python bench/judgecheck_summeval.py --config bench/configs/judgecheck_qwen.yaml [--docs 20] [--limit 5]

Takes the judge block and prompts of `--config`, and as the run's records the first `--docs`
SummEval articles of `../shared/data/metaeval/summeval.jsonl` (category summarization, the
article as the input, its reference summaries as the targets; two systems' summaries as the two
"models", which the check only uses where an item has no reference). Writes those answer files and
a config under `<save_path of --config>/summeval/` (generated from ../shared at run time, never
kept in the project) and runs `eval.py judge-check` on them: sanity pairs of each reference against
its corrupted copies, judged by the battle prompt (both orders) and the relevance rating.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from evaluate.cli import main as eval_main  # noqa: E402
from evaluate.core.io import read_jsonl  # noqa: E402

DATA = REPO.parent / "shared" / "data" / "metaeval" / "summeval.jsonl"
INSTRUCTION = "Summarize the following news article in a few sentences."


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", required=True)
    ap.add_argument("--data", default=str(DATA))
    ap.add_argument("--docs", type=int, default=20)
    ap.add_argument("--limit", type=int, default=5, help="sanity pairs per corruption")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--systems", nargs=2, default=["M11", "M23"])
    args = ap.parse_args()
    data = Path(args.data)
    if not data.exists():
        print(f"skipped: {data} is absent (../shared/data is not beside this checkout)")
        return 0
    cfg_path = Path(args.config).resolve()
    base = yaml.safe_load(cfg_path.read_text(encoding="utf-8"))
    save = (cfg_path.parent / base["save_path"]).resolve()
    out = save / "summeval"
    out.mkdir(parents=True, exist_ok=True)

    docs: dict[str, dict] = {}
    for _, row in read_jsonl(data, "SummEval data"):
        d = docs.setdefault(row["doc_id"], {"source": row["source"], "references": row["references"], "outputs": {}})
        d["outputs"][row["system_id"]] = row["output"]
    chosen = [(k, v) for k, v in docs.items() if all(s in v["outputs"] for s in args.systems)][:args.docs]
    targets = [{"id": i, "category": "summarization", "instruction": INSTRUCTION, "input": d["source"], "output": "",
                "target": d["references"]} for i, (_, d) in enumerate(chosen, 1)]
    (out / "targets.json").write_text(json.dumps(targets, ensure_ascii=False, indent=1), encoding="utf-8")
    answers = []
    for s in args.systems:
        recs = [{**t, "output": d["outputs"][s]} for t, (_, d) in zip(targets, chosen)]
        (out / f"answers_{s}.json").write_text(json.dumps(recs, ensure_ascii=False, indent=1), encoding="utf-8")
        answers.append({"name": s, "path": str(out / f"answers_{s}.json")})
    judge = dict(base["judge"])
    if judge.get("cache"):
        judge["cache"] = str((cfg_path.parent / judge["cache"]).resolve())
    prompts = {k: str((cfg_path.parent / v).resolve()) for k, v in (base.get("prompts") or {}).items()}
    cfg = {"language": "en", "answers": answers, "target_file": str(out / "targets.json"), "save_path": str(out),
           "prompts": prompts, "judge": judge, "category": {"summarization": {"GPT": ["relevance"]}}}
    (out / "config.yaml").write_text(yaml.safe_dump(cfg, sort_keys=False, allow_unicode=True), encoding="utf-8")
    print(f"{len(chosen)} SummEval articles, references as the intact texts; config {out / 'config.yaml'}",
          file=sys.stderr)
    return eval_main(["judge-check", "--config", str(out / "config.yaml"), "--limit", str(args.limit),
                      "--seed", str(args.seed), "--output", str(out / "judge_check_record.json")])


if __name__ == "__main__":
    raise SystemExit(main())
