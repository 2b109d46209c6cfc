"""End to end through the command line: outputs, exit codes, ColossalAI's flags, dry run, resume."""

import csv
import json
from pathlib import Path

import pytest

from evaluate.cli import main

REPO = Path(__file__).resolve().parents[1]
EN = REPO / "examples" / "en"


def write_config(tmp_path, categories, **extra):
    cfg = {"language": "en", "category": categories, "save_path": str(tmp_path / "out"),
           "answers": [{"name": "model_a", "path": str(EN / "answers_model_a.json")},
                       {"name": "model_b", "path": str(EN / "answers_model_b.json")}],
           "target_file": str(EN / "targets.json"), **extra}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    return path


FAST = {"classification": {"Metrics": ["Precision", "Recall", "F1 score", "CHRF"]},
        "closed_qa": {"Metrics": ["BLEU", "ROUGE", "CHRF"]},
        "brainstorming": {"Metrics": ["Distinct"]}}


def test_run_writes_results_csv_charts_manifest(tmp_path, capsys):
    cfg = write_config(tmp_path, FAST)
    assert main(["--config", str(cfg)]) == 0
    out = tmp_path / "out"
    res_a = json.loads((out / "results" / "model_a.json").read_text())
    assert res_a["schema"] == "llm-eval-results/1"
    cats = {i["category"] for i in res_a["items"]}
    assert len(cats) == 10  # every record is kept; categories without a config entry are reported
    assert set(res_a["skipped_categories"]) == cats - set(FAST)
    qa = [i for i in res_a["items"] if i["category"] == "closed_qa"]
    assert all("Metrics/BLEU-4" in i["scores"] and "Metrics/ROUGE-L" in i["scores"] for i in qa)
    agg = res_a["aggregates"]["by_category"]["closed_qa"]["Metrics/BLEU-1"]
    assert agg["n"] == len(qa) and 0 <= agg["mean"] <= 1 and agg["best"]["id"]
    assert "Metrics/BLEU-4" in res_a["signatures"]
    res_b = json.loads((out / "results" / "model_b.json").read_text())
    empty = [i for i in res_b["items"] if "empty_output" in i["flags"]]
    assert len(empty) == 1
    # model_a's answers are the good ones
    for key in ("Metrics/F1", "Metrics/CHRF"):
        assert res_a["aggregates"]["overall"][key]["mean"] > res_b["aggregates"]["overall"][key]["mean"]
    rows = list(csv.DictReader((out / "summary.csv").open()))
    assert {r["model"] for r in rows} == {"model_a", "model_b"}
    assert any(r["category"] == "(all)" and r["metric"] == "F1" for r in rows)
    assert (out / "charts" / "Metrics" / "closed_qa.png").stat().st_size > 5000
    assert (out / "charts" / "Metrics" / "overview.png").exists()
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["status"] == "ok" and manifest["config_hash"] and manifest["versions"]["sacrebleu"]
    assert [m["name"] for m in manifest["models"]] == ["model_a", "model_b"]


def test_unknown_metric_fails_before_work_with_suggestion(tmp_path, capsys):
    cfg = write_config(tmp_path, {"closed_qa": {"Metrics": ["BLEU", "BLUE"]}})
    assert main(["--config", str(cfg)]) == 2
    err = capsys.readouterr().err
    assert 'category.closed_qa.Metrics[1]: unknown metric "BLUE"; did you mean "BLEU"?' in err
    assert not (tmp_path / "out").exists()


def test_bad_answer_file_exit_2_names_file_and_id(tmp_path, capsys):
    bad = json.loads((EN / "answers_model_b.json").read_text())
    bad[3]["output"] = None
    (tmp_path / "b.json").write_text(json.dumps(bad))
    cfg = write_config(tmp_path, FAST)
    code = main(["--config", str(cfg), "--answer_file_list", str(EN / "answers_model_a.json"),
                 str(tmp_path / "b.json"), "--model_name_list", "a", "b"])
    assert code == 2
    err = capsys.readouterr().err
    assert "b.json" in err and f"(id {bad[3]['id']})" in err and 'field "output" must be a string' in err


def test_dry_run_prints_plan_and_scores_nothing(tmp_path, capsys):
    cfg = write_config(tmp_path, FAST)
    assert main(["--config", str(cfg), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "closed_qa" in out and "Metrics: BLEU, ROUGE, CHRF" in out and "dry run" in out
    assert not (tmp_path / "out").exists()


def test_colossalai_config_and_flags_with_skip(colossal, tmp_path, capsys):
    """ColossalAI's config_en.json with its placeholder UniEval paths: metrics alone must run."""
    code = main(["--config_file", str(colossal / "config" / "config_en.json"),
                 "--target_file", str(EN / "targets.json"),
                 "--answer_file_list", str(EN / "answers_model_a.json"),
                 "--model_name_list", "colossal_a", "--save_path", str(tmp_path / "c"),
                 "--only", "Metrics", "--dry-run"])
    assert code == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert "closed_qa" in out and "BERTScore" in out


def test_models_run_one_at_a_time_share_charts(tmp_path):
    cfg = write_config(tmp_path, {"classification": FAST["classification"]})
    for name, file in (("model_a", "answers_model_a.json"), ("model_b", "answers_model_b.json")):
        assert main(["--config", str(cfg), "--answer_file_list", str(EN / file), "--model_name_list", name]) == 0
    out = tmp_path / "out"
    assert sorted(p.name for p in (out / "results").glob("*.json")) == ["model_a.json", "model_b.json"]
    rows = list(csv.DictReader((out / "summary.csv").open()))
    assert {r["model"] for r in rows} == {"model_a", "model_b"}


def test_fail_under(tmp_path, capsys):
    cfg = write_config(tmp_path, {"classification": FAST["classification"]})
    assert main(["--config", str(cfg), "--fail-under", "F1=0.0"]) == 0
    assert main(["--config", str(cfg), "--fail-under", "classification:Metrics/F1=0.99"]) == 1
    assert "model_b: classification:Metrics/F1" in capsys.readouterr().err
    assert main(["--config", str(cfg), "--fail-under", "BLUE-4=0.1"]) == 2


def test_later_run_of_another_family_keeps_earlier_scores(tmp_path):
    cfg = write_config(tmp_path, {"classification": {"Metrics": ["CHRF"]}})
    assert main(["--config", str(cfg)]) == 0
    cfg2 = write_config(tmp_path, {"classification": {"Metrics": ["F1 score"]}})
    assert main(["--config", str(cfg2)]) == 0
    res = json.loads((tmp_path / "out" / "results" / "model_a.json").read_text())
    item = next(i for i in res["items"] if i["category"] == "classification")
    assert "Metrics/CHRF" in item["scores"] and "Metrics/F1" in item["scores"]


def test_unknown_family_flag(tmp_path, capsys):
    cfg = write_config(tmp_path, FAST)
    assert main(["--config", str(cfg), "--only", "Metric"]) == 2
    assert 'unknown evaluator family "Metric"; did you mean "Metrics"?' in capsys.readouterr().err


def test_corpus_aggregate_only_where_the_metric_defines_one(tmp_path):
    cfg = write_config(tmp_path, {"closed_qa": {"Metrics": ["BLEU", "ROUGE"]}})
    assert main(["--config", str(cfg)]) == 0
    res = json.loads((tmp_path / "out" / "results" / "model_a.json").read_text())
    agg = res["aggregates"]["by_category"]["closed_qa"]
    assert "corpus" in agg["Metrics/BLEU-4"] and agg["Metrics/BLEU-4"]["corpus"] != agg["Metrics/BLEU-4"]["mean"]
    assert "corpus" not in agg["Metrics/ROUGE-1"]


def test_limit_keeps_the_first_records_of_each_category_for_every_model(tmp_path, capsys):
    cfg = write_config(tmp_path, FAST, limit=2)
    assert main(["--config", str(cfg), "--limit", "1"]) == 0  # the flag overrides the file
    out = tmp_path / "out"
    first = {}
    for r in json.loads((EN / "answers_model_a.json").read_text()):
        first.setdefault(r["category"], str(r["id"]))
    for model in ("model_a", "model_b"):
        res = json.loads((out / "results" / f"{model}.json").read_text())
        assert sorted(i["id"] for i in res["items"]) == sorted(first.values())  # same ids for both models
        assert res["aggregates"]["by_category"]["closed_qa"]["Metrics/BLEU-1"]["n"] == 1
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["config"]["limit"] == 1 and manifest["models"][0]["records"] == len(first)
    bad = write_config(tmp_path, FAST, limit=0)
    assert main(["--config", str(bad)]) == 2
    assert "limit: expected a positive integer" in capsys.readouterr().err


def test_several_configs_run_in_one_process_after_all_are_checked(tmp_path, capsys):
    one = tmp_path / "one"
    one.mkdir()
    two = tmp_path / "two"
    two.mkdir()
    c1 = write_config(one, {"closed_qa": {"Metrics": ["BLEU"]}})
    c2 = write_config(two, {"brainstorming": {"Metrics": ["Distinct"]}}, limit=1)
    assert main(["--config", str(c1), str(c2), "--no-charts"]) == 0
    out = capsys.readouterr().out
    assert "== config 1 of 2" in out and "== config 2 of 2" in out
    r1 = json.loads((one / "out" / "results" / "model_a.json").read_text())
    r2 = json.loads((two / "out" / "results" / "model_a.json").read_text())
    assert "Metrics/BLEU-4" in r1["aggregates"]["overall"] and "Metrics/Distinct-1" not in r1["aggregates"]["overall"]
    assert r2["aggregates"]["by_category"]["brainstorming"]["Metrics/Distinct-1"]["n"] == 1  # its own limit
    # a bad second file stops everything before the first one scores anything
    three = tmp_path / "three"
    three.mkdir()
    c3 = write_config(three, {"closed_qa": {"Metrics": ["BLEU"]}})
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"category": {"closed_qa": {"Metrics": ["BLUE"]}},
                               "answers": [{"name": "m", "path": str(EN / "answers_model_a.json")}]}))
    assert main(["--config", str(c3), str(bad)]) == 2
    assert "BLUE" in capsys.readouterr().err
    assert not (three / "out").exists()
    # flags that belong to one run are refused with several files
    assert main(["--config", str(c1), str(c2), "--save_path", str(tmp_path / "x")]) == 2
    assert "--save_path with 2 config files" in capsys.readouterr().err


def test_a_chart_draws_no_error_bar_where_there_is_no_interval(tmp_path, monkeypatch):
    """Below 10 items a mean has no 95% interval (ci95 null): its bar has no error bar, and the title
    says so, instead of a zero-width bar captioned as a 95% CI."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.axes import Axes

    from evaluate.report import charts

    drawn = []
    real_bar, real_title = Axes.bar, Axes.set_title
    monkeypatch.setattr(Axes, "bar", lambda self, *a, **k: drawn.append(k.get("yerr")) or real_bar(self, *a, **k))
    monkeypatch.setattr(Axes, "set_title", lambda self, t, **k: drawn.append(t) or real_title(self, t, **k))
    import matplotlib.pyplot as plt

    def agg(mean, n, ci):
        return {"mean": mean, "n": n, "ci95": ci}

    charts._bars(plt, tmp_path / "few.png", "Metrics", "c", {"F1": {"a": agg(0.5, 3, None), "b": agg(0.4, 3, None)}},
                 ["a", "b"], plt.get_cmap("tab10"), (0.0, 1.0))
    charts._bars(plt, tmp_path / "mixed.png", "Metrics", "c",
                 {"F1": {"a": agg(0.5, 12, [0.4, 0.6]), "b": agg(0.4, 3, None)}}, ["a", "b"], plt.get_cmap("tab10"),
                 (0.0, 1.0))
    few_title, mixed_title = [" ".join(t.split()) for t in drawn if isinstance(t, str)]  # titles wrap to the chart
    assert "no error bars: too few items" in few_title and "95% bootstrap CI" not in few_title
    assert "error bars: 95% bootstrap CI of the mean; none below 10 items" in mixed_title
    errs = [e for e in drawn if not isinstance(e, str)]
    assert all(v != v for e in errs[:2] for side in e for v in side)  # NaN: nothing drawn
    assert errs[2] == [[pytest.approx(0.1)], [pytest.approx(0.1)]]
    assert (tmp_path / "few.png").is_file() and (tmp_path / "mixed.png").is_file()
