"""RepEval inside the pipeline: directions fitted at run time from synthetic pairs of the targets."""

import json
from pathlib import Path


from evaluate.cli import main

REPO = Path(__file__).resolve().parents[1]
EN = REPO / "examples" / "en"


def test_repeval_family_scores_answers(tmp_path, capsys):
    cfg = {"language": "en", "save_path": str(tmp_path / "out"),
           "category": {"rewriting": {"RepEval": ["fluency"]}, "summarization": {"RepEval": ["fluency"]}},
           "answers": [{"name": "model_a", "path": str(EN / "answers_model_a.json")},
                       {"name": "model_b", "path": str(EN / "answers_model_b.json")}],
           "target_file": str(EN / "targets.json"), "repeval": {"k": 10, "method": "mean"}}
    path = tmp_path / "c.json"
    path.write_text(json.dumps(cfg))
    assert main(["--config", str(path)]) == 0, capsys.readouterr().err
    res = json.loads((tmp_path / "out" / "results" / "model_a.json").read_text())
    items = [i for i in res["items"] if i["category"] in ("rewriting", "summarization")]
    assert items and all(isinstance(i["scores"]["RepEval/fluency"], float) for i in items)
    sig = res["signatures"]["RepEval/fluency"]
    assert "synthetic pairs" in sig["direction"] and sig["model"] == "SmolLM2-135M-Instruct"


def test_unknown_criterion_and_missing_direction(tmp_path, capsys):
    cfg = {"category": {"chat": {"RepEval": ["fluenc", "meaning"]}}, "save_path": str(tmp_path / "o"),
           "answers": [{"name": "a", "path": str(EN / "answers_model_a.json")}]}
    path = tmp_path / "c.json"
    path.write_text(json.dumps(cfg))
    assert main(["--config", str(path), "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert 'unknown RepEval criterion "fluenc"; did you mean "fluency"' in err
    assert 'RepEval "meaning" needs repeval.directions.meaning' in err
