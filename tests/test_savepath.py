"""The save path has one owner, `evaluate.savepath`: every file under a save path, whatever made it
(a run, a merge, generation, MT-bench, Arena-Hard, AlpacaEval), is written by that package alone
(traced at run time: every write-mode open, os.open, os.replace under the save path is attributed
to the project module that asked for it; and no other module writes in the source); every manifest
is made by the one builder (the same keys, the layout, the package versions); a benchmark lives in
one package; earlier result files are read once per run; the layout version is written and checked;
a result file cut short is named by `eval.py report` / `eval.py summary` (exit 3); the dry run,
export and batch prefetch reuse what `prepare` loaded; generated answers round-trip; the run log
reads whole or as its header."""

from __future__ import annotations

import ast
import builtins
import io
import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

import evaluate.savepath.write as sp_write
from evaluate.cli import main
from evaluate.core import io as core_io
from evaluate.savepath import LAYOUT_VERSION, read_answers, write_answers
from evaluate.savepath import read as sp_read
from evaluate.savepath.manifest import HEADER_KEYS, versions

try:
    from tests import test_generate as gen
    from tests.fake_openai_server import Reply, fake_openai  # noqa: F401
except ImportError:
    import test_generate as gen  # type: ignore[no-redef]
    from fake_openai_server import Reply, fake_openai  # type: ignore[no-redef]  # noqa: F401

REPO = Path(__file__).resolve().parents[1]
EN = REPO / "examples" / "en"
PROMPTS = REPO / "prompts"
SURVEYS = REPO / "examples" / "sageval" / "surveys.json"
SAVEPATH = "evaluate/savepath/"
# the atomic writer the save path's writer calls: a write through it is the caller's
PRIMITIVE = (REPO / "evaluate" / "core" / "io.py").resolve()


def _sqlite(path: Path) -> bool:
    """SQLite's files (the judge's and the generation's caches, their journals): written by SQLite's C
    code, not by Python, so no trace sees them; the cache's own schema, not this format."""
    return ".sqlite" in path.name


def _judge(rec):
    if "[Assistant 1's answer]" in rec.user_text:
        return Reply(content="7 5")
    return Reply(content="4")


def _sage(rec):
    msgs = rec.body["messages"]
    if msgs[0]["content"].startswith("You are SAGE"):
        return Reply(content=json.dumps({"aspects": {"accuracy": {"score": 3, "reason": "ok", "definition": None}},
                                         "new_aspects": []}))
    return Reply(content=json.dumps({"accuracy": {"score": 4, "reason": "fine"}}))


def _config(tmp_path: Path, name: str, url: str, **extra) -> Path:
    cfg = {"answers": [{"name": m, "path": str(EN / f"answers_{m}.json")} for m in ("model_a", "model_b")],
           "target_file": str(EN / "targets.json"), "save_path": str(tmp_path / "out"),
           "prompts": {"battle": str(PROMPTS / "battle_prompt_en.json"),
                       "evaluation": str(PROMPTS / "evaluation_prompt_en.json")},
           "judge": {"backend": "openai", "model": "fake-judge", "base_url": url, "mode": "generate",
                     "max_retries": 0},
           "category": {"closed_qa": {"GPT": ["relevance"], "Metrics": ["BLEU", "CHRF"]},
                        "summarization": {"GPT": ["relevance"], "Metrics": ["ROUGE"]}}, **extra}
    path = tmp_path / name
    path.write_text(json.dumps(cfg))
    return path


class Writes:
    """Every write of a file while it is installed: the path and the project module that asked for it
    (the first frame of the project's code, the core's atomic writer skipped)."""

    def __init__(self) -> None:
        self.events: list[tuple[Path, str]] = []

    def note(self, path, writing: bool) -> None:
        if not writing or not isinstance(path, (str, os.PathLike)):
            return
        frame = sys._getframe(2)
        module = "(not the project's code)"
        while frame is not None:
            f = Path(frame.f_code.co_filename).resolve()
            if f != PRIMITIVE and (REPO / "evaluate") in f.parents:
                module = f.relative_to(REPO).as_posix()
                break
            frame = frame.f_back
        self.events.append((Path(os.path.abspath(path)).resolve(), module))

    def under(self, root: Path) -> list[tuple[Path, str]]:
        root = root.resolve()
        return [(p, m) for p, m in self.events if root in p.parents]

    def check(self, root: Path) -> set[Path]:
        """Assert that every file under `root` was written, and only by evaluate/savepath/; returns the files."""
        root = root.resolve()
        mine = self.under(root)
        others = sorted({(str(p.relative_to(root)), m) for p, m in mine if not m.startswith(SAVEPATH)})
        assert not others, f"written under {root} by another module than evaluate/savepath/: {others}"
        left = {p.resolve() for p in root.rglob("*") if p.is_file()}
        unseen = sorted(str(p.relative_to(root)) for p in left - {p for p, _ in mine} if not _sqlite(p))
        assert not unseen, f"files under {root} that no traced write made: {unseen}"
        return left


@pytest.fixture
def traced(monkeypatch) -> Writes:
    """Every write-mode open (builtins.open, io.open: Path.write_*, shutil's copies), os.open with a
    write flag (tempfile, the lock, the atomic writer) and os.replace / os.rename (their target),
    with the module that asked for it."""
    writes = Writes()
    real_open, real_os_open, real_replace, real_rename = builtins.open, os.open, os.replace, os.rename

    def open_(file, mode="r", *args, **kwargs):
        writes.note(file, any(c in mode for c in "wax+"))
        return real_open(file, mode, *args, **kwargs)

    def os_open(path, flags, *args, **kwargs):
        writes.note(path, bool(flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND)))
        return real_os_open(path, flags, *args, **kwargs)

    def replace(src, dst, *args, **kwargs):
        writes.note(dst, True)
        return real_replace(src, dst, *args, **kwargs)

    def rename(src, dst, *args, **kwargs):
        writes.note(dst, True)
        return real_rename(src, dst, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", open_)
    monkeypatch.setattr(io, "open", open_)
    monkeypatch.setattr(os, "open", os_open)
    monkeypatch.setattr(os, "replace", replace)
    monkeypatch.setattr(os, "rename", rename)
    return writes


def _manifest(path: Path) -> dict:
    """A manifest as written: the one builder's keys, the layout, this version's package versions."""
    manifest = json.loads(path.read_text(encoding="utf-8"))
    missing = [k for k in HEADER_KEYS if k not in manifest]
    assert not missing, f"{path}: no {missing}"
    assert manifest["versions"] == versions() and len(manifest["versions"]) >= 5, path
    assert all(isinstance(m, dict) and m.get("name") for m in manifest["models"]), (path, manifest["models"])
    assert isinstance(manifest["errors"], list) and isinstance(manifest["usage"], dict), path
    assert manifest["started"] and manifest["finished"] and manifest["run_id"] and manifest["status"], path
    return manifest


def _saved_manifest(root: Path) -> dict:
    """manifest.json of a save path, with the layout stamped and the same manifest under runs/."""
    manifest = _manifest(root / "manifest.json")
    assert manifest["layout"] == LAYOUT_VERSION
    assert json.loads((root / "runs" / f"{manifest['run_id']}.json").read_text()) == manifest
    return manifest


def _files(root: Path) -> set[Path]:
    return {p.resolve() for p in root.rglob("*") if p.is_file()}


def test_every_file_a_run_leaves_is_written_by_the_save_path_package(tmp_path, fake_openai, monkeypatch, traced,
                                                                      capsys):
    """A GPT + Metrics run with battles, the judge check first, charts and report; then SAGEval."""
    monkeypatch.setenv("OPENAI_API_KEY", "x")
    fake_openai.reply_fn = _judge
    assert main(["--config", str(_config(tmp_path, "c.json", fake_openai.url)), "--judge-check", "1"]) == 0, \
        capsys.readouterr().err
    out = (tmp_path / "out").resolve()
    left = traced.check(out)
    kinds = {p.relative_to(out).parts[0] for p in left}
    # the run left every kind of file the layout has (but answers/, which generation writes)
    assert {"results", "battles", "comparisons", "charts", "runs", "judge_checks", "summary.csv", "report.html",
            "manifest.json", "judge_check.json", "judge_cache.sqlite"} <= kinds, kinds
    assert any(p.name == ".eval.lock" for p, _ in traced.under(out))  # the lock too, gone when the run ended
    manifest = _saved_manifest(out)
    assert manifest["plan"]["categories"] and "benchmark" not in manifest

    fake_openai.reply_fn = _sage
    monkeypatch.setenv("SAGE_KEY", "x")
    sage = {"save_path": str(tmp_path / "sage"), "answers": [{"name": "gen", "path": str(SURVEYS)}],
            "category": {"survey": {"SAGEval": ["accuracy"]}}, "sageval": {"use_logprobs": False},
            "judge": {"backend": "openai", "model": "fake-judge", "base_url": fake_openai.url,
                      "api_key_env": "SAGE_KEY", "mode": "generate"}}
    (tmp_path / "s.json").write_text(json.dumps(sage))
    assert main(["--config", str(tmp_path / "s.json"), "--no-charts"]) == 0, capsys.readouterr().err
    sage_out = (tmp_path / "sage").resolve()
    assert sage_out / "sageval" / "gen.json" in traced.check(sage_out)


def _metrics_run(tmp_path: Path, name: str, save: Path, models=("model_a", "model_b")) -> Path:
    cfg = {"answers": [{"name": m, "path": str(EN / f"answers_{m}.json")} for m in models],
           "target_file": str(EN / "targets.json"), "save_path": str(save),
           "category": {"closed_qa": {"Metrics": ["BLEU", "CHRF"]}, "classification": {"Metrics": ["F1 score"]},
                        "brainstorming": {"Metrics": ["Distinct"]}}}
    path = tmp_path / name
    path.write_text(json.dumps(cfg))
    return path


def test_a_merge_of_shards_is_written_by_the_save_path_package(tmp_path, traced, capsys):
    cfg = _metrics_run(tmp_path, "c.json", tmp_path / "sharded")
    for i in (1, 2):
        assert main(["--config", str(cfg), "--shard", f"{i}/2"]) == 0, capsys.readouterr().err
    merged = tmp_path / "merged"
    assert main(["merge", str(merged), str(tmp_path / "sharded")]) == 0, capsys.readouterr().err
    assert "models: model_a, model_b" in capsys.readouterr().out
    left = traced.check(merged)
    assert {"results", "comparisons", "charts", "runs", "summary.csv", "report.html", "manifest.json"} <= \
        {p.relative_to(merged.resolve()).parts[0] for p in left}
    shards = [_saved_manifest(tmp_path / "sharded" / f"shard-{i}-of-2") for i in (1, 2)]
    manifest = _saved_manifest(merged)
    # a merge's manifest has a run's keys: its models as entries, the shards' config and plan-less header
    assert [m["name"] for m in manifest["models"]] == ["model_a", "model_b"]
    assert [m["records"] for m in manifest["models"]] == [sum(len(json.loads(
        (tmp_path / "sharded" / f"shard-{i}-of-2" / "results" / f"{m}.json").read_text())["items"]) for i in (1, 2))
        for m in ("model_a", "model_b")]
    assert manifest["config"] == shards[0]["config"] and manifest["run_id"].split("-")[1] == "merge"
    assert [s["run_id"] for s in manifest["merged_from"]] == [s["run_id"] for s in shards]
    assert {p.name for p in (merged / "runs").iterdir()} >= {f"{s['run_id']}.json" for s in shards}


def test_generated_answers_in_a_run_are_written_by_the_save_path_package(tmp_path, fake_openai, traced, capsys):
    fake_openai.reply_fn = gen.model_reply
    cfg = gen.run_config(tmp_path, gen.model_config(tmp_path, fake_openai))
    assert main(["--config", str(cfg), "--no-charts"]) == 0, capsys.readouterr().err
    out = (tmp_path / "out").resolve()
    left = traced.check(out)
    assert {out / "answers" / "model_c.json", out / "answers" / "model_c.json.generation.json"} <= left
    _saved_manifest(out)
    made = _manifest(out / "answers" / "model_c.json.generation.json")  # generation's manifest: the same keys
    assert made["models"] == [{"name": "model_c", "answer_file": str(out / "answers" / "model_c.json"),
                               "records": 25}]
    assert made["status"] == "ok" and made["errors"] == [] and made["counts"]["answered"] == 25
    assert made["run_id"].split("-")[1] == "generate" and made["usage"]["requests"] == 25


def test_the_trace_catches_a_file_another_module_writes(tmp_path, traced):
    from evaluate.ci.reports import CIFiles

    root = tmp_path / "out"
    sp_write.write_json(root / "results" / "m.json", {"model": "m"})
    traced.check(root)  # the save path's own writer: passes
    CIFiles(root / "gates.xml", None).write()  # --junit pointed into a save path: evaluate/ci/reports.py
    with pytest.raises(AssertionError, match=r"evaluate/ci/reports\.py"):
        traced.check(root)
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "x.txt").write_bytes(b"")  # made by no project module, and no trace missed it
    with pytest.raises(AssertionError, match="not the project's code"):
        traced.check(tmp_path / "other")
    root2 = tmp_path / "unseen"
    root2.mkdir()
    real = traced.events[:]
    (root2 / "y.json").write_text("{}")
    traced.events[:] = real  # as if no trace had seen the write
    with pytest.raises(AssertionError, match=r"no traced write made: \['y\.json'\]"):
        traced.check(root2)


# ---------------------------------------------------------------- the benchmarks, each from a generated model
def _bench_manifest(out: Path, key: str) -> dict:
    manifest = _saved_manifest(out)
    assert manifest["benchmark"] == key and manifest["judge_check"] and key in manifest
    assert "mine" in [m["name"] for m in manifest["models"]]
    return manifest


def test_mt_bench_is_written_by_the_save_path_package(fake_openai, tmp_path, traced, capsys) -> None:
    gen.need(gen.MT / "question.jsonl")
    from evaluate.commands.mt_bench import main as mt_bench

    fake_openai.reply_fn = gen.judge_or_model
    out = tmp_path / "out"
    assert mt_bench(["--data", str(gen.MT), "--judge-config", str(gen.judge_config(tmp_path, fake_openai)),
                     "--mode", "single", "--save_path", str(out), "--limit", "1",
                     "--generate", f"mine={gen.model_config(tmp_path, fake_openai)}"]) == 0, capsys.readouterr().err
    left = traced.check(out)
    root = out.resolve()
    names = {p.relative_to(root).as_posix() for p in left}
    assert {"model_answer/mine.jsonl", "model_answer/mine.jsonl.generation.json", "mt_bench_summary.json",
            "model_judgment/fake-judge_single.jsonl", "results/mine.json", "report.html"} <= names, names
    assert any(p.name == ".eval.lock" for p, _ in traced.under(out))
    manifest = _bench_manifest(out, "mt_bench")
    assert manifest["config"]["mt_bench"]["mode"] == "single" and manifest["mt_bench"]["counts"]["judged"] == 16  # 8 questions, 2 turns
    _manifest(out / "model_answer" / "mine.jsonl.generation.json")
    # a second run appends nothing it has (FastChat's file, through the save path's appender)
    lines = (out / "model_judgment" / "fake-judge_single.jsonl").read_text().count("\n")
    assert mt_bench(["--data", str(gen.MT), "--judge-config", str(tmp_path / "judge.yaml"), "--mode", "single",
                     "--save_path", str(out), "--limit", "1", "--answers", str(out / "model_answer" / "mine.jsonl")]) == 0
    assert (out / "model_judgment" / "fake-judge_single.jsonl").read_text().count("\n") == lines
    traced.check(out)


def test_arena_hard_is_written_by_the_save_path_package(fake_openai, tmp_path, traced, capsys) -> None:
    gen.need(gen.AH / "question.jsonl", gen.AH.parent / "judge_prompt_v0.1.json")
    from evaluate.commands.arena_hard import main as arena

    fake_openai.reply_fn = gen.judge_or_model
    out = tmp_path / "ah"
    assert arena(["--bench", str(gen.AH), "--judge-config", str(gen.judge_config(tmp_path, fake_openai)),
                  "--judge-prompt", str(gen.AH.parent / "judge_prompt_v0.1.json"), "--limit", "3", "--save_path",
                  str(out), "--generate", f"mine={gen.model_config(tmp_path, fake_openai)}"]) == 0, \
        capsys.readouterr().err
    said = capsys.readouterr().out.splitlines()[-1]
    assert said == f"written: {out / 'model_judgment' / 'fake-judge'}, {out / 'leaderboard.csv'}, {out / 'report.html'}"
    names = {p.relative_to(out.resolve()).as_posix() for p in traced.check(out)}
    assert {"model_answer/mine.jsonl", "model_answer/gpt-4-0314.jsonl", "model_judgment/fake-judge/mine.jsonl",
            "leaderboard.csv", "battles/mine__vs__gpt-4-0314.json", "report.html"} <= names, names
    assert _bench_manifest(out, "arena_hard")["arena_hard"]["baseline"] == "gpt-4-0314"


def test_alpaca_eval_is_written_by_the_save_path_package(fake_openai, tmp_path, traced, capsys) -> None:
    gen.need(gen.AE / "model_outputs" / "gpt4_1106_preview.json",
             gen.AE / "evaluators_configs" / "weighted_alpaca_eval_gpt4_turbo")
    from evaluate.commands.alpaca_eval import main as alpaca

    fake_openai.reply_fn = gen.judge_or_model
    out = tmp_path / "ae"
    assert alpaca(["--reference-outputs", str(gen.AE / "model_outputs" / "gpt4_1106_preview.json"),
                   "--evaluator-config", str(gen.AE / "evaluators_configs" / "weighted_alpaca_eval_gpt4_turbo"),
                   "--judge-config", str(gen.judge_config(tmp_path, fake_openai)), "--save_path", str(out),
                   "--limit", "3", "--generate", f"mine={gen.model_config(tmp_path, fake_openai)}"]) == 0, \
        capsys.readouterr().err
    names = {p.relative_to(out.resolve()).as_posix() for p in traced.check(out)}
    annotator = "weighted_alpaca_eval_gpt4_turbo"
    assert {"model_outputs/mine.json", f"mine/{annotator}/annotations.json", f"mine/{annotator}/judge_run.json",
            "results/mine.json", "battles/mine__vs__gpt4_1106_preview.json", "report.html"} <= names, names
    manifest = _bench_manifest(out, "alpaca_eval")
    assert manifest["usage"]["AlpacaEval"]["requests"] == 3


# ---------------------------------------------------------------- a benchmark lives in one package
BENCHMARK_MODULES = {
    "mt_bench": {"__init__", "config", "data", "files", "formats", "judge", "judge_check", "outputs", "records",
                 "run", "stats", "text"},
    "alpaca_eval": {"__init__", "formats", "judge", "leaderboard", "outputs", "records"},
    "arena_hard": {"__init__", "files", "formats", "outputs", "records", "run", "scores"},
}


def test_each_benchmark_is_one_package_and_its_command_one_call():
    """Its data reading, prompts, judge, files, statistics, outputs (and MT-bench's judge check) are the
    modules of evaluate/benchmarks/<name>/; no module elsewhere is named after it but its command, which
    parses nothing itself; the Benchmark the command runs is the package's."""
    from evaluate.benchmarks.benchmark import benchmarks

    for name, modules in BENCHMARK_MODULES.items():
        package = REPO / "evaluate" / "benchmarks" / name
        assert {p.stem for p in package.glob("*.py")} == modules, name
        elsewhere = sorted(p.relative_to(REPO).as_posix() for p in (REPO / "evaluate").rglob("*.py")
                           if name.replace("_", "") in p.as_posix().replace("_", "").replace("-", "")
                           and package not in p.parents)
        assert elsewhere == [f"evaluate/commands/{name}.py"], elsewhere
        command = (REPO / "evaluate" / "commands" / f"{name}.py").read_text(encoding="utf-8")
        tree = ast.parse(command)
        imports = [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]
        assert [(i.module, [a.name for a in i.names]) for i in imports if isinstance(i, ast.ImportFrom)
                and i.module != "__future__"] == [("common", ["drive_benchmark"])], name
        bench = benchmarks().get(name.replace("_", "-"))
        assert bench.__module__ == f"evaluate.benchmarks.{name}.outputs", bench.__module__


# the modules that may write files, each outside any save path, with why
WRITERS_ELSEWHERE = {
    "evaluate/core/io.py": "the atomic writer itself (the save path's writer calls it)",
    "evaluate/models/checksums.py": "the model cache's checksum index",
    "evaluate/models/convert.py": "the model cache's converted weights",
    "evaluate/models/load.py": "downloads into the model cache",
    "evaluate/backends/speed.py": "the model cache's record of a local judge's measured speed",
    "evaluate/judgecheck/check.py": "judge-check --output FILE, a path the user names",
    "evaluate/commands/judgecheck.py": "judge-check --labels --output FILE, a path the user names",
    "evaluate/pipeline/collect.py": "--export-requests FILE.jsonl, a path the user names",
    "evaluate/commands/compare.py": "compare --out FILE",
    "evaluate/commands/metaeval.py": "meta-eval --output FILE",
    "evaluate/commands/leaderboard.py": "leaderboard --out FILE",
    "evaluate/generation/in_run.py": "a dry run's stand-in answers, in a temporary folder",
    "evaluate/generation/benchmark_flag.py": "a dry run's stand-in answers, in a temporary folder",
    "evaluate/generation/offline.py": "generate --export-requests FILE.jsonl, a path the user names",
    "evaluate/cli.py": "os.devnull, where stdout points once its reader has gone (eval.py help | head)",
    "evaluate/ci/reports.py": "--junit FILE.xml and --markdown FILE.md, paths the user names",
}
WRITE_CALLS = {"atomic_write_json", "atomic_write_text", "atomic_write_bytes", "write_text", "write_bytes",
               "savefig", "to_csv", "copy2", "copyfile", "copyfileobj", "copytree"}


def _savepath_names(tree: ast.AST) -> set[str]:
    """Names a module binds to evaluate.savepath or to what it defines (`from ..savepath import write`,
    `from ..savepath.write import write_text`): calls through them are the package's own writer."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and "savepath" in (node.module or "").split("."):
            names.update(a.asname or a.name for a in node.names)
    return names


def _writes(tree: ast.AST) -> list[int]:
    """Lines of calls that write a file other than through the save path's package: the write calls
    above, open(..., 'w'/'a'/'x'/'+'), os.fdopen(..., 'w'/'wb')."""
    ours = _savepath_names(tree)
    lines = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        owner = func.value.id if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) else None
        if name in WRITE_CALLS and (owner or name) not in ours:
            lines.append(node.lineno)
        elif name in ("open", "fdopen"):
            mode = node.args[1] if len(node.args) > 1 else next((k.value for k in node.keywords if k.arg == "mode"),
                                                                 None)
            if isinstance(mode, ast.Constant) and isinstance(mode.value, str) and set(mode.value) & set("wax+"):
                lines.append(node.lineno)
    return lines


def test_no_module_but_the_save_path_package_writes_files_into_a_save_path():
    found = {}
    for path in sorted((REPO / "evaluate").rglob("*.py")):
        rel = path.relative_to(REPO).as_posix()
        if rel.startswith("evaluate/savepath/"):
            continue
        lines = _writes(ast.parse(path.read_text(encoding="utf-8")))
        if lines:
            found[rel] = lines
    assert set(found) == set(WRITERS_ELSEWHERE), {k: v for k, v in found.items() if k not in WRITERS_ELSEWHERE}


def test_the_scan_catches_a_planted_writer():
    planted = ast.parse("from ..savepath import write\nfrom ..savepath.write import write_json\n"
                        "def f(p):\n    (p / 'x.json').write_text('{}')\n    open(p, 'w')\n    fig.savefig(p)\n"
                        "    open(p)\n    write.write_text(p, '')\n    write_json(p, {})\n    shutil.copy2(p, p)\n")
    assert sorted(_writes(planted)) == [4, 5, 6, 10]


def _metrics_config(tmp_path: Path, name: str, models: tuple[str, ...]) -> Path:
    cfg = {"answers": [{"name": m, "path": str(EN / f"answers_{m}.json")} for m in models],
           "target_file": str(EN / "targets.json"), "save_path": str(tmp_path / "out"),
           "category": {"closed_qa": {"Metrics": ["BLEU"]}, "classification": {"Metrics": ["F1 score"]}}}
    path = tmp_path / name
    path.write_text(json.dumps(cfg))
    return path


def test_earlier_result_files_are_read_once_per_run(tmp_path, monkeypatch, capsys):
    """Runs of one model at a time into one save path: each earlier result file is parsed once per run
    (it was three times: the model's own open, then include_earlier twice)."""
    assert main(["--config", str(_metrics_config(tmp_path, "a.json", ("model_a",))), "--no-charts"]) == 0
    assert main(["--config", str(_metrics_config(tmp_path, "b.json", ("model_b",))), "--no-charts"]) == 0
    reads: Counter = Counter()
    real = sp_read.read_json

    def read_json(path):
        reads[Path(path).name] += 1
        return real(path)

    monkeypatch.setattr(sp_read, "read_json", read_json)
    assert main(["--config", str(_metrics_config(tmp_path, "a2.json", ("model_a",))), "--no-charts"]) == 0
    assert reads["model_a.json"] == 1 and reads["model_b.json"] == 1, reads
    assert "model_b: results from an earlier run" in capsys.readouterr().err


def eval_py(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "eval.py", *argv], cwd=REPO, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "NO_COLOR": "1"})


def test_a_result_file_cut_short_is_named_by_report_and_summary_with_exit_3(tmp_path):
    cfg = _metrics_config(tmp_path, "c.json", ("model_a", "model_b"))
    assert eval_py("--config", str(cfg), "--no-charts").returncode == 0
    cut = tmp_path / "out" / "results" / "model_b.json"
    text = cut.read_text()
    cut.write_text(text[: len(text) // 2])  # as a killed writer without the atomic rename would leave it
    for argv in (("report", str(tmp_path / "out")), ("summary", str(tmp_path / "out"), "--width", "100")):
        proc = eval_py(*argv)
        assert proc.returncode == 3, (argv, proc.returncode, proc.stderr)
        last = proc.stderr.strip().splitlines()[-1]
        assert last.startswith("exit 3: ") and str(cut) in last and "cut short" in last, last
        assert "Traceback" not in proc.stderr
    page = (tmp_path / "out" / "report.html").read_text()
    assert "model_a" in page and str(cut) in page  # what could be read is shown, and the problem named


def test_a_save_path_of_a_newer_layout_is_refused_and_an_older_one_read(tmp_path):
    cfg = _metrics_config(tmp_path, "c.json", ("model_a", "model_b"))
    assert eval_py("--config", str(cfg), "--no-charts").returncode == 0
    manifest_path = tmp_path / "out" / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    assert manifest["layout"] == LAYOUT_VERSION
    del manifest["layout"]  # written before the number was: layout 1, read as before
    manifest_path.write_text(json.dumps(manifest))
    assert eval_py("summary", str(tmp_path / "out")).returncode == 0
    manifest["layout"] = LAYOUT_VERSION + 1
    manifest_path.write_text(json.dumps(manifest))
    for argv in (("report", str(tmp_path / "out")), ("summary", str(tmp_path / "out")), ("--config", str(cfg))):
        proc = eval_py(*argv)
        last = proc.stderr.strip().splitlines()[-1]
        assert proc.returncode == 2 and last.startswith("error: ") and str(manifest_path) in last, (argv, last)
        assert f"layout {LAYOUT_VERSION + 1} is newer" in last and "Traceback" not in proc.stderr


def test_dry_run_export_and_prefetch_reuse_what_prepare_loaded(tmp_path, fake_openai, monkeypatch, capsys):
    """--dry-run with a priced judge: the answer files are loaded once and the plan built once (the
    estimate used to load and plan a second time); the run with judge.batch prefetches from the same."""
    import evaluate.pipeline.answers as answers
    import evaluate.pipeline.plan as plan

    loads: Counter = Counter()
    real_load, real_build = answers.load_answer_sets, plan.build_plan

    def load_answer_sets(*a, **k):
        loads["answers"] += 1
        return real_load(*a, **k)

    def build_plan(*a, **k):
        loads["plan"] += 1
        return real_build(*a, **k)

    monkeypatch.setattr(answers, "load_answer_sets", load_answer_sets)
    monkeypatch.setattr(plan, "build_plan", build_plan)
    monkeypatch.setenv("OPENAI_API_KEY", "x")
    fake_openai.reply_fn = _judge
    cfg = _config(tmp_path, "c.json", fake_openai.url)
    assert main(["--config", str(cfg), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "judge requests to send: 16" in out, out  # 2 models x 4 items x 1 rating + 4 battles x 2 orders
    assert loads == {"answers": 1, "plan": 1}, loads
    loads.clear()
    assert main(["--config", str(cfg), "--export-requests", str(tmp_path / "req.jsonl")]) == 0
    assert loads == {"answers": 1, "plan": 1} and len((tmp_path / "req.jsonl").read_text().splitlines()) == 16


def test_generated_answers_round_trip(tmp_path, traced):
    rows = [{"id": "1", "category": "chat", "instruction": "Hi?", "output": "Hello \u4f60\u597d"},
            {"id": "2", "category": "chat", "instruction": "Bye?", "output": ""}]
    path = write_answers(tmp_path, "model/x", rows)
    assert path == tmp_path / "answers" / "model_x.jsonl" and path.resolve() in traced.check(tmp_path)
    assert read_answers(tmp_path, "model/x") == rows
    assert len(path.read_text(encoding="utf-8").splitlines()) == 2
    as_list = write_answers(tmp_path, "m", rows, ext="json")
    assert json.loads(as_list.read_text(encoding="utf-8")) == rows and read_answers(tmp_path, "m", "json") == rows
    path.write_text(path.read_text() + "{not json\n")
    from evaluate.core.errors import InputError
    with pytest.raises(InputError, match=r"model_x\.jsonl: line 3"):
        read_answers(tmp_path, "model/x")


def test_the_writer_is_atomic_and_the_same_bytes_as_the_core_writer(tmp_path):
    data = {"b": [1.5, None, float("nan")], "a": "\u00e9\ud800"}
    sp_write.write_json(tmp_path / "x" / "one.json", data)
    core_io.atomic_write_json(tmp_path / "two.json", data)
    assert (tmp_path / "x" / "one.json").read_bytes() == (tmp_path / "two.json").read_bytes()
    assert not [p for p in (tmp_path / "x").iterdir() if p.name.endswith(".tmp")]


def test_the_run_log_reads_whole_or_as_its_header_and_refuses_a_newer_layout(tmp_path, capsys):
    from evaluate.savepath import LayoutError, NoResults, RunLog, read_run_header, read_run_log

    out = tmp_path / "out"
    assert main(["--config", str(_metrics_run(tmp_path, "c.json", out)), "--no-charts"]) == 0
    capsys.readouterr()
    manifest = json.loads((out / "manifest.json").read_text())
    head = read_run_header(out)
    assert head.header_only and head.results == [] and head.manifest == manifest
    assert (head.run_id, head.status, head.layout, head.models) == (manifest["run_id"], "ok", LAYOUT_VERSION,
                                                                    ["model_a", "model_b"])
    assert head.versions == manifest["versions"] and head.plan == manifest["plan"] and head.benchmark is None
    log = head.full()
    assert not log.header_only and log == read_run_log(out) and log.models == ["model_a", "model_b"]
    files = {json.loads(p.read_text())["model"]: json.loads(p.read_text()) for p in (out / "results").glob("*.json")}
    assert log.results == [files["model_a"], files["model_b"]] and log.problems == [] and log.unreadable == []
    assert [c["model_a"] for c in log.comparisons] == ["model_a"]
    assert log.scored_categories == ["brainstorming", "classification", "closed_qa"]
    assert set(log.scored_categories) < set(log.categories)  # the items of every category are read, scored or not
    assert len(log.scores()) == sum(len(it["scores"]) for r in files.values() for it in r["items"])
    # labels: one person's verdict a line; a line cut short is named and left out, the others read
    label = '"category": "c", "model_a": "model_a", "model_b": "model_b"'
    (out / "labels.jsonl").write_text(f'{{"id": "1", "verdict": "A", {label}}}\n{{"id": "2", "verd\n'
                                      f'{{"id": "3", "verdict": "tie", {label}}}\n')
    log = RunLog.read(out)
    assert [(x.id, x.verdict) for x in log.labels] == [("1", "A"), ("3", "tie")]
    assert [p for p in log.problems if "labels.jsonl line 2" in p]
    # a newer layout: refused by the header alone, before anything else is read
    manifest["layout"] = LAYOUT_VERSION + 1
    (out / "manifest.json").write_text(json.dumps(manifest))
    for read in (read_run_header, read_run_log):
        with pytest.raises(LayoutError, match=f"layout {LAYOUT_VERSION + 1} is newer"):
            read(out)
    with pytest.raises(NoResults, match="no results"):
        read_run_log(tmp_path / "nothing")
    assert read_run_header(tmp_path / "nothing").manifest is None  # a header of nothing is an empty one


def test_the_run_headers_under_a_folder_newest_first(tmp_path, capsys):
    from evaluate.savepath import find_run_headers

    for name, models in (("one", ("model_a",)), ("two", ("model_a", "model_b"))):
        assert main(["--config", str(_metrics_run(tmp_path, f"{name}.json", tmp_path / "runs" / name, models)),
                     "--no-charts"]) == 0
    cfg = _metrics_run(tmp_path, "s.json", tmp_path / "runs" / "sharded")
    assert main(["--config", str(cfg), "--shard", "1/2", "--no-charts"]) == 0
    capsys.readouterr()
    for second, run in enumerate(("one", "two", "sharded/shard-1-of-2"), 1):  # one second apart, in this order
        path = tmp_path / "runs" / run / "manifest.json"
        path.write_text(json.dumps({**json.loads(path.read_text()), "finished": f"2026-11-27T00:00:0{second}+00:00"}))
    newer = tmp_path / "runs" / "newer"
    (newer / "results").mkdir(parents=True)
    (newer / "manifest.json").write_text(json.dumps({"layout": LAYOUT_VERSION + 1}))
    heads = find_run_headers(tmp_path / "runs", tmp_path / "nowhere")
    assert [h.path.name for h in heads] == ["shard-1-of-2", "two", "one"]  # the newest first; the newer layout left out
    assert all(h.header_only and h.status == "ok" for h in heads)
    assert heads[1].models == ["model_a", "model_b"] and heads[2].full().models == ["model_a"]
