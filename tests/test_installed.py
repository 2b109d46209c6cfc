"""The tool as `pip install .` leaves it (issue 47): the wheel built from this checkout, installed into a
fresh virtual environment, run as `llm-eval` and `python -m evaluate` from a folder that is not the
checkout. Before the prompts shipped inside the package, a GPT dry run ended with exit 2,
`.../site-packages/prompts/evaluation_prompt_en.json: prompt file not found`.

Offline and fast: the wheel is built with this environment's pip and setuptools (`--no-build-isolation`,
`--no-deps`: nothing is downloaded), installed with `--no-deps --no-index` into a new venv, and that venv
finds the dependencies (torch, sacrebleu, ...) in this environment's site-packages through a `.pth` line.
A path a `.pth` line adds is not itself a site folder, so the editable install of the checkout that lives
there (its `__editable__` finder is started by a `.pth` file of its own) is never active: `evaluate` is
imported from the wheel's copy, which the test checks.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
EN = REPO / "examples" / "en"
SKIP = shutil.ignore_patterns(".git", ".venv*", ".cache", "results", "build", "dist", "*.egg-info", "__pycache__",
                              "node_modules", ".pytest_cache", "tests", "bench", "docs")


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> dict[str, Path]:
    """{"venv", "bin", "site", "wheel"}: a fresh venv holding the wheel of this checkout."""
    tmp = tmp_path_factory.mktemp("installed")
    src = tmp / "src"
    shutil.copytree(REPO, src, ignore=SKIP, symlinks=True)  # a copy: building writes build/ and egg-info
    dist = tmp / "dist"
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
                            "-q", "-w", str(dist), str(src)], capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, build.stdout + build.stderr
    wheel = next(dist.glob("*.whl"))
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    py = venv / "bin" / "python"
    inst = subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "--no-deps", "--no-index",
                           "-q", str(wheel)], capture_output=True, text=True, timeout=300)
    assert inst.returncode == 0, inst.stdout + inst.stderr
    site = Path(subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    ours = sysconfig.get_paths()
    (site / "deps.pth").write_text("\n".join(dict.fromkeys([ours["purelib"], ours["platlib"]])) + "\n")
    return {"venv": venv, "bin": venv / "bin", "site": site, "wheel": wheel}


def tool(installed: dict[str, Path], cwd: Path, *argv: str) -> subprocess.CompletedProcess:
    """A command of the installed venv, run in `cwd` with a home of its own (the user's cache folder)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "EVAL_CACHE_DIR", "VIRTUAL_ENV")}
    env.update(HOME=str(cwd / "home"), XDG_CACHE_HOME=str(cwd / "home" / ".cache"), EVAL_NO_PROGRESS="1",
               NO_COLOR="1", COLUMNS="100", PATH=f"{installed['bin']}{os.pathsep}{env.get('PATH', '')}")
    return subprocess.run([*argv], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def files_of(folder: Path) -> dict[str, int]:
    return {str(p.relative_to(folder)): p.stat().st_mtime_ns for p in folder.rglob("*") if p.is_file()}


def test_the_wheel_holds_every_file_a_run_reads(installed):
    names = set(zipfile.ZipFile(installed["wheel"]).namelist())
    for need in ("evaluate/prompts/evaluation_prompt_en.json", "evaluate/prompts/battle_prompt_cn.json",
                 "evaluate/prompts/README.md", "evaluate/report/templates/report.html.j2",
                 "evaluate/view/static/index.html", "sageval/prompts.json", "repeval/templates.json",
                 "evaluate/__main__.py"):
        assert need in names, need
    assert not any(n.startswith(("tests/", "prompts/")) for n in names)


def test_llm_eval_runs_from_another_folder_a_gpt_dry_run_and_a_metrics_run(installed, tmp_path):
    where = tmp_path / "elsewhere"
    where.mkdir()
    for name in ("answers_model_a.json", "answers_model_b.json", "targets.json"):
        shutil.copy(EN / name, where / name)
    before = files_of(installed["site"])

    code = tool(installed, where, "python", "-c", "import evaluate, sys; print(evaluate.__file__)")
    assert code.returncode == 0 and code.stdout.strip().startswith(str(installed["site"])), code  # the wheel's copy
    version = tool(installed, where, "llm-eval", "--version")
    assert (version.returncode, version.stdout.strip()) == (0, "llm-eval 0.1.0"), version
    assert tool(installed, where, "python", "-m", "evaluate", "--version").stdout.strip() == "python -m evaluate 0.1.0"
    helped = tool(installed, where, "llm-eval", "help")
    assert helped.returncode == 0 and "usage: llm-eval --config FILE" in helped.stdout, helped.stdout
    assert "usage: llm-eval generate" in tool(installed, where, "llm-eval", "generate", "-h").stdout

    prompts = tool(installed, where, "llm-eval", "prompts")
    assert prompts.returncode == 0, prompts.stderr
    assert str(installed["site"] / "evaluate" / "prompts" / "evaluation_prompt_en.json") in prompts.stdout
    assert "correctness" in prompts.stdout

    # a GPT dry run: the project's own prompts are found in the package (no prompts: key)
    gpt = {"answers": [{"name": "base", "path": "answers_model_a.json"}, {"name": "cand", "path": "answers_model_b.json"}],
           "target_file": "targets.json", "save_path": "out-gpt",
           "judge": {"backend": "openai", "model": "judge", "base_url": "http://127.0.0.1:9/v1"},
           "category": {"closed_qa": {"GPT": ["correctness"]}, "brainstorming": {"GPT": ["relevance"]}}}
    (where / "gpt.json").write_text(json.dumps(gpt))
    dry = tool(installed, where, "llm-eval", "--config", "gpt.json", "--dry-run")
    assert dry.returncode == 0, dry.stdout + dry.stderr
    assert "prompt file not found" not in dry.stderr and "judge requests to send" in dry.stdout + dry.stderr
    assert not (where / "out-gpt").exists()

    # a Metrics run, to the end: results, report (the package's templates), closing lines
    metrics = {**gpt, "save_path": "out-metrics", "category": {"closed_qa": {"Metrics": ["BLEU", "ROUGE"]},
                                                                 "classification": {"Metrics": ["F1 score"]}}}
    metrics.pop("judge")
    (where / "metrics.json").write_text(json.dumps(metrics))
    run = tool(installed, where, "llm-eval", "--config", "metrics.json", "--no-charts")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "status: ok" in run.stdout + run.stderr
    assert (where / "out-metrics" / "report.html").is_file()
    saved = json.loads((where / "out-metrics" / "results" / "cand.json").read_text())
    closed = [i for i in saved["items"] if i["category"] == "closed_qa"]
    assert closed and all(isinstance(i["scores"].get("Metrics/ROUGE-L"), float) for i in closed)

    # nothing was written into the installed package; the user's cache folder is where weights would go
    after = files_of(installed["site"])
    assert {k: v for k, v in after.items() if "__pycache__" not in k} == \
        {k: v for k, v in before.items() if "__pycache__" not in k}
    cache = tool(installed, where, "python", "-c", "from evaluate.core.places import cache_dir; print(cache_dir())")
    assert cache.stdout.strip() == str(where / "home" / ".cache" / "llm-eval" / "models"), cache
