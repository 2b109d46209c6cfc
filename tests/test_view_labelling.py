"""`eval.py view`'s labels for issue 44, over HTTP to the real server: Label next hands out the save path's
label queue (`GET /api/next`), a label of a handed-out item is on the queue and one of an item the person
chose is off it (the server decides, whatever the page sends), every label carries its annotator
("anonymous" by default), a person's score on a GPT metric is a rating label on that metric's scale, the
label-corrected verdicts come from `GET /api/corrected` and with every label stored; a label that does
not fit the run is 400 naming its field, and nothing is stored."""

from __future__ import annotations

import json
from urllib.parse import quote

import pytest

from evaluate.judgecheck.corrected import corrected
from evaluate.savepath.labels import read_labels, read_queues

try:
    from tests import view_fixtures as vf
    from tests.fake_openai_server import FakeOpenAIServer
except ImportError:
    import view_fixtures as vf
    from fake_openai_server import FakeOpenAIServer


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """The battle run of tests/view_fixtures.py (three models, GPT ratings and battles in both orders)."""
    root = tmp_path_factory.mktemp("view-labelling") / "root"
    root.mkdir()
    with FakeOpenAIServer() as server:
        save = vf.battle_run(root, server)
    view = vf.start_view(root)
    rid = view.json("/api/runs")["runs"][0]["rid"]
    info = view.json(f"/api/run?run={quote(rid, safe='')}")
    yield {"view": view, "save": save, "rid": rid, "info": info}
    view.stop()


def nxt(world, **params) -> dict:
    q = "&".join(f"{k}={quote(str(v), safe='')}" for k, v in {"run": world["rid"], **params}.items())
    return world["view"].json(f"/api/next?{q}")


def lines(world) -> list[dict]:
    path = world["save"] / "labels.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def test_label_next_hands_out_the_queue_and_its_labels_are_on_it(world):
    view, rid, models = world["view"], world["rid"], world["info"]["models"]
    first = nxt(world, annotator="ann")["unit"]
    queue = read_queues(world["save"])
    assert len(queue) == 1
    (q,) = queue.values()
    assert q.kind == "battle" and q.design == "uniform" and 0 in q.handed  # the first draw, handed to ann
    unit = q.units[q.draws[0]]
    assert [first["id"], first["category"], first["model_a"], first["model_b"]] == unit
    assert first["pair"] == [models.index(unit[2]), models.index(unit[3])] and first["draw"] == 0
    assert first["p"] == pytest.approx(1 / len(q.units))
    status, d = view.post("/api/labels", {"run": rid, "id": first["id"], "pair": first["pair"], "verdict": "A",
                                          "annotator": "ann"})
    assert status == 200, d
    assert d["label"]["annotator"] == "ann" and d["label"]["queue"]["draw"] == 0
    assert d["label"]["queue"]["seed"] == q.seed and d["label"]["verdict_here"] == "A"
    pair = next(p for p in d["corrected"]["pairs"] if {p["model_a"], p["model_b"]} == {unit[2], unit[3]})
    assert pair["labels_used"] == 1
    assert d["corrected"] == view.json(f"/api/corrected?run={quote(rid, safe='')}")  # the same, by either road
    # the next one for ann is another draw; bob walks the same sequence from its start
    second = nxt(world, annotator="ann")["unit"]
    assert second["draw"] == 1 and (second["id"], second["pair"]) != (first["id"], first["pair"])
    assert nxt(world, annotator="bob")["unit"]["draw"] == 0


def test_a_label_the_queue_did_not_hand_out_is_off_it_whatever_the_page_sends(world):
    view, rid, models = world["view"], world["rid"], world["info"]["models"]
    q = next(iter(read_queues(world["save"]).values()))
    handed = {tuple(q.units[q.draws[d]]) for d in q.handed}
    chosen = next(u for u in q.units if tuple(u) not in handed)
    body = {"run": rid, "id": chosen[0], "pair": [models.index(chosen[2]), models.index(chosen[3])], "verdict": "B",
            "annotator": "carol", "queue": {"seed": q.seed, "design": "uniform", "draw": 5, "p": 0.5}}
    status, d = view.post("/api/labels", body)
    assert status == 200 and d["label"]["queue"] is None and lines(world)[-1]["queue"] is None
    pair = next(p for p in d["corrected"]["pairs"] if {p["model_a"], p["model_b"]} == {chosen[2], chosen[3]})
    assert json.dumps(pair["left_out"]).count("off the queue") == 1


def test_a_label_without_a_name_is_anonymous(world):
    view, rid = world["view"], world["rid"]
    status, d = view.post("/api/labels", {"run": rid, "id": world_ids(world)[0], "pair": [0, 1], "verdict": "tie"})
    assert status == 200 and d["label"]["annotator"] == "anonymous" == lines(world)[-1]["annotator"]
    status, d = view.post("/api/labels", {"run": rid, "id": world_ids(world)[0], "pair": [0, 1], "verdict": "tie",
                                          "annotator": "   "})
    assert status == 200 and d["label"]["annotator"] == "anonymous"


def world_ids(world) -> list[str]:
    return world["view"].json(f"/api/items?run={quote(world['rid'], safe='')}&limit=500")["ids"]


def gpt_key(world) -> tuple[str, list[float]]:
    scales = world["info"]["scales"]
    key = next(k for k in world["info"]["keys"] if k.startswith("GPT/") and scales.get(k))
    return key, scales[key]


def test_a_score_on_a_gpt_metric_is_a_rating_label_on_its_scale(world):
    view, rid = world["view"], world["rid"]
    key, scale = gpt_key(world)
    assert scale == [1, 5]
    unit = nxt(world, annotator="ann", kind="rating", metric=key)["unit"]
    assert unit["kind"] == "rating" and unit["metric"] == key.split("/", 1)[1]
    assert world["info"]["models"][unit["model_index"]] == unit["model"]
    status, d = view.post("/api/labels", {"kind": "rating", "run": rid, "id": unit["id"], "model": unit["model_index"],
                                          "metric": key, "score": 4, "annotator": "ann"})
    assert status == 200, d
    stored = read_labels(world["save"]).ratings[-1]
    assert (stored.id, stored.model, stored.metric, stored.score, stored.annotator) == (
        unit["id"], unit["model"], key.split("/", 1)[1], 4.0, "ann")
    assert stored.queue is not None and stored.queue.kind == "rating" and stored.queue.draw == unit["draw"]
    item = view.json(f"/api/item?run={quote(rid, safe='')}&id={quote(unit['id'], safe='')}")
    assert [(r["model"], r["score"]) for r in item["ratings"]] == [(unit["model"], 4.0)]
    assert any(r.get("model") == unit["model"] and r["labels_used"] == 1
               for r in d["corrected"]["ratings"] if "difference" not in r)


@pytest.mark.parametrize("change, field", [
    ({"verdict": "C"}, '"verdict"'),
    ({"verdict": None}, '"verdict"'),
    ({"annotator": 7}, '"annotator"'),
    ({"annotator": "x" * 501}, '"annotator"'),
    ({"pair": [0, 9]}, "pair"),
    ({"note": "x" * 2001}, '"note"'),
    ({"kind": "rating", "model": 0, "metric": "GPT/nonsense", "score": 3}, '"metric"'),
    ({"kind": "rating", "model": 0, "metric": "GPT", "score": 6}, '"score"'),
    ({"kind": "rating", "model": 0, "metric": "GPT", "score": 0}, '"score"'),
    ({"kind": "rating", "model": 0, "metric": "GPT", "score": "4"}, '"score"'),
    ({"kind": "rating", "model": 0, "metric": "GPT", "score": True}, '"score"'),
    ({"kind": "rating", "model": "nobody", "metric": "GPT", "score": 3}, '"model"'),
    ({"kind": "rating", "model": 17, "metric": "GPT", "score": 3}, '"model"'),
])
def test_a_label_that_does_not_fit_the_run_is_400_naming_its_field_and_nothing_is_stored(world, change, field):
    view, rid = world["view"], world["rid"]
    key, _ = gpt_key(world)
    change = {k: (key if v == "GPT" else v) for k, v in change.items()}
    before = (world["save"] / "labels.jsonl").read_bytes() if (world["save"] / "labels.jsonl").exists() else b""
    body = {"run": rid, "id": world_ids(world)[0], "pair": [0, 1], "verdict": "A", **change}
    status, d = view.post("/api/labels", body)
    assert status == 400 and field in d["error"], d
    after = (world["save"] / "labels.jsonl").read_bytes() if (world["save"] / "labels.jsonl").exists() else b""
    assert after == before


@pytest.mark.parametrize("params, field", [
    ({"design": "greedy"}, '"design"'), ({"kind": "vote"}, '"kind"'), ({"seed": "x"}, '"seed"'),
    ({"kind": "rating", "metric": "GPT/nonsense"}, '"metric"'), ({"annotator": "y" * 501}, '"annotator"')])
def test_label_next_with_a_bad_parameter_is_400_naming_it(world, params, field):
    q = "&".join(f"{k}={quote(v, safe='')}" for k, v in {"run": world["rid"], **params}.items())
    status, body, _ = world["view"].get(f"/api/next?{q}")
    assert status == 400 and field in json.loads(body)["error"]


def test_the_new_routes_need_the_token(world):
    rid = quote(world["rid"], safe="")
    for path in (f"/api/next?run={rid}", f"/api/corrected?run={rid}"):
        status, _, _ = world["view"].get(path, token="wrong")
        assert status == 403
    before = len(read_queues(world["save"]))
    status, _, _ = world["view"].get(f"/api/next?run={rid}&seed=99", token="wrong")
    assert status == 403 and len(read_queues(world["save"])) == before  # no queue made without the token


def test_the_panel_s_figures_are_the_data_layer_s(world):
    """What the viewer serves is `judgecheck.corrected` of the save path, not a figure of its own."""
    served = world["view"].json(f"/api/corrected?run={quote(world['rid'], safe='')}")
    assert served == json.loads(json.dumps(corrected(world["save"]), default=str))


def test_a_score_on_an_answer_the_judge_did_not_score_is_400(world):
    """open_qa has no GPT metric in this run: a score there has no judge score to correct (as `eval.py label`)."""
    view, rid = world["view"], world["rid"]
    key, _ = gpt_key(world)
    rows = view.json(f"/api/items?run={quote(rid, safe='')}&cat=open_qa&limit=5")["rows"]
    before = read_labels(world["save"]).ratings
    status, d = view.post("/api/labels", {"kind": "rating", "run": rid, "id": rows[0]["id"], "model": 0,
                                          "metric": key, "score": 3})
    assert status == 400 and '"metric"' in d["error"] and "no judge score" in d["error"]
    assert read_labels(world["save"]).ratings == before


def test_every_label_rewrites_the_save_path_s_corrected_file(world):
    from evaluate.savepath.layout import corrected_file

    view, rid = world["view"], world["rid"]
    status, d = view.post("/api/labels", {"run": rid, "id": world_ids(world)[1], "pair": [0, 2], "verdict": "B",
                                          "annotator": "dan"})
    assert status == 200
    assert json.loads(corrected_file(world["save"]).read_text()) == d["corrected"]
    assert "dan" in d["corrected"]["annotators"]["names"]
