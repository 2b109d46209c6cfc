"""--shard I/N and `eval.py merge`: three shards merged equal one unsharded run, file by file."""

from __future__ import annotations

import csv
import json
import sqlite3
from pathlib import Path

import pytest

from evaluate.cli import main
from evaluate.pipeline.shard import parse_shard, shard_of
from evaluate.core.errors import InputError

try:
    from tests.fake_openai_server import FakeOpenAIServer, Reply
except ImportError:
    from fake_openai_server import FakeOpenAIServer, Reply

REPO = Path(__file__).resolve().parents[1]
EN = REPO / "examples" / "en"


def judge(rec):
    if "[Assistant 1's answer]" in rec.user_text:
        return Reply(content="6 5\nclose" if len(rec.user_text) % 3 else "5 6\nclose")
    return Reply(content=str(1 + len(rec.user_text) % 5))


def write_config(tmp_path, url):
    cfg = {"language": "en", "save_path": str(tmp_path / "runs"),
           "category": {"closed_qa": {"GPT": ["relevance"], "Metrics": ["BLEU", "CHRF", "ROUGE"]},
                        "classification": {"GPT": ["correctness"], "Metrics": ["BLEU", "CHRF", "F1 score"]},
                        "brainstorming": {"Metrics": ["Distinct", "CHRF"]},
                        "open_qa": {"GPT": ["correctness"], "Metrics": ["BLEU"]}},
           "answers": [{"name": "model_a", "path": str(EN / "answers_model_a.json")},
                       {"name": "model_b", "path": str(EN / "answers_model_b.json")}],
           "target_file": str(EN / "targets.json"),
           "judge": {"backend": "openai", "model": "fake-judge", "base_url": url, "mode": "generate", "max_retries": 0}}
    path = tmp_path / "c.json"
    path.write_text(json.dumps(cfg))
    return path


def strip(obj):
    if isinstance(obj, dict):
        return {k: strip(v) for k, v in obj.items() if k not in ("runs", "run_id")}
    if isinstance(obj, list):
        return [strip(v) for v in obj]
    return obj


def test_shard_spec_and_assignment():
    assert parse_shard("2/3") == (2, 3)
    for bad in ("0/3", "4/3", "x", "1/0"):
        with pytest.raises(InputError):
            parse_shard(bad)
    ids = [str(i) for i in range(300)]
    counts = [sum(shard_of(i, 3) == k for i in ids) for k in (1, 2, 3)]
    assert sum(counts) == 300 and min(counts) > 70  # every id in exactly one shard, roughly even
    assert shard_of("17", 3) == shard_of("17", 3)


def test_three_shards_merged_equal_one_unsharded_run(tmp_path, capsys):
    with FakeOpenAIServer(judge) as server:
        cfg = write_config(tmp_path, server.url)
        full = tmp_path / "runs"
        assert main(["--config", str(cfg), "--no-charts"]) == 0
        full_calls = server.chat_calls
        for i in (1, 2, 3):
            assert main(["--config", str(cfg), "--shard", f"{i}/3", "--no-charts"]) == 0
        assert server.chat_calls == 2 * full_calls  # the shards together judge each item once
    shards = [full / f"shard-{i}-of-3" for i in (1, 2, 3)]
    sizes = [len(json.loads((s / "results" / "model_a.json").read_text())["items"]) for s in shards]
    assert all(n > 0 for n in sizes) and sum(sizes) == len(json.loads((full / "results" / "model_a.json").read_text())["items"])
    merged = tmp_path / "merged"
    assert main(["merge", str(merged), *map(str, shards)]) == 0

    for model in ("model_a", "model_b"):
        a = json.loads((merged / "results" / f"{model}.json").read_text())
        b = json.loads((full / "results" / f"{model}.json").read_text())
        # corpus BLEU / chrF are recomputed, not averaged
        assert a["aggregates"]["by_category"]["closed_qa"]["Metrics/BLEU-4"]["corpus"] == \
            b["aggregates"]["by_category"]["closed_qa"]["Metrics/BLEU-4"]["corpus"]
        assert strip(a) == strip(b)
    for name in ("model_a__vs__model_b.json",):
        assert json.loads((merged / "battles" / name).read_text()) == json.loads((full / "battles" / name).read_text())
    assert list(csv.reader((merged / "summary.csv").open())) == list(csv.reader((full / "summary.csv").open()))
    keys = lambda p: {r[0] for r in sqlite3.connect(p).execute("SELECT key FROM completions")}  # noqa: E731
    assert keys(merged / "judge_cache.sqlite") == keys(full / "judge_cache.sqlite")
    manifest = json.loads((merged / "manifest.json").read_text())
    assert [m["shard"] for m in manifest["merged_from"]] == [[1, 3], [2, 3], [3, 3]]
    runs = sorted(p.name for p in (merged / "runs").glob("*.json"))  # the three shards' runs and the merge itself
    assert len(runs) == 4 and sum("-merge-" in r for r in runs) == 1
    assert (merged / "charts" / "Metrics" / "closed_qa.png").exists()


def test_merge_refuses_overlapping_shards(tmp_path, capsys):
    with FakeOpenAIServer(judge) as server:
        cfg = write_config(tmp_path, server.url)
        assert main(["--config", str(cfg), "--shard", "1/2", "--no-charts", "--only", "Metrics"]) == 0
    shard = tmp_path / "runs" / "shard-1-of-2"
    assert main(["merge", str(tmp_path / "m"), str(shard), str(shard)]) == 2
    assert "is in two shards" in capsys.readouterr().err
    assert main(["merge", str(tmp_path / "m"), str(tmp_path / "nothing")]) == 2


def test_a_panel_sharded_and_merged_equals_one_run(tmp_path, capsys):
    """A panel of two judges that disagree: each judge's battle items are joined across the shards, its
    calibration refitted on all of them and the panel's vote recomputed, so the merged battle file is the
    unsharded run's; the results (each judge's and the panel's scores, Krippendorff's alpha) too."""
    import re

    def by_length(longer: bool):
        def reply(rec):
            text = rec.user_text
            if "[Assistant 1's answer]" not in text:
                return Reply(content=str(1 + len(text) % 5 if longer else 5 - len(text) % 4))
            a, b = (len(m) for m in re.findall(r"\[Assistant [12]'s answer\]\n(.*?)\n\[End of Assistant", text, re.S))
            first = (a > b) == longer  # one prefers the longer answer, two the shorter, in either order
            return Reply(content="7 3" if first else "3 7")
        return reply

    with FakeOpenAIServer(by_length(True)) as one, FakeOpenAIServer(by_length(False), model="other-judge") as two:
        cfg = json.loads(write_config(tmp_path, one.url).read_text())
        first = {**cfg["judge"], "name": "one"}
        cfg["judge"] = [first, {**first, "name": "two", "model": "other-judge", "base_url": two.url}]
        cfg["panel"] = {"weights": {"one": 2, "two": 1}}
        path = tmp_path / "panel.json"
        path.write_text(json.dumps(cfg))
        full = tmp_path / "runs"
        assert main(["--config", str(path), "--no-charts"]) == 0
        for i in (1, 2):
            assert main(["--config", str(path), "--shard", f"{i}/2", "--no-charts"]) == 0
    merged = tmp_path / "merged"
    assert main(["merge", str(merged), str(full / "shard-1-of-2"), str(full / "shard-2-of-2")]) == 0
    name = "model_a__vs__model_b.json"
    got, want = (json.loads((d / "battles" / name).read_text()) for d in (merged, full))
    assert set(got["panel"]["judges"]) == {"one", "two"}
    votes = [it["judges"] for it in want["items"]]
    # they disagree wherever the answers' lengths differ (an equal-length pair is a tie for both)
    assert all(v["two"] == {"A": "B", "B": "A", "tie": "tie"}[v["one"]] for v in votes)
    assert sum(v["one"] in ("A", "B") for v in votes) >= 6
    assert [it["verdict"] for it in want["items"]] == [v["one"] for v in votes]  # one's double weight decides
    assert got == want
    for model in ("model_a", "model_b"):
        a, b = (json.loads((d / "results" / f"{model}.json").read_text()) for d in (merged, full))
        assert a["panel"]["agreement"] and strip(a) == strip(b)
