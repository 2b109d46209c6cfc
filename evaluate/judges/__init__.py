"""LLM-judge evaluations: rating (with or without a reference) and battle.

Each layer knows one thing: prompts.py reads the prompt files and fills templates, parsing.py
turns replies into numbers (or says why not), rating.py / battle.py build requests and send them
through one `Backend.complete_many` call (dispatch.py). None of them knows which backend it talks
to; ranking several models from the battles is statistics (`evaluate.stats.bradley_terry`).
"""

from .battle import BattleItem, BattleJudge, BattleResult, OrderJudgment, battle, battle_all
from .parsing import parse_pair, parse_rating, score_from_top_logprobs
from .prompts import (BattlePrompt, EvaluationPrompts, PromptEntry, fill, load_battle_prompt,
                      load_evaluation_prompts)
from .rating import RatingJudge, rate

__all__ = [
    "BattleItem", "BattleJudge", "BattlePrompt", "BattleResult", "EvaluationPrompts",
    "OrderJudgment", "PromptEntry", "RatingJudge", "battle", "battle_all", "fill",
    "load_battle_prompt", "load_evaluation_prompts", "parse_pair", "parse_rating",
    "rank", "rate", "score_from_top_logprobs",
]
