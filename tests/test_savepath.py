"""The save path has one owner, `evaluate.savepath`: every file a run leaves is written through its
one writer and nothing else opens a path under the save path for writing (checked at run time and
in the source); earlier result files are read once per run; the layout version is written and
checked; a result file cut short is named by `eval.py report` / `eval.py summary` (exit 3); the
dry run, export and batch prefetch reuse what `prepare` loaded; generated answers round-trip."""

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

try:
    from tests.fake_openai_server import Reply, fake_openai  # noqa: F401
except ImportError:
    from fake_openai_server import Reply, fake_openai  # noqa: F401

REPO = Path(__file__).resolve().parents[1]
EN = REPO / "examples" / "en"
PROMPTS = REPO / "prompts"
SURVEYS = REPO / "examples" / "sageval" / "surveys.json"
# written by SQLite (the judge cache, evaluate.backends.cache), not a file format of this project's own
NOT_THROUGH_THE_WRITER = {"judge_cache.sqlite"}


def _foreign(path: str) -> bool:
    """Files under a save path that are not its format: SQLite's (the cache, its journal) and the run's
    lock (evaluate.core.lock, removed when the run ends)."""
    name = Path(path).name
    return ".sqlite" in name or name == ".eval.lock"


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


@pytest.fixture
def watched(monkeypatch):
    """Every path the save path's writer is given, and every write-mode open of any other path (the
    runtime half of "no other module writes into a save path")."""
    through: Counter = Counter()
    other: list[str] = []
    real_write, real_open, real_os_open = sp_write.write_bytes, builtins.open, os.open

    def write_bytes(path, data):
        through[Path(path).resolve()] += 1
        return real_write(path, data)

    def inside_writer() -> bool:
        frame = sys._getframe(2)
        while frame is not None:
            if frame.f_code.co_filename == sp_write.__file__:
                return True
            frame = frame.f_back
        return False

    def note(path, writing):
        if writing and isinstance(path, (str, os.PathLike)) and not inside_writer():
            other.append(str(Path(path).resolve()))

    def open_(file, mode="r", *args, **kwargs):
        note(file, any(c in mode for c in "wax+"))
        return real_open(file, mode, *args, **kwargs)

    def os_open(path, flags, *args, **kwargs):
        note(path, bool(flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT)))
        return real_os_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(sp_write, "write_bytes", write_bytes)
    monkeypatch.setattr(builtins, "open", open_)
    monkeypatch.setattr(io, "open", open_)
    monkeypatch.setattr(os, "open", os_open)
    return through, other


def _files(root: Path) -> set[Path]:
    return {p.resolve() for p in root.rglob("*") if p.is_file()}


def test_every_file_a_run_leaves_is_written_through_the_save_path_package(tmp_path, fake_openai, monkeypatch,
                                                                           watched, capsys):
    """A GPT + Metrics run with battles, the judge check first, charts and report; then SAGEval."""
    through, other = watched
    monkeypatch.setenv("OPENAI_API_KEY", "x")
    fake_openai.reply_fn = _judge
    assert main(["--config", str(_config(tmp_path, "c.json", fake_openai.url)), "--judge-check", "1"]) == 0, \
        capsys.readouterr().err
    out = (tmp_path / "out").resolve()
    left = _files(out)
    kinds = {p.relative_to(out).parts[0] for p in left}
    # the run left every kind of file the layout has (but answers/, which `generate` writes)
    assert {"results", "battles", "comparisons", "charts", "runs", "judge_checks", "summary.csv", "report.html",
            "manifest.json", "judge_check.json", "judge_cache.sqlite"} <= kinds, kinds
    written = {p for p in left if p.name not in NOT_THROUGH_THE_WRITER}
    assert written - set(through) == set(), "written without the save path's writer"
    assert not [p for p in other if p.startswith(str(out)) and not _foreign(p)], other
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["layout"] == LAYOUT_VERSION
    # one version list for a run and a benchmark command: the run records the packages the module lists
    from evaluate.savepath.manifest import versions
    assert manifest["versions"] == versions() and len(manifest["versions"]) >= 5

    fake_openai.reply_fn = _sage
    monkeypatch.setenv("SAGE_KEY", "x")
    sage = {"save_path": str(tmp_path / "sage"), "answers": [{"name": "gen", "path": str(SURVEYS)}],
            "category": {"survey": {"SAGEval": ["accuracy"]}}, "sageval": {"use_logprobs": False},
            "judge": {"backend": "openai", "model": "fake-judge", "base_url": fake_openai.url,
                      "api_key_env": "SAGE_KEY", "mode": "generate"}}
    (tmp_path / "s.json").write_text(json.dumps(sage))
    assert main(["--config", str(tmp_path / "s.json"), "--no-charts"]) == 0, capsys.readouterr().err
    sage_out = (tmp_path / "sage").resolve()
    left = _files(sage_out)
    assert sage_out / "sageval" / "gen.json" in left
    assert {p for p in left if p.name not in NOT_THROUGH_THE_WRITER} - set(through) == set()
    assert not [p for p in other if p.startswith(str(sage_out)) and not _foreign(p)], other


# the modules that may write files, each outside any save path, with why
WRITERS_ELSEWHERE = {
    "evaluate/core/io.py": "the atomic writer itself (the save path's writer calls it)",
    "evaluate/core/lock.py": "the save path's lock file, removed when the run ends",
    "evaluate/models/checksums.py": "the model cache's checksum index",
    "evaluate/models/convert.py": "the model cache's converted weights",
    "evaluate/models/load.py": "downloads into the model cache",
    "evaluate/judgecheck/check.py": "judge-check --output FILE, a path the user names",
    "evaluate/pipeline/collect.py": "--export-requests FILE.jsonl, a path the user names",
    "evaluate/commands/compare.py": "compare --out FILE",
    "evaluate/commands/metaeval.py": "meta-eval --output FILE",
    "evaluate/commands/leaderboard.py": "leaderboard --out FILE",
    # the benchmarks' own file formats (FastChat's, AlpacaEval's, Arena-Hard's), the "bench" side of issue 28
    "evaluate/benchmarks/mt_bench/run.py": "FastChat's files",
    "evaluate/benchmarks/alpaca_eval/judge.py": "AlpacaEval's annotations",
    "evaluate/benchmarks/arena_hard/files.py": "Arena-Hard's judgment files",
    "evaluate/benchmarks/mt_bench/files.py": "FastChat's judgment files",
    "evaluate/benchmarks/arena_hard/outputs.py": "Arena-Hard's leaderboard.csv and model_answer copies",
    "evaluate/generation/in_run.py": "a dry run's stand-in answers, in a temporary folder",
    "evaluate/generation/benchmark_flag.py": "a dry run's stand-in answers, in a temporary folder",
    "evaluate/generation/offline.py": "generate --export-requests FILE.jsonl, a path the user names",
    "evaluate/cli.py": "os.devnull, where stdout points once its reader has gone (eval.py help | head)",
    "evaluate/pipeline/ci_reports.py": "--junit FILE.xml and --markdown FILE.md, paths the user names",
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


def test_generated_answers_round_trip(tmp_path, watched):
    through, _ = watched
    rows = [{"id": "1", "category": "chat", "instruction": "Hi?", "output": "Hello \u4f60\u597d"},
            {"id": "2", "category": "chat", "instruction": "Bye?", "output": ""}]
    path = write_answers(tmp_path, "model/x", rows)
    assert path == tmp_path / "answers" / "model_x.jsonl" and path.resolve() in through
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
