"""The cluster files a user submits (examples/cluster, docs/cluster.md), run here as local processes.

The Slurm array script is executed by bash once per array task, with the variables Slurm sets for a
task (SLURM_ARRAY_TASK_ID / _COUNT / _MIN / _STEP, SLURM_SUBMIT_DIR) taken from its own `#SBATCH
--array` line; then its merge script. The Kubernetes Indexed Job's container command runs once per
completion index, then the merge Job's. Either way the merged save path must equal one unsharded run
of the same config: results, battles, comparisons, summary.csv. The judge is the fake OpenAI server
(a real HTTP server), so each shard is a few seconds.
"""

from __future__ import annotations

import csv
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

try:
    from tests.fake_openai_server import FakeOpenAIServer, Reply
except ImportError:
    from fake_openai_server import FakeOpenAIServer, Reply

REPO = Path(__file__).resolve().parents[1]
CLUSTER = REPO / "examples" / "cluster"
EN = REPO / "examples" / "en"


def judge(rec):
    if "[Assistant 1's answer]" in rec.user_text:
        return Reply(content="7 5\nclear" if len(rec.user_text) % 3 else "4 6\nclear")
    return Reply(content=str(1 + len(rec.user_text) % 5))


def write_config(folder: Path, url: str) -> Path:
    cfg = {"language": "en",
           "category": {"closed_qa": {"GPT": ["relevance"], "Metrics": ["BLEU", "CHRF"]},
                        "classification": {"GPT": ["correctness"], "Metrics": ["F1 score"]},
                        "open_qa": {"GPT": ["correctness"], "Metrics": ["CHRF"]},
                        "brainstorming": {"Metrics": ["Distinct"]}},
           "answers": [{"name": "model_a", "path": str(EN / "answers_model_a.json")},
                       {"name": "model_b", "path": str(EN / "answers_model_b.json")}],
           "target_file": str(EN / "targets.json"),
           "judge": {"backend": "openai", "model": "fake-judge", "base_url": url, "mode": "generate",
                     "max_retries": 0}}
    path = folder / "my.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def env_for(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "JOB_COMPLETION"))}
    env.update(EVAL_PYTHON=sys.executable, EVAL_NO_PROGRESS="1", PYTHONPATH=str(REPO), **extra)
    return env


def run(cmd: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    out = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, f"{cmd}: exit {out.returncode}\n{out.stdout[-2000:]}\n{out.stderr[-3000:]}"
    assert "Traceback" not in out.stderr
    return out


def strip(obj):
    """A save path's JSON without what differs between any two runs (run ids, the runs list)."""
    if isinstance(obj, dict):
        return {k: strip(v) for k, v in obj.items() if k not in ("runs", "run_id")}
    if isinstance(obj, list):
        return [strip(v) for v in obj]
    return obj


def assert_same_run(merged: Path, full: Path) -> None:
    for model in ("model_a", "model_b"):
        a = json.loads((merged / "results" / f"{model}.json").read_text())
        b = json.loads((full / "results" / f"{model}.json").read_text())
        assert a["items"] and strip(a) == strip(b), model
    battles = sorted(p.name for p in (full / "battles").glob("*.json"))
    assert "model_a__vs__model_b.json" in battles
    assert sorted(p.name for p in (merged / "battles").glob("*.json")) == battles
    for name in battles:
        assert strip(json.loads((merged / "battles" / name).read_text())) == \
            strip(json.loads((full / "battles" / name).read_text())), name
    comparisons = sorted(p.relative_to(full / "comparisons") for p in (full / "comparisons").rglob("*") if p.is_file())
    assert comparisons, "the one run wrote no comparisons"
    assert sorted(p.relative_to(merged / "comparisons") for p in (merged / "comparisons").rglob("*")
                  if p.is_file()) == comparisons
    for rel in comparisons:
        a, b = (merged / "comparisons" / rel), (full / "comparisons" / rel)
        if rel.suffix == ".json":
            assert strip(json.loads(a.read_text())) == strip(json.loads(b.read_text())), rel
        else:
            assert a.read_text() == b.read_text(), rel
    assert list(csv.reader((merged / "summary.csv").open())) == list(csv.reader((full / "summary.csv").open()))


@pytest.fixture(scope="module")
def one_run(tmp_path_factory):
    """The fake judge, the config, and one unsharded run of it (what every merge must equal)."""
    folder = tmp_path_factory.mktemp("cluster")
    with FakeOpenAIServer(judge) as server:
        config = write_config(folder, server.url)
        full = folder / "one-run"
        run([sys.executable, "eval.py", "--config", str(config), "--save_path", str(full), "--no-charts"], env_for())
        yield server, config, full, folder


def array_range(script: str) -> list[int]:
    """The task ids of the script's `#SBATCH --array=A-B[:S]` (or a list A,B,C)."""
    m = re.search(r"^#SBATCH --array=(\S+)", script, re.M)
    assert m, "no #SBATCH --array line"
    spec = m.group(1).split("%")[0]
    ids: list[int] = []
    for part in spec.split(","):
        bounds, _, step = part.partition(":")
        lo, _, hi = bounds.partition("-")
        ids += list(range(int(lo), int(hi or lo) + 1, int(step or 1)))
    return ids


def test_the_slurm_array_script_sharded_and_merged_equals_one_run(one_run):
    server, config, full, folder = one_run
    script = CLUSTER / "eval-array.sbatch"
    ids = array_range(script.read_text())
    assert len(ids) > 1
    save = folder / "slurm-run"
    for task in ids:  # what Slurm sets for each task of the array
        out = run(["bash", str(script)], env_for(
            CONFIG=str(config), SAVE_PATH=str(save), SLURM_SUBMIT_DIR=str(REPO), SLURM_ARRAY_JOB_ID="77",
            SLURM_ARRAY_TASK_ID=str(task), SLURM_ARRAY_TASK_COUNT=str(len(ids)),
            SLURM_ARRAY_TASK_MIN=str(min(ids)), SLURM_ARRAY_TASK_MAX=str(max(ids)), SLURM_ARRAY_TASK_STEP="1"))
        assert f"of {len(ids)}" in out.stdout
    shards = sorted(p.name for p in save.iterdir())
    assert shards == [f"shard-{i}-of-{len(ids)}" for i in range(1, len(ids) + 1)]
    run(["bash", str(CLUSTER / "merge.sbatch")], env_for(SAVE_PATH=str(save), SLURM_SUBMIT_DIR=str(REPO)))
    assert_same_run(folder / "slurm-run-merged", full)


def test_the_slurm_script_numbers_shards_from_any_array_range(one_run, tmp_path):
    """--array=0-6:2 (ids 0, 2, 4, 6) is shards 1..4 of 4; outside an array the script says so (no run)."""
    _, config, _, _ = one_run
    script = CLUSTER / "eval-array.sbatch"
    save = tmp_path / "run"
    env = env_for(CONFIG=str(config), SAVE_PATH=str(save), EVAL_ARGS="--dry-run")
    out = run(["bash", str(script)], {**env, "SLURM_ARRAY_TASK_ID": "4", "SLURM_ARRAY_TASK_COUNT": "4",
                                      "SLURM_ARRAY_TASK_MIN": "0", "SLURM_ARRAY_TASK_STEP": "2"})
    assert "shard 3 of 4" in out.stdout
    bare = subprocess.run(["bash", str(script)], cwd=REPO, env=env, capture_output=True, text=True)
    assert bare.returncode != 0 and "submit with sbatch" in bare.stderr


def test_the_kubernetes_indexed_job_sharded_and_merged_equals_one_run(one_run):
    server, config, full, folder = one_run
    job = yaml.safe_load((CLUSTER / "eval-job.yaml").read_text())
    spec = job["spec"]
    assert job["kind"] == "Job" and spec["completionMode"] == "Indexed"
    container = spec["template"]["spec"]["containers"][0]
    env = {e["name"]: e["value"] for e in container["env"]}
    n = spec["completions"]
    assert int(env["SHARDS"]) == n == spec["parallelism"]
    save = folder / "k8s-run"
    for index in range(n):  # JOB_COMPLETION_INDEX, as Kubernetes sets it in pod `index`
        run([*container["command"], *container["args"]], env_for(
            CONFIG=str(config), SAVE_PATH=str(save), SHARDS=str(n), JOB_COMPLETION_INDEX=str(index)))
    assert sorted(p.name for p in save.iterdir()) == [f"shard-{i}-of-{n}" for i in range(1, n + 1)]
    merge = yaml.safe_load((CLUSTER / "merge-job.yaml").read_text())["spec"]["template"]["spec"]["containers"][0]
    merged = folder / "k8s-merged"
    run([*merge["command"], *merge["args"]], env_for(SAVE_PATH=str(save), MERGED=str(merged)))
    assert_same_run(merged, full)
