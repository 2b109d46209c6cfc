"""bench/gpu_check.sh fails fast and clearly where it cannot run (the lead runs it once on a lent GPU
machine, so a missing file must say what to do, not crash half-way): without the GGUF's parts it
names them and the --prepare step; with parts that do not join to SmolLM2 it names the sha256; asked
for CUDA on a machine without it, the Python helper says what torch sees. The full check is rehearsed
on a CPU with GPU_CHECK_DEVICE=cpu (BENCHMARKS.md)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def fake_root(tmp_path: Path) -> Path:
    """The script and its helper in a folder of their own (it works from its checkout's root)."""
    (tmp_path / "bench").mkdir()
    for name in ("gpu_check.sh", "gpu_check.py"):
        shutil.copy(REPO / "bench" / name, tmp_path / "bench" / name)
    return tmp_path


def run(root: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(root / "bench" / "gpu_check.sh"), *args], cwd=root, capture_output=True,
                          text=True, timeout=120, env={**os.environ, "PYTHON": sys.executable, **env})


def test_without_the_gguf_parts_it_says_what_to_carry(tmp_path):
    root = fake_root(tmp_path)
    out = run(root)
    assert out.returncode == 2
    assert ".gpu/smollm2.part1 is missing" in out.stderr and "--prepare" in out.stderr
    assert "Traceback" not in out.stderr


def test_parts_that_do_not_join_to_smollm2_are_refused(tmp_path):
    root = fake_root(tmp_path)
    (root / ".gpu").mkdir()
    (root / ".gpu" / "smollm2.part1").write_bytes(b"GGUF" + b"\0" * 100)
    (root / ".gpu" / "smollm2.part2").write_bytes(b"\1" * 100)
    out = run(root)
    assert out.returncode == 2 and "expected b179c9523d0e6a0f" in out.stderr
    assert not (root / ".gpu" / "SmolLM2-135M-Instruct.Q4_1.gguf").exists()


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="a machine with CUDA runs the real check")
def test_asked_for_cuda_without_it_the_helper_says_what_torch_sees(tmp_path):
    out = subprocess.run([sys.executable, str(REPO / "bench" / "gpu_check.py"), "--gguf", str(tmp_path / "x.gguf")],
                         capture_output=True, text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert out.returncode == 2
    assert "torch sees no CUDA device" in out.stderr and "GPU_CHECK_DEVICE=cpu" in out.stderr
