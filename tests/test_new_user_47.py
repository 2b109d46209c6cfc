"""What a new user met in issue 47, each tried the way the user ran it: `python eval.py` in a subprocess on
small files of the user's own (English and Chinese questions, Chinese model names, a folder where a file
was meant), with Metrics or the fake OpenAI-compatible server of tests/fake_openai_server.py where a model
is needed; the exit code, what the terminal says and what was written. The installed package:
tests/test_installed.py; the managed vLLM server killed mid-run: tests/test_vllm_managed.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
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
