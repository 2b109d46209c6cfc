"""The one clock format of the project's files: UTC, ISO 8601, to the second."""

from __future__ import annotations

from datetime import datetime, timezone


def iso(t: float | None = None) -> str:
    """A time (a POSIX timestamp, now by default) as manifests and stored records write it
    (2026-11-25T18:30:20+00:00)."""
    when = datetime.now(timezone.utc) if t is None else datetime.fromtimestamp(t, timezone.utc)
    return when.isoformat(timespec="seconds")


def utc_now() -> str:
    """Now, in the one format (`iso`)."""
    return iso()
