"""`eval.py prompts`: a prompt file's metrics; a misspelt steps key named with the key it should be."""

from __future__ import annotations

import json
from pathlib import Path

from evaluate.cli import main

REPO = Path(__file__).resolve().parents[1]
EN = REPO / "examples" / "en"


def _misspelt(tmp_path: Path) -> Path:
    """The project's English prompts plus a metric added by editing the file, its CoT key misspelt."""
    data = json.loads((REPO / "prompts" / "evaluation_prompt_en.json").read_text())
    data["closed_qa"]["metrics"]["persuasiveness"] = "Persuasiveness (1-5): how convincing the answer is."
    data["closed_qa"]["CoT"]["persuasivness"] = "1. Read the answer.\n2. Rate how convincing it is.\n"
    path = tmp_path / "prompts.json"
    path.write_text(json.dumps(data))
    return path


def test_prompts_lists_each_categorys_metrics_and_the_misspelt_key(tmp_path, capsys):
    assert main(["prompts"]) == 0
    out = capsys.readouterr().out
    closed = next(x for x in out.splitlines() if x.startswith("closed_qa"))
    assert "relevance" in closed and "correctness" in closed and "scores: GPT/<metric>" in out
    assert main(["prompts", str(_misspelt(tmp_path)), "--category", "closed_qa"]) == 0
    out = capsys.readouterr().out
    assert "persuasiveness" not in out.splitlines()[1]  # not ratable: no evaluation steps
    assert ('"closed_qa" -> "metrics" -> "persuasiveness" has no evaluation steps: "CoT" has no key '
            '"persuasiveness"; did you mean "persuasivness"?') in out
    assert main(["prompts", str(tmp_path / "missing.json")]) == 2
    assert "missing.json" in capsys.readouterr().err


def test_a_config_naming_the_metric_gets_the_missing_key_and_its_closest(tmp_path, capsys):
    cfg = {"save_path": str(tmp_path / "out"), "prompts": {"evaluation": str(_misspelt(tmp_path))},
           "answers": [{"name": "a", "path": str(EN / "answers_model_a.json")}],
           "target_file": str(EN / "targets.json"), "category": {"closed_qa": {"GPT": ["persuasiveness"]}},
           "judge": {"backend": "openai", "model": "m", "base_url": "http://127.0.0.1:9/v1"}}
    path = tmp_path / "c.json"
    path.write_text(json.dumps(cfg))
    assert main(["--config", str(path), "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert 'category.closed_qa.GPT: GPT metric "persuasiveness": ' in err
    assert '"CoT" has no key "persuasiveness"; did you mean "persuasivness"?' in err
    assert "known:" not in err and "Traceback" not in err
