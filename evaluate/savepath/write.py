"""The one writer of a save path, under the run log's door (`log.write_run_log` hands each record's
bytes here; no module outside this package calls these): every file goes through `write_bytes` (atomic: a
reader never sees half a file), but the lines appended to a benchmark's own judgment file
(`append_text`: FastChat appends, so a re-run keeps what was judged). Tests trace every write
under a save path back to this package."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, BinaryIO, Callable

from ..core import io as core_io
from .layout import server_log_file


def write_bytes(path: Path, data: bytes) -> Path:
    core_io.atomic_write_bytes(path, data)
    return Path(path)


def write_text(path: Path, text: str) -> Path:
    # surrogates (a lone "\ud800" from JSON input) cannot be encoded; written escaped, not a crash
    return write_bytes(path, text.encode("utf-8", errors="backslashreplace"))


def write_json(path: Path, data: Any) -> Path:
    return write_text(path, json.dumps(core_io.clean_json(data), ensure_ascii=False, indent=2,
                                       default=core_io.json_default) + "\n")


def write_figure(path: Path, fig: Any, **savefig_kwargs: Any) -> Path:
    """A matplotlib figure as PNG, through the one writer."""
    import io

    buf = io.BytesIO()
    fig.savefig(buf, format="png", **savefig_kwargs)
    return write_bytes(path, buf.getvalue())


def append_text(path: Path, text: str) -> Path:
    """Append whole lines to a file (created with its folder when absent), as FastChat appends its
    judgment files; a file that does not end in a line break gets one first, so a line cut short by an
    earlier crash stays on its own line."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    lead = ""
    if path.exists() and path.stat().st_size:
        with open(path, "rb") as fh:
            fh.seek(-1, 2)
            lead = "" if fh.read(1) == b"\n" else "\n"
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(lead + text)
    return path


def copy_file(source: Path, path: Path) -> Path:
    """A file's bytes under a new name in the save path (a benchmark's answer file kept beside its judgments)."""
    return write_bytes(path, Path(source).read_bytes())


def open_log(path: Path) -> BinaryIO:
    """A log another process writes as it goes (a server's output): opened for appending, the one
    file of a save path that is not written atomically (it is read while it grows)."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    return open(path, "ab")


def server_logs(root: Path) -> Callable[[str], BinaryIO]:
    """Where the servers a run starts write their output: `logs/<name>.log` of the save path `root`."""
    return lambda name: open_log(server_log_file(root, name))
