"""The project's version, in a leaf module: anything may import it without importing the package
root (which also holds the command line); and the name the user started the tool by."""

from __future__ import annotations

import os
import sys
from pathlib import Path

__version__ = "0.1.0"

SCRIPT = "eval.py"  # the checkout's script; the name the messages and docs use
CONSOLE = "llm-eval"  # the console script `pip install` makes (pyproject.toml's [project.scripts])


def program(argv0: str | None = None) -> str:
    """How the tool was started, for --version, the help and usage lines: `llm-eval` (the console script),
    `python -m evaluate`, else `eval.py`."""
    path = Path(argv0 if argv0 is not None else (sys.argv[0] if sys.argv else ""))
    stem = path.name.lower().removesuffix(".exe").removesuffix("-script.py")
    if stem == CONSOLE:
        return CONSOLE
    if path.name == "__main__.py" and os.path.basename(os.path.dirname(os.path.abspath(path))) == "evaluate":
        return "python -m evaluate"
    return SCRIPT
