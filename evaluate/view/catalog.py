"""The runs the viewer serves: the save paths found under the folders it was given, each named by a
run id `<folder index>:<path below that folder>`, and the runs opened so far (cached).

Why the checks here: the run id comes from the browser. A run id is served only when it names a save
path that discovery listed: its path has no `..`, is not absolute, resolves (links followed) inside its
folder, and no file of it is a link leading out of the folders given. Anything else is refused the same
way, however it was spelled (`..`, `%2e%2e`, `%2f`, a link).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from ..core.errors import InputError
from ..savepath.labels import Label
from . import data
from .items import RunView, label_key

CACHED_RUNS = 4  # runs kept loaded; the least recently opened one is dropped first ...
CACHED_ITEMS = 40_000  # ... and while the runs kept hold more items (x models) than this, but the one in use
CACHED_COMPARISONS = 32


def build_quietly(path: Path) -> RunView:
    """Read and index a run with the cyclic garbage collector paused, then leave what was read out of its
    later passes (gc.freeze). A run's JSON is millions of containers and no cycle: with the collector on,
    reading 10,000 items x 3 models took 2.0 s instead of 0.6-0.9 s on the development machine, and each
    later full pass over them (0.4 s) would stall whichever request it fell on."""
    import gc

    was = gc.isenabled()
    gc.disable()
    try:
        return RunView.build(data.load_run(path))
    finally:
        if was:
            gc.enable()
        gc.freeze()


def release_memory() -> None:
    """Hand the memory a run's JSON text and parse left free back to the system (glibc keeps it
    otherwise: some 20 MB after reading a run of 10,000 items x 3 models). A no-op elsewhere."""
    import ctypes

    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


class Refused(Exception):
    """A request for something the viewer does not serve (HTTP status and why)."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


@dataclass
class Loaded:
    stamp: tuple[int, ...]
    view: RunView


class Catalog:
    def __init__(self, folders: list[Path]):
        self.folders = [Path(f) for f in folders]
        for f in self.folders:
            if not f.is_dir():
                raise InputError(f"view: {f}: no such folder (give folders that hold save paths)")
        self.roots = [f.resolve() for f in self.folders]
        self._lock = threading.Lock()
        self._headers: dict[Path, tuple[tuple[int, ...], data.Header]] = {}
        self._known: dict[str, Path] = {}
        self._runs: OrderedDict[str, Loaded] = OrderedDict()
        self._run_locks: dict[str, threading.Lock] = {}
        self._compared: OrderedDict[tuple[Any, ...], Any] = OrderedDict()

    # --- names ------------------------------------------------------------------------------------
    def rid(self, path: Path) -> str:
        for i, root in enumerate(self.roots):
            if path == root or root in path.parents:
                rel = path.relative_to(root).as_posix()
                return f"{i}:{rel}"
        raise ValueError(path)

    def name(self, header: data.Header) -> str:
        """A run as a person reads it: its folder below the root (the root's own name for the root)."""
        rid = self.rid(header.path)
        idx, rel = rid.split(":", 1)
        return (self.folders[int(idx)].name or str(self.folders[int(idx)])) if rel == "." else rel

    # --- discovery --------------------------------------------------------------------------------
    def scan(self) -> list[data.Header]:
        """Every save path under the folders, newest first (headers read again only when changed)."""
        found: dict[str, Path] = {}
        for root in self.roots:
            for path in data.find_save_paths(root):
                found[self.rid(path)] = path
        headers = []
        for rid, path in found.items():
            mark = data.change_mark(path)
            cached = self._headers.get(path)
            if cached is None or cached[0] != mark:
                bad = data.links_out(path, self.roots)  # checked before anything of it is read
                header = (data.Header(path=path, problems=["not read: links leading out of the folders given: "
                                                           + ", ".join(bad)]) if bad else data.read_header(path))
                self._headers[path] = (mark, header)
            headers.append(self._headers[path][1])
        with self._lock:
            self._known = found
        from .runs import when

        return sorted(headers, key=when, reverse=True)

    def resolve(self, rid: str) -> Path:
        """The save path a run id names, or Refused (404: not a run served here; 403: outside)."""
        if not isinstance(rid, str) or ":" not in rid:
            raise Refused(404, "no such run")
        idx, rel = rid.split(":", 1)
        if not idx.isdigit() or int(idx) >= len(self.roots):
            raise Refused(404, "no such run")
        pure = PurePosixPath(rel)
        if pure.is_absolute() or ".." in pure.parts or "\\" in rel or "\x00" in rel:
            raise Refused(403, "outside the folders served")
        root = self.roots[int(idx)]
        path = (root / rel).resolve() if rel != "." else root
        if not (path == root or root in path.parents):
            raise Refused(403, "outside the folders served")
        with self._lock:
            known = self._known.get(rid)
        if known is None:
            self.scan()
            with self._lock:
                known = self._known.get(rid)
        if known is None or known.resolve() != path:
            raise Refused(404, "no such run")
        if data.links_out(known, self.roots):
            raise Refused(403, "this run has files that are links leading out of the folders served")
        return known

    def header(self, rid: str) -> data.Header:
        path = self.resolve(rid)
        cached = self._headers.get(path)
        return cached[1] if cached else data.read_header(path)

    # --- runs -------------------------------------------------------------------------------------
    def view(self, rid: str) -> RunView:
        """The run, loaded once and kept while its files do not change (one load at a time per run)."""
        path = self.resolve(rid)
        with self._lock:
            lock = self._run_locks.setdefault(rid, threading.Lock())
        with lock:
            mark = data.stamp(path)
            with self._lock:
                hit = self._runs.get(rid)
                if hit is not None and hit.stamp == mark:
                    self._runs.move_to_end(rid)
                    return hit.view
            with self._lock:
                self._runs.pop(rid, None)  # a changed run: its old view goes before the new one is read
            view = build_quietly(path)
            with self._lock:
                self._runs[rid] = Loaded(mark, view)
                self._runs.move_to_end(rid)
                while len(self._runs) > 1 and (len(self._runs) > CACHED_RUNS or sum(
                        len(x.view.entries) * max(1, len(x.view.models)) for x in self._runs.values()) > CACHED_ITEMS):
                    self._runs.popitem(last=False)
            release_memory()
            return view

    def labels(self, rid: str) -> tuple[dict[tuple[str, str, frozenset[str]], Label], list[Label], list[str]]:
        """(the latest label per item and pair, every label in file order, the lines that were skipped)."""
        found = data.labels_of(self.resolve(rid))
        latest: dict[tuple[str, str, frozenset[str]], Label] = {}
        for lab in found.labels:
            latest[label_key(lab.id, lab.category, lab.model_a, lab.model_b)] = lab
        return latest, found.labels, found.problems

    def add_label(self, rid: str, payload: dict[str, Any]) -> Label:
        return data.add_label(self.resolve(rid), payload)

    def compare(self, rid_a: str, rid_b: str) -> list[dict[str, Any]]:
        """`eval.py compare` of two runs (cached while neither changes)."""
        pa, pb = self.resolve(rid_a), self.resolve(rid_b)
        key = (rid_a, rid_b, data.stamp(pa), data.stamp(pb))
        with self._lock:
            if key in self._compared:
                self._compared.move_to_end(key)
                return self._compared[key]
        comps = data.compare_two(pa, pb)
        with self._lock:
            self._compared[key] = comps
            while len(self._compared) > CACHED_COMPARISONS:
                self._compared.popitem(last=False)
        return comps

    def file(self, rid: str, rel: str) -> tuple[bytes, str]:
        """A file of a run (the report, a chart) by its path below the save path, checked like a run id."""
        path = self.resolve(rid)
        pure = PurePosixPath(rel)
        if not rel or pure.is_absolute() or ".." in pure.parts or "\\" in rel or "\x00" in rel:
            raise Refused(403, "outside the run")
        target = (path / rel).resolve()
        if not (path.resolve() in target.parents):
            raise Refused(403, "outside the run")
        got = data.run_file(path, rel)
        if got is None:
            raise Refused(404, "no such file (the viewer serves the run's .html, .png, .csv, .json and .jsonl files)")
        return got

