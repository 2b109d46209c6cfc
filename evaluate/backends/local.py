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

A greedy reply that has fallen into a loop (the same block repeated at its end, by the rule of
`core.repetition`) ends there with finish_reason "repetition" instead of running to `max_tokens`:
greedy decoding that has written a block four times in a row writes it again. Replies that do not
loop are unchanged, so the judge's signature (and cache key) is too.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from ..core.errors import InputError
from ..core.repetition import MIN_CHARS as LOOP_MIN_CHARS, repeated_tail
from ..models.catalogue import ModelInfo
from ..models.device import device_type, resolve_device
from ..models.load import common_prefix, load_causal_lm, resolve_dtype, resolve_model
from .base import Backend, BackendError, Completion, JudgeRequest, ProgressFn
from .kv import cache_kwarg, compact, new_cache, plain_layers
from .memory import available_memory, process_rss, total_memory, trim, tune_malloc
from .onednn import (linear as onednn_linear, onednn_scope, pack_linears, pack_module, packed_copy, resolve_matmul,
                     route_linears, unpacked_bytes)
from .speed import record as record_speed


log = logging.getLogger(__name__)


@dataclass
class _Slot:
    """A prompt's token ids and the KV cache that holds exactly those tokens."""

    ids: list[int]
    cache: Any  # transformers DynamicCache


class _Reply:
    """One request's decoding state: the tokens chosen so far, the text, the per-position top
    log-probabilities, why it ended. The same object serves one-at-a-time decoding and a row of a
    batch, so both choose, stop and count tokens by one rule."""

    def __init__(self, backend: "LocalBackend", request: JudgeRequest, ids: list[int], budget: int,
                 gen: Any, eos: set[int]):
        self.backend, self.request, self.ids, self.budget, self.gen, self.eos = backend, request, ids, budget, gen, eos
        self.out: list[int] = []
        self.positions: list[dict[str, float]] = []
        self.text, self.finish, self.hit_eos = "", "length", False

    def emit(self, logits: Any) -> tuple[int, bool]:
        """Choose the next token from fp32 `logits` (vocab,); (token, whether the reply is finished)."""
        import torch

        req = self.request
        if req.top_logprobs > 0:
            self.positions.append(self.backend._top_logprobs(torch.log_softmax(logits, -1), req.top_logprobs))
        if req.temperature > 0:  # drawn on the CPU by the request's own generator, whatever the device
            probs = torch.softmax(logits.cpu() / req.temperature, -1)
            nxt = int(torch.multinomial(probs, 1, generator=self.gen))
        else:
            nxt = int(torch.argmax(logits))
        if nxt in self.eos:
            self.finish, self.hit_eos = "stop", True
            return nxt, True
        self.out.append(nxt)
        text = self.backend._tok.decode(self.out, skip_special_tokens=True)
        cut = min((text.find(s) for s in req.stop if s and s in text), default=-1)
        if cut >= 0:
            self.text, self.finish = text[:cut], "stop"
            return nxt, True
        self.text = text
        if req.temperature == 0 and len(text) >= LOOP_MIN_CHARS and repeated_tail(text) is not None:
            self.finish = "repetition"  # a greedy loop only repeats itself until max_tokens
            return nxt, True
        return nxt, len(self.out) >= self.budget

    def completion(self) -> Completion:
        return Completion(
            text=self.text,
            top_logprobs=self.positions if self.request.top_logprobs > 0 else [],
            prompt_tokens=len(self.ids),
            completion_tokens=len(self.out) + self.hit_eos,
            finish_reason=self.finish,
        )


class LocalBackend(Backend):
    """In-process transformers judge.

    Options: `device` where the model runs ("auto": a CUDA GPU where torch sees one, else the CPU;
    `evaluate.models.device`); `dtype` of the weights and activations ("auto": bfloat16 on a GPU and
    on CPUs with AMX, else float32, which was 1.5x faster than bfloat16 on an avx512_bf16 CPU without
    AMX; logits are fp32 either way); `max_new_tokens` caps every request's
    `max_tokens`; `prefix_reuse` keeps the KV caches of the latest prompts, at most `prefix_slots`
    of them and `prefix_tokens` tokens in all (the newest always; 3,072 tokens are 0.17 GB of
    float32 cache for Qwen-1.5B), and starts a new prompt from the longest token prefix it shares
    with one of them (at least `min_reuse_tokens`); `threads` sets torch's intra-op threads (None: leave as is);
    `lookahead` is the most tokens a greedy request drafts from an earlier occurrence of its last
    `lookup_ngram` (or fewer, down to 2) tokens (0: plain one-token steps); `batch_size` is how many
    one-token requests share one left-padded forward pass (1: one at a time, with prefix reuse);
    `sequences` is how many multi-token requests are decoded together (continuous batching: each
    prompt is prefilled alone, with prefix reuse, then joins the batch, which advances every row by
    one token per forward pass; a finished row leaves and the next request takes its place), and
    `batch_tokens` bounds the KV cache of those rows (rows x padded width, counted when a row joins);
    `matmul` picks the kernel of the float32 matrix products ("auto": oneDNN for float32 on x86-64,
    see `backends/onednn.py`; "default": torch's own); with oneDNN, `pack` keeps a second copy of the
    float32 weights in oneDNN's blocked layout for products of two rows or more (prefill, drafts,
    sequences in flight; the same numbers, faster): "always" (at load), "never", or "auto": once a
    `complete_many` call brings at least `PACK_AFTER_TOKENS` tokens of decoding budget, and only when
    the copy takes at most half the memory available and the process with it at most half the
    machine's memory (`_pack_weights`). The copy belongs to the loaded model: every
    backend on it reads it once it exists. oneDNN and packing are CPU kernels: on a GPU `matmul`
    resolves to "default" and nothing is packed.
    """

    # Packing Qwen-1.5B took 16-17 s on the 2-core development VM (mostly first-touching 7 GB of new
    # memory) and saves about 0.15 s per 8-row decoding step or 2-row draft step: it pays for itself
    # after about a hundred such steps, about 1,000 tokens decoded 8 at a time (BENCHMARKS.md).
    PACK_AFTER_TOKENS = 1024

    kind = "local"

    def __init__(
        self,
        model: str,
        dtype: str = "auto",
        max_new_tokens: int = 512,
        *,
        prefix_reuse: bool = True,
        prefix_slots: int = 16,
        prefix_tokens: int = 3072,
        min_reuse_tokens: int = 8,
        threads: int | None = None,
        expected_sha256: str | None = None,
        lookahead: int = 3,
        lookup_ngram: int = 3,
        batch_size: int = 1,
        sequences: int = 1,
        batch_tokens: int = 16384,
        matmul: str = "auto",
        pack: str = "auto",
        device: str = "auto",
    ):
        super().__init__(model)
        self.device = resolve_device(device, "device")  # InputError (exit 2) when it is not there
        self.dtype = resolve_dtype(dtype, self.device)  # resolved now: the judge signature (cache key) names the real one
        self.max_new_tokens = max_new_tokens
        self.prefix_reuse = prefix_reuse
        self.prefix_slots = prefix_slots
        self.prefix_tokens = prefix_tokens
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
        if sequences < 1 or batch_tokens < 1:
            raise InputError(f"LocalBackend: sequences and batch_tokens must be >= 1, got {sequences}, {batch_tokens}")
        self.sequences = sequences  # multi-token requests decoded together, one token each per forward pass
        self.batch_tokens = batch_tokens  # most KV-cache positions (rows x padded width) of the sequences in flight
        if matmul not in ("auto", "onednn", "default"):
            raise InputError(f'LocalBackend: matmul must be "auto", "onednn" or "default", got {matmul!r}')
        if matmul == "onednn" and not self.on_cpu:
            raise InputError(f"local_matmul: onednn is a CPU kernel, and the model runs on {self.device}; "
                             "leave local_matmul at auto (or default)")
        self.matmul = matmul  # resolved on first use (it imports torch): self.kernel
        self._kernel: str | None = None
        if pack not in ("auto", "always", "never"):
            raise InputError(f'LocalBackend: pack must be "auto", "always" or "never", got {pack!r}')
        self.pack = pack
        self._head_module: Any = None  # the output projection module: its packed copy hangs on it
        self._lock = threading.RLock()
        self._slots: list[_Slot] = []
        self._lm: Any = None
        self._tok: Any = None
        self._info: ModelInfo | None = None
        self._head: tuple[Any, Any] | None = None  # fp32 (weight, bias) of the output projection
        self._cache_kw = "cache"  # the body's keyword for its KV cache (kv.cache_kwarg), set at load
        self.forward_passes = 0  # counts calls of the transformer body; tests and benchmarks read it
        self.reused_tokens = 0  # prompt tokens taken from a cached prefix instead of recomputed
        self.drafted_tokens = 0  # prompt-lookup tokens fed as drafts, and how many the model confirmed
        self.accepted_tokens = 0
        self.most_in_flight = 0  # the most rows a batched decoding step has carried (tests read it)

    @property
    def supports_logprobs(self) -> bool:
        return True

    @property
    def on_cpu(self) -> bool:
        return device_type(self.device) == "cpu"

    @property
    def kernel(self) -> str:
        """The float32 matrix-product kernel this backend's forward passes use: "onednn" or "default"
        (always "default" on a GPU: oneDNN is a CPU library)."""
        if self._kernel is None:
            self._kernel = resolve_matmul(self.matmul, self.dtype) if self.on_cpu else "default"
        return self._kernel

    def _tensor(self, data: Any) -> Any:
        """A long tensor of token ids, positions or mask values on the model's device."""
        import torch

        return torch.tensor(data, device=self.device)

    def _scope(self) -> Any:
        return onednn_scope(self.kernel == "onednn")

    # ------------------------------------------------------------------ loading

    def load(self) -> "LocalBackend":
        """Load the model now (otherwise the first request does). Raises InputError if it cannot be found."""
        with self._lock:
            if self._lm is None:
                import torch

                if self.threads:
                    torch.set_num_threads(self.threads)
                tune_malloc()  # freed KV caches and logits go back to the system (backends/memory.py)
                lm, tok, info = load_causal_lm(self.model, dtype=self.dtype, expected_sha256=self.expected_sha256,
                                               device=self.device, chat=True)
                if self.kernel == "onednn":
                    route_linears(lm.base_model)  # only inside this backend's forward passes (onednn.py)
                head = lm.get_output_embeddings()
                bias = getattr(head, "bias", None)
                self._head = (head.weight.detach().float(), None if bias is None else bias.detach().float())
                self._head_module = head
                self._cache_kw = cache_kwarg(lm.base_model)
                self._lm, self._tok, self._info = lm, tok, info
                if self.kernel == "onednn" and self.pack == "always":
                    self._pack_weights()
        return self

    @property
    def packed(self) -> bool:
        """Whether the loaded model's products of 2+ rows read packed weights (whoever packed them)."""
        return self._head_module is not None and packed_copy(self._head_module) is not None

    def _pack_weights(self) -> None:
        """Packed copies of the body's linears and the output projection (on the loaded model, so shared
        with every backend on it); with `pack="auto"` only when the copy takes at most half the memory
        available and the process, copy included, stays within half the machine's memory (a judge that
        doubles its weights for speed should not crowd out the rest of the machine: on the 24 GB
        development VM the copy took a Qwen-1.5B run to 14-16 GB, BENCHMARKS.md)."""
        import torch

        lm, head = self._lm, self._head_module
        if self.packed or self._head[0].dtype != torch.float32:
            return
        need = unpacked_bytes(lm.base_model) + self._head[0].numel() * 4
        if self.pack == "auto":
            free, total, held = available_memory(), total_memory(), process_rss()
            if free is None or total is None or held is None or need > free // 2 or held + need > total // 2:
                log.info("local model %s: weights not packed for oneDNN (a copy of %.1f GB; %s GB available, the "
                         "process holds %s GB of the machine's %s GB)", self.model, need / 1e9,
                         *("?" if n is None else f"{n / 1e9:.1f}" for n in (free, held, total)))
                return
        t0 = time.perf_counter()
        pack_linears(lm.base_model)
        pack_module(head, self._head[0])
        log.info("local model %s: weights packed for oneDNN (%.1f GB) in %.1f s", self.model, need / 1e9,
                 time.perf_counter() - t0)

    def _maybe_pack(self, requests: Sequence[JudgeRequest]) -> None:
        if self.pack != "auto" or self.kernel != "onednn" or self.packed:
            return
        budget = sum(min(r.max_tokens, self.max_new_tokens) for r in requests if r.max_tokens > 1)
        if budget >= self.PACK_AFTER_TOKENS:
            with self._lock:
                self._pack_weights()

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
        sig = {"backend": self.kind, "model": name, "weights_sha256": sha, "dtype": self.dtype, "logits": "float32"}
        if self.kernel != "default":  # the kernels round differently: their judgments are cached apart
            sig["matmul"] = self.kernel
        if not self.on_cpu:  # a GPU's kernels round differently again; the CPU's signature stays as it was
            sig["device"] = device_type(self.device)
        return sig

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
        with self._scope():
            out = self._lm.base_model(input_ids=self._tensor([list(ids)]), use_cache=True, **{self._cache_kw: cache})
        last = out.last_hidden_state[0, -rows:] if rows > 1 else out.last_hidden_state[0, -1]
        return self._logits(last.float())

    def _new_cache(self, prefix_of: _Slot | None = None, length: int = 0) -> Any:
        if prefix_of is None or length == 0:
            return new_cache(self._lm.config)
        data = [(layer.keys[..., :length, :], layer.values[..., :length, :]) for layer in prefix_of.cache.layers]
        return new_cache(self._lm.config, data)

    def _reusable(self, slot: _Slot) -> bool:
        return plain_layers(slot.cache)

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
        compact(cache)  # the reply's room in the buffer is not kept with the prompt
        # a slot whose prompt is a prefix of this one can serve nothing this one cannot
        self._slots = [s for s in self._slots if common_prefix(s.ids, ids) < len(s.ids)]
        self._slots.insert(0, _Slot(ids=list(ids), cache=cache))
        # the newest prompts, within both bounds: a question's other ratings and battle orders arrive a
        # few prompts later, so a bound in tokens keeps more short prompts than a fixed count would
        kept, tokens = 0, 0
        for slot in self._slots[:self.prefix_slots]:
            tokens += len(slot.ids)
            if kept and tokens > self.prefix_tokens:
                break
            kept += 1
        del self._slots[kept:]

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

    def _start(self, request: JudgeRequest, ids: list[int]) -> "_Reply | None":
        """The decoding state of `request` (None: its budget is 0 tokens). Raises BackendError for a prompt
        that does not fit the model's context."""
        import torch

        limit = getattr(self._lm.config, "max_position_embeddings", None) or 10**9
        if len(ids) >= limit:
            raise BackendError(f"prompt has {len(ids)} tokens; the model's context is {limit}")
        budget = max(0, min(request.max_tokens, self.max_new_tokens, limit - len(ids)))
        if budget == 0:
            return None
        gen = None
        if request.temperature > 0:  # one generator per request: its draws do not depend on its batch-mates
            gen = torch.Generator()
            gen.manual_seed(request.seed if request.seed is not None else torch.seed())
        return _Reply(self, request, ids, budget, gen, self._eos_ids())

    def _complete(self, request: JudgeRequest) -> Completion:
        import torch

        self.load()
        ids = self.prompt_ids(request)
        reply = self._start(request, ids)
        if reply is None:
            return Completion(prompt_tokens=len(ids), finish_reason="length")
        with torch.inference_mode():
            logits, cache = self._prefill(ids)
            nxt, done = reply.emit(logits)
            if not done:
                self._decode_alone(reply, nxt, cache)
            self._remember(ids, cache)
        return reply.completion()

    def _decode_alone(self, reply: _Reply, nxt: int, cache: Any) -> None:
        """Decode `reply` to its end, alone: `nxt` is its last chosen token (not yet in `cache`, which holds
        everything before it). Greedy requests feed prompt-lookup drafts with each token. The cache may
        be left holding drafted tokens past the end (`_remember` crops to the prompt)."""
        done = False
        while not done:
            draft = self._draft(reply.ids, reply.out, reply.budget - len(reply.out)) if reply.gen is None else []
            step = [nxt, *draft]
            rows = self._forward(step, cache, rows=len(step))
            rows = rows.unsqueeze(0) if rows.dim() == 1 else rows
            self.drafted_tokens += len(draft)
            for i in range(len(step)):
                nxt, done = reply.emit(rows[i])
                if done:
                    break
                if i < len(draft) and nxt != draft[i]:
                    cache.crop(-(len(draft) - i))  # inputs after position i were guesses that failed
                    break
                self.accepted_tokens += i < len(draft)

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
        once (a run killed mid-way loses at most the judgments in progress)."""
        self.load()
        answered: list[tuple[int, Completion]] = []

        def note(i: int, comp: Completion) -> None:
            answered.append((i, comp))
            on_result(i, comp)

        started = time.perf_counter()
        try:
            self._answer_all(requests, note)
        finally:
            if any(r.max_tokens > 1 for r in requests):
                trim()  # the KV caches of this call's replies are freed: their pages go back to the system
            # this judge's speed on this machine, for a later --dry-run's time estimate (evaluate.backends.speed)
            record_speed(self.signature(), time.perf_counter() - started, [requests[i] for i, _ in answered],
                         sum(c.completion_tokens for _, c in answered))

    def _answer_all(self, requests: Sequence[JudgeRequest], on_result: Callable[[int, Completion], None]) -> None:
        self._maybe_pack(requests)
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
        rest = [i for i in range(len(requests)) if not answered[i]]
        if self.sequences > 1 and sum(requests[i].max_tokens > 1 for i in rest) > 1:
            self._decode_together([(i, requests[i]) for i in rest], on_result)
            return
        for i in rest:
            on_result(i, self._complete_or_error(requests[i]))

    def _complete_or_error(self, request: JudgeRequest) -> Completion:
        try:
            return self.complete(request)
        except Exception as exc:  # noqa: BLE001 - never raise past complete_many
            return Completion(error=str(exc) or type(exc).__name__)

    def _decode_together(self, items: Sequence[tuple[int, JudgeRequest]],
                         on_result: Callable[[int, Completion], None]) -> None:
        """Continuous batching of up to `sequences` requests, each with its own decoding options.

        Each prompt is prefilled alone (prefix reuse applies, and the prompt's logits are those of
        one-at-a-time decoding), then its KV cache joins the batch's, left-padded to the batch's width.
        Every step feeds each row its last token with an attention mask over the padding and
        explicit position ids (the row's own token count), so a row computes what it would compute
        alone, up to the float rounding of a matrix product over several rows (tests check the
        greedy text is identical in float32). A finished row leaves at once and the next request is
        prefilled into its place; columns that became padding in every row are dropped. Prompt-lookup
        drafts are not used while several rows share each pass over the weights; the last row, once no
        request waits, finishes alone with them, as one at a time would."""
        import torch

        queue = list(items)
        rows: list[tuple[int, _Reply]] = []
        lengths: list[int] = []  # each row's real tokens in the cache (its next position id)
        feed: list[int] = []  # the token each row feeds at the next step
        cache: Any = None
        mask: Any = None  # (rows, width) 1 for a real position, 0 for padding

        def fail(i: int, exc: BaseException) -> Completion:
            if isinstance(exc, (BackendError, InputError)):
                return Completion(error=str(exc))
            return Completion(error=f"local model {self.model}: {type(exc).__name__}: {exc}")

        def admit(i: int, req: JudgeRequest, ids: list[int]) -> None:
            nonlocal cache, mask
            reply = self._start(req, ids)
            if reply is None:
                on_result(i, Completion(prompt_tokens=len(ids), finish_reason="length"))
                return
            logits, own = self._prefill(ids)
            nxt, done = reply.emit(logits)
            layers = [(layer.keys, layer.values) for layer in own.layers]
            if not self._reusable(_Slot(ids, own)):
                raise BackendError("this model's KV cache cannot be batched (not a plain dynamic cache)")
            self._remember(ids, own)
            if done:
                on_result(i, reply.completion())
                return
            n = len(ids)
            row_mask = torch.ones(1, n, dtype=torch.long, device=self.device)
            if cache is None:
                cache = new_cache(self._lm.config, layers)  # a copy: `own` stays the prefix cache's
                mask = row_mask
            else:
                width = mask.shape[1]
                if n > width:  # the newcomer is longer: pad every row already in flight
                    grow = n - width
                    for layer in cache.layers:
                        layer.keys = torch.nn.functional.pad(layer.keys, (0, 0, grow, 0))
                        layer.values = torch.nn.functional.pad(layer.values, (0, 0, grow, 0))
                    mask = torch.nn.functional.pad(mask, (grow, 0))
                    width = n
                for layer, (k, v) in zip(cache.layers, layers):
                    layer.keys = torch.cat([layer.keys, torch.nn.functional.pad(k, (0, 0, width - n, 0))])
                    layer.values = torch.cat([layer.values, torch.nn.functional.pad(v, (0, 0, width - n, 0))])
                mask = torch.cat([mask, torch.nn.functional.pad(row_mask, (width - n, 0))])
            rows.append((i, reply))
            lengths.append(n)
            feed.append(nxt)

        def keep(live: list[int]) -> None:
            """Only rows `live` stay; leading columns that are padding in all of them go."""
            nonlocal cache, mask
            if not live:
                cache, mask = None, None
                rows.clear(), lengths.clear(), feed.clear()
                return
            index = self._tensor(live)
            mask = mask[index]
            start = int(torch.nonzero(mask.any(0))[0])
            mask = mask[:, start:]
            for layer in cache.layers:
                layer.keys = layer.keys[index, :, start:]
                layer.values = layer.values[index, :, start:]
            rows[:] = [rows[j] for j in live]
            lengths[:] = [lengths[j] for j in live]
            feed[:] = [feed[j] for j in live]

        with self._lock, torch.inference_mode():
            while queue or rows:
                while queue and len(rows) < self.sequences:
                    i, req = queue[0]
                    try:
                        ids = self.prompt_ids(req)
                    except Exception as exc:  # noqa: BLE001 - one bad request is one invalid judgment
                        queue.pop(0)
                        on_result(i, fail(i, exc))
                        continue
                    width = max(mask.shape[1] if rows else 0, len(ids))
                    if rows and (len(rows) + 1) * width > self.batch_tokens:
                        break  # the memory bound: this one waits for a row to finish
                    queue.pop(0)
                    try:
                        admit(i, req, ids)
                    except Exception as exc:  # noqa: BLE001
                        on_result(i, fail(i, exc))
                if not rows:
                    continue
                if len(rows) == 1 and not queue and self.lookahead > 0:
                    # the last one: alone it decodes as one-at-a-time does, with prompt-lookup drafts
                    i, reply = rows[0]
                    n = lengths[0]
                    own = new_cache(self._lm.config, [(layer.keys[:, :, -n:], layer.values[:, :, -n:])
                                                      for layer in cache.layers])
                    nxt = feed[0]
                    keep([])
                    try:
                        self._decode_alone(reply, nxt, own)
                    except Exception as exc:  # noqa: BLE001 - as a failing step: redone one at a time
                        log.warning("local decoding of the last row failed (%s); decoding it one at a time", exc)
                        on_result(i, self._complete_or_error(reply.request))
                        continue
                    on_result(i, reply.completion())
                    continue
                self.most_in_flight = max(self.most_in_flight, len(rows))
                try:
                    logits = self._step(feed, lengths, mask, cache)
                except Exception as exc:  # noqa: BLE001 - a failing step: its rows are redone one at a time
                    log.warning("local batch step over %d rows failed (%s); decoding them one at a time", len(rows), exc)
                    redo = [(i, r.request) for i, r in rows]
                    keep([])
                    for i, req in redo:
                        on_result(i, self._complete_or_error(req))
                    continue
                mask = torch.nn.functional.pad(mask, (0, 1), value=1)
                live = []
                for j, (i, reply) in enumerate(rows):
                    lengths[j] += 1
                    feed[j], done = reply.emit(logits[j])
                    if done:
                        on_result(i, reply.completion())
                    else:
                        live.append(j)
                if len(live) < len(rows):
                    keep(live)

    def _step(self, feed: list[int], lengths: list[int], mask: Any, cache: Any) -> Any:
        """One decoding step of every row of a batch: fp32 logits (rows, vocab) of the fed tokens."""
        import torch

        self.forward_passes += 1
        with self._scope():
            out = self._lm.base_model(
                input_ids=self._tensor(feed).unsqueeze(1),
                attention_mask=torch.nn.functional.pad(mask, (0, 1), value=1),
                position_ids=self._tensor(lengths).unsqueeze(1),
                use_cache=True, **{self._cache_kw: cache})
        return self._logits(out.last_hidden_state[:, -1].float())

    def _logits(self, hidden: Any) -> Any:
        """fp32 logits from fp32 final hidden states: (rows, hidden) -> (rows, vocab), or one position's
        (hidden,) -> (vocab,); through oneDNN with that kernel, else a matrix product (a matrix-vector
        product for one position, torch's fastest there)."""
        import torch

        weight, bias = self._head  # type: ignore[misc]
        if self.kernel == "onednn":
            logits = onednn_linear(hidden, weight, bias, packed_copy(self._head_module))
        else:
            logits = hidden @ weight.T if hidden.dim() > 1 else weight @ hidden
            if bias is not None:
                logits = logits + bias
        cap = getattr(self._lm.config, "final_logit_softcapping", None)
        if cap:
            logits = torch.tanh(logits / cap) * cap
        return logits

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
            ids = self._tensor([[pad] * (width - len(p)) + p for p in prompts])
            mask = self._tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])
            self.forward_passes += 1
            with self._scope():
                hidden = self._lm.base_model(input_ids=ids, attention_mask=mask).last_hidden_state[:, -1]
            logits = self._logits(hidden.float())
            eos = self._eos_ids()
            out = []
            for req, p, row in zip(requests, prompts, logits):
                nxt = int(torch.argmax(row))
                top = [self._top_logprobs(torch.log_softmax(row, -1), req.top_logprobs)] if req.top_logprobs > 0 else []
                text = "" if nxt in eos else self._tok.decode([nxt], skip_special_tokens=True)
                out.append(Completion(text=text, top_logprobs=top, prompt_tokens=len(p), completion_tokens=1,
                                      finish_reason="stop" if nxt in eos else "length"))
            return out

