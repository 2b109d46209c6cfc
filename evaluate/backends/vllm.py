"""`backend: vllm`: vLLM's OpenAI-compatible server, started by the tool for the named model.

The model is named as for the local backend (a packaged name, a Hugging Face folder, a GGUF, which
is converted once as for the local backend, or a hub id where a hub is reachable) and served from
that folder. The server starts at the first request the cache cannot answer (a run answered from
the cache starts nothing), on a free port of 127.0.0.1, under the watchdog of vllm_server.py;
every request then goes through `OpenAICompatBackend` like any OpenAI-compatible judge (the pool,
retries, progress, cost), and the server stops when the tool is done with it.

The signature, and so the cache key, names the model by its weights (the sha256 the local backend
uses) and the dtype, never the port: a re-run on another port answers from the cache. A server
that exits mid-run makes the judge unreachable at once (the run stops, exit 3, naming the server
and its log); what was answered is in the cache, and the re-run sends only the rest.

Where vLLM lives and the server's flags: vllm_engine.py; the server's lifetime: vllm_server.py.
"""

from __future__ import annotations

import threading
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Sequence

from ..core.errors import InputError
from .base import Backend, Completion, JudgeRequest, ProgressFn
from .retry import JudgeUnreachable, ResultFn
from .server_watchdog import GRACE
from .vllm_engine import Engine, Install, check_install, engine, looked_at, vllm_python
from .vllm_server import ManagedServer, ServerFailed, ServerSpec, acquire, release

if TYPE_CHECKING:
    from .kinds import ServerLog
    from .openai_compat import OpenAICompatBackend

DOWN_AFTER = 2.0  # seconds of refused connections after which a server that answered before is dead


class VllmBackend(Backend):
    """A model served by a vLLM server the tool starts (see the module docstring).

    Args:
        opts: the block (`JudgeOptions`: model, engine keys, concurrency, timeout, max_retries, price).
        server_log: opens the file the server's output goes to (the save path's logs/vllm-NAME.log);
            None: a temporary file, named when the server starts.
    """

    kind = "vllm"

    def __init__(self, opts: Any, server_log: "ServerLog | None" = None):
        super().__init__(opts.model)
        self.opts = opts
        self._server_log = server_log
        self._lock = threading.Lock()  # the state below; never held while the server starts
        self._start_lock = threading.Lock()
        self._resolved: Any = None
        self._install: Install | None = None
        self._spec: ServerSpec | None = None
        self._server: ManagedServer | None = None
        self._client: "OpenAICompatBackend | None" = None
        self._failed: str | None = None
        self._closed = False

    # ------------------------------------------------------------------ identity
    @property
    def supports_logprobs(self) -> bool:
        return True

    def install(self) -> Install:
        if self._install is None:
            self._install = check_install(vllm_python(self.opts), looked_at(self.opts))
        return self._install

    def resolved(self) -> Any:
        if self._resolved is None:
            from ..models.load import resolve_model

            self._resolved = resolve_model(self.opts.model)
        return self._resolved

    def engine(self) -> Engine:
        return engine(self.opts, self.install())

    def signature(self) -> dict[str, Any]:
        """The weights (as the local backend names them), the dtype and the longest sequence (a reply that
        does not fit is cut), never where the server listens."""
        r = self.resolved()
        eng = self.engine()
        sig: dict[str, Any] = {"backend": self.kind, "model": r.name, "weights_sha256": r.sha256, "dtype": eng.dtype}
        if eng.max_model_len:
            sig["max_model_len"] = eng.max_model_len
        if self.opts.quantization:
            sig["quantization"] = self.opts.quantization
        return sig

    def spec(self) -> ServerSpec:
        """The server this backend needs (the weights folder: a GGUF is converted first, once)."""
        if self._spec is None:
            from ..models.convert import ensure_converted

            folder = ensure_converted(self.resolved())
            eng = self.engine()
            self._spec = ServerSpec(self.install().python, str(folder), self.resolved().name, eng.flags, eng.env)
        return self._spec

    def _fit(self, request: JudgeRequest) -> JudgeRequest:
        """A request asking more tokens than the server's longest sequence asks that many (vLLM refuses it
        otherwise; it cuts any reply to what fits after the prompt itself). The cache keeps the request as asked."""
        most = self.engine().max_model_len
        return replace(request, max_tokens=most) if most and request.max_tokens > most else request

    # ------------------------------------------------------------------ the server
    def _ready(self) -> "OpenAICompatBackend | None":
        """The client of a running server, starting it on first use; None when it cannot be had
        (`unreachable` says why)."""
        with self._start_lock:  # one thread starts the server; the others wait for it here
            if self._closed:
                return None
            if self._client is not None or self._failed is not None:
                return self._client
            try:
                spec = self.spec()
                log = self._server_log(f"vllm-{spec.served_name}") if self._server_log else None
                server = acquire(spec, lambda: ManagedServer(spec, log=log, startup_timeout=self.opts.startup_timeout))
            except ServerFailed as exc:
                self._failed = str(exc)
                return None
            except InputError as exc:
                self._failed = f"vllm: {exc}"
                return None
            with self._lock:
                if self._closed:  # closed while the server was starting (a stopped run): not ours any more
                    release(spec)
                    return None
                self._server, self._spec = server, spec
                self._client = self._open_client(
                    spec.served_name, base_url=server.url, api_key="EMPTY", concurrency=self.opts.concurrency,
                    timeout=self.opts.timeout, max_retries=self.opts.max_retries, price=self.opts.price,
                    unreachable_after=DOWN_AFTER, down_after=DOWN_AFTER)
                self._client.judge_name = self.judge_name  # its messages name the judge as this one's do
                return self._client

    def _open_client(self, *args: Any, **kwargs: Any) -> "OpenAICompatBackend":
        from .openai_compat import OpenAICompatBackend

        return OpenAICompatBackend(*args, **kwargs)

    @property
    def server(self) -> "ManagedServer | None":
        return self._server

    @property
    def unreachable(self) -> str | None:
        """Why no request can be answered: the server failed to start, or went away mid-run (said once,
        then kept: the server is not started again in this run)."""
        if self._failed is not None:
            return self._failed
        down = self._client.unreachable if self._client is not None else None
        server = self._server
        if down is None and not self._died(server):
            return None
        # a dead server's watchdog ends within seconds (at most its grace period after the server itself)
        code = server.wait_exit(5.0 if down else GRACE + 5.0) if server is not None else None
        if server is not None and code is not None:
            why = (f"{server.describe()} exited with code {code} during the run; the answers received are kept in "
                   f"the cache, and a re-run sends only the rest; the last lines of its log:\n{server.log_tail()}")
        else:
            why = f"{server.describe() if server else 'the vllm server'}: {down or 'its process has ended'}"
        with self._lock:
            self._failed = self._failed or why
        return self._failed

    @staticmethod
    def _died(server: ManagedServer | None) -> bool:
        """The server this run started has exited on its own. With retries the client finds a dead server
        unreachable after DOWN_AFTER s of refused connections; with `max_retries: 0` every request fails at
        once, none is retried, and the run ended with "24 of 24 scores invalid ... connection refused" and no
        word of the server (issue 47): its exit is then what says it is gone."""
        return server is not None and server.ready and not server.stopped and server.gone()

    def _unsent(self, n: int) -> list[Completion]:
        return [Completion(error=str(JudgeUnreachable(self.unreachable or "", sent=False))) for _ in range(n)]

    # ------------------------------------------------------------------ Backend
    def complete(self, request: JudgeRequest) -> Completion:
        client = self._ready()
        if client is None:
            raise JudgeUnreachable(self.unreachable or "", sent=False)
        return client.complete(self._fit(request))

    def complete_many_indexed(self, requests: Sequence[JudgeRequest], on_result: ResultFn | None = None
                              ) -> list[Completion]:
        client = self._ready() if requests else None
        if client is None:
            return self._unsent(len(requests))  # the cache reports what comes back unreported
        return client.complete_many_indexed([self._fit(r) for r in requests], on_result)

    def complete_many(self, requests: Sequence[JudgeRequest], progress: ProgressFn | None = None) -> list[Completion]:
        client = self._ready() if requests else None
        if client is None:
            out = self._unsent(len(requests))
            for c in out:
                if progress is not None:
                    progress(c)
            return out
        return client.complete_many([self._fit(r) for r in requests], progress)

    def usage(self) -> dict[str, Any]:
        return self._client.usage() if self._client is not None else {}

    def cancel(self) -> None:
        if self._client is not None:
            self._client.cancel()

    def close(self) -> None:
        """Close the client and let the server go (it stops after its last user, or at the end of the run).
        Never waits for a server that is still starting: that one is let go when its start returns."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            client, spec = self._client, self._spec
        if client is not None:
            client.close()
            if spec is not None:
                release(spec)
