"""The one clock format of the project's files: UTC, ISO 8601, to the second."""

from __future__ import annotations

from datetime import datetime, timezone


def utc_now() -> str:
    """Now, as manifests and stored records write it (2026-11-25T18:30:20+00:00)."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")
