"""The run log owns what a save path holds (issue 45): every file is a typed record of
`evaluate/savepath/records.py` (a benchmark's declared in its package), written through
`write_run_log` and read through `read_run_log`, with a JSON Schema each (`eval.py schema`).

- no module outside evaluate/savepath/ imports the save path's writers or calls one (an ast walk; the
  paths a user names are listed with why), and a planted violation is caught;
- every kind's JSON Schema validates the files a real run writes (a GPT + Metrics run with battles and
  the judge check, SAGEval, a sharded run's merge, against tests/fake_openai_server.py);
- `eval.py schema` prints valid JSON Schemas, one kind's or all, and refuses an unknown kind (exit 2);
- write_run_log then read_run_log gives back what was written, byte for byte.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import jsonschema
import pytest

from evaluate.cli import main
from evaluate.savepath import layout
from evaluate.savepath import read as sp_read
from evaluate.savepath.log import read_run_header, read_run_log, write_run_log
from evaluate.savepath.records import (SCHEMA_VERSION, Battle, Comparison, ComparisonsCsv, JudgeCheck, Manifest,
                                       ModelResults, Ranking, SagevalSummary, SummaryCsv, json_bytes, record_kinds)

try:
    from tests import test_savepath as sp
    from tests.fake_openai_server import fake_openai  # noqa: F401
except ImportError:
    import test_savepath as sp  # type: ignore[no-redef]
    from fake_openai_server import fake_openai  # type: ignore[no-redef]  # noqa: F401

REPO = Path(__file__).resolve().parents[1]

# the save path's writers: a module outside evaluate/savepath/ hands records to write_run_log instead
# (`savepath.labels`' append_label / write_queue / write_corrected are the labels' own door: it checks each
# label and builds its record there, as write_run_log does for the other files)
WRITERS = {"write_json", "write_text", "write_bytes", "append_text", "copy_file", "write_figure", "write_answers"}
# files a user names (or the tool's own caches), written with the core's atomic writer: not a save path's
USER_PATHS = {
    "evaluate/judgecheck/check.py": "judge-check --output FILE: the check's record where the user says",
    "evaluate/commands/judgecheck.py": "judge-check --labels --output FILE: the labels' check where the user says",
    "evaluate/commands/compare.py": "compare --out FILE: two runs' comparison where the user says",
    "evaluate/commands/leaderboard.py": "leaderboard --out FILE: the table where the user says",
    "evaluate/commands/metaeval.py": "meta-eval --output FILE: the report where the user says",
    "evaluate/ci/reports.py": "--junit / --markdown FILE: the gates' reports for a CI system, where the user says",
    "evaluate/models/checksums.py": "the model cache's checksum index (the cache, not a run)",
    "evaluate/backends/speed.py": "the speed store in the user's cache folder (not a run)",
}
CORE_WRITERS = {"atomic_write_json", "atomic_write_text", "atomic_write_bytes"}


def savepath_writes(tree: ast.AST) -> list[str]:
    """What a module does with the save path's writers: imports of them (`from ..savepath.write import
    write_json`, `from ..savepath import write`, a writer re-exported by the package) and calls through
    them (`write.write_json(...)`, `write_text(...)` when imported from the save path)."""
    found = []
    bound: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            parts = (node.module or "").split(".")
            if "savepath" not in parts:
                continue
            for alias in node.names:
                if parts[-1] == "write" and alias.name != "server_logs" or alias.name in WRITERS \
                        or alias.name == "write" and parts[-1] == "savepath":
                    found.append(f"line {node.lineno}: imports {alias.name} from {node.module or '.'}")
                    bound.add(alias.asname or alias.name)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in bound \
                    and func.attr in WRITERS or isinstance(func, ast.Name) and func.id in bound:
                found.append(f"line {node.lineno}: calls a save path writer")
    return found


def core_writes(tree: ast.AST) -> list[int]:
    return [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Call) and
            (getattr(n.func, "id", None) in CORE_WRITERS or getattr(n.func, "attr", None) in CORE_WRITERS)]


def test_no_module_outside_the_save_path_package_writes_a_save_path_file():
    found, core = {}, set()
    for path in sorted((REPO / "evaluate").rglob("*.py")):
        rel = path.relative_to(REPO).as_posix()
        if rel.startswith("evaluate/savepath/") or rel == "evaluate/core/io.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        if savepath_writes(tree):
            found[rel] = savepath_writes(tree)
        if core_writes(tree):
            core.add(rel)
    assert not found, f"modules that write a save path's file themselves, not through write_run_log: {found}"
    assert core == set(USER_PATHS), f"writers of user-named files not listed (or listed and gone): " \
                                    f"{sorted(core ^ set(USER_PATHS))}"


def test_the_walk_catches_a_planted_writer():
    planted = ast.parse("from ..savepath import write\nfrom ..savepath.write import write_json as wj\n"
                        "from ..savepath.write import server_logs\nfrom ..savepath import write_text\n"
                        "def f(p):\n    write.write_json(p, {})\n    wj(p, {})\n    server_logs(p)\n"
                        "    write.server_logs(p)\n")
    got = savepath_writes(planted)
    assert [g.split(":")[0] for g in got] == ["line 1", "line 2", "line 4", "line 6", "line 7"], got
    assert core_writes(ast.parse("from ..core.io import atomic_write_json\natomic_write_json(p, {})\n")) == [2]
    assert not savepath_writes(ast.parse("from ..savepath.log import write_run_log\nwrite_run_log(p, [])\n"))


# ---------------------------------------------------------------- the schemas validate what a run writes
def kind_of(rel: str) -> str | None:
    """The record kind of a file of the save paths these tests write (None: not a record's: a cache)."""
    name = rel.rsplit("/", 1)[-1]
    first = rel.split("/", 1)[0]
    if name.endswith(".sqlite") or name == layout.LOCK_NAME:
        return None
    if name == "ranking.json":
        return "ranking"
    return {"results": "results", "battles": "battle", "sageval": "sageval", "runs": "manifest", "charts": "chart",
            "judge_checks": "judge_check", "summary.csv": "summary_csv", "manifest.json": "manifest",
            "judge_check.json": "judge_check", "report.html": "report", "logs": None}.get(first) or \
        ("comparisons_csv" if name == "comparisons.csv" else "comparison" if first == "comparisons" else None)


def benchmark_kind_of(rel: str) -> str | None:
    """The record kind of a benchmark's own file or a generated answer file (None: a run's file)."""
    parts = rel.split("/")
    name = parts[-1]
    if name.endswith(".sqlite"):  # the generation's cache of replies (SQLite, not a record)
        return None
    if name.endswith(".generation.json"):
        return "generation"
    if parts[0] in ("model_answer", "model_outputs"):
        return "answers"
    if parts[0] == "model_judgment":
        return "mt_bench_judgments" if len(parts) == 2 else "arena_hard_judgments"
    return {"mt_bench_summary.json": "mt_bench_summary", "leaderboard.csv": "arena_hard_leaderboard",
            "annotations.json": "alpaca_eval_annotations", "judge_run.json": "alpaca_eval_judge_run"}.get(name)


def validate_tree(root: Path) -> dict[str, int]:
    """Validate every file under `root` against its kind's schema; returns how many of each kind."""
    from evaluate.commands.schema import kinds as all_kinds

    kinds = all_kinds()
    seen: dict[str, int] = {}
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        rel = path.relative_to(root).as_posix()
        kind = benchmark_kind_of(rel) or kind_of(rel)
        if kind is None:
            assert rel.endswith(".sqlite") or rel.startswith("logs/"), f"{rel}: no record kind"
            continue
        cls = kinds[kind]
        doc = cls.document(path.read_bytes())
        try:
            jsonschema.validate(doc, cls.json_schema())
        except jsonschema.ValidationError as exc:
            raise AssertionError(f"{rel} ({kind}): {exc.message} at {list(exc.absolute_path)}") from None
        seen[kind] = seen.get(kind, 0) + 1
    return seen


def test_every_kinds_schema_validates_what_a_real_run_writes(tmp_path, fake_openai, monkeypatch, capsys):
    monkeypatch.setenv("OPENAI_API_KEY", "x")
    fake_openai.reply_fn = sp._judge
    assert main(["--config", str(sp._config(tmp_path, "c.json", fake_openai.url)), "--judge-check", "1"]) == 0, \
        capsys.readouterr().err
    seen = validate_tree(tmp_path / "out")
    assert {"results", "battle", "comparison", "comparisons_csv", "summary_csv", "manifest", "judge_check", "chart",
            "report"} <= set(seen), seen
    assert seen["results"] == 2 and seen["manifest"] == 2  # manifest.json and runs/<id>.json
    # the log read back, as records, written elsewhere: every file the same bytes as the run wrote
    out, again = tmp_path / "out", tmp_path / "again"
    written = write_run_log(again, read_run_log(out).records())
    assert {p.relative_to(again).parts[0] for p in written} >= {"results", "battles", "comparisons", "runs",
                                                                "judge_checks", "manifest.json", "judge_check.json"}
    for p in written:
        assert p.read_bytes() == (out / p.relative_to(again)).read_bytes(), p.relative_to(again)

    fake_openai.reply_fn = sp._sage
    monkeypatch.setenv("SAGE_KEY", "x")
    sage = {"save_path": str(tmp_path / "sage"), "answers": [{"name": "gen", "path": str(sp.SURVEYS)}],
            "category": {"survey": {"SAGEval": ["accuracy"]}}, "sageval": {"use_logprobs": False},
            "judge": {"backend": "openai", "model": "fake-judge", "base_url": fake_openai.url,
                      "api_key_env": "SAGE_KEY", "mode": "generate"}}
    (tmp_path / "s.json").write_text(json.dumps(sage))
    assert main(["--config", str(tmp_path / "s.json"), "--no-charts"]) == 0, capsys.readouterr().err
    assert validate_tree(tmp_path / "sage")["sageval"] == 1

    cfg = sp._metrics_run(tmp_path, "m.json", tmp_path / "sharded")
    for i in (1, 2):
        assert main(["--config", str(cfg), "--shard", f"{i}/2"]) == 0, capsys.readouterr().err
    assert main(["merge", str(tmp_path / "merged"), str(tmp_path / "sharded")]) == 0, capsys.readouterr().err
    assert validate_tree(tmp_path / "merged")["manifest"] >= 3  # its own, twice, and each shard's run


def test_every_benchmarks_schemas_validate_what_it_writes(fake_openai, tmp_path, capsys):
    """MT-bench, Arena-Hard and AlpacaEval, each with a generated model (its answer file and manifest)."""
    from evaluate.commands.alpaca_eval import main as alpaca
    from evaluate.commands.arena_hard import main as arena
    from evaluate.commands.mt_bench import main as mt_bench

    gen = sp.gen
    gen.need(gen.MT / "question.jsonl", gen.AH / "question.jsonl", gen.AH.parent / "judge_prompt_v0.1.json",
             gen.AE / "model_outputs" / "gpt4_1106_preview.json",
             gen.AE / "evaluators_configs" / "weighted_alpaca_eval_gpt4_turbo")
    fake_openai.reply_fn = gen.judge_or_model
    judge, model = gen.judge_config(tmp_path, fake_openai), gen.model_config(tmp_path, fake_openai)
    assert mt_bench(["--data", str(gen.MT), "--judge-config", str(judge), "--mode", "single", "--save_path",
                     str(tmp_path / "mt"), "--limit", "1", "--generate", f"mine={model}"]) == 0, capsys.readouterr().err
    seen = validate_tree(tmp_path / "mt")
    assert {"mt_bench_summary", "mt_bench_judgments", "answers", "generation", "results", "manifest"} <= set(seen)
    assert arena(["--bench", str(gen.AH), "--judge-config", str(judge), "--judge-prompt",
                  str(gen.AH.parent / "judge_prompt_v0.1.json"), "--limit", "3", "--save_path", str(tmp_path / "ah"),
                  "--generate", f"mine={model}"]) == 0, capsys.readouterr().err
    seen = validate_tree(tmp_path / "ah")
    assert {"arena_hard_judgments", "arena_hard_leaderboard", "answers", "battle"} <= set(seen), seen
    assert alpaca(["--reference-outputs", str(gen.AE / "model_outputs" / "gpt4_1106_preview.json"),
                   "--evaluator-config", str(gen.AE / "evaluators_configs" / "weighted_alpaca_eval_gpt4_turbo"),
                   "--judge-config", str(judge), "--save_path", str(tmp_path / "ae"), "--limit", "3",
                   "--generate", f"mine={model}"]) == 0, capsys.readouterr().err
    seen = validate_tree(tmp_path / "ae")
    assert {"alpaca_eval_annotations", "alpaca_eval_judge_run", "answers", "generation"} <= set(seen), seen


def test_a_schema_refuses_a_file_that_does_not_fit():
    schema = ModelResults.json_schema()
    good = {"schema": "x", "model": "m", "answer_file": None, "runs": [], "signatures": {}, "aggregates": {},
            "skipped_categories": {}, "items": []}
    jsonschema.validate(good, schema)
    for bad in ({**good, "model": 3}, {k: v for k, v in good.items() if k != "model"}, {**good, "runs": "r1"}):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, schema)


# ---------------------------------------------------------------- eval.py schema
def test_eval_py_schema_prints_every_kinds_schema_and_refuses_an_unknown_kind(capsys):
    assert main(["schema"]) == 0
    every = json.loads(capsys.readouterr().out)
    assert set(every) == set(record_kinds()) >= {"results", "battle", "ranking", "comparison", "judge_check",
                                                 "labels", "manifest", "sageval", "mt_bench_summary",
                                                 "arena_hard_leaderboard", "alpaca_eval_annotations"}
    for kind, schema in every.items():
        jsonschema.Draft202012Validator.check_schema(schema)
        assert schema["title"] == kind and schema["x-schema-version"] == SCHEMA_VERSION
    assert main(["schema", "results"]) == 0
    one = json.loads(capsys.readouterr().out)
    assert one == every["results"] and {"model", "items", "aggregates"} <= set(one["properties"])
    assert "model" in one["required"] and "stem" not in json.dumps(every["battle"]["properties"])
    assert main(["schema", "resuls"]) == 2
    err = capsys.readouterr().err
    assert 'no file kind "resuls"' in err and 'did you mean "results"' in err


def test_the_save_path_package_names_no_benchmark_but_each_registers_its_files():
    from evaluate.commands.schema import kinds as all_kinds

    kinds = all_kinds()
    owners = {k: c.__module__ for k, c in kinds.items()}
    assert owners["mt_bench_summary"] == "evaluate.benchmarks.mt_bench.records"
    assert owners["arena_hard_judgments"] == "evaluate.benchmarks.arena_hard.records"
    assert owners["alpaca_eval_judge_run"] == "evaluate.benchmarks.alpaca_eval.records"
    assert all(m.startswith(("evaluate.savepath.", "evaluate.benchmarks.")) for m in owners.values())


# ---------------------------------------------------------------- the two doors
def test_write_run_log_then_read_run_log_round_trips(tmp_path):
    root = tmp_path / "run"
    results = {"schema": "llm-eval-results/3", "model": "m/ä", "answer_file": "a.json", "runs": ["r1"],
               "signatures": {}, "aggregates": {"overall": {"Metrics/BLEU": {"mean": 0.5}}, "by_category": {}},
               "skipped_categories": {}, "items": [{"id": "1", "category": "c", "scores": {"Metrics/BLEU": 0.5}}],
               "later": "a key the record does not declare, kept in place"}
    battle = {"summary": {"model_a": "m/ä", "model_b": "n"}, "schema": "b/1", "items": []}
    manifest = {"run_id": "20260101T000000Z-abc123", "status": "ok", "benchmark": "x", "config": {}, "models": [],
                "layout": layout.LAYOUT_VERSION}
    comparison = {"schema": sp_read.COMPARISON_SCHEMA, "model_a": "m/ä", "model_b": "n", "method": {}, "rows": []}
    check = {"schema": "llm-eval-judge-check/1", "key": "k1", "judge": {}, "prompts": {}, "labelled": None,
             "sanity": None, "trustworthy": True, "verdict_text": "ok", "created": "t"}
    written = write_run_log(root, [ModelResults.from_dict(results), Battle.from_dict(battle),
                                   Ranking.from_dict({"schema": "r/1", "n_items": 1}),
                                   Comparison.from_dict(comparison), JudgeCheck.from_dict(check),
                                   SagevalSummary(model="m/ä", by_category={"c": {}}), Manifest.from_dict(manifest),
                                   SummaryCsv(rows=[{"model": "m", "mean": 1 / 3, "n": 3}]),
                                   ComparisonsCsv(rows=[{"model_a": "m", "p": None, "diff": 0.25}])])
    assert layout.results_file(root, "m/ä") in written and layout.judge_check_file(root) in written
    assert layout.run_manifest_file(root, manifest["run_id"]) in written
    assert layout.results_file(root, "m/ä").read_bytes() == json_bytes(results)  # the bytes write_json wrote
    log = read_run_log(root)
    assert log.results == [results] and list(log.results[0]) == list(results)
    assert log.battles == [battle] and log.ranking == {"schema": "r/1", "n_items": 1}
    assert log.comparisons == [comparison] and log.judge_check == check and log.manifest == manifest
    assert log.sageval == {"m/ä": {"model": "m/ä", "by_category": {"c": {}}}}
    assert layout.summary_csv(root).read_text().splitlines()[1] == "m,,,,0.333333,,,,3,,"
    assert layout.comparisons_csv(root).read_text().splitlines()[1].startswith("m,,,,,,,,,,,0.25,")
    head = read_run_log(root, header_only=True)
    assert head.header_only and head.results == [] and head.manifest == manifest
    assert read_run_header(root).manifest == manifest
    again = tmp_path / "again"  # what was read, written again: the same bytes
    write_run_log(again, [ModelResults.from_dict(r) for r in log.results] + [Manifest.from_dict(log.manifest)])
    assert layout.results_file(again, "m/ä").read_bytes() == layout.results_file(root, "m/ä").read_bytes()
    assert layout.manifest_file(again).read_bytes() == layout.manifest_file(root).read_bytes()


def test_a_record_built_from_a_file_missing_a_required_key_says_which():
    with pytest.raises(ValueError, match="results: missing 'model'"):
        ModelResults.from_dict({"schema": "x"})


def test_the_viewers_run_list_reads_headers_only(tmp_path, monkeypatch):
    """The viewer's list of runs (view.catalog -> view.data.read_header) asks the run log for the header
    alone: no result file is opened, even a broken one."""
    from evaluate.savepath.log import RunLog
    from evaluate.view import data

    root = tmp_path / "run"
    write_run_log(root, [Manifest.from_dict({"run_id": "20260101T000000Z-abc123", "status": "ok", "models": [
        {"name": "m"}], "layout": layout.LAYOUT_VERSION})])
    layout.results_dir(root).mkdir()
    layout.results_file(root, "m").write_text("{ not json")  # a full read would name it
    asked = []
    real = RunLog.read.__func__

    def read(cls, path, *, header_only=False):
        asked.append(header_only)
        return real(cls, path, header_only=header_only)

    monkeypatch.setattr(RunLog, "read", classmethod(read))
    head = data.read_header(root)
    assert asked == [True] and head.run_id == "20260101T000000Z-abc123" and head.models == ["m"]
    assert not any("results" in p for p in head.problems)
