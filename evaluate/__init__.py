"""An evaluation pipeline for LLM answers: judges, automatic metrics, UniEval, RepEval, SAGEval.

Note: this top-level package is named `evaluate`, like Hugging Face's `evaluate` library; the two
cannot be installed in one environment. The project's Makefile uses its own virtual environment.
"""

from .core.version import __version__  # noqa: F401  (the one place it is set)
