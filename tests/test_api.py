"""The Python API's documentation runs: every ```python block of docs/api.md, executed in order from
the repository root (its own asserts check the numbers against the save path it wrote); and the
rows it gives agree with the result files."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "api.md"


def blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.S)


def test_the_documented_example_runs(monkeypatch, capsys):
    found = blocks()
    assert len(found) >= 2
    monkeypatch.chdir(REPO)
    for code in found:
        exec(compile(code, str(DOC), "exec"), {"__name__": "__doc_example__"})
    out = capsys.readouterr().out
    assert "SavedRun(" in out and "gate passed: --fail-under F1=0.1" in out
    assert 'unknown metric "F2 score"' in out


def test_rows_agree_with_the_result_files(tmp_path):
    from evaluate import api

    run = api.run(REPO / "configs" / "example_en.yaml", overrides={
        "save_path": str(tmp_path), "battle": False, "category": {"closed_qa": {"Metrics": ["F1 score", "BLEU"]}}},
        families=["Metrics"])
    assert run.models == ["model_a", "model_b"] and run.categories == ["closed_qa"] and run.status == "ok"
    for model in run.models:
        data = json.loads((tmp_path / "results" / f"{model}.json").read_text())
        want = {(it["id"], k): v for it in data["items"] for k, v in it["scores"].items()}
        got = {(r.id, r.score): r.value for r in run.scores() if r.model == model}
        assert got == want and all(r.invalid is None for r in run.scores())
    pd = pytest.importorskip("pandas")
    df = run.frame()
    assert isinstance(df, pd.DataFrame) and list(df.columns) == ["model", "category", "id", "score", "value", "invalid"]
    assert len(df) == len(run.scores())
    with pytest.raises(api.InputError, match="no results"):
        api.open_run(tmp_path / "nothing")
    with pytest.raises(api.InputError, match='no score "F2"'):
        run.gate(fail_under=["F2=0.1"])
