"""Where a judge's replies are kept: the one rule for runs and benchmark commands alike.

`judge.cache: FILE` or `DIR/` (relative to the file that holds the `judge:` block), else the
environment variable EVAL_JUDGE_CACHE (a file or a folder), else the save path's own
judge_cache.sqlite; `judge.cache: false` keeps none. A folder gets judge_cache.sqlite inside it.
One cache may serve many save paths and runs at once (evaluate.backends.cache): the same request
to the same judge is paid for once, whichever run asked first.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable

from ..savepath.layout import judge_cache_file

JUDGE_CACHE_ENV = "EVAL_JUDGE_CACHE"
JUDGE_CACHE_FILE = "judge_cache.sqlite"


def cache_file(cache: bool | str, save_path: Path, resolve: Callable[[str], Path]) -> Path | None:
    """The cache file for a `judge.cache` value; `resolve` turns a written path into one relative to
    the file that wrote it."""
    if cache is False:
        return None
    if isinstance(cache, str):
        return _as_file(resolve(cache), cache)
    env = os.environ.get(JUDGE_CACHE_ENV, "").strip()
    if env:
        return _as_file(Path(env).expanduser().absolute(), env)
    return judge_cache_file(save_path)


def judge_cache_path(cfg: Any) -> Path | None:
    """A run config's cache file (cfg.judge.cache, cfg.resolve, cfg.save_path)."""
    return cache_file(cfg.judge.cache, cfg.save_path, cfg.resolve)


def relative_to(config: Path | None) -> Callable[[str], Path]:
    """A resolver for paths written in `config` (the current folder when there is no file)."""
    base = Path(config).parent if config is not None else Path(".")

    def resolve(written: str) -> Path:
        p = Path(written).expanduser()
        return p if p.is_absolute() else base / p

    return resolve


def _as_file(path: Path, written: str) -> Path:
    return path / JUDGE_CACHE_FILE if path.is_dir() or written.endswith(("/", os.sep)) else path
