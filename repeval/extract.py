"""Hidden-state extraction from a decoder-only LM, stopping at the deepest layer needed.

RepEval only reads middle-to-late layers, so the layers above the deepest requested one are
dead weight. `truncated_layers` swaps the model's decoder-layer list for its first L entries
for the duration of a forward pass; forward hooks on the requested layers capture their
outputs (the residual stream *before* the model's final norm, for every layer including the
last, so that layer L means the same thing whether or not the pass was truncated).

Layer numbering: 1..N is the output of decoder layer 1..N; -1..-N count from the top
(-1 = the last layer). Token positions count from the end of the text: -1 is the last token.
"""

from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass
from typing import Any, Iterator, Sequence

import numpy as np

from evaluate.errors import InputError

# The truncation and the hooks modify the (shared) model object for the length of a pass.
_MODEL_LOCK = threading.RLock()


def decoder_layers(model: Any) -> Any:
    """The model's list of decoder layers (``model.model.layers`` for Llama/Qwen/Mistral/Gemma)."""
    base = getattr(model, "model", model)
    layers = getattr(base, "layers", None)
    if layers is None:
        raise InputError(f"{type(model).__name__}: cannot find the decoder layers (expected model.model.layers)")
    return layers


def n_layers(model: Any) -> int:
    return len(decoder_layers(model))


def normalize_layers(model: Any, layers: int | Sequence[int]) -> list[int]:
    """Requested layers as 1-based indices; negative ones count from the top. Unknown -> InputError."""
    depth = n_layers(model)
    requested = [layers] if isinstance(layers, (int, np.integer)) else list(layers)
    if not requested:
        raise InputError("layers: expected at least one layer index")
    out = []
    for layer in requested:
        if isinstance(layer, bool) or not isinstance(layer, (int, np.integer)):
            raise InputError(f"layer {layer!r}: expected an integer")
        idx = int(layer) + depth + 1 if layer < 0 else int(layer)
        if not 1 <= idx <= depth:
            raise InputError(
                f"layer {layer}: this model has {depth} decoder layers; use 1..{depth} or -1..-{depth}"
            )
        out.append(idx)
    return out


@contextlib.contextmanager
def truncated_layers(model: Any, depth: int) -> Iterator[None]:
    """Run the model with only its first `depth` decoder layers; restore the full list on exit."""
    import torch

    base = getattr(model, "model", model)
    full = decoder_layers(model)
    if not 1 <= depth <= len(full):
        raise InputError(f"truncate to {depth} layers: the model has {len(full)}")
    with _MODEL_LOCK:
        base.layers = torch.nn.ModuleList(list(full)[:depth])
        try:
            yield
        finally:
            base.layers = full


@dataclass(frozen=True)
class Batch:
    input_ids: Any
    attention_mask: Any
    position_ids: Any


def _left_pad(token_lists: list[list[int]], pad_id: int) -> Batch:
    """Left-pad token id lists; position ids restart at 0 on each row's first real token, so a
    padded row gets the same positions (and hidden states) as the same text run alone."""
    import torch

    width = max(len(t) for t in token_lists)
    ids = torch.full((len(token_lists), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(token_lists), width), dtype=torch.long)
    for row, toks in enumerate(token_lists):
        ids[row, width - len(toks):] = torch.tensor(toks, dtype=torch.long)
        mask[row, width - len(toks):] = 1
    pos = (mask.cumsum(-1) - 1).clamp(min=0)
    return Batch(ids, mask, pos)


def tokenize(tokenizer: Any, texts: Sequence[str], max_tokens: int | None) -> list[list[int]]:
    """Token ids per text; texts longer than `max_tokens` keep their *last* tokens, because the
    representation is read at the end (where the prompt's question sits)."""
    out = []
    for i, text in enumerate(texts):
        if not isinstance(text, str) or not text.strip():
            raise InputError(f"text #{i}: expected a non-empty string, got {text!r:.60}")
        ids = tokenizer(text, add_special_tokens=True)["input_ids"]
        if max_tokens is not None and len(ids) > max_tokens:
            ids = ids[-max_tokens:]
        out.append(list(ids))
    return out


def extract_hidden_states(
    model: Any,
    tokenizer: Any,
    texts: Sequence[str],
    layers: int | Sequence[int],
    token: int | Sequence[int] = -1,
    *,
    batch_size: int = 8,
    max_tokens: int | None = 2048,
    truncate: bool = True,
) -> np.ndarray:
    """Hidden states of `texts` at the given layers and token positions, as float32 numpy.

    Returns ``[n, n_layers, hidden]`` for a single `token`, ``[n, n_tokens, n_layers, hidden]``
    for a sequence of tokens. Texts are sorted by length and batched with left padding, so the
    last token of every row sits in the last column. `truncate=False` runs every layer (for
    checking that truncation changes nothing, and for timing).
    """
    import torch

    layer_idx = normalize_layers(model, layers)
    single_token = isinstance(token, (int, np.integer))
    tokens = [int(token)] if single_token else [int(t) for t in token]
    if not tokens or any(t >= 0 for t in tokens):
        raise InputError(f"token {token!r}: expected negative position(s) counted from the end (-1 = last)")
    token_ids = tokenize(tokenizer, texts, max_tokens)
    short = [i for i, t in enumerate(token_ids) if len(t) < -min(tokens)]
    if short:
        raise InputError(f"text #{short[0]}: {len(token_ids[short[0]])} tokens, shorter than token position {min(tokens)}")
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else (tokenizer.eos_token_id or 0)
    depth = max(layer_idx)
    hidden = model.config.hidden_size
    out = np.zeros((len(texts), len(tokens), len(layer_idx), hidden), dtype=np.float32)
    order = sorted(range(len(texts)), key=lambda i: len(token_ids[i]))
    all_layers = decoder_layers(model)
    captured: dict[int, Any] = {}

    def hook_for(idx: int):
        def hook(_module, _inputs, output):
            captured[idx] = output[0] if isinstance(output, tuple) else output
        return hook

    with _MODEL_LOCK:
        handles = [all_layers[i - 1].register_forward_hook(hook_for(i)) for i in set(layer_idx)]
        ctx = truncated_layers(model, depth) if truncate else contextlib.nullcontext()
        try:
            with ctx, torch.inference_mode():
                base = getattr(model, "model", model)
                for start in range(0, len(order), batch_size):
                    rows = order[start:start + batch_size]
                    batch = _left_pad([token_ids[i] for i in rows], pad_id)
                    captured.clear()
                    base(input_ids=batch.input_ids, attention_mask=batch.attention_mask,
                         position_ids=batch.position_ids, use_cache=False)
                    for li, idx in enumerate(layer_idx):
                        states = captured[idx][:, tokens, :].float().numpy()  # [b, n_tokens, hidden]
                        out[rows, :, li, :] = states
        finally:
            for h in handles:
                h.remove()
    return out[:, 0] if single_token else out
