"""Other harnesses' outputs as answer files, made here by the real tools, offline (tests/harness_tools.py):
Inspect AI logs of its mock model (.eval and .json), lm-evaluation-harness's --log_samples files of the
packaged SmolLM2 on a local task, promptfoo's results of two echo providers. Each file is read, two
models are paired by the harness's own sample ids, the harness's scores are the `Harness` family, and
the closing lines' verdicts are checked against a hand computation (scipy's exact binomial test on the
discordant pairs, from the harness's files read on their own). Bad files are refused with exit 2,
naming the file, the sample and what was expected."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from scipy.stats import binomtest

try:
    from tests import harness_tools as tools
except ImportError:
    import harness_tools as tools

REPO = Path(__file__).resolve().parents[1]


def eval_py(*argv: str, cwd: Path = REPO, timeout: float = 300) -> tuple[int, str, str]:
    proc = subprocess.run([sys.executable, str(REPO / "eval.py"), *argv], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **tools.OFFLINE})
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    return proc.returncode, proc.stdout, proc.stderr


def write_config(folder: Path, answers: list, category: dict, **extra) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "c.json"
    path.write_text(json.dumps({"answers": answers, "save_path": str(folder / "out"), "category": category, **extra}))
    return path


def hand_verdict(a: dict[str, float], b: dict[str, float], m: int) -> tuple[float, float, str]:
    """Exact McNemar by hand: scipy's two-sided binomial test of the items only A passed among the
    discordant ones; (p, p adjusted for m primary scores, the verdict it gives at 0.05)."""
    shared = [k for k in a if k in b]
    only_a = sum(1 for k in shared if a[k] == 1 and b[k] == 0)
    only_b = sum(1 for k in shared if a[k] == 0 and b[k] == 1)
    p = binomtest(only_a, only_a + only_b, 0.5).pvalue if only_a + only_b else 1.0
    p_adj = min(1.0, p * m)
    verdict = "no detectable difference" if p_adj >= 0.05 else ("A better" if only_a > only_b else "B better")
    return p, p_adj, verdict


def row(save: Path, a: str, b: str, score: str) -> dict:
    comp = json.loads((save / "comparisons" / f"{a}__vs__{b}.json").read_text())
    return next(r for r in comp["rows"] if r["score"] == score and r["category"] == "(all)")


def item_scores(save: Path, model_file: str, score: str) -> dict[str, float]:
    res = json.loads((save / "results" / f"{model_file}.json").read_text())
    return {it["id"]: it["scores"][score] for it in res["items"] if score in it["scores"]}


# ---------------------------------------------------------------------------------------------- Inspect AI
@pytest.fixture(scope="module")
def inspect_logs(tmp_path_factory):
    return tools.make_inspect(tmp_path_factory.mktemp("inspect"))


def inspect_values(path: Path, scorer: str) -> dict[str, float]:
    """(sample id, epoch) -> the scorer's value as 0/1, read with Inspect's own reader, errored samples left out."""
    from inspect_ai.log import read_eval_log

    log = read_eval_log(str(path))
    return {f"{s.id}_epoch_{s.epoch}": {"C": 1.0, "I": 0.0}[s.scores[scorer].value]
            for s in log.samples if s.scores and scorer in s.scores}


def test_an_inspect_log_reads_the_same_through_inspects_reader_and_the_documented_format(inspect_logs, monkeypatch):
    from evaluate.harness import inspect_log

    def read(path):
        hf = inspect_log.read(path)
        (model, recs), = hf.models.items()
        return hf, model, [(r.id, r.category, r.instruction, r.output, r.targets, r.extra["harness"].scores,
                            r.extra["harness"].invalid) for r in recs]

    by_inspect = [read(inspect_logs["a"]), read(inspect_logs["a_json"])]
    monkeypatch.setitem(sys.modules, "inspect_ai.log", None)  # Inspect not installed: the documented format
    documented = [read(inspect_logs["a"]), read(inspect_logs["a_json"])]
    for hf, model, recs in by_inspect + documented:
        assert (model, hf.task, hf.epochs, hf.harness) == ("mockllm/model-a", "addition", 2, "inspect_ai")
        assert sorted(recs) == sorted(by_inspect[0][2])
    hf, _, recs = by_inspect[0]
    assert len(recs) == 2 * tools.N_INSPECT and hf.scorers["match"] == {"location": "end"}
    for rid, cat, question, output, targets, scores, invalid in recs:
        i = int(rid.split("_")[0][1:])
        assert rid.endswith(("_epoch_1", "_epoch_2")) and question == f"What is {i} plus {i}?"
        assert targets == (str(2 * i),) and output == f"The answer is {2 * i + (i % 10 == 0)}"
        assert scores == {"match": float(i % 10 != 0), "includes": float(i % 10 != 0)} and not invalid


def test_two_inspect_logs_pair_by_sample_and_epoch_and_their_scores_decide_as_by_hand(inspect_logs, tmp_path):
    cfg = write_config(tmp_path, [{"path": str(inspect_logs["a"])}, {"path": str(inspect_logs["b"])}],
                       {"addition": {"Harness": ["match", "includes"]}})
    code, out, err = eval_py("--config", str(cfg), "--dry-run")
    assert code == 0, err
    assert f"answers: {inspect_logs['b']}: inspect_ai" in out and "(inspect, detected)" in out
    assert "30 samples x 2 epochs" in out and "models: mockllm/model-a, mockllm/model-b" in out
    code, out, err = eval_py("--config", str(cfg))
    assert code == 0, err[-3000:]
    save = tmp_path / "out"
    for model, path in (("mockllm_model-a", inspect_logs["a"]), ("mockllm_model-b", inspect_logs["b"])):
        assert item_scores(save, model, "Harness/match") == inspect_values(path, "match")
    res_b = json.loads((save / "results" / "mockllm_model-b.json").read_text())
    failed = [it for it in res_b["items"] if it["id"].startswith("q7_")]
    assert len(failed) == 2 and all("dropped the connection on sample 7" in it["invalid"]["Harness/match"]["reason"]
                                    for it in failed)
    import inspect_ai

    sig = res_b["signatures"]["Harness/match"]
    assert sig == {"evaluator": "Harness", "harness": "inspect_ai", "version": inspect_ai.__version__,
                   "task": "addition", "scorer": "match", "options": {"location": "end"}, "scale": [0.0, 1.0],
                   "outcome": "pass/fail"}
    a, b = inspect_values(inspect_logs["a"], "match"), inspect_values(inspect_logs["b"], "match")
    p, p_adj, verdict = hand_verdict(a, b, m=2)  # match and includes: two primary scores
    got = row(save, "mockllm_model-a", "mockllm_model-b", "Harness/match")
    assert (got["p"], got["p_adj"]) == (pytest.approx(p), pytest.approx(p_adj))
    assert got["verdict"] == verdict == "A better" and got["n"] == 2 * (tools.N_INSPECT - 1) and got["dropped"] == 2
    assert got["diff"] == pytest.approx(sum(a[k] - b[k] for k in b) / len(b))
    assert "mockllm/model-a vs mockllm/model-b: mockllm/model-a better on 2" in out.replace("\n  ", " ")
    code, again, _ = eval_py("summary", str(save))
    assert code == 0 and "mockllm/model-a better on 2" in again.replace("\n  ", " ")
    # the gates read the harness's scores as any other
    code, _, err = eval_py("summary", str(save), "--fail-if-worse", "mockllm/model-b:mockllm/model-a:Harness/match")
    assert code == 1, err
    assert "Harness/match" in (save / "report.html").read_text(encoding="utf-8")


def dry_run(cfg: Path, capsys) -> tuple[int, str]:
    """`eval.py --config CFG --dry-run` in this process (the command line's own error handling: exit 2 and
    one line, no traceback), for the many bad inputs; the runs above go through a subprocess."""
    from evaluate.cli import main

    code = main(["--config", str(cfg), "--dry-run"])
    return code, capsys.readouterr().err


def test_inspect_logs_that_do_not_pair_are_refused_naming_the_file_and_the_sample(inspect_logs, tmp_path, capsys):
    a = str(inspect_logs["a"])
    truncated = tmp_path / "truncated.eval"
    data = inspect_logs["b"].read_bytes()
    truncated.write_bytes(data[:len(data) // 2])
    no_id = tmp_path / "no_id.json"
    log = json.loads(inspect_logs["a_json"].read_text())
    del log["samples"][3]["id"]
    no_id.write_text(json.dumps(log))
    other_input = tmp_path / "other_input.json"
    log = json.loads(inspect_logs["a_json"].read_text())
    log["samples"][0]["input"] = "What is 100 plus 100?"
    other_input.write_text(json.dumps(log))
    cases = [
        (truncated, [str(truncated), "cannot be read as an Inspect log", "expected a complete zip archive",
                     "truncated"]),
        (inspect_logs["b_subtraction"], [str(inspect_logs["b_subtraction"]), "task 'subtraction'",
                                         f"but {a} (its pair) is task 'addition'"]),
        (inspect_logs["b_one_epoch"], [str(inspect_logs["b_one_epoch"]), "sample q1 has 1 epoch", f"and {a}",
                                       "has 2 of it", "expected the same epochs"]),
        (no_id, [str(no_id), "sample 4", "no id", "expected every sample to carry the id"]),
        (other_input, [str(other_input), f"its input differs from {a}'s", "expected the same input"]),
    ]
    for bad, wants in cases:
        first = [{"path": a}] if bad != no_id else []
        cfg = write_config(tmp_path / bad.stem, first + [{"path": str(bad), "name": "other"}],
                           {"addition": {"Harness": ["match"]}})
        code, err = dry_run(cfg, capsys)
        assert code == 2, (bad, err)
        assert "Traceback" not in err
        for want in wants:
            assert want in err, (bad, want, err)
    cfg = write_config(tmp_path / "names", [{"path": a, "format": "inspct"}, {"path": str(inspect_logs["b"])}],
                       {"addition": {"Harness": ["mach"]}})
    code, err = dry_run(cfg, capsys)
    assert code == 2 and 'answers[0].format: unknown answer file format "inspct"; did you mean "inspect"?' in err
    cfg = write_config(tmp_path / "names", [{"path": a}, {"path": str(inspect_logs["b"])}],
                       {"addition": {"Harness": ["mach"]}})
    code, err = dry_run(cfg, capsys)
    assert code == 2 and 'category.addition.Harness[0]: no Harness score "mach" in category "addition"; did you ' \
                         'mean "match"?' in err, err


def test_harness_scores_need_records_read_from_a_harness(tmp_path, capsys):
    en = REPO / "examples" / "en"
    cfg = write_config(tmp_path, [{"name": "a", "path": str(en / "answers_model_a.json")}],
                       {"closed_qa": {"Harness": ["match"]}}, target_file=str(en / "targets.json"))
    code, err = dry_run(cfg, capsys)
    assert code == 2 and 'category.closed_qa.Harness: category "closed_qa" holds no records read from another ' \
                         "harness's file" in err, err


# ---------------------------------------------------------------------------------- lm-evaluation-harness
@pytest.fixture(scope="module")
def lm_eval_samples(tmp_path_factory):
    return tools.make_lm_eval(tmp_path_factory.mktemp("lm_eval"))


def lm_eval_lines(path: Path) -> dict[str, dict]:
    return {str(d["doc_id"]): d for d in map(json.loads, path.read_text().splitlines())}


def test_lm_eval_samples_of_two_settings_pair_by_document_and_decide_as_by_hand(lm_eval_samples, tmp_path):
    import lm_eval

    zero, two = lm_eval_samples["zero_shot"], lm_eval_samples["two_shot"]
    cfg = write_config(tmp_path, [{"name": "zero-shot", "path": str(zero)},
                                  {"name": "two-shot", "path": str(two), "format": "lm-eval"}],
                       {"tiny_addition": {"Harness": ["exact_match"]}})
    code, out, err = eval_py("--config", str(cfg))
    assert code == 0, err[-3000:]
    save = tmp_path / "out"
    res = json.loads((save / "results" / "zero-shot.json").read_text())
    lines = lm_eval_lines(zero)
    assert len(res["items"]) == len(lines) == tools.N_LM_EVAL
    for it in res["items"]:
        line = lines[it["id"]]
        assert it["scores"]["Harness/exact_match"] == line["exact_match"]
        assert it["output"] == line["filtered_resps"][0] and it["targets"] == [str(line["target"])]
        assert it["instruction"] == line["arguments"]["gen_args_0"]["arg_0"]
    assert res["signatures"]["Harness/exact_match"] == {
        "evaluator": "Harness", "harness": "lm-eval", "version": lm_eval.__version__, "task": "tiny_addition",
        "scorer": "exact_match", "options": {"filter": "first-number", "task_version": 1.0}, "scale": [0.0, 1.0],
        "outcome": "pass/fail"}
    two_lines = lm_eval_lines(two)
    assert two_lines["0"]["arguments"]["gen_args_0"]["arg_0"].count("Question:") == 3  # two shots, then the question
    a = {k: float(v["exact_match"]) for k, v in two_lines.items()}
    b = {k: float(v["exact_match"]) for k, v in lines.items()}
    p, p_adj, verdict = hand_verdict(a, b, m=1)
    got = row(save, "two-shot", "zero-shot", "Harness/exact_match")
    assert (got["p"], got["p_adj"], got["verdict"]) == (pytest.approx(p), pytest.approx(p_adj), verdict)
    headline = out.replace("\n  ", " ")
    if verdict == "no detectable difference":
        assert "no detectable difference on 1 of 1 primary score" in headline
    else:
        assert f"{'two-shot' if verdict == 'A better' else 'zero-shot'} better on 1" in headline


def test_lm_eval_samples_without_a_doc_id_are_refused(lm_eval_samples, tmp_path, capsys):
    zero = lm_eval_samples["zero_shot"]
    bad = tmp_path / zero.name
    rows = zero.read_text().splitlines()
    broken = json.loads(rows[2])
    del broken["doc_id"]
    bad.write_text("\n".join(rows[:2] + [json.dumps(broken)] + rows[3:]) + "\n")
    cfg = write_config(tmp_path, [{"name": "zero-shot", "path": str(bad)}],
                       {"tiny_addition": {"Harness": ["exact_match"]}})
    code, err = dry_run(cfg, capsys)
    assert code == 2 and f"{bad}: line 3: no doc_id; expected every sample to carry lm-eval's doc_id" in err, err


# --------------------------------------------------------------------------------------------- promptfoo
@pytest.fixture(scope="module")
def promptfoo_results(tmp_path_factory):
    path = tools.make_promptfoo(tmp_path_factory.mktemp("promptfoo"))
    if path is None:
        pytest.skip("promptfoo is not installed here (make setup-promptfoo, which make test runs)")
    return path


def test_a_promptfoo_file_of_two_providers_is_two_models_paired_by_test(promptfoo_results, tmp_path):
    data = json.loads(promptfoo_results.read_text())
    cfg = write_config(tmp_path, [{"path": str(promptfoo_results)}], {"addition": {"Harness": ["pass", "correct"]}})
    code, out, err = eval_py("--config", str(cfg))
    assert code == 0, err[-3000:]
    save = tmp_path / "out"
    by_provider: dict[str, dict[str, float]] = {}
    for r in data["results"]["results"]:
        by_provider.setdefault(r["provider"]["label"], {})[str(r["testIdx"])] = float(r["gradingResult"]["pass"])
    assert set(by_provider) == {"echo-a", "echo-b"}
    assert sum(v for m in by_provider.values() for v in m.values()) == data["results"]["stats"]["successes"]
    for model in ("echo-a", "echo-b"):
        assert item_scores(save, model, "Harness/pass") == by_provider[model]
    assert sorted((k for k, v in by_provider["echo-b"].items() if not v), key=int) == ["2", "5", "8", "11"]
    res = json.loads((save / "results" / "echo-b.json").read_text())
    assert next(it for it in res["items"] if it["id"] == "2")["output"] == "Question: What is 3 plus 3?\nAnswer: unsure"
    assert res["signatures"]["Harness/pass"]["harness"] == "promptfoo"
    assert res["signatures"]["Harness/pass"]["version"] == data["metadata"]["promptfooVersion"]
    p, p_adj, verdict = hand_verdict(by_provider["echo-a"], by_provider["echo-b"], m=2)
    got = row(save, "echo-a", "echo-b", "Harness/pass")
    assert (got["p"], got["p_adj"], got["verdict"]) == (pytest.approx(p), pytest.approx(p_adj), verdict)
    assert verdict == "no detectable difference"  # 4 discordant tests, all one way: p = 0.125 before adjustment
    assert "no detectable difference on 2 of 2 primary scores" in out.replace("\n  ", " ")


def test_promptfoo_files_without_outputs_or_with_a_failed_call(promptfoo_results, tmp_path, capsys):
    data = json.loads(promptfoo_results.read_text())
    failed = json.loads(json.dumps(data))
    one = next(r for r in failed["results"]["results"] if r["provider"]["label"] == "echo-b" and r["testIdx"] == 0)
    one.pop("response")
    one["error"] = "API error: 503 Service Unavailable"
    (tmp_path / "failed.json").write_text(json.dumps(failed))
    cfg = write_config(tmp_path / "one", [{"path": str(tmp_path / "failed.json")}], {"addition": {"Harness": ["pass"]}})
    code, out, err = eval_py("--config", str(cfg))
    assert code == 0, err[-2000:]
    res = json.loads((tmp_path / "one" / "out" / "results" / "echo-b.json").read_text())
    bad = next(it for it in res["items"] if it["id"] == "0")
    assert bad["invalid"]["Harness/pass"]["reason"] == "the provider returned no output: API error: 503 Service Unavailable"
    assert "Harness/pass" not in bad["scores"]
    for r in data["results"]["results"]:
        r.pop("response", None)
    (tmp_path / "none.json").write_text(json.dumps(data))
    cfg = write_config(tmp_path / "none", [{"path": str(tmp_path / "none.json")}], {"addition": {"Harness": ["pass"]}})
    code, err = dry_run(cfg, capsys)
    assert code == 2 and f"{tmp_path / 'none.json'}: no test has an output" in err and \
        "expected each provider's output under results.results[].response.output" in err, err
