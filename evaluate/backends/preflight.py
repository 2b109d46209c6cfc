"""Before a judge or a model under test is opened: the model a backend loads in this process, found
and checked, so that a new user's checkpoint folder without a tokenizer or a chat template, or a
relative path that names nothing, stops at once with exit 2 instead of after the weights have loaded.

Only a backend whose weights are read on this machine is checked (a model in this process, or a
server the tool starts for it: its capabilities say which): for a server the user names, `model` is
the name that server knows, which may look like a path (`vllm serve ./ckpt` serves "./ckpt").
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence


def loads_weights(opts: Any) -> bool:
    """Whether `opts.model` is read on this machine, by this process or a server it starts (a packaged
    name, a folder or a .gguf on disk, or a hub id)."""
    from .registry import capabilities

    if getattr(opts, "backend", None) is None:
        return False
    return capabilities(opts).loads_weights


def check_model(opts: Any, bases: Sequence[Path | None], where: str) -> None:
    """`opts.model` located against `bases` (the folder of the file that names it first, then the current
    directory), made absolute, and its folder's files checked (evaluate.models.load.preflight); `opts`
    is changed in place. InputError naming `where` (e.g. "run.yaml: judge.model")."""
    if not loads_weights(opts) or not opts.model:
        return
    from ..models.load import preflight

    folders = [Path(b) for b in bases if b is not None] + [Path.cwd()]
    opts.model = preflight(opts.model, folders, where, chat=True)
