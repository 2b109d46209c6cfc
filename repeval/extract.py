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

from evaluate.core.errors import InputError
from evaluate.backends.kv import cache_kwarg
from evaluate.models.load import common_prefix

# The truncation and the hooks modify the (shared) model object for the length of a pass.
_MODEL_LOCK = threading.RLock()


def decoder_layers(model: Any) -> Any:
    """The model's list of decoder layers (``model.model.layers`` for Llama/Qwen/Mistral/Gemma)."""
    base = getattr(model, "model", model)
    layers = getattr(base, "layers", None)
    if layers is None:
        raise InputError(f"{type(model).__name__}: cannot find the decoder layers (expected model.model.layers)")
    return layers


def model_device(model: Any) -> Any:
    """Where the model's weights are (inputs go there; hidden states come back to the CPU as numpy)."""
    device = getattr(model, "device", None)
    if device is None:
        device = next(model.parameters()).device
    return device


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


def full_attention_only(config: Any) -> bool:
    """True when every layer attends to the whole past (Llama, Qwen2 without its sliding window):
    the only case where the shared-prefix cache is reused; sliding-window, chunked or recurrent
    layers keep a different cache, and their texts simply run on their own."""
    types = getattr(config, "layer_types", None)
    if types is not None:
        return all(t == "full_attention" for t in types)
    return not (getattr(config, "sliding_window", None) and getattr(config, "use_sliding_window", True))


def prefix_groups(token_ids: Sequence[Sequence[int]], min_prefix: int, keep: int) -> list[tuple[int, list[int]]]:
    """Texts that share a token prefix of at least `min_prefix` tokens, as (prefix length, text
    indices) groups of two or more. The prefix stops `keep` tokens short of the shortest member,
    so the positions read (the last `keep`) always lie in the part that is run per text."""
    order = sorted(range(len(token_ids)), key=lambda i: token_ids[i])
    groups: list[tuple[int, list[int]]] = []
    members, shared = [order[0]] if order else [], 1 << 62

    def close() -> None:
        if len(members) > 1:
            length = min(shared, min(len(token_ids[i]) for i in members) - keep)
            if length >= min_prefix:
                groups.append((length, list(members)))

    for i in order[1:]:
        n = min(shared, common_prefix(token_ids[members[-1]], token_ids[i]))
        if n >= min_prefix:
            members.append(i)
            shared = n
        else:
            close()
            members, shared = [i], 1 << 62
    if members:
        close()
    return groups


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
    min_shared_prefix: int | None = 64,
) -> np.ndarray:
    """Hidden states of `texts` at the given layers and token positions, as float32 numpy.

    Returns ``[n, n_layers, hidden]`` for a single `token`, ``[n, n_tokens, n_layers, hidden]``
    for a sequence of tokens. Texts are sorted by length and batched with left padding, so the
    last token of every row sits in the last column. `truncate=False` runs every layer (for
    checking that truncation changes nothing, and for timing).

    Texts that share a prefix of at least `min_shared_prefix` tokens (e.g. the same source
    article before each of its summaries) run that prefix once: its keys and values are
    computed for one row and reused by every text of the group, which then runs only its own
    tokens. The model is causal, so the states equal those of separate passes (up to float
    rounding). `min_shared_prefix=None` turns this off.
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
    share = bool(min_shared_prefix) and full_attention_only(model.config)
    groups = prefix_groups(token_ids, min_shared_prefix, -min(tokens)) if share else []
    grouped = {i for _, members in groups for i in members}
    order = sorted((i for i in range(len(texts)) if i not in grouped), key=lambda i: len(token_ids[i]))
    all_layers = decoder_layers(model)
    device = model_device(model)
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
                    base(input_ids=batch.input_ids.to(device), attention_mask=batch.attention_mask.to(device),
                         position_ids=batch.position_ids.to(device), use_cache=False)
                    for li, idx in enumerate(layer_idx):
                        states = captured[idx][:, tokens, :].float().cpu().numpy()  # [b, n_tokens, hidden]
                        out[rows, :, li, :] = states
                for length, members in groups:
                    _run_shared_prefix(base, model.config, token_ids, length, members, tokens, layer_idx,
                                       batch_size, pad_id, captured, out, device)
        finally:
            for h in handles:
                h.remove()
    return out[:, 0] if single_token else out


def _run_shared_prefix(base: Any, config: Any, token_ids: Sequence[Sequence[int]], length: int,
                       members: list[int], tokens: list[int], layer_idx: list[int], batch_size: int,
                       pad_id: int, captured: dict, out: np.ndarray, device: Any = "cpu") -> None:
    """One group of `extract_hidden_states`: the shared prefix once, then the members' own
    tokens in right-padded batches on top of a copy of its cache (right padding: a real token
    never attends to a pad, so no mask is needed; the positions read are found per row)."""
    import torch
    from transformers import DynamicCache

    captured.clear()
    prefix = DynamicCache(config=config)
    kw = cache_kwarg(base)
    base(input_ids=torch.tensor([list(token_ids[members[0]][:length])], device=device), use_cache=True,
         **{kw: prefix})
    kv = [(layer.keys, layer.values) for layer in prefix.layers if getattr(layer, "is_initialized", False)]
    rest = sorted(members, key=lambda i: len(token_ids[i]))
    for start in range(0, len(rest), batch_size):
        rows = rest[start:start + batch_size]
        tails = [list(token_ids[i][length:]) for i in rows]
        width = max(len(t) for t in tails)
        ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
        for r, t in enumerate(tails):
            ids[r, :len(t)] = torch.tensor(t, dtype=torch.long)
        ids = ids.to(device)
        cache = DynamicCache(ddp_cache_data=[(k.expand(len(rows), -1, -1, -1).contiguous(),
                                              v.expand(len(rows), -1, -1, -1).contiguous()) for k, v in kv],
                             config=config)
        pos = torch.arange(length, length + width, device=device).unsqueeze(0).expand(len(rows), -1)
        captured.clear()
        base(input_ids=ids, position_ids=pos, use_cache=True, **{kw: cache})
        at = torch.tensor([[len(t) + k for k in tokens] for t in tails], device=device)  # [b, n_tokens]
        for li, idx in enumerate(layer_idx):
            states = captured[idx]
            picked = torch.stack([states[r, at[r]] for r in range(len(rows))])  # [b, n_tokens, hidden]
            out[rows, :, li, :] = picked.float().cpu().numpy()
