"""Generation with any batch engine (vLLM's `run_batch`, SGLang, a cluster): `--export-requests`
writes the requests still needed in the OpenAI batch format (custom_id = the cache key) and stops;
`--import-responses` loads the engine's output into the generation cache; the next normal
`eval.py generate` writes the answers from the cache without a call. MT-bench's second turns depend
on the first turns' replies: export, import, and export again until nothing is left.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..backends.batch import batch_line, read_result_file, request_body
from ..backends.cache import CachedBackend
from ..backends.pool import open_backend
from ..core.errors import InputError
from .engine import walk
from .formats import QuestionFile


def export_requests(qf: QuestionFile, opts: Any, cache: Path | None, path: Path) -> dict[str, Any]:
    """Write the requests that can be sent now to `path`; returns the counts."""
    bare = open_backend(opts.judge_options(), None)
    try:
        est, pending, deferred = walk(qf, opts, bare.signature(), cache)
    finally:
        bare.close()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        for key, req in pending.items():
            fh.write(batch_line(key, request_body(opts.model, req, logprobs=False)) + "\n")
    tmp.replace(path)
    return {"requests": len(pending), "cached": est.cached, "deferred": deferred, "file": str(path)}


def import_responses(qf: QuestionFile, opts: Any, cache: Path | None, path: Path) -> dict[str, Any]:
    """Load a batch engine's output into the cache. The whole file is refused (InputError, nothing stored)
    when a custom_id is not a request of these questions and this model, or a reply names another model."""
    if cache is None:
        raise InputError("--import-responses: model.cache is false; the responses go to the cache, turn it on")
    if not path.is_file():
        raise InputError(f"--import-responses: {path}: no such file")
    inner = open_backend(opts.judge_options(), None)
    _, pending, _ = walk(qf, opts, inner.signature(), cache)
    ok, failed, problems = read_result_file(
        path, pending, opts.model, model_key="the model config's model (model.model)",
        unknown="a request still needed for these questions and this model (exported from another file or "
                "config, or already imported?)")
    if problems:
        inner.close()
        raise InputError("--import-responses refused, nothing was stored:\n  " + "\n  ".join(problems[:20]))
    store = CachedBackend(inner, cache)
    try:
        stored = store.store_many([(cid, pending[cid], comp) for cid, comp in ok])
    finally:
        store.close()
    return {"stored": stored, "failed": len(failed), "failures": failed[:10],
            "still_missing": len(set(pending) - {cid for cid, _ in ok}), "cache": str(cache)}
