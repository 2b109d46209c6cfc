"""RepEval: text quality from the hidden states of a decoder-only LLM (Sheng et al.).

A direction along which quality varies is learned from K (good, bad) pairs; new text is scored
by projecting its representation on it.
"""

__version__ = "0.1.0"

from .estimator import RepEval  # noqa: E402
from .extract import extract_hidden_states, truncated_layers  # noqa: E402
from .pairs import Pair  # noqa: E402

__all__ = ["RepEval", "Pair", "extract_hidden_states", "truncated_layers", "__version__"]
