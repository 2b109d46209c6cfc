"""Manifests: one run id formula, one list of package versions, one place that stamps the layout.

A run, a merge and each benchmark command build their manifest from `base_manifest` and write it
with `SaveDir.write_manifest` (`manifest.json` and `runs/<run_id>.json`)."""

from __future__ import annotations

import platform
import uuid
from datetime import datetime, timezone
from typing import Any

from ..core.clock import iso  # noqa: F401  (the one time format, re-exported for the save path's writers)
from ..core.version import __version__
from .layout import LAYOUT_VERSION

# the packages whose version can change a score, recorded in every manifest
PACKAGES = ("torch", "transformers", "sacrebleu", "rouge-score", "nltk", "jieba", "bert-score",
            "scikit-learn", "numpy", "openai", "matplotlib", "pyyaml")


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


def stamp_layout(manifest: dict[str, Any]) -> dict[str, Any]:
    """The manifest as written: with the save path's layout version."""
    manifest["layout"] = LAYOUT_VERSION
    return manifest
