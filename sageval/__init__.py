"""SAGEval: reference-free evaluation of open-ended text (lists, surveys, forms, quizzes) by two
agents (Ghosh et al., "SAGEval"). An evaluator agent scores each aspect G-Eval style; the SAGE
meta-evaluator reads the item and those scores and rectifies them, proposes better aspect
definitions and names aspects the given ones miss.

Aspects and both agents' prompts are data (`aspects.json`, `prompts.json`); the judges are any
`evaluate.backends.base.Backend`.
"""

from .aspects import Aspect, load_aspects, normalise_name, resolve_aspects, validate_aspects
from .parsing import NewAspect, ParsedReply, extract_json_object, parse_evaluator_reply, parse_sage_reply
from .prompts import Prompts, fill, load_prompts
from .result import EVALUATOR_SUFFIX, AgentJudgement, SageItem, SageResult
from .run import run_sage

__all__ = [
    "Aspect", "AgentJudgement", "EVALUATOR_SUFFIX", "NewAspect", "ParsedReply", "Prompts", "SageItem",
    "SageResult", "extract_json_object", "fill", "load_aspects", "load_prompts", "normalise_name",
    "parse_evaluator_reply", "parse_sage_reply", "resolve_aspects", "run_sage", "validate_aspects",
]
