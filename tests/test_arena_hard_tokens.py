"""Arena-Hard's token lengths: o200k_base counts as add_markdown_info.py makes them (tiktoken), from
bpe-openai (the `arena` extra) without any download, the word count only when no encoder is at hand,
and the footer saying which count was used.

The hand-checked counts below were read once from bpe-openai 0.1.4 and checked against tiktoken 0.14.0
(`tiktoken.encoding_for_model("gpt-4o")`, its vocabulary put in TIKTOKEN_CACHE_DIR from bpe-openai's
shipped `o200k_base.tiktoken.gz`, whose sha256 446a9538...1a2d is the one tiktoken checks): equal
token ids for these strings, and equal counts on all 1,500 answers in
../shared/data/arena_hard/arena-hard-v0.1/model_answer/.
"""
from __future__ import annotations

import hashlib
import json
import sys
import types
from pathlib import Path

import pytest

from evaluate.benchmarks.arena_hard import scores

ANSWERS = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "arena_hard" / "arena-hard-v0.1" / "model_answer"

# text -> o200k_base token ids (encode(text, disallowed_special=()))
HAND_CHECKED: dict[str, list[int]] = {
    "hello world": [24912, 2375],
    "Hello, world!": [13225, 11, 2375, 0],
    "<|endoftext|> is special": [27, 91, 419, 1440, 919, 91, 29, 382, 3582],
    "def f(x):\n    return x**2\n": [1314, 285, 4061, 1883, 271, 622, 1215, 410, 17, 198],
    "日本語のテキスト": [9048, 40909, 3385, 16056, 18368, 38236],
}


@pytest.fixture
def fresh(monkeypatch: pytest.MonkeyPatch):
    """token_len with its encoder chosen again (the choice is made once per process)."""
    monkeypatch.setattr(scores, "_ENC", [])
    return scores


def hide(monkeypatch: pytest.MonkeyPatch, *modules: str) -> None:
    for m in modules:
        monkeypatch.setitem(sys.modules, m, None)  # `import m` raises ImportError


def test_bpe_openai_gives_o200k_counts(fresh) -> None:
    pytest.importorskip("bpe_openai", reason="bpe-openai is not installed (the `arena` extra, part of `test`)")
    enc = fresh._encoder()
    assert type(enc).__module__.startswith("bpe_openai")
    for text, ids in HAND_CHECKED.items():
        assert enc.encode(text, disallowed_special=()) == ids
        assert fresh.token_len(text) == len(ids)
    assert fresh.style_metadata("Hello, world!")["token_len"] == 4
    assert "o200k_base tokens (bpe-openai)" in fresh.token_counter()


def test_bpe_openai_equals_tiktoken_on_real_answers(fresh, monkeypatch) -> None:
    """Only where tiktoken can load o200k_base from its cache (no network here)."""
    bpe = pytest.importorskip("bpe_openai", reason="bpe-openai is not installed")
    tiktoken = pytest.importorskip("tiktoken", reason="tiktoken is not installed")
    cached = fresh._tiktoken_cache_file()
    if cached is None or not cached.is_file():
        pytest.skip("tiktoken's o200k_base vocabulary is not in its cache (it would download it)")
    if not ANSWERS.is_dir():
        pytest.skip("../shared/data/arena_hard is not present beside this checkout")
    tk, bp = tiktoken.get_encoding("o200k_base"), bpe.get_encoding("o200k_base")
    answers = [json.loads(line)["messages"][-1]["content"]["answer"]
               for f in sorted(ANSWERS.glob("*.jsonl")) for line in f.read_text(encoding="utf-8").splitlines()[:40]]
    assert len(answers) >= 80
    assert [len(bp.encode(a, disallowed_special=())) for a in answers] == \
           [len(tk.encode(a, disallowed_special=())) for a in answers]


def test_word_count_fallback_is_said_in_the_footer(fresh, monkeypatch, tmp_path) -> None:
    hide(monkeypatch, "bpe_openai", "tiktoken")
    assert fresh._encoder() is None
    # words and punctuation marks: Hello , world ! -> 4; def f ( x ) : return x * * 2 -> 11
    assert fresh.token_len("Hello, world!") == 4
    assert fresh.token_len("def f(x):\n    return x**2\n") == 11
    assert fresh.token_counter().startswith("words and punctuation marks")
    assert "bpe-openai" in fresh.token_counter()
    from evaluate.benchmarks.arena_hard.run import lengths_note

    (tmp_path / "model_answer").mkdir()
    (tmp_path / "model_answer" / "m.jsonl").write_text(json.dumps(
        {"uid": "q1", "model": "m", "messages": [{"role": "user", "content": "hi"},
                                                 {"role": "assistant", "content": {"answer": "Hello"}}]}) + "\n")
    assert "words and punctuation marks" in lengths_note(tmp_path)


def fake_tiktoken(calls: list[str]) -> types.ModuleType:
    mod = types.ModuleType("tiktoken")

    def get_encoding(name: str):
        calls.append(name)
        return types.SimpleNamespace(encode=lambda text, disallowed_special=(): text.split())

    mod.get_encoding = get_encoding  # type: ignore[attr-defined]
    return mod


def test_tiktoken_is_used_only_when_its_vocabulary_is_cached(fresh, monkeypatch, tmp_path) -> None:
    """tiktoken downloads o200k_base on first use; the project asks it only when the file is in
    tiktoken's cache (the sha1 of the URL in TIKTOKEN_CACHE_DIR), so an offline run never waits on it."""
    hide(monkeypatch, "bpe_openai")
    calls: list[str] = []
    monkeypatch.setitem(sys.modules, "tiktoken", fake_tiktoken(calls))
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    assert fresh._encoder() is None and calls == []
    assert fresh.token_len("two words") == 2  # the word count

    (tmp_path / hashlib.sha1(fresh.O200K_URL.encode()).hexdigest()).write_bytes(b"cached")
    monkeypatch.setattr(scores, "_ENC", [])
    assert fresh._encoder() is not None and calls == ["o200k_base"]

    monkeypatch.setattr(scores, "_ENC", [])
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", "")  # caching off: tiktoken would download every time
    calls.clear()
    assert fresh._encoder() is None and calls == []


def test_real_tiktoken_without_cache_makes_no_request(fresh, monkeypatch, tmp_path) -> None:
    pytest.importorskip("tiktoken", reason="tiktoken is not installed")
    hide(monkeypatch, "bpe_openai")
    import socket

    def no_network(*args, **kwargs):
        raise AssertionError("tried to open a connection")

    monkeypatch.setattr(socket, "create_connection", no_network)
    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    assert fresh._encoder() is None
    assert fresh.token_counter().startswith("words and punctuation marks")
