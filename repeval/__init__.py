"""RepEval: text quality from the hidden states of a decoder-only LLM (Sheng et al.).

A direction along which quality varies is learned from K (good, bad) pairs; new text is scored
by projecting its representation on it.
"""

from .estimator import RepEval
from .extract import extract_hidden_states, truncated_layers
from .pairs import Pair
from .version import __version__

__all__ = ["RepEval", "Pair", "extract_hidden_states", "truncated_layers", "__version__"]
