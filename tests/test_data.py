"""Answer and target files: formats, checks, and the file/id named in every error."""

import json

import pytest

from evaluate.pipeline.answers import load_answer_sets, load_records
from evaluate.core.errors import ConfigError, InputError


def rec(i, cat="chat", out="an answer", target="ref"):
    return {"category": cat, "instruction": f"q{i}", "input": "", "output": out, "target": target, "id": i}


def write(path, records, jsonl=False):
    if jsonl:
        path.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    else:
        path.write_text(json.dumps(records))
    return path


def test_json_and_jsonl_and_target_lists(tmp_path):
    a = write(tmp_path / "a.json", [rec(1), rec(2, target=["r1", "r2", ""])])
    b = write(tmp_path / "b.jsonl", [rec(1), rec(2, target=["r1", "r2"])], jsonl=True)
    ra, rb = load_records(a), load_records(b)
    assert [r.id for r in ra] == ["1", "2"] == [r.id for r in rb]
    assert ra[1].targets == ("r1", "r2")
    assert ra[0].question == "q1"


def test_record_errors_name_file_and_id(tmp_path):
    bad = [rec(1), {"category": "chat", "instruction": 5, "output": "x", "id": 7},
           {"category": "chat", "instruction": "q", "id": 8}, rec(1), {"instruction": "q", "output": "o"}]
    path = write(tmp_path / "answers.json", bad)
    with pytest.raises(ConfigError) as err:
        load_records(path)
    msg = str(err.value)
    assert str(path) in msg
    assert 'record 1 (id 7): field "instruction" must be a string, got int' in msg
    assert 'record 2 (id 8): missing field "output"' in msg
    assert "duplicate ids: 1" in msg
    assert 'record 4: missing field "id"' in msg


def test_bad_jsonl_line_is_named(tmp_path):
    path = tmp_path / "a.jsonl"
    path.write_text(json.dumps(rec(1)) + "\n{oops\n")
    with pytest.raises(InputError, match=r"a.jsonl: line 2: not valid JSON"):
        load_records(path)


def test_targets_merged_and_mismatches_reported(tmp_path):
    targets = write(tmp_path / "t.json", [dict(rec(1), output="", target="gold 1"),
                                          dict(rec(2), output="", target="gold 2")])
    a = write(tmp_path / "a.json", [rec(1, target=""), rec(2, out="  ", target="")])
    sets = load_answer_sets([("A", a)], targets)
    assert sets[0].records[0].targets == ("gold 1",)
    assert sets[0].empty_output_ids == ["2"]  # empty outputs are scored, and flagged
    b = write(tmp_path / "b.json", [rec(1, cat="open_qa"), rec(3)])
    with pytest.raises(ConfigError) as err:
        load_answer_sets([("A", a), ("B", b)], targets)
    msg = str(err.value)
    assert "b.json: no answer for ids in the target file" in msg and ": 2" in msg
    assert "b.json: ids not in the target file" in msg and ": 3" in msg
    assert "category differs from the target file for ids: 1 ('open_qa' vs 'chat')" in msg


def test_duplicate_model_names(tmp_path):
    a = write(tmp_path / "a.json", [rec(1)])
    with pytest.raises(InputError, match="model names must be unique; repeated: m"):
        load_answer_sets([("m", a), ("m", a)], None)
