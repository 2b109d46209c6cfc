"""Which Python runs the vLLM server: the block's `vllm_python`, else $EVAL_VLLM_PYTHON, else
`.venv-vllm` in the working directory (where `make setup-vllm` makes it in a checkout), else this
interpreter; never a path beside the package's own files, which for an installed package are in
site-packages. An installed layout is simulated by working directories with and without `.venv-vllm`:
the checkout's own `.venv-vllm` (CI makes one) is not found from a directory that has none. When vLLM
is not there, the message names the three places looked at.

The checks against a real vLLM (its CPU build) run where one is: $EVAL_VLLM_PYTHON or the checkout's
`.venv-vllm` (`make setup-vllm`); they only ask the interpreter what it has (no server is started).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from evaluate.backends import vllm_engine
from evaluate.backends.options import JudgeOptions
from evaluate.core.options import parse_options

REPO = Path(__file__).resolve().parents[1]
VLLM_PYTHON = os.environ.get("EVAL_VLLM_PYTHON") or str(REPO / ".venv-vllm" / "bin" / "python")
needs_vllm = pytest.mark.skipif(not Path(VLLM_PYTHON).exists(),
                                reason=f"no vLLM interpreter at {VLLM_PYTHON} (make setup-vllm makes one)")


def fake_venv(folder: Path, python: str = sys.executable) -> Path:
    """`folder/.venv-vllm/bin/python`, a link to `python` (a venv's python is one too)."""
    bin_dir = folder / ".venv-vllm" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "python").symlink_to(python)
    return bin_dir / "python"


@pytest.fixture
def nowhere(tmp_path, monkeypatch) -> Path:
    """A working directory without .venv-vllm, and no $EVAL_VLLM_PYTHON."""
    monkeypatch.delenv("EVAL_VLLM_PYTHON", raising=False)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_the_order_it_looks_in(nowhere, monkeypatch):
    here = fake_venv(nowhere)
    assert vllm_engine.vllm_python(JudgeOptions(backend="vllm")) == str(here)  # the working directory's
    monkeypatch.setenv("EVAL_VLLM_PYTHON", "/opt/vllm/bin/python")
    assert vllm_engine.vllm_python(JudgeOptions(backend="vllm")) == "/opt/vllm/bin/python"  # the environment's
    opts = JudgeOptions(backend="vllm", vllm_python="/srv/py/bin/python")
    assert vllm_engine.vllm_python(opts) == "/srv/py/bin/python"  # the block's, first


def test_not_beside_the_package(nowhere):
    """From a directory without .venv-vllm the checkout's own is not used (where the checkout has one, as CI's
    has after make setup-vllm; before, it was found from the package's source path): the package may be
    installed anywhere, and its source folder says nothing about where vLLM is."""
    assert vllm_engine.vllm_python(JudgeOptions(backend="vllm")) == sys.executable


def test_the_message_names_the_three_places(nowhere):
    """This interpreter has no vLLM: the block is refused at load, naming where it looked."""
    _, problems = parse_options(JudgeOptions, {"backend": "vllm", "model": "m"}, "judge")
    assert len(problems) == 1, problems
    msg = problems[0]
    assert msg.startswith(f"judge.vllm_python: {sys.executable}: vLLM is not importable by this interpreter")
    assert "vllm_python (not set)" in msg and "$EVAL_VLLM_PYTHON (not set)" in msg
    assert f"{nowhere / '.venv-vllm'} in the working directory (none)" in msg and "make setup-vllm" in msg


def test_a_working_directory_venv_without_vllm_is_named(nowhere):
    fake_venv(nowhere)  # a .venv-vllm whose python has no vLLM
    _, problems = parse_options(JudgeOptions, {"backend": "vllm", "model": "m"}, "judge")
    assert problems and f"{nowhere / '.venv-vllm' / 'bin' / 'python'}: vLLM is not importable" in problems[0]
    assert f"{nowhere / '.venv-vllm'} in the working directory (there)" in problems[0]


# ------------------------------------------------------------------ a real vLLM, found from where eval.py runs
def _dry_run(cwd: Path, env_python: str | None) -> subprocess.CompletedProcess:
    cfg = cwd / "run.yaml"
    answers = cwd / "a.json"
    answers.write_text('[{"id": 1, "category": "open_qa", "instruction": "q?", "output": "a"}]', encoding="utf-8")
    cfg.write_text(yaml.safe_dump({"answers": [{"name": "ma", "path": str(answers)}], "save_path": str(cwd / "out"),
                                   "category": {"open_qa": {"GPT": ["correctness"]}},
                                   "judge": {"backend": "vllm", "model": "SmolLM2-135M-Instruct"}}), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "EVAL_VLLM_PYTHON"}
    if env_python:
        env["EVAL_VLLM_PYTHON"] = env_python
    return subprocess.run([sys.executable, str(REPO / "eval.py"), "--config", str(cfg), "--dry-run"], cwd=cwd,
                          env={**env, "EVAL_NO_PROGRESS": "1"}, capture_output=True, text=True, timeout=300)


@needs_vllm
def test_eval_py_finds_vllm_in_its_working_directory(tmp_path):
    with_venv, without = tmp_path / "project", tmp_path / "elsewhere"
    with_venv.mkdir()
    without.mkdir()
    (with_venv / ".venv-vllm").symlink_to(Path(VLLM_PYTHON).parent.parent, target_is_directory=True)
    done = _dry_run(with_venv, None)
    assert done.returncode == 0, done.stderr[-3000:]
    done = _dry_run(without, None)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "vLLM is not importable by this interpreter" in done.stderr
    assert f"{without / '.venv-vllm'} in the working directory (none)" in done.stderr
    done = _dry_run(without, VLLM_PYTHON)  # the environment names it
    assert done.returncode == 0, done.stderr[-3000:]
