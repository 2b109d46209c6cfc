"""`evaluate.api.benchmark` runs a registered benchmark through the one driver, as `eval.py NAME` does: MT-bench
on FastChat's files (two questions a category) against the fake OpenAI server gives the same judgment file,
the same tables and the same save path as the command; nothing is printed, bad input raises InputError
before any judge call, and a dry run contacts nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evaluate import api
from evaluate.commands.mt_bench import main as mt_bench_main

try:
    from tests.fake_openai_server import fake_openai  # noqa: F401
    from tests.test_mt_bench import ANSWERS, BENCH, LIMIT, MODELS, expected_messages, judge_config, judge_reply
except ImportError:  # tests/ itself on sys.path
    from fake_openai_server import fake_openai  # type: ignore[no-redef]  # noqa: F401
    from test_mt_bench import ANSWERS, BENCH, LIMIT, MODELS, expected_messages, judge_config, judge_reply


@pytest.fixture
def data() -> Path:
    if not (BENCH / "question.jsonl").exists() or not (ANSWERS / "gpt-3.5-turbo.jsonl").exists():
        pytest.skip("../shared/data/fastchat_mt_bench or mt_bench/model_answer is not present")
    return BENCH


def _options(data: Path, cfg: Path, out: Path, **more) -> dict:
    return {"data": data, "answers": [ANSWERS / f"{m}.jsonl" for m in MODELS], "judge_config": cfg, "mode": "single",
            "save_path": out, "limit": LIMIT, **more}


def _rows(path: Path) -> list[tuple]:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return sorted((r["question_id"], r["model"], r["turn"], r["judge"][1], r["judgment"], r["score"]) for r in rows)


def test_the_api_runs_mt_bench_as_the_command_does(data, fake_openai, tmp_path, capsys) -> None:
    fake_openai.reply_fn = judge_reply
    cfg = judge_config(tmp_path, fake_openai)
    lines: list[str] = []
    got = api.benchmark("mt-bench", log=lines.append, **_options(data, cfg, tmp_path / "api"))
    assert capsys.readouterr() == ("", "")  # the API prints nothing: the command's text comes back
    sent = fake_openai.chat_calls
    want = expected_messages(data, "single")
    assert got.code == 0 and sent == len(want)  # identical requests (two models, one answer) are sent once

    assert mt_bench_main([
        "--data", str(data), "--answers", *(str(ANSWERS / f"{m}.jsonl") for m in MODELS), "--judge-config", str(cfg),
        "--mode", "single", "--save_path", str(tmp_path / "cli"), "--limit", str(LIMIT)]) == 0
    printed = capsys.readouterr().out
    judgments = Path("model_judgment") / "gpt-4_single.jsonl"
    assert _rows(tmp_path / "api" / judgments) == _rows(tmp_path / "cli" / judgments)
    assert len(_rows(tmp_path / "api" / judgments)) == sum(want.values())
    assert got.text.replace(str(tmp_path / "api"), "OUT") == printed.replace(str(tmp_path / "cli"), "OUT")

    assert got.run is not None and sorted(got.run.models) == sorted(MODELS)  # the save path, opened
    cli_run = api.open_run(tmp_path / "cli")
    assert got.run.means() == cli_run.means() and got.run.means()


def test_a_dry_run_contacts_nothing_and_opens_no_run(data, fake_openai, tmp_path) -> None:
    got = api.benchmark("mt-bench", **_options(data, judge_config(tmp_path, fake_openai), tmp_path / "out",
                                               dry_run=True))
    assert got.code == 0 and got.run is None and fake_openai.chat_calls == 0
    assert "total" in got.text and not (tmp_path / "out").exists()


def test_bad_input_raises_before_any_call(fake_openai, tmp_path) -> None:
    with pytest.raises(api.InputError, match=r'unknown benchmark "mt-bnech".*did you mean.*mt-bench'):
        api.benchmark("mt-bnech", save_path=tmp_path)
    with pytest.raises(api.InputError, match=r'no option "judge_confg".*judge_config'):
        api.benchmark("mt-bench", judge_confg="x.yaml", save_path=tmp_path)
    with pytest.raises(api.InputError, match=r"mt-bench: .*--mode: invalid choice: 'both'"):
        api.benchmark("mt-bench", mode="both", save_path=tmp_path)
    cfg = judge_config(tmp_path, fake_openai)
    with pytest.raises(api.InputError, match=r"nope"):  # a missing data folder: the driver's own check
        api.benchmark("mt-bench", data=tmp_path / "nope", answers=[tmp_path / "a.jsonl"], judge_config=cfg,
                      mode="single", save_path=tmp_path / "out")
    assert fake_openai.chat_calls == 0 and not (tmp_path / "out").exists()
