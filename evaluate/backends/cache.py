"""A persistent SQLite cache in front of any backend.

Judge calls cost money and time; the same (judge, request) pair must be paid for once. The
key is sha256 of the judge's identity and the request's canonical hash. The identity is the judge's
signature minus the fields that never change an answer (concurrency, timeouts, price): the weights
for a judge the tool runs (local, or a vLLM server it starts, on whatever port), and the model name
*with its server* for an HTTP judge (`base_url`; several replicas of one judge block: their sorted
URLs), since one model name on two servers may be two different models (two judges of a panel,
llama.cpp's "default", a fine-tune served under its base model's name). Entries written under older
keys are found too and copied to the current key, so an older cache is never paid for twice: each
replica's URL alone, and the model name without the server (the key of the versions before this
one), unless two judges of the run share that model name on different servers, when nobody can
tell whose replies those rows are (`separate_namesakes`). Each successful completion is written the
moment it arrives, so a run killed half-way resumes paying only for the rest. Failures and
empty replies are never stored: a re-run retries them.

One file may serve several processes at once (runs sharing a cache across save paths): WAL lets
readers and one writer go on together, SQLite's busy timeout makes a writer wait for another's
transaction, and the few cases where SQLite answers "database is locked" without waiting
(switching to WAL, a read that turns into a write) are tried again for up to `lock_wait`
seconds. WAL needs a local disk (not NFS). `stats()` gives the size and this run's hits.
"""

from __future__ import annotations

import hashlib
import json
import random
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence, TypeVar

from .base import Backend, Completion, JudgeRequest, ProgressFn, WrappingBackend
from .retry import progress_bar
from ..core.errors import InputError

SCHEMA_VERSION = 1
# Signature fields that never change what the judge answers; excluded from the cache key so that
# tuning them keeps the cache valid.
KEY_VOLATILE: tuple[str, ...] = ("concurrency", "timeout", "max_retries", "price", "batch_size", "device")
# ... and the server URL too: what a judge is taken to be where replicas of one model are one judge
# (a stored judge check, a benchmark's signature); the cache key keeps the server (module docstring).
VOLATILE_FIELDS: tuple[str, ...] = (*KEY_VOLATILE, "base_url")

CACHE_SCHEMA = """
CREATE TABLE IF NOT EXISTS completions (
    key TEXT PRIMARY KEY,
    judge TEXT NOT NULL,
    request TEXT NOT NULL,
    completion TEXT NOT NULL,
    created REAL NOT NULL
)
"""


T = TypeVar("T")


@dataclass(frozen=True)
class CacheStats:
    """The size of a judge cache and what this process asked of it."""

    path: str
    entries: int
    bytes: int  # the database file and its write-ahead log, on disk
    hits: int
    misses: int

    def line(self) -> str:
        asked = self.hits + self.misses
        share = f" ({self.hits / asked:.0%} hits)" if asked else ""
        return (f"judge cache {self.path}: {self.entries:,} entries, {self.bytes / 1e6:.1f} MB; "
                f"this run {self.hits:,} hits, {self.misses:,} misses{share}")


def _locked(exc: sqlite3.OperationalError) -> bool:
    text = str(exc).lower()
    return "locked" in text or "busy" in text


def judge_blob(signature: dict[str, Any], volatile_fields: Sequence[str] = KEY_VOLATILE) -> str:
    """The judge part of a cache key: the signature without the fields that never change answers (a
    list of replicas' URLs sorted: the same servers in another order are the same judge)."""
    judge = {k: v for k, v in signature.items() if k not in set(volatile_fields)}
    if isinstance(judge.get("base_url"), list):
        judge["base_url"] = sorted(judge["base_url"])
    return json.dumps(judge, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def judge_blobs(signature: dict[str, Any]) -> tuple[str, list[str], str | None]:
    """(the current key's judge blob, the blobs of each replica's URL alone, the model-name-only blob of
    the versions that left the server out, or None where it is the current one): what a cache reads."""
    current = judge_blob(signature)
    urls = signature.get("base_url")
    replicas = [judge_blob({**signature, "base_url": u}) for u in urls] if isinstance(urls, list) else []
    model_only = judge_blob(signature, VOLATILE_FIELDS)
    return current, [b for b in replicas if b != current], (model_only if model_only != current else None)


def separate_namesakes(caches: Iterable["CachedBackend"]) -> None:
    """Judges of one run that share a model name on different servers (a panel's two judges both
    `model: same`) stop reading the model-name-only rows of older caches: those rows do not say
    which server wrote them, and read by both they would make one judge's replies the other's."""
    caches = list(caches)
    by_name: dict[str, set[str]] = {}
    for c in caches:
        if c.model_only is not None:
            by_name.setdefault(c.model_only, set()).add(c.judge_key_blob)
    for c in caches:
        if c.model_only is not None and len(by_name[c.model_only]) > 1:
            c.read_model_only = False


def cache_key(judge: str, request: JudgeRequest) -> str:
    """The cache key of `request` asked of the judge `judge` (a `judge_blob`); also the custom_id
    of batch jobs and exported requests, so a result always finds its cache row."""
    blob = json.dumps({"v": SCHEMA_VERSION, "judge": judge, "request": request.key()}, sort_keys=True)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def request_from_dict(d: dict[str, Any]) -> JudgeRequest:
    """The inverse of `JudgeRequest.as_dict` (rows of the cache and of batch jobs hold that form)."""
    return JudgeRequest(messages=tuple((m["role"], m["content"]) for m in d["messages"]),
                        max_tokens=int(d["max_tokens"]), temperature=float(d["temperature"]),
                        top_logprobs=int(d["top_logprobs"]), stop=tuple(d.get("stop") or ()), seed=d.get("seed"),
                        top_p=d.get("top_p"))


class CachedBackend(WrappingBackend):
    """Wraps `inner`; answers from `path` when it can and asks `inner` only for the misses.

    Args:
        inner: the backend that really answers.
        path: the SQLite file (created with its parent folder).
        volatile_fields: signature keys left out of the cache key (the server URL is kept: see the
            module docstring).
        chunk_size: for inner backends without `complete_many_indexed`, misses are sent in chunks
            of this size and each chunk is stored as soon as it returns.
        busy_timeout: seconds one statement waits for another process's write to end.
        lock_wait: seconds an operation is tried again while SQLite still says "database is
            locked" (beyond the busy timeout); then the error propagates.
    """

    def __init__(
        self,
        inner: Backend,
        path: str | Path,
        *,
        volatile_fields: Sequence[str] = KEY_VOLATILE,
        chunk_size: int = 16,
        busy_timeout: float = 30.0,
        lock_wait: float = 120.0,
    ):
        super().__init__(inner)
        self.path = Path(path)
        self.chunk_size = max(1, chunk_size)
        sig = inner.signature()
        self._judge = judge_blob(sig, volatile_fields)
        current, replicas, model_only = judge_blobs(sig)
        # older keys read (and copied to the current one): each replica's URL alone, and the model name
        # without its server unless another judge of the run has that name too (separate_namesakes)
        self._replica_judges = replicas if self._judge == current else []
        self.model_only = model_only if self._judge == current else None
        self.read_model_only = self.model_only is not None
        self.hits = 0
        self.misses = 0
        self.lock_wait = lock_wait
        self.lock_retries = 0  # times SQLite said "locked" and the operation was tried again
        self._lock = threading.Lock()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # One connection shared under a lock: writes are tiny, and WAL lets other processes read meanwhile.
            self._conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None,
                                         timeout=busy_timeout)
            self.journal_mode = self._retry(lambda: self._conn.execute("PRAGMA journal_mode=WAL").fetchone()[0])
            self._conn.execute("PRAGMA synchronous=NORMAL")
            self._retry(lambda: self._conn.execute(CACHE_SCHEMA))
        except sqlite3.OperationalError as exc:
            if _locked(exc):
                raise InputError(f"{self.path}: the judge cache stayed locked by another process for "
                                 f"{lock_wait:g}s ({exc})") from exc
            raise InputError(f"{self.path}: cannot open the judge cache as an SQLite database ({exc})") from exc
        except sqlite3.DatabaseError as exc:
            raise InputError(f"{self.path}: cannot open the judge cache as an SQLite database ({exc})") from exc

    def _retry(self, fn: Callable[[], T]) -> T:
        """`fn()`, tried again with a growing pause while SQLite says the database is locked."""
        deadline = time.monotonic() + self.lock_wait
        pause = 0.01
        while True:
            try:
                return fn()
            except sqlite3.OperationalError as exc:
                if not _locked(exc) or time.monotonic() + pause > deadline:
                    raise
            self.lock_retries += 1
            time.sleep(pause * random.uniform(0.5, 1.0))
            pause = min(pause * 2, 1.0)

    # ------------------------------------------------------------------ keys and storage
    @property
    def judge_key_blob(self) -> str:
        """The judge's identity as its cache keys hold it (module docstring)."""
        return self._judge

    def key(self, request: JudgeRequest) -> str:
        return cache_key(self._judge, request)

    def _older_judges(self) -> list[str]:
        return self._replica_judges + ([self.model_only] if self.read_model_only and self.model_only else [])

    @staticmethod
    def _key(judge: str, request_key: str) -> str:
        """The key of a request (by its `JudgeRequest.key()`) under an older judge blob (legacy lookups)."""
        blob = json.dumps({"v": SCHEMA_VERSION, "judge": judge, "request": request_key}, sort_keys=True)
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()

    def _select(self, keys: Sequence[str]) -> dict[str, str]:
        found: dict[str, str] = {}
        unique = list(dict.fromkeys(keys))
        with self._lock:
            for start in range(0, len(unique), 500):  # stay under SQLite's bound-parameter limit
                part = unique[start : start + 500]
                found.update(self._retry(lambda: self._conn.execute(
                    f"SELECT key, completion FROM completions WHERE key IN ({','.join('?' * len(part))})", part
                ).fetchall()))
        return found

    def _lookup(self, keys: Sequence[str], requests: Sequence[JudgeRequest] = ()) -> dict[str, Completion]:
        """Completions stored under `keys`; with `requests` (in the same order), misses are also looked
        up under the judge's older keys (`_older_judges`), and copied over."""
        blobs = self._select(keys)
        older = self._older_judges()
        if older and requests and len(blobs) < len(set(keys)):
            legacy: dict[str, tuple[str, JudgeRequest]] = {}
            for k, req in zip(keys, requests):
                if k not in blobs:
                    rk = req.key()
                    for judge in older:
                        legacy[self._key(judge, rk)] = (k, req)
            for old_key, blob in self._select(list(legacy)).items():
                k, req = legacy[old_key]
                if k not in blobs:
                    blobs[k] = blob
                    row = (k, self._judge, json.dumps(req.as_dict(), ensure_ascii=False), blob, time.time())
                    with self._lock:
                        self._retry(lambda: self._conn.execute(
                            "INSERT OR IGNORE INTO completions VALUES (?, ?, ?, ?, ?)", row))
        return {k: Completion.from_dict(json.loads(blob), cached=True) for k, blob in blobs.items()}

    def _store(self, key: str, request: JudgeRequest, comp: Completion) -> None:
        if not comp.ok or not comp.text.strip():
            return
        row = (key, self._judge, json.dumps(request.as_dict(), ensure_ascii=False), json.dumps(comp.to_dict(), ensure_ascii=False), time.time())
        with self._lock:
            self._retry(lambda: self._conn.execute("INSERT OR REPLACE INTO completions VALUES (?, ?, ?, ?, ?)", row))

    def store_many(self, rows: Sequence[tuple[str, JudgeRequest, Completion]]) -> int:
        """Store many (key, request, completion) in one transaction (an import); failures and empty
        replies are skipped as in `_store`. Returns how many were stored."""
        data = [(k, self._judge, json.dumps(r.as_dict(), ensure_ascii=False), json.dumps(c.to_dict(), ensure_ascii=False),
                 time.time()) for k, r, c in rows if c.ok and c.text.strip()]
        with self._lock:
            # IMMEDIATE: the write lock is taken (or waited for) at BEGIN, so the transaction never
            # has to turn a read into a write, which SQLite refuses without waiting
            self._retry(lambda: self._conn.execute("BEGIN IMMEDIATE"))
            try:
                self._conn.executemany("INSERT OR REPLACE INTO completions VALUES (?, ?, ?, ?, ?)", data)
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._retry(lambda: self._conn.execute("COMMIT"))
        return len(data)

    def __len__(self) -> int:
        with self._lock:
            return self._retry(lambda: self._conn.execute("SELECT COUNT(*) FROM completions").fetchone()[0])

    def stats(self) -> CacheStats:
        """Entries and bytes on disk now (every process's), hits and misses of this backend."""
        size = sum(p.stat().st_size for p in (self.path, self.path.with_name(self.path.name + "-wal")) if p.exists())
        with self._lock:
            hits, misses = self.hits, self.misses
        return CacheStats(str(self.path), len(self), size, hits, misses)

    # ------------------------------------------------------------------ Backend
    @property
    def unreachable(self) -> str | None:
        """Why the judge behind the cache cannot be reached (see OpenAICompatBackend), or None."""
        return getattr(self.inner, "unreachable", None)

    def usage(self) -> dict[str, Any]:
        return {**super().usage(), "cache_hits": self.hits, "cache_misses": self.misses}

    def complete(self, request: JudgeRequest) -> Completion:
        key = self.key(request)
        hit = self._lookup([key], [request]).get(key)
        if hit is not None:
            with self._lock:
                self.hits += 1
            return hit
        with self._lock:
            self.misses += 1
        comp = self.inner.complete(request)
        self._store(key, request, comp)
        return comp

    def complete_many(self, requests: Sequence[JudgeRequest], progress: ProgressFn | None = None) -> list[Completion]:
        """Hits first, then the misses (each distinct request once) through the inner backend; input order kept."""
        keys = [self.key(r) for r in requests]
        found = self._lookup(keys, requests)
        out: list[Completion | None] = [found.get(k) for k in keys]
        # Identical requests in one batch are sent once: the cache would collapse them on a re-run anyway.
        positions: dict[str, list[int]] = {}
        for j, (k, c) in enumerate(zip(keys, out)):
            if c is None:
                positions.setdefault(k, []).append(j)
        miss_keys = list(positions)
        miss_requests = [requests[positions[k][0]] for k in miss_keys]
        with self._lock:
            self.hits += len(requests) - sum(1 for c in out if c is None)
            self.misses += len(miss_keys)

        with progress_bar(len(requests), desc=f"judge {self.model}") as bar:
            for comp in out:
                if comp is not None:
                    bar.add(comp)
                    if progress is not None:
                        progress(comp)

            aborted = False

            def on_result(i: int, comp: Completion) -> None:
                nonlocal aborted
                key = miss_keys[i]
                self._store(key, miss_requests[i], comp)  # first: a kill right after still keeps it
                for j in positions[key]:
                    out[j] = comp
                    if aborted:
                        continue
                    bar.add(comp)
                    if progress is not None:
                        try:
                            progress(comp)
                        except BaseException:
                            aborted = True
                            raise

            returned = self._send(miss_requests, on_result)
            for i, comp in enumerate(returned):  # never sent (a stopped run, an unreachable judge): reported now
                for j in positions[miss_keys[i]]:
                    if out[j] is None:
                        out[j] = comp
                        bar.add(comp)
                        if progress is not None:
                            progress(comp)
        return out  # type: ignore[return-value]

    def _send(self, requests: list[JudgeRequest], on_result: Callable[[int, Completion], None]) -> list[Completion]:
        """The misses through the inner backend, each stored by `on_result` as it finishes; returns them
        all, including those the inner backend gave back without reporting (never sent)."""
        if not requests:
            return []
        indexed = getattr(self.inner, "complete_many_indexed", None)
        if callable(indexed):
            return indexed(requests, on_result) or []  # the local backend reports every one and returns None
        out: list[Completion] = []
        for start in range(0, len(requests), self.chunk_size):
            chunk = requests[start : start + self.chunk_size]
            for offset, comp in enumerate(self.inner.complete_many(chunk)):
                on_result(start + offset, comp)
                out.append(comp)
        return out

    def close(self) -> None:
        with self._lock:
            self._conn.close()
        super().close()
