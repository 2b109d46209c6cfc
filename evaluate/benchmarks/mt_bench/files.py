"""FastChat's judgment files (`model_judgment/<judge>_single.jsonl`, `<judge>_pair.jsonl`) and the
tables its show_result.py prints from them.

Rows are written in FastChat's schema, so FastChat's own show_result.py reads them, and rows FastChat
wrote are read here. An invalid judgment is written as FastChat writes it (score -1, winner
"error"), so show_result.py leaves it out as it leaves out its own. A judge call that *failed*
(no reply) is not written at all: a re-run asks again instead of keeping a hole.

Append-safe: rows are appended one line each, and a match whose row is already there (same judge,
prompt, question, model(s) and turn; a pair in either order) is not judged again.

The tables follow show_result.py over the whole file, as it reads it: single, the mean score per
model for turn 1, turn 2 and both pooled, rows with score -1 left out; pairwise, rows with an
"error" game left out, a pair counted as a tie when its first game is a tie or the two games
disagree, win rate adjusted = (win + 0.5 tie) / (win + loss + tie), and with a baseline only the
rows that include it, the baseline itself not listed.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Iterable, Sequence

from ...core.errors import InputError
from ...core.io import read_jsonl
from ...core.options import short
from ...core.io import safe_name
from ...savepath.log import write_run_log
from .records import MtBenchJudgments
from ..folders import model_judgment_dir
from .judge import SCALE, Game, PairJudgment, SingleJudgment, outside


def judgment_file(root: Path, judge_model: str, mode: str) -> Path:
    """FastChat's `model_judgment/<judge>_single.jsonl` / `<judge>_pair.jsonl` (the name made file-safe)."""
    suffix = "single" if mode == "single" else "pair"
    return model_judgment_dir(root) / f"{safe_name(judge_model)}_{suffix}.jsonl"


def summary_file(root: Path) -> Path:
    """An MT-bench run's counts, file hashes and tables (`mt_bench_summary.json`)."""
    return Path(root) / "mt_bench_summary.json"

INVALID_SCORE = -1
ERROR = "error"


def single_row(j: SingleJudgment, judge: str) -> dict[str, Any]:
    return {"question_id": j.question_id, "model": j.model, "judge": [judge, j.prompt_name],
            "user_prompt": j.game.user_prompt, "judgment": j.game.judgment,
            "score": _file_score(j), "turn": j.turn, "tstamp": time.time()}


def _file_score(j: SingleJudgment) -> float:
    """What FastChat's gen_judgment.py writes: its own reading (an out-of-scale rating included), -1 for none."""
    for value in (j.score, j.fastchat_score):
        if value is not None:
            return value
    return INVALID_SCORE


def pair_row(j: PairJudgment, judge: str) -> dict[str, Any]:
    return {"question_id": j.question_id, "model_1": j.model_1, "model_2": j.model_2,
            "g1_winner": j.g1_winner or ERROR, "g2_winner": j.g2_winner or ERROR, "judge": [judge, j.prompt_name],
            "g1_user_prompt": j.g1.user_prompt, "g1_judgment": j.g1.judgment,
            "g2_user_prompt": j.g2.user_prompt, "g2_judgment": j.g2.judgment, "turn": j.turn, "tstamp": time.time()}


def append_rows(path: Path, rows: Iterable[dict[str, Any]]) -> int:
    """Append rows (one JSON line each, as FastChat writes them); returns how many."""
    rows = list(rows)
    if not rows:
        return 0
    write_run_log(Path(path).parent, [MtBenchJudgments(rows=rows, file=Path(Path(path).name))])
    return len(rows)


_SINGLE_KEYS = ("question_id", "model", "judge", "score", "judgment")
_PAIR_KEYS = ("question_id", "model_1", "model_2", "g1_winner", "g2_winner", "judge", "g1_judgment", "g2_judgment")


def read_rows(path: Path, kind: str) -> list[tuple[int, dict[str, Any]]]:
    """The rows of a judgment file ([] when there is none), each checked for what the tables need."""
    path = Path(path)
    if not path.exists():
        return []
    keys = _SINGLE_KEYS if kind == "single" else _PAIR_KEYS
    rows = read_jsonl(path, "judgment")
    for n, row in rows:
        if not isinstance(row, dict):
            raise InputError(f"{path}: line {n}: expected a JSON object, got {short(row)}")
        missing = [k for k in keys if k not in row]
        if missing:
            raise InputError(f"{path}: line {n}: not a FastChat {kind} judgment row: no {', '.join(missing)}")
        judge = row["judge"]
        if not (isinstance(judge, list) and len(judge) == 2 and all(isinstance(x, str) for x in judge)):
            raise InputError(f"{path}: line {n}: judge must be [judge model, prompt name], got {short(judge)}")
        if kind == "single" and (isinstance(row["score"], bool) or not isinstance(row["score"], (int, float))):
            raise InputError(f"{path}: line {n}: score must be a number, got {short(row['score'])}")
    return rows


def single_key(judge: str, prompt: str, qid: Any, model: str, turn: int) -> tuple:
    return (judge, prompt, qid, model, int(turn))


def pair_key(judge: str, prompt: str, qid: Any, m1: str, m2: str, turn: int) -> tuple:
    return (judge, prompt, qid, frozenset((m1, m2)), int(turn))


def index_single(rows: Sequence[tuple[int, dict[str, Any]]]) -> dict[tuple, dict[str, Any]]:
    """Existing rows by match; a row written twice counts once here (the first one)."""
    out: dict[tuple, dict[str, Any]] = {}
    for _, r in rows:
        out.setdefault(single_key(r["judge"][0], r["judge"][1], r["question_id"], r["model"], r.get("turn", 1)), r)
    return out


def index_pairs(rows: Sequence[tuple[int, dict[str, Any]]]) -> dict[tuple, dict[str, Any]]:
    out: dict[tuple, dict[str, Any]] = {}
    for _, r in rows:
        key = pair_key(r["judge"][0], r["judge"][1], r["question_id"], r["model_1"], r["model_2"], r.get("turn", 1))
        out.setdefault(key, r)
    return out


def single_from_row(row: dict[str, Any], category: str, system_prompt: str,
                    scale: tuple[float, float] = SCALE) -> SingleJudgment:
    score = row["score"]
    game = Game(system_prompt, row.get("user_prompt", ""), judgment=row["judgment"] or "")
    read = None
    if score == INVALID_SCORE:
        game.reason = "score -1 in the judgment file (FastChat's unreadable reply)"
        score = None
    elif outside(score, scale):
        game.reason, read, score = outside(score, scale), score, None
    return SingleJudgment(row["question_id"], category, row["model"], int(row.get("turn", 1)), row["judge"][1], game,
                          score, reused=True, fastchat_score=read)


def pair_from_row(row: dict[str, Any], category: str, system_prompt: str) -> PairJudgment:
    games = []
    for g in ("g1", "g2"):
        game = Game(system_prompt, row.get(f"{g}_user_prompt", ""), judgment=row[f"{g}_judgment"] or "")
        if row[f"{g}_winner"] == ERROR:
            game.reason = "winner \"error\" in the judgment file"
        games.append(game)
    w1, w2 = (None if row[k] == ERROR else row[k] for k in ("g1_winner", "g2_winner"))
    return PairJudgment(row["question_id"], category, row["model_1"], row["model_2"], int(row.get("turn", 1)),
                        row["judge"][1], games[0], games[1], w1, w2, reused=True)


# ------------------------------------------------------------------ show_result.py's tables
def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


def single_table(rows: Iterable[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """{"turn_1" | "turn_2" | "average": [{model, score, n}] best first}, score -1 left out."""
    by: dict[str, dict[str, list[float]]] = {"turn_1": {}, "turn_2": {}, "average": {}}
    for r in rows:
        score = r["score"]
        if score == INVALID_SCORE or score is None:
            continue
        turn = r.get("turn")
        if turn in (1, 2):
            by[f"turn_{turn}"].setdefault(r["model"], []).append(score)
        by["average"].setdefault(r["model"], []).append(score)
    return {name: sorted(({"model": m, "score": _mean(v), "n": len(v)} for m, v in table.items()),
                         key=lambda d: -d["score"])
            for name, table in by.items()}


def pairwise_table(rows: Iterable[dict[str, Any]], baseline: str | None) -> list[dict[str, Any]]:
    """[{model, win, loss, tie, win_rate, loss_rate, win_rate_adjusted}] best first."""
    counts: dict[str, dict[str, int]] = {}

    def add(model: str, outcome: str) -> None:
        counts.setdefault(model, {"win": 0, "loss": 0, "tie": 0})[outcome] += 1

    for r in rows:
        g1, g2 = r["g1_winner"], r["g2_winner"]
        if g1 == ERROR or g2 == ERROR:
            continue
        m1, m2 = r["model_1"], r["model_2"]
        if baseline is not None and baseline not in (m1, m2):
            continue
        if g1 == "tie" or g1 != g2:
            add(m1, "tie")
            add(m2, "tie")
        else:
            winner, loser = (m1, m2) if g1 == "model_1" else (m2, m1)
            add(winner, "win")
            add(loser, "loss")
    out = []
    for model, c in counts.items():
        if model == baseline:
            continue
        total = c["win"] + c["loss"] + c["tie"]
        out.append({"model": model, **c, "win_rate": c["win"] / total, "loss_rate": c["loss"] / total,
                    "win_rate_adjusted": (c["win"] + 0.5 * c["tie"]) / total})
    return sorted(out, key=lambda d: -d["win_rate_adjusted"])
