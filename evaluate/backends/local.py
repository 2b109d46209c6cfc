"""A judge that runs a causal LM in-process through transformers (CPU is fine).

Why not `model.generate`: a judge needs (1) next-token probabilities fine enough to weight the
scores "1".."5" -- bf16 logits tie neighbouring probabilities, so the last projection to logits
is done here in fp32 from the final hidden state; (2) KV-cache reuse across requests, because
evaluators send many prompts that share a long prefix (system prompt, rubric, article) and only
the last few hundred tokens differ; (3) stop strings and per-position top log-probabilities in
the shape the OpenAI API returns them. A small explicit decoding loop does all three.

A request with ``max_tokens=1`` costs exactly one forward pass (over the part of the prompt not
already in a cached prefix).

Greedy requests also use *prompt-lookup decoding*: judge replies copy a lot from their prompt
(aspect names, JSON keys, the first agent's reasons quoted back by the second), so after each
token the loop looks for the last few generated tokens earlier in the prompt or reply and, when
found, feeds the tokens that followed there as a draft in the same forward pass. The drafted
tokens that the model's own greedy choice confirms are kept, the rest are cut from the KV cache.
On a CPU a decoding step costs about the time to read the weights once, whether it runs one
token or ten, so every confirmed token is a step saved; the output is the greedy output.
"""

from __future__ import annotations

import logging

import threading
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from ..core.errors import InputError
from ..models.catalogue import ModelInfo
from ..models.load import common_prefix, load_causal_lm, resolve_dtype, resolve_model
from .base import Backend, BackendError, Completion, JudgeRequest, ProgressFn


log = logging.getLogger(__name__)


@dataclass
class _Slot:
    """A prompt's token ids and the KV cache that holds exactly those tokens."""

    ids: list[int]
    cache: Any  # transformers DynamicCache


class LocalBackend(Backend):
    """In-process transformers judge.

    Options: `dtype` of the weights and activations ("auto": bfloat16 on CPUs with AMX, else
    float32, which was 1.5x faster than bfloat16 on an avx512_bf16 CPU without AMX; logits are
    fp32 either way); `max_new_tokens` caps every request's
    `max_tokens`; `prefix_reuse` keeps the KV caches of the last `prefix_slots` prompts and starts
    a new prompt from the longest token prefix it shares with one of them (at least
    `min_reuse_tokens`); `threads` sets torch's intra-op threads (None: leave as is);
    `lookahead` is the most tokens a greedy request drafts from an earlier occurrence of its last
    `lookup_ngram` (or fewer, down to 2) tokens (0: plain one-token steps).
    """

    kind = "local"

    def __init__(
        self,
        model: str,
        dtype: str = "auto",
        max_new_tokens: int = 512,
        *,
        prefix_reuse: bool = True,
        prefix_slots: int = 4,
        min_reuse_tokens: int = 8,
        threads: int | None = None,
        expected_sha256: str | None = None,
        lookahead: int = 3,
        lookup_ngram: int = 3,
        batch_size: int = 1,
    ):
        super().__init__(model)
        self.dtype = resolve_dtype(dtype)  # resolved now: the judge signature (cache key) names the real one
        self.max_new_tokens = max_new_tokens
        self.prefix_reuse = prefix_reuse
        self.prefix_slots = prefix_slots
        self.min_reuse_tokens = min_reuse_tokens
        self.threads = threads
        self.expected_sha256 = expected_sha256
        if lookahead < 0 or lookup_ngram < 2:
            raise InputError(f"LocalBackend: lookahead must be >= 0 and lookup_ngram >= 2, got {lookahead}, {lookup_ngram}")
        self.lookahead = lookahead
        self.lookup_ngram = lookup_ngram
        if batch_size < 1:
            raise InputError(f"LocalBackend: batch_size must be >= 1, got {batch_size}")
        self.batch_size = batch_size  # one-token requests per forward pass (left-padded); 1: one at a time
        self._lock = threading.RLock()
        self._slots: list[_Slot] = []
        self._lm: Any = None
        self._tok: Any = None
        self._info: ModelInfo | None = None
        self._head: tuple[Any, Any] | None = None  # fp32 (weight, bias) of the output projection
        self.forward_passes = 0  # counts calls of the transformer body; tests and benchmarks read it
        self.reused_tokens = 0  # prompt tokens taken from a cached prefix instead of recomputed
        self.drafted_tokens = 0  # prompt-lookup tokens fed as drafts, and how many the model confirmed
        self.accepted_tokens = 0

    @property
    def supports_logprobs(self) -> bool:
        return True

    # ------------------------------------------------------------------ loading

    def load(self) -> "LocalBackend":
        """Load the model now (otherwise the first request does). Raises InputError if it cannot be found."""
        with self._lock:
            if self._lm is None:
                import torch

                if self.threads:
                    torch.set_num_threads(self.threads)
                lm, tok, info = load_causal_lm(self.model, dtype=self.dtype, expected_sha256=self.expected_sha256)
                if not getattr(tok, "chat_template", None):
                    raise InputError(f'model "{self.model}" ({info.path}): the tokenizer has no chat template')
                head = lm.get_output_embeddings()
                bias = getattr(head, "bias", None)
                self._head = (head.weight.detach().float(), None if bias is None else bias.detach().float())
                self._lm, self._tok, self._info = lm, tok, info
        return self

    @property
    def info(self) -> ModelInfo:
        return self.load()._info  # type: ignore[return-value]

    @property
    def tokenizer(self) -> Any:
        return self.load()._tok

    def signature(self) -> dict[str, Any]:
        if self._info is not None:
            name, sha = self._info.name, self._info.sha256
        else:  # resolving is cheap (hash checks are cached); loading the weights is not needed here
            resolved = resolve_model(self.model, expected_sha256=self.expected_sha256)
            name, sha = resolved.name, resolved.sha256
        return {"backend": self.kind, "model": name, "weights_sha256": sha, "dtype": self.dtype,
                "logits": "float32"}

    def close(self) -> None:
        with self._lock:
            self._slots.clear()

    # ------------------------------------------------------------------ prompt and forward passes

    def prompt_ids(self, request: JudgeRequest) -> list[int]:
        """The chat-templated prompt, ending with the assistant turn's opening, as token ids."""
        tok = self.tokenizer
        msgs = [{"role": role, "content": content} for role, content in request.messages]
        text = tok.apply_chat_template(msgs, add_generation_prompt=True, tokenize=False)
        return list(tok(text, add_special_tokens=False)["input_ids"])

    def _forward(self, ids: Sequence[int], cache: Any, rows: int = 1) -> Any:
        """Run `ids` through the body on top of `cache` (extended in place); fp32 logits of the last
        position, or with rows > 1 a (rows, vocab) tensor for the last `rows` positions."""
        import torch

        self.forward_passes += 1
        out = self._lm.base_model(input_ids=torch.tensor([list(ids)]), past_key_values=cache, use_cache=True)
        weight, bias = self._head  # type: ignore[misc]
        if rows > 1:
            hidden = out.last_hidden_state[0, -rows:].float()
            logits = hidden @ weight.T
        else:
            hidden = out.last_hidden_state[0, -1].float()
            logits = weight @ hidden
        if bias is not None:
            logits = logits + bias
        cap = getattr(self._lm.config, "final_logit_softcapping", None)
        if cap:
            logits = torch.tanh(logits / cap) * cap
        return logits

    def _new_cache(self, prefix_of: _Slot | None = None, length: int = 0) -> Any:
        from transformers import DynamicCache

        if prefix_of is None or length == 0:
            return DynamicCache(config=self._lm.config)
        data = [(layer.keys[..., :length, :].clone(), layer.values[..., :length, :].clone())
                for layer in prefix_of.cache.layers]
        return DynamicCache(ddp_cache_data=data, config=self._lm.config)

    def _reusable(self, slot: _Slot) -> bool:
        from transformers.cache_utils import DynamicLayer

        return all(type(layer) is DynamicLayer and layer.is_initialized for layer in slot.cache.layers)

    def _prefill(self, ids: list[int]) -> tuple[Any, Any]:
        """(logits after the prompt, cache holding the prompt), starting from the best cached prefix."""
        best, shared = None, 0
        if self.prefix_reuse:
            for slot in self._slots:
                n = common_prefix(slot.ids, ids)
                if n > shared and self._reusable(slot):
                    best, shared = slot, n
        shared = min(shared, len(ids) - 1)  # at least one token must run to get the next-token logits
        if shared < self.min_reuse_tokens:
            best, shared = None, 0
        cache = self._new_cache(best, shared)
        logits = self._forward(ids[shared:], cache)
        self.reused_tokens += shared
        return logits, cache

    def _remember(self, ids: list[int], cache: Any) -> None:
        if not self.prefix_reuse or self.prefix_slots <= 0:
            return
        extra = cache.get_seq_length() - len(ids)
        if extra > 0:
            cache.crop(-extra)  # transformers 5: a negative count removes that many tokens
        # a slot whose prompt is a prefix of this one can serve nothing this one cannot
        self._slots = [s for s in self._slots if common_prefix(s.ids, ids) < len(s.ids)]
        self._slots.insert(0, _Slot(ids=list(ids), cache=cache))
        del self._slots[self.prefix_slots:]

    # ------------------------------------------------------------------ decoding

    def _top_logprobs(self, logprobs: Any, k: int) -> dict[str, float]:
        """Top-k as {decoded token text: logprob}. Tokens that decode to the same text (rare: partial
        UTF-8 bytes) are merged by adding their probabilities, so the values stay real log-probs."""
        import torch

        values, indices = torch.topk(logprobs, k)
        out: dict[str, float] = {}
        for v, i in zip(values.tolist(), indices.tolist()):
            text = self._tok.decode([i])
            out[text] = v if text not in out else float(torch.logaddexp(torch.tensor(out[text]), torch.tensor(v)))
        return out

    def _eos_ids(self) -> set[int]:
        ids: set[int] = set()
        for src in (getattr(self._lm, "generation_config", None), self._lm.config):
            eos = getattr(src, "eos_token_id", None) if src is not None else None
            if eos is not None:
                ids.update(eos if isinstance(eos, (list, tuple)) else [eos])
        if self._tok.eos_token_id is not None:
            ids.add(self._tok.eos_token_id)
        return ids

    def _draft(self, prompt: list[int], out: list[int], room: int) -> list[int]:
        """Prompt-lookup draft: the tokens that followed the latest earlier occurrence of the reply's
        last n tokens (n = lookup_ngram down to 2) in prompt + reply; at most `lookahead` and `room - 1`
        (the token chosen from the verifying pass's last row also counts against the budget)."""
        k = min(self.lookahead, room - 1)
        if k <= 0:
            return []
        ctx = prompt + out
        for n in range(min(self.lookup_ngram, len(ctx) - 1), 1, -1):
            tail = ctx[-n:]
            first = tail[0]
            for i in range(len(ctx) - n - 1, -1, -1):
                if ctx[i] == first and ctx[i:i + n] == tail:
                    return ctx[i + n:i + n + k]
        return []

    def _complete(self, request: JudgeRequest) -> Completion:
        import torch

        self.load()
        ids = self.prompt_ids(request)
        limit = getattr(self._lm.config, "max_position_embeddings", None) or 10**9
        if len(ids) >= limit:
            raise BackendError(f"prompt has {len(ids)} tokens; the model's context is {limit}")
        budget = max(0, min(request.max_tokens, self.max_new_tokens, limit - len(ids)))
        if budget == 0:
            return Completion(prompt_tokens=len(ids), finish_reason="length")
        gen = None
        if request.temperature > 0:
            gen = torch.Generator()
            gen.manual_seed(request.seed if request.seed is not None else torch.seed())
        eos = self._eos_ids()

        out_ids: list[int] = []
        positions: list[dict[str, float]] = []
        state = {"text": "", "finish": "length", "eos": False}

        def emit(logits: Any) -> tuple[int, bool]:
            """Choose the next token from `logits`; (token, whether the reply is finished)."""
            if request.top_logprobs > 0:
                positions.append(self._top_logprobs(torch.log_softmax(logits, -1), request.top_logprobs))
            if request.temperature > 0:
                probs = torch.softmax(logits / request.temperature, -1)
                nxt = int(torch.multinomial(probs, 1, generator=gen))
            else:
                nxt = int(torch.argmax(logits))
            if nxt in eos:
                state["finish"], state["eos"] = "stop", True
                return nxt, True
            out_ids.append(nxt)
            text = self._tok.decode(out_ids, skip_special_tokens=True)
            cut = min((text.find(s) for s in request.stop if s and s in text), default=-1)
            if cut >= 0:
                state["text"], state["finish"] = text[:cut], "stop"
                return nxt, True
            state["text"] = text
            return nxt, len(out_ids) >= budget

        with torch.inference_mode():
            logits, cache = self._prefill(ids)
            nxt, done = emit(logits)
            while not done:
                draft = self._draft(ids, out_ids, budget - len(out_ids)) if gen is None else []
                step = [nxt, *draft]
                rows = self._forward(step, cache, rows=len(step))
                rows = rows.unsqueeze(0) if rows.dim() == 1 else rows
                self.drafted_tokens += len(draft)
                for i in range(len(step)):
                    nxt, done = emit(rows[i])
                    if done:
                        break  # the cache may hold drafted tokens past the end: _remember crops to the prompt
                    if i < len(draft) and nxt != draft[i]:
                        cache.crop(-(len(draft) - i))  # inputs after position i were guesses that failed
                        break
                    self.accepted_tokens += i < len(draft)
            self._remember(ids, cache)
        text, finish, hit_eos = state["text"], state["finish"], state["eos"]
        return Completion(
            text=text,
            top_logprobs=positions if request.top_logprobs > 0 else [],
            prompt_tokens=len(ids),
            completion_tokens=len(out_ids) + hit_eos,
            finish_reason=finish,
        )

    def complete(self, request: JudgeRequest) -> Completion:
        with self._lock:
            try:
                return self._complete(request)
            except (BackendError, InputError):
                raise
            except Exception as exc:  # noqa: BLE001 - a failing forward pass is one invalid judgment
                raise BackendError(f"local model {self.model}: {type(exc).__name__}: {exc}") from exc

    def complete_many(self, requests: Sequence[JudgeRequest], progress: ProgressFn | None = None) -> list[Completion]:
        """In order, one at a time (the prefix cache makes that fast on a CPU), or, with `batch_size` > 1,
        greedy one-token requests (G-Eval ratings, UniEval questions) `batch_size` to a forward pass:
        what pays on a GPU. Loads the model first, so a missing model raises InputError once instead
        of turning every request into an invalid one."""
        out: list[Completion | None] = [None] * len(requests)

        def done(i: int, comp: Completion) -> None:
            out[i] = comp
            if progress:
                progress(comp)

        self.complete_many_indexed(requests, done)
        return [c for c in out if c is not None]

    def complete_many_indexed(self, requests: Sequence[JudgeRequest],
                              on_result: Callable[[int, Completion], None]) -> None:
        """`on_result(i, completion)` as each judgment is made, so the cache in front stores it at
        once (a run killed mid-way loses at most the judgment in progress)."""
        self.load()
        answered = [False] * len(requests)
        batchable = [i for i, r in enumerate(requests)
                     if self.batch_size > 1 and r.max_tokens == 1 and r.temperature == 0 and not r.stop]
        for start in range(0, len(batchable), self.batch_size):
            chunk = batchable[start:start + self.batch_size]
            try:
                comps = self._complete_batch([requests[i] for i in chunk])
            except Exception as exc:  # noqa: BLE001 - a failing batch: each request is tried alone below
                log.warning("local batch of %d failed (%s); judging them one at a time", len(chunk), exc)
                continue
            for i, comp in zip(chunk, comps):
                answered[i] = True
                on_result(i, comp)
        for i, req in enumerate(requests):
            if answered[i]:
                continue
            try:
                comp = self.complete(req)
            except Exception as exc:  # noqa: BLE001 - never raise past this point
                comp = Completion(error=str(exc) or type(exc).__name__)
            on_result(i, comp)

    def _complete_batch(self, requests: Sequence[JudgeRequest]) -> list[Completion]:
        """Greedy one-token completions of several prompts in one left-padded forward pass.

        Pads sit left of each prompt and are masked out; rotary position embeddings depend only on
        relative positions, so each row's last-position logits equal its own unpadded pass (to float
        rounding; tests compare with one at a time)."""
        import torch

        with self._lock, torch.inference_mode():
            prompts = [self.prompt_ids(r) for r in requests]
            limit = getattr(self._lm.config, "max_position_embeddings", None) or 10**9
            if max(len(p) for p in prompts) >= limit:
                raise BackendError(f"a prompt reaches the model's context ({limit} tokens)")
            width = max(len(p) for p in prompts)
            pad = self._tok.pad_token_id if self._tok.pad_token_id is not None else (self._tok.eos_token_id or 0)
            ids = torch.tensor([[pad] * (width - len(p)) + p for p in prompts])
            mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
            self.forward_passes += 1
            hidden = self._lm.base_model(input_ids=ids, attention_mask=mask).last_hidden_state[:, -1].float()
            weight, bias = self._head  # type: ignore[misc]
            logits = hidden @ weight.T
            if bias is not None:
                logits = logits + bias
            cap = getattr(self._lm.config, "final_logit_softcapping", None)
            if cap:
                logits = torch.tanh(logits / cap) * cap
            eos = self._eos_ids()
            out = []
            for req, p, row in zip(requests, prompts, logits):
                nxt = int(torch.argmax(row))
                top = [self._top_logprobs(torch.log_softmax(row, -1), req.top_logprobs)] if req.top_logprobs > 0 else []
                text = "" if nxt in eos else self._tok.decode([nxt], skip_special_tokens=True)
                out.append(Completion(text=text, top_logprobs=top, prompt_tokens=len(p), completion_tokens=1,
                                      finish_reason="stop" if nxt in eos else "length"))
            return out

