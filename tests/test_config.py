"""Config loading: ColossalAI's files unchanged, YAML/JSON, shape errors with key paths."""

import json

import pytest

from evaluate.pipeline.config import load_config, parse_config
from evaluate.core.errors import ConfigError, InputError


def test_colossalai_configs_load_unchanged(colossal):
    en = load_config(colossal / "config" / "config_en.json")
    assert en.language == "en"
    assert len(en.categories) == 20
    assert en.categories["closed_qa"]["Metrics"] == ["BLEU", "ROUGE", "BERTScore", "CHRF"]
    assert en.path_for_unieval["summarization"] == "path to unieval-sum"
    cn = load_config(colossal / "config" / "config_cn.json")
    assert cn.language == "cn"
    assert cn.categories["classification"]["Metrics"] == ["Precision", "Recall", "F1 score", "CHRF"]


def test_yaml_and_json_give_the_same_config(tmp_path):
    raw = {"language": "cn", "category": {"chat": {"Metrics": ["Distinct"]}}, "save_path": "out",
           "answers": [{"name": "a", "path": "a.json"}]}
    (tmp_path / "c.json").write_text(json.dumps(raw))
    (tmp_path / "c.yaml").write_text("language: cn\ncategory:\n  chat: {Metrics: [Distinct]}\nsave_path: out\n"
                                     "answers:\n  - {name: a, path: a.json}\n")
    a, b = load_config(tmp_path / "c.json"), load_config(tmp_path / "c.yaml")
    assert a.to_dict() == b.to_dict()
    assert a.hash == b.hash
    assert a.save_path == tmp_path / "out"  # relative to the config file's folder
    assert a.answers[0].path == tmp_path / "a.json"


def test_shape_errors_name_key_paths_and_are_all_reported():
    raw = {"language": "fr", "category": {"chat": {"Metrics": "Distinct", "GTP": ["relevance"]},
                                          "qa": {"Metrics": ["BLEU", 3, "BLEU"]}},
           "judge": {"backend": "openia", "concurrency": "8", "api_key": "sk-secret", "lookahead": -1},
           "save_pth": "x"}
    with pytest.raises(ConfigError) as err:
        parse_config(raw, None)
    msg = str(err.value)
    assert 'language: expected "en" or "cn", got "fr"' in msg
    assert "category.chat.Metrics: expected a list of names" in msg
    assert 'category.chat: unknown key "GTP"; did you mean "GPT"?' in msg
    assert "category.qa.Metrics[1]: expected a name string" in msg
    assert 'category.qa.Metrics[2]: "BLEU" is listed twice' in msg
    assert 'judge.backend: expected "local" or "openai" or "vllm", got "openia"; did you mean "openai"?' in msg
    assert "judge.concurrency: expected a positive integer" in msg
    assert "judge.lookahead: expected a non-negative integer, got -1" in msg
    assert "keys are never read from config files" in msg
    assert "sk-secret" not in msg
    assert 'unknown key "save_pth"; did you mean "save_path"?' in msg


def test_bad_files(tmp_path):
    with pytest.raises(InputError, match="config file not found"):
        load_config(tmp_path / "missing.yaml")
    (tmp_path / "bad.json").write_text("{ not json")
    with pytest.raises(InputError, match=r"bad.json: not valid JSON: .* line 1"):
        load_config(tmp_path / "bad.json")
    (tmp_path / "bad.yaml").write_text("a: [1, 2\n")
    with pytest.raises(InputError, match="bad.yaml: not valid YAML"):
        load_config(tmp_path / "bad.yaml")
    (tmp_path / "list.json").write_text("[]")
    with pytest.raises(ConfigError, match="expected a mapping at the top level"):
        load_config(tmp_path / "list.json")


def test_local_batching_options_are_typed_and_bounded():
    """The local judge's rows in flight and their memory bound are validated at load, with the key path."""
    ok = parse_config({"language": "en", "category": {}, "judge": {"local_sequences": 4, "local_batch_tokens": 4096}},
                      None)
    assert ok.judge.local_sequences == 4 and ok.judge.local_batch_tokens == 4096
    with pytest.raises(ConfigError) as err:
        parse_config({"language": "en", "category": {},
                      "judge": {"local_sequences": 0, "local_batch_tokens": "lots", "local_sequence": 2}}, None)
    msg = str(err.value)
    assert "judge.local_sequences: expected an integer from 1 to 256, got 0" in msg
    assert 'judge.local_batch_tokens: expected an integer >= 256, got a string "lots"' in msg
    assert 'judge: unknown key "local_sequence"; did you mean "local_sequences"' in msg
