"""Send a finished save path to every configured tracker. A tracker that refuses (a server down, a
store that cannot be written, a library error) is a warning naming it and why: the run's own files
are never touched (nothing here writes to the save path) and the run's exit code is what it was."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from ..savepath.log import RunLog
from . import mlflow_run, wandb_run
from .payload import build

SENDERS = {"mlflow": mlflow_run.send, "wandb": wandb_run.send}


def track(save_path: Path, trackers: dict[str, Any], *, status: str | None = None,
          log: Callable[[str], None] = print, warn: Callable[[str], None] = print) -> list[str]:
    """Each tracker's line (where the run went); a tracker that failed is warned about and left out."""
    if not trackers:
        return []
    payload = build(RunLog.read(save_path), status=status)
    done = []
    for name, opts in trackers.items():
        try:
            line = SENDERS[name](payload, opts)
        except Exception as exc:  # never lose or fail a finished run over its tracker
            warn(f"warning: track {name}: not logged ({type(exc).__name__}: {str(exc)[:300]}); the run's own "
                 f"files are intact in {save_path}; send it later with `eval.py track {save_path} --to {name}`")
            continue
        log(f"tracked: {line}")
        done.append(line)
    return done
