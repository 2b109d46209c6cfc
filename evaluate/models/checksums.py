"""Where converted models live, and the sha256 checks of weight files (remembered per path, size
and mtime so a file is not hashed again each run)."""

from __future__ import annotations


import hashlib
import json
import shutil
import threading
import time
from pathlib import Path

from ..core.errors import InputError
from ..core.io import atomic_write_text
from ..core.places import cache_dir


# --------------------------------------------------------------------------- cache dir and hashing

_HASH_LOCK = threading.Lock()


def _hash_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 22), b""):
            h.update(block)
    return h.hexdigest()


def file_sha256(path: Path) -> str:
    """sha256 of a file, remembered in ``<cache>/sha256.json`` under (size, mtime) so that a
    verified 1 GB file costs a stat, not a re-read, on the next run."""
    path = Path(path).resolve()
    st = path.stat()
    index_path = cache_dir() / "sha256.json"
    key = str(path)
    with _HASH_LOCK:
        try:
            index = json.loads(index_path.read_text())
        except (OSError, ValueError):
            index = {}
        hit = index.get(key)
        if hit and hit.get("size") == st.st_size and hit.get("mtime_ns") == st.st_mtime_ns:
            return hit["sha256"]
        digest = _hash_file(path)
        index[key] = {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": digest}
        atomic_write_text(index_path, json.dumps(index, indent=1, sort_keys=True))
        return digest


def verify_sha256(path: Path, expected: str, what: str) -> str:
    got = file_sha256(path)
    if got != expected.lower():
        raise InputError(
            f"{path}: sha256 mismatch for {what}: expected {expected}, got {got}. "
            "The file is corrupt or not the pinned version; reinstall it."
        )
    return got


_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth")


def folder_sha256(folder: Path) -> str:
    """One hash for a folder's weights: sha256 over the sorted "name:sha256" lines of its weight files."""
    files = sorted(p for p in Path(folder).rglob("*") if p.is_file() and p.suffix in _WEIGHT_SUFFIXES)
    if not files:
        raise InputError(f"{folder}: no weight files ({', '.join(_WEIGHT_SUFFIXES)}) in this model folder")
    lines = "".join(f"{p.relative_to(folder).as_posix()}:{file_sha256(p)}\n" for p in files)
    return hashlib.sha256(lines.encode()).hexdigest()


def _sweep_stale(parent: Path, pattern: str, max_age_s: float = 6 * 3600) -> None:
    """Remove temp files/folders that a killed run left behind (old enough not to be in use)."""
    for p in parent.glob(pattern) if parent.is_dir() else ():
        try:
            if time.time() - p.stat().st_mtime > max_age_s:
                shutil.rmtree(p, ignore_errors=True) if p.is_dir() else p.unlink()
        except OSError:
            pass


