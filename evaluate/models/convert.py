"""A GGUF converted once into a bf16 safetensors folder in the cache dir: loading a GGUF
de-quantizes every tensor (Qwen-1.5B: ~110 s with gguf's own code, ~40 s with gguf_fast's), the
converted copy reloads in about half a second."""

from __future__ import annotations


import json
import os
import shutil
import tempfile
import threading
from pathlib import Path
from typing import Any

from ..core.errors import InputError

from .catalogue import ResolvedModel
from . import gguf_fast
from .checksums import _sweep_stale, cache_dir

CONVERTED_DTYPE = "bfloat16"  # storage dtype of converted GGUFs; fp32 loads upcast it
_CONVERT_LOCK = threading.Lock()  # gguf_fast's patch of the gguf module is process-wide


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


def _convert_gguf(resolved: ResolvedModel, target: Path) -> None:
    with _CONVERT_LOCK, gguf_fast.patched():
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

