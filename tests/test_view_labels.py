"""labels.jsonl (evaluate/savepath/labels.py): appended one whole line per label under a lock, by several
processes at once without losing one; a line that is not a label is named with its number and skipped;
a line cut by a killed writer is named and the next label starts on a line of its own."""

from __future__ import annotations

import json
import multiprocessing
from pathlib import Path

import pytest

from evaluate.savepath.labels import LabelError, append_label, check_label, read_labels

LABEL = {"id": "7", "category": "closed_qa", "model_a": "model_a", "model_b": "model_b", "verdict": "A"}


def _writer(args: tuple[str, int, int]) -> int:
    root, k, n = args
    for i in range(n):
        append_label(Path(root), {**LABEL, "id": f"{k}-{i}", "note": f"process {k} " + "x" * (i * 37 % 1900)})
    return n


def test_processes_appending_at_once_lose_no_label_and_leave_whole_lines(tmp_path):
    with multiprocessing.get_context("fork").Pool(4) as pool:
        assert sum(pool.map(_writer, [(str(tmp_path), k, 60) for k in range(4)])) == 240
    found = read_labels(tmp_path)
    assert found.problems == [] and len(found.labels) == 240
    assert {lab.id for lab in found.labels} == {f"{k}-{i}" for k in range(4) for i in range(60)}
    raw = (tmp_path / "labels.jsonl").read_bytes()
    assert raw.endswith(b"\n") and all(json.loads(line) for line in raw.splitlines())


def test_a_label_is_stamped_and_read_back(tmp_path):
    lab = append_label(tmp_path, {**LABEL, "note": "<b>not</b> markup to us", "run_id": "r1"})
    assert lab.time.endswith("+00:00") and lab.schema == "llm-eval-label/2"
    back = read_labels(tmp_path).labels
    assert [x.to_dict() for x in back] == [lab.to_dict()] and back[0].note == "<b>not</b> markup to us"


@pytest.mark.parametrize("bad, why", [
    ({**LABEL, "verdict": "C"}, '"verdict": expected one of A, B, tie'),
    ({**LABEL, "id": ""}, '"id": expected a non-empty string'),
    ({**LABEL, "model_b": "model_a"}, "a label compares two models"),
    ({**LABEL, "note": "x" * 2001}, '"note": 2001 characters, at most 2000'),
    ([1, 2], "expected a JSON object"),
])
def test_a_bad_label_is_refused_naming_the_field(tmp_path, bad, why):
    with pytest.raises(LabelError, match=why.replace("(", r"\(")):
        check_label(bad)
    if isinstance(bad, dict):
        with pytest.raises(LabelError):
            append_label(tmp_path, bad)
        assert not (tmp_path / "labels.jsonl").exists()


def test_bad_lines_are_named_and_a_cut_line_does_not_swallow_the_next(tmp_path):
    append_label(tmp_path, LABEL)
    path = tmp_path / "labels.jsonl"
    with open(path, "ab") as fh:
        fh.write(b"\n")  # a blank line: nothing
        fh.write(json.dumps({**LABEL, "verdict": "maybe"}).encode() + b"\n")
        fh.write(b"\xff\xfe not utf-8\n")
        fh.write(b'{"id": "8", "category": "closed_qa", "model_a": "mo')  # a writer killed mid-line
    found = read_labels(tmp_path)
    assert len(found.labels) == 1
    assert [p.split(": ", 1)[0] for p in found.problems] == [f"{path} line 3", f"{path} line 4", f"{path} line 5"]
    assert "not a label" in found.problems[0] and "not UTF-8" in found.problems[1]
    assert "cut short" in found.problems[2]
    append_label(tmp_path, {**LABEL, "id": "9"})
    found = read_labels(tmp_path)
    assert [lab.id for lab in found.labels] == ["7", "9"]
    assert "line 5: not JSON" in found.problems[2]  # the fragment is now a whole bad line, the label after it whole
