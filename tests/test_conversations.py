"""Conversations in the project's own records, end to end against the fake judge: the bundled chat
example (`configs/example_chat.yaml`, model A in `turns`, model B in OpenAI `messages`) rated and
battled turn by turn, Metrics on the last turn, the report's item browser showing every turn; bad
conversations and families that cannot score one refused with exit 2 before any judge call."""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import pytest
import yaml

from evaluate.cli import main

try:
    from tests.fake_openai_server import RecordedRequest, Reply, fake_openai  # noqa: F401
except ImportError:
    from fake_openai_server import RecordedRequest, Reply, fake_openai  # noqa: F401

REPO = Path(__file__).resolve().parents[1]
CHAT = REPO / "examples" / "chat"
CONFIG = REPO / "configs" / "example_chat.yaml"
A = json.loads((CHAT / "answers_model_a.json").read_text(encoding="utf-8"))
B = [json.loads(line) for line in (CHAT / "answers_model_b.jsonl").read_text(encoding="utf-8").splitlines()]
TARGETS = json.loads((CHAT / "targets.json").read_text(encoding="utf-8"))
A_REPLIES = {t["assistant"] for r in A for t in r["turns"]}
N_TURNS = {r["id"]: len(r["turns"]) for r in A}  # 1: 3, 2: 2, 3: 3, 4: 3, 5: 2
TURNS = sum(N_TURNS.values())  # 13 judged turns per model and metric


def b_replies(rid: int) -> list[str]:
    rec = next(r for r in B if r["id"] == rid)
    return [m["content"] for m in rec["messages"] if m["role"] == "assistant"]


def between(text: str, start: str, end: str) -> str:
    return text.split(start, 1)[1].split(end, 1)[0].strip()


def judge(rec: RecordedRequest) -> Reply:
    """Model A's replies are good and model B's weak, wherever they are shown (G-Eval log-probs)."""
    text = rec.user_text
    if "[Assistant 1's latest reply]" in text:
        first = between(text, "[Assistant 1's latest reply]", "[End of Assistant 1's latest reply]")
        return Reply(content="9 2" if first in A_REPLIES else "2 9")
    reply = between(text, "[Assistant's latest reply]", "[End of latest reply]")
    probs = {"5": 0.7, "4": 0.3} if reply in A_REPLIES else {"2": 0.6, "1": 0.4}
    return Reply(content=max(probs, key=probs.get), top_logprobs=[{k: math.log(v) for k, v in probs.items()}])


def chat_config(tmp_path: Path, server, *, answers: tuple[Path, Path] | None = None, edit: Callable | None = None,
                **judge_opts: Any) -> Path:
    """The example's config with absolute paths, the fake judge and a save path under tmp_path."""
    cfg = yaml.safe_load(CONFIG.read_text(encoding="utf-8"))
    a, b = answers or (CHAT / "answers_model_a.json", CHAT / "answers_model_b.jsonl")
    cfg["answers"] = [{"name": "model_a", "path": str(a)}, {"name": "model_b", "path": str(b)}]
    cfg["target_file"] = str(CHAT / "targets.json")
    cfg["prompts"] = {k: str((CONFIG.parent / v).resolve()) for k, v in cfg["prompts"].items()}
    cfg["save_path"] = str(tmp_path / "out")
    cfg["judge"] = {"backend": "openai", "model": "fake-judge", "base_url": server.url, "api_key_env": "CONV_KEY",
                    "mode": "logprobs", "max_retries": 1, "timeout": 10, **judge_opts}
    if edit is not None:
        edit(cfg)
    path = tmp_path / "c.json"
    path.write_text(json.dumps(cfg), encoding="utf-8")
    return path


@pytest.fixture(autouse=True)
def _key(monkeypatch):
    monkeypatch.setenv("CONV_KEY", "sk-conv-test")


def results(tmp_path: Path, model: str) -> dict[str, dict[str, Any]]:
    data = json.loads((tmp_path / "out" / "results" / f"{model}.json").read_text(encoding="utf-8"))
    return {it["id"]: it for it in data["items"]} | {"": data}


# ------------------------------------------------------------------ the chat example, end to end
@pytest.fixture(scope="module")
def run_once(tmp_path_factory):
    """One run of the chat example (module-wide: several tests read its files)."""
    try:
        from tests.fake_openai_server import FakeOpenAIServer
    except ImportError:
        from fake_openai_server import FakeOpenAIServer
    tmp = tmp_path_factory.mktemp("chat")
    with pytest.MonkeyPatch.context() as mp, FakeOpenAIServer(reply_fn=judge) as server:
        mp.setenv("CONV_KEY", "sk-conv-test")
        code = main(["--config", str(chat_config(tmp, server))])
        requests = [r.user_text for r in server.chat_requests()]
    return tmp, code, requests


def test_rating_per_turn_and_the_whole(run_once):
    tmp, code, requests = run_once
    assert code == 0
    assert len(requests) == 2 * TURNS + 2 * TURNS  # a rating per model and turn; a battle per turn in both orders
    ra, rb = results(tmp, "model_a"), results(tmp, "model_b")
    item = ra["1"]
    assert [t["user"] for t in item["turns"]] == [t["user"] for t in A[0]["turns"]]
    assert [t["assistant"] for t in item["turns"]] == [t["assistant"] for t in A[0]["turns"]]
    for k in (1, 2, 3):
        assert item["scores"][f"GPT/relevance@turn{k}"] == pytest.approx(0.7 * 5 + 0.3 * 4)
        assert rb["1"]["scores"][f"GPT/relevance@turn{k}"] == pytest.approx(0.6 * 2 + 0.4 * 1)
    assert item["scores"]["GPT/relevance"] == pytest.approx(4.7)
    assert item["details"]["GPT/relevance"]["turns"] == 3
    assert "GPT/relevance@turn3" not in ra["2"]["scores"] and "GPT/relevance@turn2" in ra["2"]["scores"]
    roleplay = ra["4"]["scores"]
    assert {k for k in roleplay if k.startswith("GPT/")} == {"GPT/fidelity", "GPT/fidelity@turn1",
                                                             "GPT/fidelity@turn2", "GPT/fidelity@turn3"}
    sigs = ra[""]["signatures"]
    assert sigs["GPT/relevance@turn2"]["turn"] == 2 and sigs["GPT/relevance@turn2"]["metric"] == "relevance"
    agg = ra[""]["aggregates"]["by_category"]["chat"]
    assert agg["GPT/relevance@turn3"]["n"] == 2 and agg["GPT/relevance@turn1"]["n"] == 3  # ids 1 and 3 have 3 turns
    comps = json.loads((tmp / "out" / "comparisons" / "model_a__vs__model_b.json").read_text())
    keys = {(row["category"], row["score"]) for row in comps["rows"]}
    assert {("chat", "GPT/relevance@turn2"), ("chat", "GPT/relevance"), ("roleplay", "GPT/fidelity@turn3")} <= keys


def test_the_judge_of_turn_k_sees_this_models_earlier_turns_only(run_once):
    _, _, requests = run_once
    b1 = b_replies(1)
    rating = [t for t in requests if "[Assistant's latest reply]" in t
              and between(t, "[Assistant's latest reply]", "[End of latest reply]") == b1[1]]
    assert len(rating) == 1
    text = rating[0]
    history = between(text, "[Conversation so far]", "[End of conversation so far]")
    assert b1[0] in history and A[0]["turns"][0]["assistant"] not in history  # model B's own turn 1
    assert b1[1] not in history and A[0]["turns"][1]["user"] not in history  # turn 2 is the one graded
    assert A[0]["turns"][0]["user"] in history and A[0]["turns"][2]["user"] not in text  # nothing after turn 2
    assert between(text, "[User's latest message]", "[Assistant's latest reply]") == A[0]["turns"][1]["user"]
    # a role-play's setup is shown before the first turn
    setup = [t for t in requests if "[Assistant's latest reply]" in t
             and between(t, "[Assistant's latest reply]", "[End of latest reply]") == A[3]["turns"][0]["assistant"]]
    assert len(setup) == 1 and A[3]["instruction"] in between(setup[0], "[Conversation so far]", "[User's latest")
    # battle, turn 2 of record 1 in both orders: each conversation travels with its own reply
    battles = [t for t in requests if "[User's latest message, the same for both]" in t
               and between(t, "[User's latest message, the same for both]", "[Assistant 1's") == A[0]["turns"][1]["user"]]
    assert len(battles) == 2
    for t in battles:
        first_conv = between(t, "[Conversation of Assistant 1 so far]", "[End of Assistant 1's conversation")
        first_reply = between(t, "[Assistant 1's latest reply]", "[End of Assistant 1's latest reply]")
        own_turn1 = A[0]["turns"][0]["assistant"] if first_reply in A_REPLIES else b1[0]
        assert own_turn1 in first_conv


def test_battle_per_turn_and_whole(run_once):
    tmp, _, _ = run_once
    battle = json.loads((tmp / "out" / "battles" / "model_a__vs__model_b.json").read_text())
    s = battle["summary"]
    assert (s["items"], s["wins"], s["losses"], s["invalid"]) == (5, 5, 0, 0)
    assert s["turn_judgments"] == TURNS and s["both_orders_valid"] == TURNS and s["flips"] == 0
    assert {k: v["items"] for k, v in s["by_turn"].items()} == {"1": 5, "2": 5, "3": 3}
    item = next(it for it in battle["items"] if it["id"] == "1")
    assert item["verdict"] == "A" and item["orders"] == []
    assert [t["turn"] for t in item["turns"]] == [1, 2, 3]
    assert all(t["verdict"] == "A" and [o["order"] for o in t["orders"]] == ["AB", "BA"] for t in item["turns"])
    assert set(battle["by_category"]) == {"chat", "roleplay"}


def test_metrics_score_the_last_turn_against_its_reference(run_once):
    from evaluate.metrics import MetricInput, build

    tmp, _, _ = run_once
    item = results(tmp, "model_a")["3"]
    last, ref = A[2]["turns"][-1], TARGETS[2]["target"][-1]
    chrf = build("CHRF", "en")
    expected = chrf.score([MetricInput(output=last["assistant"], references=(ref,), source=last["user"])])[0]["CHRF"]
    joined = chrf.score([MetricInput(output="\n".join(t["assistant"] for t in A[2]["turns"]), references=(ref,),
                                     source=last["user"])])[0]["CHRF"]
    assert item["scores"]["Metrics/CHRF"] == pytest.approx(expected) and expected != pytest.approx(joined)
    assert item["targets"] == [ref]
    detail = item["details"]["Metrics/CHRF"]
    assert (detail["turn"], detail["of"]) == (3, 3) and "the last reply" in detail["scored"]
    assert "Metrics/CHRF" not in results(tmp, "model_a")["3"]["invalid"]


def test_report_browser_shows_every_turn(run_once):
    from evaluate.savepath import read_run_log
    from evaluate.report.page import browser_data

    tmp, _, _ = run_once
    data = browser_data(read_run_log(tmp / "out"))
    a, b = data["models"].index("model_a"), data["models"].index("model_b")
    for rec in A:
        entry = next(e for e in data["items"] if e["id"] == str(rec["id"]))
        assert entry["u"] == [t["user"] for t in rec["turns"]]
        assert entry["r"][a] == [t["assistant"] for t in rec["turns"]]
        assert entry["r"][b] == b_replies(rec["id"])
        assert entry["q"] == rec["instruction"]
    first = next(e for e in data["items"] if e["id"] == "1")
    assert first["tr"] == [[t] for t in TARGETS[0]["target"]]
    row = data["battles"][0]["items"]["1"]
    assert [t[0] for t in row[5]] == [1, 2, 3] and {t[1] for t in row[5]} == {"A" if data["battles"][0]["a"] == a
                                                                               else "B"}


NODE = shutil.which("node")


@pytest.mark.skipif(NODE is None, reason="node is not installed")
def test_report_script_renders_the_conversation_as_text(run_once, tmp_path):
    """report.js on a minimal DOM in node: each turn's user message and both replies are in the item
    browser, the battle's per-turn verdicts too, and nothing is ever written as HTML."""
    from evaluate.savepath import read_run_log
    from evaluate.report.page import browser_data, embed_json

    run_tmp, _, _ = run_once
    data = browser_data(read_run_log(run_tmp / "out"))
    data["items"][0]["r"][1][0] = "<img src=x onerror=window.pwned=1>"  # hostile text stays text
    script = (REPO / "evaluate" / "report" / "templates" / "report.js").read_text(encoding="utf-8")
    (tmp_path / "data.json").write_text(embed_json(data), encoding="utf-8")
    (tmp_path / "report.js").write_text(script, encoding="utf-8")
    (tmp_path / "dom.js").write_text(DOM_SHIM, encoding="utf-8")
    out = subprocess.run([NODE, str(tmp_path / "dom.js")], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    text = out.stdout
    for rec in A:
        for k, turn in enumerate(rec["turns"], 1):
            assert turn["user"] in text and turn["assistant"] in text, (rec["id"], k)
        for reply in b_replies(rec["id"])[1:]:
            assert reply in text
    assert "<img src=x onerror=window.pwned=1>" in text and "IMG-ELEMENT" not in text
    assert "turn 3 · user" in text and "Turn 2: model_a wins" in text and "(whole conversation)" in text


DOM_SHIM = r"""
// just enough DOM for report.js: elements keep text and children; innerHTML is refused
const fs = require("fs");
class El {
  constructor(tag) { this.tagName = tag.toUpperCase(); this.children = []; this._text = ""; this.value = "";
    this.className = ""; this.checked = false; this.disabled = false; this.attrs = {}; }
  appendChild(c) { if (c.isFragment) { c.children.forEach((x) => this.children.push(x)); } else this.children.push(c); return c; }
  addEventListener() {}
  setAttribute(k, v) { this.attrs[k] = v; }
  querySelector(sel) { return sel === "summary" ? (this._summary = this._summary || new El("summary")) : null; }
  set textContent(v) { this.children = []; this._text = String(v); }
  get textContent() { return this._text + this.children.map((c) => c.textContent).join(""); }
  set innerHTML(v) { throw new Error("innerHTML used"); }
  dump(depth) { const pad = " ".repeat(depth);
    return pad + (this.tagName === "IMG" ? "IMG-ELEMENT" : "") + this._text + "\n" + this.children.map((c) => c.dump(depth + 1)).join(""); }
}
const ids = {};
for (const id of ["f-cat", "f-key", "f-m1", "f-m2", "f-invalid", "f-sort", "f-text", "b-prev", "b-next", "b-count",
                  "b-page", "b-list", "report-data", "items"]) ids[id] = new El(id === "b-list" ? "div" : "select");
ids["f-sort"].value = "file";
ids["report-data"].textContent = fs.readFileSync("data.json", "utf8");
global.document = { getElementById: (id) => ids[id] || null, createElement: (t) => new El(t),
  createDocumentFragment: () => Object.assign(new El("fragment"), { isFragment: true }),
  querySelectorAll: () => [], body: new El("body") };
global.window = {};
global.location = { hash: "" };
global.performance = { mark() {} };
eval(fs.readFileSync("report.js", "utf8"));
process.stdout.write(ids["b-list"].dump(0));  // 5 items: all on the first page
"""


# ------------------------------------------------------------------ invalid turns, changed turns, counts
def test_an_invalid_turn_is_kept_with_its_raw_reply_and_the_whole_is_invalid(tmp_path, fake_openai):
    bad = b_replies(2)[1]

    def reply(rec: RecordedRequest) -> Reply:
        text = rec.user_text
        if "[Assistant's latest reply]" in text and between(text, "[Assistant's latest reply]",
                                                             "[End of latest reply]") == bad:
            return Reply(content="I would rather not grade this one.")
        return Reply(content="9 2" if "[Assistant 1's latest reply]" in text else "4")

    fake_openai.reply_fn = reply
    assert main(["--config", str(chat_config(tmp_path, fake_openai, mode="generate"))]) in (0, 3)
    item = results(tmp_path, "model_b")["2"]
    assert item["scores"]["GPT/relevance@turn1"] == 4.0
    assert item["invalid"]["GPT/relevance@turn2"]["raw"] == "I would rather not grade this one."
    whole = item["invalid"]["GPT/relevance"]
    assert "GPT/relevance" not in item["scores"] and whole["reason"].startswith("turn 2 of 2 is invalid")
    assert whole["raw"] == "I would rather not grade this one."
    agg = results(tmp_path, "model_b")[""]["aggregates"]["by_category"]["chat"]["GPT/relevance"]
    assert (agg["n"], agg["invalid"], agg["mean"]) == (2, 1, 4.0)


def test_a_changed_earlier_turn_is_judged_again(tmp_path, fake_openai):
    fake_openai.reply_fn = judge
    cfg = chat_config(tmp_path, fake_openai)
    assert main(["--config", str(cfg)]) == 0
    first_calls = fake_openai.chat_calls
    before = results(tmp_path, "model_a")["2"]["output_sha256"]
    changed = json.loads(json.dumps(A))
    changed[1]["turns"][0]["assistant"] += " Add a pinch of baking soda as well."
    path = tmp_path / "a_changed.json"
    path.write_text(json.dumps(changed), encoding="utf-8")
    cfg = chat_config(tmp_path, fake_openai, answers=(path, CHAT / "answers_model_b.jsonl"))
    assert main(["--config", str(cfg)]) in (0, 3)
    # record 2 (2 turns): both of model_a's ratings (turn 2 shows turn 1) and both turns' battles in both orders
    assert fake_openai.chat_calls - first_calls == 2 + 2 * 2
    assert results(tmp_path, "model_a")["2"]["output_sha256"] != before


def test_dry_run_and_export_count_every_turn(tmp_path, fake_openai, capsys):
    cfg = chat_config(tmp_path, fake_openai)
    assert main(["--config", str(cfg), "--dry-run"]) == 0
    out = capsys.readouterr()
    text = out.out + out.err
    assert f"judge_calls={2 * TURNS}, battle_calls={2 * TURNS}" in text
    assert f"judge requests to send: {4 * TURNS} " in text
    export = tmp_path / "requests.jsonl"
    assert main(["--config", str(cfg), "--export-requests", str(export)]) == 0
    lines = export.read_text().splitlines()
    assert len(lines) == 4 * TURNS and len({json.loads(x)["custom_id"] for x in lines}) == 4 * TURNS
    assert fake_openai.chat_calls == 0


# ------------------------------------------------------------------ refused at load: exit 2, nothing paid
def _write_answers(tmp: Path, edit_a: Callable | None = None, edit_b: Callable | None = None) -> tuple[Path, Path]:
    a, b = json.loads(json.dumps(A)), json.loads(json.dumps(B))
    if edit_a:
        edit_a(a)
    if edit_b:
        edit_b(b)
    pa, pb = tmp / "answers_a.json", tmp / "answers_b.jsonl"
    pa.write_text(json.dumps(a, ensure_ascii=False), encoding="utf-8")
    pb.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in b), encoding="utf-8")
    return pa, pb


def _drop_reply(a):
    del a[2]["turns"][1]["assistant"]


def _extra_assistant(b):
    b[3]["messages"].append({"role": "assistant", "content": "And one more thing."})


def _blank_reply(a):
    a[0]["turns"][1]["assistant"] = "   "


def _blank_user(b):
    b[1]["messages"][0]["content"] = ""


def _other_user(b):
    b[4]["messages"][3]["content"] = "What salary should I ask for?"


def _lost_turn(b):
    b[1]["messages"] = b[1]["messages"][:2]


BAD = [
    ("a turn missing its reply", _drop_reply, None, "answers_a.json",
     r'record 2 \(id 3\): turns\[1\] \(turn 2\): missing "assistant"'),
    ("more assistant than user turns", None, _extra_assistant, "answers_b.jsonl",
     r"line 4 \(id 4\): messages\[7\] \(turn \d\): two assistant messages in a row \(more assistant than user turns\)"),
    ("an empty reply", _blank_reply, None, "answers_a.json",
     r"record 0 \(id 1\): turns: turn 2: the assistant reply is empty"),
    ("an empty user message", None, _blank_user, "answers_b.jsonl",
     r"line 2 \(id 2\): messages: turn 1: the user message is empty"),
    ("a user turn that differs between models", None, _other_user, "answers_b.jsonl",
     r"record 5: turn 2: the user message differs from .*targets\.json"),
    ("a whole turn missing in one model", None, _lost_turn, "answers_b.jsonl",
     r"record 2: 1 turns here, 2 in .*targets\.json"),
]


@pytest.mark.parametrize("name, edit_a, edit_b, file, expected", BAD, ids=[c[0] for c in BAD])
def test_bad_conversations_exit_2_before_any_judge_call(tmp_path, fake_openai, name, edit_a, edit_b, file, expected):
    answers = _write_answers(tmp_path, edit_a, edit_b)
    cfg = chat_config(tmp_path, fake_openai, answers=answers)
    env = {**os.environ, "PYTHONPATH": str(REPO), "CONV_KEY": "sk-conv-test"}
    proc = subprocess.run([sys.executable, str(REPO / "eval.py"), "--config", str(cfg)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert str(tmp_path / file) in proc.stderr
    assert re.search(expected, proc.stderr), proc.stderr
    assert fake_openai.requests == []  # no judge call, not even the probe
    assert not (tmp_path / "out").exists()


def _refused(tmp_path, server, capsys, edit: Callable, *argv: str) -> str:
    code = main(["--config", str(chat_config(tmp_path, server, edit=edit)), *argv])
    err = capsys.readouterr().err
    assert code == 2, err
    assert server.chat_calls == 0 and not (tmp_path / "out").exists()
    return err


@pytest.mark.parametrize("family, names, block", [
    ("UniEval", ["dialogue-naturalness"], {"unieval": {"evaluator": "judge"}}),
    ("RepEval", ["fluency"], {}),
    ("SAGEval", ["accuracy"], {}),
])
def test_families_that_score_one_answer_refuse_a_conversation_category(tmp_path, fake_openai, capsys, family, names,
                                                                       block):
    def edit(cfg):
        cfg["category"]["chat"][family] = names
        cfg.update(block)

    err = _refused(tmp_path, fake_openai, capsys, edit, "--dry-run")
    assert f"category.chat.{family}: {family} scores one question and one answer" in err
    assert f"{CHAT / 'answers_model_a.json'}: record 1, 3 turns" in err
    assert "roleplay" not in err  # only the category that lists the family


def test_prompt_files_without_conversation_templates_are_refused(tmp_path, fake_openai, capsys):
    evaluation = json.loads((REPO / "prompts" / "evaluation_prompt_en.json").read_text(encoding="utf-8"))
    for entry in evaluation.values():
        entry.pop("conversation_prompt")
        entry.pop("conversation_reference_prompt")
    battle = json.loads((REPO / "prompts" / "battle_prompt_en.json").read_text(encoding="utf-8"))
    battle.pop("conversation_template")
    (tmp_path / "eval.json").write_text(json.dumps(evaluation), encoding="utf-8")
    (tmp_path / "battle.json").write_text(json.dumps(battle), encoding="utf-8")

    def edit(cfg):
        cfg["prompts"] = {"evaluation": str(tmp_path / "eval.json"), "battle": str(tmp_path / "battle.json")}

    err = _refused(tmp_path, fake_openai, capsys, edit)
    assert f'category.chat.GPT: category "chat" holds conversations ({CHAT / "answers_model_a.json"}: record 1' in err
    assert f'{tmp_path / "eval.json"} has no "conversation_prompt"' in err
    assert f'{tmp_path / "battle.json"}: no "conversation_template"' in err


def test_rating_with_a_reference_needs_one_per_turn(tmp_path, fake_openai, capsys):
    err = _refused(tmp_path, fake_openai, capsys, lambda cfg: cfg.update(gpt_with_reference=True))
    # ids 2, 4 and 5 have a reference for their last turn only
    assert re.search(r"record 2: turn\(s\) 1 of 2 have no reference", err)
    assert re.search(r"record 4: turn\(s\) 1, 2 of 3 have no reference", err)
    assert "record 1:" not in err and "record 3:" not in err


def test_with_a_reference_each_turn_is_judged_against_its_own(tmp_path, fake_openai):
    targets = json.loads(json.dumps(TARGETS))
    for rec in targets:
        if isinstance(rec["target"], str):
            rec["target"] = [f"reference of turn {k} of record {rec['id']}" for k in range(1, len(rec["turns"]))] \
                + [rec["target"]]
    (tmp_path / "targets.json").write_text(json.dumps(targets), encoding="utf-8")
    fake_openai.reply_fn = judge
    cfg = chat_config(tmp_path, fake_openai, edit=lambda c: c.update(gpt_with_reference=True,
                                                                     target_file=str(tmp_path / "targets.json")))
    assert main(["--config", str(cfg)]) == 0
    texts = [r.user_text for r in fake_openai.chat_requests()]
    assert len(texts) == 4 * TURNS
    turn1 = A[1]["turns"][0]
    rating = [t for t in texts if "[Assistant's latest reply]" in t
              and between(t, "[Assistant's latest reply]", "[End of latest reply]") == turn1["assistant"]]
    assert len(rating) == 1
    assert between(rating[0], "[Reference reply]", "[End of reference reply]") == "reference of turn 1 of record 2"
    battle = [t for t in texts if "[User's latest message, the same for both]" in t and turn1["user"] in
              between(t, "[User's latest message, the same for both]", "[Assistant 1's latest reply]")]
    assert len(battle) == 2
    assert all(between(t, "[Reference answer]", "[End of reference answer]") == "reference of turn 1 of record 2"
               for t in battle)
    assert all(TARGETS[1]["target"] not in t for t in rating + battle)  # the last turn's reference is not shown


def test_two_shards_merged_keep_the_turns(tmp_path, fake_openai):
    """Sharded conversations merge into the unsharded battle file and results: turns included."""
    fake_openai.reply_fn = judge
    cfg = chat_config(tmp_path, fake_openai)
    assert main(["--config", str(cfg), "--no-charts"]) == 0
    for i in (1, 2):
        assert main(["--config", str(cfg), "--shard", f"{i}/2", "--no-charts"]) == 0
    full = tmp_path / "out"
    merged = tmp_path / "merged"
    assert main(["merge", str(merged), str(full / "shard-1-of-2"), str(full / "shard-2-of-2")]) == 0
    name = "battles/model_a__vs__model_b.json"
    got, want = (json.loads((d / name).read_text()) for d in (merged, full))
    assert got["summary"] == want["summary"] and got["summary"]["by_turn"]["3"]["items"] == 3
    assert sorted(got["items"], key=lambda it: it["id"]) == sorted(want["items"], key=lambda it: it["id"])
    items = {it["id"]: it for it in json.loads((merged / "results" / "model_b.json").read_text())["items"]}
    assert [t["assistant"] for t in items["4"]["turns"]] == b_replies(4)
    assert items["4"]["scores"]["GPT/fidelity@turn3"] == pytest.approx(1.6)


def test_an_invalid_turn_is_counted_once_in_the_invalid_share():
    """The judge-failure contract counts the judge's replies: a conversation whose turn 1 could not be read
    has one invalid judgment and one valid one, not a second invalid for the whole score derived from them."""
    from evaluate.core.scores import Invalid, InvalidTally, ItemScores
    from evaluate.core.records import turn_key
    from evaluate.judges.rating import whole_conversation

    item = ItemScores()
    item.invalid[turn_key("relevance", 1)] = Invalid(reason="no score in the reply", raw="hmm")
    item.scores[turn_key("relevance", 2)] = 4.0
    whole_conversation(item, "relevance", 2)
    assert "relevance" in item.invalid  # the whole is invalid, as the results show ...
    tally = InvalidTally()
    tally.add("GPT", [item])
    assert tally.counts["GPT"] == [1, 1] and tally.share("GPT") == 0.5  # ... but counted once
    assert tally.reasons["GPT"] == {"no score in the reply": 1}


def test_judge_biases_read_a_conversations_turns():
    """Position and flip rates come from where the orders are: each turn of a conversation."""
    from evaluate.stats.battle import judge_bias

    def order(o, v):
        return {"order": o, "verdict": v}

    conv = {"id": "c1", "verdict": "A", "orders": [], "turns": [
        {"turn": 1, "id": "c1", "verdict": "A", "orders": [order("AB", "A"), order("BA", "A")]},
        {"turn": 2, "id": "c1", "verdict": "tie", "orders": [order("AB", "A"), order("BA", "B")]}]}
    got = judge_bias([conv], {"c1": (120.0, 80.0)})
    assert (got["first_position_wins"]["rate"], got["first_position_wins"]["n"]) == (0.75, 4)
    assert (got["flip_rate"]["rate"], got["flip_rate"]["n"]) == (0.5, 2)  # turn 2 follows the order
    assert (got["longer_wins"]["rate"], got["longer_wins"]["n"]) == (1.0, 1)  # the whole verdict, the longer side
