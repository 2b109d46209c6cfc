"""AlpacaEval's own files in a save path, as records of the run log (`evaluate.savepath.records`):
`<model>/<annotator>/annotations.json` and `judge_run.json` beside it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from ...savepath.records import BenchmarkFile, BenchmarkRows, register_record


@register_record
@dataclass
class AlpacaEvalAnnotations(BenchmarkRows):
    """<model>/<annotator>/annotations.json: AlpacaEval's annotations, one object per instruction."""

    kind: ClassVar[str] = "alpaca_eval_annotations"


@register_record
@dataclass
class AlpacaEvalJudgeRun(BenchmarkFile):
    """<model>/<annotator>/judge_run.json: how the annotations were made (baseline, judge, seed, the
    evaluator's signature) and their win rates."""

    kind: ClassVar[str] = "alpaca_eval_judge_run"
    model: str = ""
    evaluator: dict[str, Any] | None = None
    win_rate: dict[str, Any] | None = None
