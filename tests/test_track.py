"""Runs out to a tracker: a real run (the bundled English answers, automatic metrics and battles judged
by a fake OpenAI-compatible judge on 127.0.0.1) sent to MLflow (a local SQLite store, read back with
`MlflowClient`) and to Weights & Biases (offline: the run folder's own log is parsed), the numbers
checked against the save path's own files; a tracker that is down warns and changes neither the
run's files nor its exit code; a tracker whose package is missing is exit 2 naming the extra."""

from __future__ import annotations

import json
import os
import shutil
import socket
import struct
import subprocess
import sys
from pathlib import Path

import pytest

try:
    from tests.fake_openai_server import FakeOpenAIServer, Reply
except ImportError:
    from fake_openai_server import FakeOpenAIServer, Reply

REPO = Path(__file__).resolve().parents[1]
EN = REPO / "examples" / "en"
ANSWERS_A = json.loads((EN / "answers_model_a.json").read_text(encoding="utf-8"))
OFFLINE = {"NO_COLOR": "1", "WANDB_MODE": "offline", "WANDB_SILENT": "true", "MLFLOW_TRACKING_URI": ""}


def eval_py(*argv: str, cwd: Path = REPO, timeout: float = 300) -> tuple[int, str, str]:
    env = {k: v for k, v in {**os.environ, **OFFLINE}.items() if v != ""}
    proc = subprocess.run([sys.executable, str(REPO / "eval.py"), *argv], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env=env)
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    return proc.returncode, proc.stdout, proc.stderr


def dead_url() -> str:
    """A local port nothing listens on (bound, then closed)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return f"http://127.0.0.1:{port}"


def judge(rec) -> Reply:
    """Battles: model_a's answer wins in both orders; ratings: 4."""
    text = rec.user_text
    if "[Assistant 1's answer]" in text:
        first = text.split("[Assistant 1's answer]")[1].split("[End of Assistant 1's answer]")[0].strip()
        return Reply(content="9 2" if any(first == a["output"].strip() for a in ANSWERS_A) else "2 9")
    return Reply(content="4")


def config(tmp_path: Path, url: str, **extra) -> Path:
    cfg = {"answers": [{"name": "model_a", "path": str(EN / "answers_model_a.json")},
                       {"name": "model_b", "path": str(EN / "answers_model_b.json")}],
           "target_file": str(EN / "targets.json"), "save_path": str(tmp_path / "out"), "battle": True,
           "judge": {"backend": "openai", "model": "fake-judge", "base_url": url, "mode": "generate",
                     "max_retries": 1, "timeout": 10},
           "category": {c: {"Metrics": ["ROUGE", "CHRF"]} for c in ("classification", "extraction", "generation",
                                                                   "open_qa", "rewriting", "brainstorming")}}
    cfg["category"]["closed_qa"] = {"Metrics": ["ROUGE"], "GPT": ["relevance"]}
    cfg.update(extra)
    path = tmp_path / "c.json"
    path.write_text(json.dumps(cfg))
    return path


@pytest.fixture(scope="module")
def tracked(tmp_path_factory):
    """One run sent to a local MLflow store by its config's track: block (the save path and the store)."""
    tmp = tmp_path_factory.mktemp("tracked")
    store = tmp / "store" / "mlflow.db"
    with FakeOpenAIServer(reply_fn=judge) as server:
        cfg = config(tmp, server.url, track={"mlflow": {"uri": f"sqlite:///{store}", "experiment": "nightly"}})
        code, out, err = eval_py("--config", str(cfg), cwd=tmp)
    assert code == 0, err[-3000:]
    assert "tracked: mlflow: run " in out and "experiment 'nightly'" in out, out[-2000:]
    return tmp / "out", store


def expected_metrics(save: Path) -> dict[str, float]:
    """The metrics the save path's own files say, computed here from the JSON (not through the payload)."""
    want: dict[str, float] = {}
    for f in sorted((save / "results").glob("*.json")):
        res = json.loads(f.read_text())
        for score, agg in res["aggregates"]["overall"].items():
            if "@" not in score and agg.get("mean") is not None:
                want[f"score/{res['model']}/{score}"] = agg["mean"]
    for f in sorted((save / "comparisons").glob("*__vs__*.json")):
        comp = json.loads(f.read_text())
        for row in comp["rows"]:
            if row["role"] == "confirmatory" and row["category"] == "(all)":
                base = f"pair/{comp['model_a']} vs {comp['model_b']}/{row['score']}"
                want[f"{base}/diff"] = row["diff"]
                want[f"{base}/p_adj"] = row["p_adj"]
                want[f"{base}/verdict"] = {"A better": 1.0, "B better": -1.0}.get(row["verdict"], 0.0)
    for f in sorted((save / "battles").glob("*__vs__*.json")):
        s = json.loads(f.read_text())["summary"]
        want[f"battle/{s['model_a']} vs {s['model_b']}/win_rate"] = s["win_rate"]
        want[f"battle/{s['model_a']} vs {s['model_b']}/wins"] = s["wins"]
    return want


def test_mlflow_run_read_back_holds_the_save_paths_numbers_and_files(tracked, tmp_path):
    from mlflow import MlflowClient

    save, store = tracked
    client = MlflowClient(tracking_uri=f"sqlite:///{store}")
    exp = client.get_experiment_by_name("nightly")
    runs = client.search_runs([exp.experiment_id])
    assert len(runs) == 1
    run = runs[0]
    manifest = json.loads((save / "manifest.json").read_text())
    want = expected_metrics(save)
    assert any(k.startswith("battle/") for k in want) and any(k.startswith("pair/") for k in want)
    for k, v in want.items():
        assert run.data.metrics[k] == pytest.approx(v), k
    battle = json.loads(next((save / "battles").glob("*__vs__*.json")).read_text())["summary"]
    assert battle["win_rate"] == 1.0  # the fake judge prefers model_a's answer in both orders
    assert run.data.metrics["usage/GPT/requests"] == manifest["usage"]["GPT"]["requests"] > 0
    assert run.data.params["models"] == "model_a, model_b"
    comp = json.loads((save / "comparisons" / "model_a__vs__model_b.json").read_text())
    rouge = next(r for r in comp["rows"] if r["score"] == "Metrics/ROUGE-L" and r["category"] == "(all)")
    words = run.data.params["pair/model_a vs model_b/Metrics/ROUGE-L/verdict"]
    assert words == (f"{rouge['better']} better" if rouge["better"] else rouge["verdict"])
    assert run.data.tags["llm_eval.config_hash"] == manifest["config_hash"]
    assert run.data.tags["llm_eval.run_id"] == manifest["run_id"]
    assert run.data.tags["llm_eval.status"] == "ok"
    sig = json.loads((save / "results" / "model_a.json").read_text())["signatures"]["Metrics/ROUGE-L"]
    assert json.loads(run.data.tags["signature/Metrics/ROUGE-L"]) == sig
    assert run.info.status == "FINISHED"
    names = sorted(a.path for a in client.list_artifacts(run.info.run_id))
    assert names == ["manifest.json", "report.html", "summary.csv"]
    for name in names:
        got = Path(client.download_artifacts(run.info.run_id, name, str(tmp_path)))
        assert got.read_bytes() == (save / name).read_bytes(), name
    # the artifacts live beside the store, not in the folder the command ran in
    assert (store.parent / "mlruns").is_dir()


def wandb_records(path: Path):
    """The records of a W&B run log (`run-<id>.wandb`: a LevelDB-style log of protobuf records in 32 KiB
    blocks, each chunk with a 7-byte header: checksum, length, type 1 full / 2 first / 3 middle / 4 last)."""
    from wandb.proto import wandb_internal_pb2 as pb

    data = path.read_bytes()
    ident = struct.unpack("<4sHB", data[:7])[0]
    assert ident == b":W&B", ident
    pos, buf, block = 7, b"", 32768
    while pos + 7 <= len(data):
        if block - pos % block < 7:
            pos += block - pos % block
            continue
        _, length, kind = struct.unpack("<IHB", data[pos:pos + 7])
        chunk = data[pos + 7:pos + 7 + length]
        pos += 7 + length
        if kind == 0 and length == 0:
            break
        if kind in (1, 2):
            buf = chunk
        else:
            buf += chunk
        if kind in (1, 4):
            rec = pb.Record()
            rec.ParseFromString(buf)
            yield rec


def test_wandb_offline_run_folder_holds_the_metrics_and_the_files(tracked, tmp_path):
    save, _ = tracked
    before = {p: p.stat().st_mtime_ns for p in save.rglob("*")}
    code, out, err = eval_py("track", str(save), "--to", "wandb", "--dir", str(tmp_path / "wb"), "--project", "nightly",
                             cwd=tmp_path)
    assert code == 0, err[-2000:]
    assert "wandb sync" in out
    folders = list((tmp_path / "wb" / "wandb").glob("offline-run-*"))
    assert len(folders) == 1
    summary: dict[str, float] = {}
    config: dict[str, object] = {}
    for rec in wandb_records(next(folders[0].glob("run-*.wandb"))):
        kind = rec.WhichOneof("record_type")
        if kind == "summary":
            summary.update({u.key: json.loads(u.value_json) for u in rec.summary.update if u.key})
        elif kind == "run":
            assert rec.run.project == "nightly"
            config.update({u.key: json.loads(u.value_json) for u in rec.run.config.update})
    for k, v in expected_metrics(save).items():
        assert summary[k] == pytest.approx(v), k
    manifest = json.loads((save / "manifest.json").read_text())
    assert config["tags/llm_eval.config_hash"] == manifest["config_hash"]
    for name in ("report.html", "summary.csv", "manifest.json"):
        assert (folders[0] / "files" / name).read_bytes() == (save / name).read_bytes(), name
    assert {p: p.stat().st_mtime_ns for p in save.rglob("*")} == before  # nothing written into the save path


def test_an_unreachable_tracker_warns_and_keeps_the_run_and_its_exit_code(tmp_path):
    gate = ("--fail-under", "Metrics/ROUGE-L=0.99")
    with FakeOpenAIServer(reply_fn=judge) as server:
        cfg = config(tmp_path, server.url, track={"mlflow": {"uri": dead_url(), "timeout": 3}})
        code, out, err = eval_py("--config", str(cfg), *gate, cwd=tmp_path)
    saved = tmp_path / "out"
    without, _, _ = eval_py("summary", str(saved), *gate)  # the same run's verdict, read back without a tracker
    assert code == without == 1  # the gate's exit, with the dead tracker as without it
    warning = next(line for line in err.splitlines() if line.startswith("warning: track mlflow"))
    assert "no answer from http://127.0.0.1:" in warning and "intact in" in warning, warning
    assert "status: gate failed" in out and "tracked:" not in out
    for name in ("report.html", "summary.csv", "manifest.json", "results/model_a.json", "comparisons"):
        assert (saved / name).exists(), name
    assert json.loads((saved / "manifest.json").read_text())["status"] == "ok"
    assert not list(tmp_path.glob("*.db"))  # nothing made a local store instead


def test_a_missing_tracker_package_is_exit_2_naming_the_extra(tracked, tmp_path, monkeypatch, capsys):
    from evaluate.cli import main

    save, _ = tracked
    monkeypatch.setitem(sys.modules, "wandb", None)  # as if not installed
    assert main(["track", str(save), "--to", "wandb"]) == 2
    err = capsys.readouterr().err
    assert 'the "wandb" package is not installed: pip install ".[wandb]"' in err
    monkeypatch.setitem(sys.modules, "mlflow", None)
    cfg = config(tmp_path, "http://127.0.0.1:9/v1", track="mlflow")
    assert main(["--config", str(cfg), "--dry-run"]) == 2
    assert 'track.mlflow: the "mlflow" package is not installed: pip install ".[mlflow]"' in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_the_track_block_is_checked_when_the_config_loads(tmp_path, capsys):
    from evaluate.cli import main

    for block, want in (({"mlfow": {}}, 'track: unknown tracker "mlfow"; did you mean "mlflow"?'),
                        ({"mlflow": {"experimnt": "x"}}, 'track.mlflow: unknown key "experimnt"; did you mean '
                                                        '"experiment"?'),
                        ({"wandb": {"mode": "onlin"}}, 'track.wandb.mode: expected "offline" or "online", got '
                                                        '"onlin"; did you mean "online"'),
                        (["mlflow", 3], "track[1]: expected a tracker name (mlflow, wandb), got an integer 3")):
        cfg = config(tmp_path, "http://127.0.0.1:9/v1", track=block)
        assert main(["--config", str(cfg), "--dry-run"]) == 2
        assert want in capsys.readouterr().err, block
    cfg = config(tmp_path, "http://127.0.0.1:9/v1", track={"wandb": {"dir": "runs"}})
    assert main(["--config", str(cfg), "--dry-run", "--track", "mlflow"]) == 0
    out = capsys.readouterr().out
    assert f"track: after the run, to wandb (project=llm-eval, mode=offline, dir={tmp_path / 'runs'})" in out
    assert "track: after the run, to mlflow (experiment=llm-eval, timeout=10.0)" in out
    shutil.rmtree(tmp_path / "out", ignore_errors=True)
