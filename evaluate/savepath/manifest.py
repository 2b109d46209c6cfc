"""Manifests: one builder, one run id formula, one list of package versions, one place that stamps
the layout.

Every manifest a save path holds (a run's, a merge's, each benchmark command's, a generation's) is
made by `new_manifest`, so each has the same keys (`HEADER_KEYS`, and `plan` where there is one): a
reader (the report, `eval.py summary`, the gates, the API, the viewer) finds a run's id, status,
times, versions, models, usage and errors in the same place whatever made it. What only one kind of
run knows (a merge's shards, a benchmark's block, a run's invalid counts) comes after them. A run, a
merge and a benchmark write it through `SaveDir.write_manifest` (`manifest.json` and
`runs/<run_id>.json`, stamped with the layout); generation beside its answer file."""

from __future__ import annotations

import platform
import sys
import uuid
from datetime import datetime, timezone
from typing import Any

from ..core.clock import iso  # noqa: F401  (the one time format, re-exported for the save path's writers)
from ..core.secrets import scrub_argv
from ..core.version import __version__
from .layout import LAYOUT_VERSION

# the packages whose version can change a score, recorded in every manifest
PACKAGES = ("torch", "transformers", "sacrebleu", "rouge-score", "nltk", "jieba", "bert-score",
            "scikit-learn", "numpy", "openai", "matplotlib", "pyyaml")

# the keys of every manifest, in this order (and `plan` after `models` where there is one; `layout` is
# stamped when it is written)
HEADER_KEYS = ("run_id", "status", "config", "config_hash", "config_file", "argv", "versions", "started",
               "finished", "models", "errors", "usage")


def new_run_id(tag: str = "") -> str:
    """`<UTC time>-<6 hex>` (`<UTC time>-<tag>-<6 hex>` with a tag, e.g. "merge")."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    return f"{stamp}-{tag + '-' if tag else ''}{uuid.uuid4().hex[:6]}"


def versions() -> dict[str, str]:
    """Python's, the project's and every installed package of PACKAGES."""
    from importlib import metadata

    out = {"python": platform.python_version(), "evaluate": __version__}
    for pkg in PACKAGES:
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            pass
    return out


def new_manifest(*, run_id: str | None = None, tag: str = "", status: str = "running",
                 config: dict[str, Any] | None = None, config_hash: str | None = None,
                 config_file: str | None = None, started: str | None = None, finished: str | None = None,
                 models: list[dict[str, Any]] | None = None, plan: dict[str, Any] | None = None,
                 errors: list[dict[str, Any]] | None = None, usage: dict[str, Any] | None = None,
                 first: dict[str, Any] | None = None, **rest: Any) -> dict[str, Any]:
    """A manifest with every key of HEADER_KEYS (a new run id when none is given; this process's argv,
    secrets scrubbed; the package versions), `plan` after `models` when given, `first` (what says what
    made it: a benchmark's name, a merge's shards) after `status`, and `rest` after them all.

    `models`: one entry per model, each at least {"name"}; `errors`: {"error", and where: "model",
    "category", "family", "shard"}; `usage`: the judge's (or the generating model's) requests, tokens
    and cost by family."""
    out: dict[str, Any] = {"run_id": run_id or new_run_id(tag), "status": status, **(first or {}),
                           "config": config if config is not None else {}, "config_hash": config_hash,
                           "config_file": config_file, "argv": scrub_argv(sys.argv), "versions": versions(),
                           "started": started, "finished": finished, "models": list(models or [])}
    if plan is not None:
        out["plan"] = plan
    out["errors"] = list(errors or [])
    out["usage"] = dict(usage or {})
    out.update(rest)
    return out


def model_entry(name: str, answer_file: Any = None, records: int | None = None, **more: Any) -> dict[str, Any]:
    """One model of a manifest: its name, the file its answers came from and how many records it has."""
    return {"name": name, "answer_file": None if answer_file is None else str(answer_file), "records": records,
            **more}


def model_names(manifest: dict[str, Any] | None) -> list[str]:
    """The names of a manifest's models (entries {"name", ...}; a merge of layout 1 wrote bare names)."""
    out = []
    for m in (manifest or {}).get("models") or []:
        name = m.get("name") if isinstance(m, dict) else m if isinstance(m, str) else None
        if name:
            out.append(str(name))
    return out


def stamp_layout(manifest: dict[str, Any]) -> dict[str, Any]:
    """The manifest as written: with the save path's layout version."""
    manifest["layout"] = LAYOUT_VERSION
    return manifest
