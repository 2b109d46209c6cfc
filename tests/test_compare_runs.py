"""`eval.py summary` and `eval.py compare`: an earlier run's closing lines, and two runs of the same
model on the same items compared with the paired statistics of a run."""

from __future__ import annotations

import json
from pathlib import Path

from evaluate.cli import main

EN = Path(__file__).resolve().parents[1] / "examples" / "en"
CATS = ("brainstorming", "chat", "classification", "closed_qa", "extraction", "generation", "open_qa", "rewriting",
        "roleplay", "summarization")


def _run(tmp_path: Path, name: str, answers: str, **extra) -> Path:
    """One model called "mymodel" (a checkpoint), every category scored with ROUGE."""
    cfg = {"answers": [{"name": "mymodel", "path": str(EN / answers)}], "target_file": str(EN / "targets.json"),
           "save_path": str(tmp_path / name), "category": {c: {"Metrics": ["ROUGE"]} for c in CATS}, **extra}
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(cfg))
    assert main(["--config", str(path), "--no-charts"]) == 0
    return tmp_path / name


def test_summary_prints_an_earlier_runs_closing_lines(tmp_path, capsys):
    save = _run(tmp_path, "yesterday", "answers_model_b.json")
    capsys.readouterr()
    assert main(["summary", str(save), "--width", "80"]) == 0
    out = capsys.readouterr().out
    assert "Metrics/ROUGE-L" in out and "mymodel" in out and "report:" in out and "(not written)" not in out
    assert main(["summary", str(tmp_path / "nothing")]) == 2
    assert "no results" in capsys.readouterr().err


def all_items_row(out: str, score: str, model: str = "mymodel") -> str:
    """The row of `score` under the heading "<model> · (all)" of `eval.py compare`."""
    block = out.split(f"\n{model} · (all)\n", 1)[1].split("\n\n", 1)[0]
    return next(x for x in block.splitlines() if x.split()[0] == score)


def test_a_better_checkpoint_is_found_and_signatures_must_agree(tmp_path, capsys):
    # yesterday's checkpoint answered like model_b, today's like model_a (ROUGE-L .75 vs .27 in the README)
    a = _run(tmp_path, "yesterday", "answers_model_b.json")
    b = _run(tmp_path, "today", "answers_model_a.json")
    capsys.readouterr()
    assert main(["compare", str(a), str(b)]) == 0
    out = capsys.readouterr().out
    line = all_items_row(out, "Metrics/ROUGE-L")
    assert line.endswith("better in B")
    diff = float(line.split()[3])
    assert diff > 0.3
    # the same run against itself: nothing changed
    assert main(["compare", str(b), str(b)]) == 0
    same = all_items_row(capsys.readouterr().out, "Metrics/ROUGE-L")
    assert same.split()[3] == "0.000"
    # ROUGE made another way (mean over references instead of the best one): refused, named
    c = _run(tmp_path, "other", "answers_model_a.json", metric_options={"ROUGE": {"multi_ref": "mean"}})
    capsys.readouterr()
    assert main(["compare", str(a), str(c)]) == 2
    err = capsys.readouterr().err
    assert "not comparable (signatures differ): mymodel: Metrics/ROUGE-L" in err and "run A" in err and "run B" in err
    assert err.strip().splitlines()[-1].startswith("error: compare: no score of the two runs was made the same way")


def test_runs_without_shared_items_or_models_are_refused(tmp_path, capsys):
    a = _run(tmp_path, "a", "answers_model_a.json")
    cfg = json.loads((tmp_path / "a.json").read_text())
    cfg["answers"][0]["name"] = "someone_else"
    cfg["save_path"] = str(tmp_path / "b")
    (tmp_path / "b.json").write_text(json.dumps(cfg))
    assert main(["--config", str(tmp_path / "b.json"), "--no-charts"]) == 0
    capsys.readouterr()
    assert main(["compare", str(a), str(tmp_path / "b")]) == 2
    assert "share no model name" in capsys.readouterr().err
    assert main(["compare", str(a), str(tmp_path / "b"), "--model", "mymodel:someone_else"]) == 0
    assert main(["compare", str(a), str(tmp_path / "b"), "--model", "mymodel"]) == 2
    assert "expected A_NAME:B_NAME" in capsys.readouterr().err


def test_compare_writes_a_report_of_both_runs(tmp_path, capsys):
    """--report: one page with run A's and run B's model side by side, the pair's verdict, every item once."""
    a = _run(tmp_path, "yesterday", "answers_model_b.json")
    b = _run(tmp_path, "today", "answers_model_a.json")
    capsys.readouterr()
    out = tmp_path / "cmp" / "report.html"
    assert main(["compare", str(a), str(b), "--report", str(out)]) == 0
    assert f"report: {out}" in capsys.readouterr().out
    html = out.read_text(encoding="utf-8")
    data = json.loads(html.split('id="report-data">', 1)[1].split("</script>", 1)[0])
    assert data["models"] == ["A:mymodel", "B:mymodel"]
    n_items = len(json.loads((b / "results" / "mymodel.json").read_text())["items"])
    assert len(data["items"]) == n_items
    # both runs' answers of an item, side by side: yesterday's (model_b's) and today's (model_a's)
    first = data["items"][0]
    want = {json.loads((EN / f).read_text())[0]["output"] for f in ("answers_model_b.json", "answers_model_a.json")}
    assert set(first["o"]) == want
    # the pair's headline: ROUGE-L over all items, B (today's checkpoint) ahead
    assert "A:mymodel" in html and "ROUGE-L" in html
    assert f"Two runs compared: A = {a}, B = {b}" in html
