"""Where the tool finds the files it ships and keeps the files it makes, installed or in a checkout.

Everything a run reads by default ships inside the package (the project's prompts, the report's
templates, the viewer's page, the JSON data of the evaluators), so `pip install` and `llm-eval` from
any folder work as `python eval.py` in the checkout does. What the tool makes for later runs (converted
model weights, their checksums, a local judge's measured speed) goes to a cache folder of the user's,
never into the installed package (site-packages may be read-only, and is replaced by an upgrade).
"""

from __future__ import annotations

import os
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1]  # the `evaluate` package's folder
PROMPTS = PACKAGE / "prompts"  # the project's battle and evaluation prompts, en and cn
CACHE_ENV = "EVAL_CACHE_DIR"  # the folder for converted weights and what is remembered about them
APP = "llm-eval"


def checkout() -> Path | None:
    """The source checkout this package runs from (its eval.py and pyproject.toml beside the package), or
    None when it is installed (a wheel in site-packages)."""
    root = PACKAGE.parent
    return root if (root / "eval.py").is_file() and (root / "pyproject.toml").is_file() else None


def cache_dir() -> Path:
    """Converted weights, weight checksums and measured judge speeds: $EVAL_CACHE_DIR; else a checkout's own
    `.cache/models` (where `make demo` put them); else the user's cache folder, `$XDG_CACHE_HOME/llm-eval/models`
    (by default `~/.cache/llm-eval/models`)."""
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env).expanduser().resolve()
    root = checkout()
    if root is not None:
        return root / ".cache" / "models"
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base).expanduser().resolve() / APP / "models"
