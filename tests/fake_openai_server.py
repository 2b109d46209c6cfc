"""A scriptable OpenAI-compatible HTTP server for tests and benchmarks.

It is a real server on 127.0.0.1 (a random free port), so the code under test goes through the
real `openai` client, real sockets, real timeouts. Each request to /v1/chat/completions is
answered by the next `Reply` in `server.queue`, else by `server.reply_fn(request)`. Faults are
replies too: `Reply.rate_limited(1.0)`, `Reply.server_error()`, `Reply.stall(5)`,
`Reply.malformed()`, `Reply.empty()`. Every request is recorded (headers included).
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Iterator

import pytest


@dataclass
class Reply:
    """One scripted answer.

    `top_logprobs`: one {token: logprob} per generated position, best first; the first token of
    each is the one "sampled". Sent (cut to the request's top_logprobs) only when the request
    asks for logprobs; None simulates a server that never returns them.
    """

    content: str | None = "ok"
    status: int = 200
    top_logprobs: list[dict[str, float]] | None = None
    usage: tuple[int, int] | None = (10, 1)  # (prompt, completion); None omits the usage block
    finish_reason: str = "stop"
    latency: float | None = None  # None: the server's default latency
    headers: dict[str, str] = field(default_factory=dict)
    raw_body: bytes | None = None  # sent verbatim instead of a JSON body
    hang: float = 0.0  # seconds to stall before answering (longer than the client timeout = a hang)

    @classmethod
    def rate_limited(cls, retry_after: float = 1.0) -> "Reply":
        body = json.dumps({"error": {"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"}})
        return cls(status=429, headers={"Retry-After": f"{retry_after:g}"}, raw_body=body.encode())

    @classmethod
    def server_error(cls, status: int = 500) -> "Reply":
        body = json.dumps({"error": {"message": "The server had an error", "type": "server_error"}})
        return cls(status=status, raw_body=body.encode())

    @classmethod
    def client_error(cls, status: int = 400) -> "Reply":
        body = json.dumps({"error": {"message": f"client error {status}", "type": "invalid_request_error"}})
        return cls(status=status, raw_body=body.encode())

    @classmethod
    def malformed(cls) -> "Reply":
        return cls(raw_body=b'{"id": "chatcmpl-x", "object": "chat.completion", "choices": [{"index": 0, "mess')

    @classmethod
    def empty(cls) -> "Reply":
        return cls(content="")

    @classmethod
    def stall(cls, seconds: float) -> "Reply":
        return cls(hang=seconds)


@dataclass
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]
    raw: bytes
    time: float
    answered: int = 0  # the status of the reply once it was written (0: none was, e.g. the server stopped)

    @property
    def body(self) -> dict[str, Any]:
        return json.loads(self.raw) if self.raw else {}

    @property
    def user_text(self) -> str:
        msgs = self.body.get("messages", [])
        return next((m["content"] for m in reversed(msgs) if m.get("role") == "user"), "")


ReplyFn = Callable[[RecordedRequest], "Reply | str"]


def _default_reply(_: RecordedRequest) -> Reply:
    return Reply()


class FakeOpenAIServer:
    """Start with `start()` (or as a context manager); `url` is the base URL ending in /v1."""

    def __init__(self, reply_fn: ReplyFn | None = None, latency: float = 0.0, model: str = "fake-judge"):
        self.reply_fn: ReplyFn = reply_fn or _default_reply
        self.latency = latency
        self.model = model
        self.queue: deque[Reply] = deque()
        self.requests: list[RecordedRequest] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ control
    @property
    def url(self) -> str:
        assert self._httpd is not None, "server not started"
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    @property
    def chat_calls(self) -> int:
        with self._lock:
            return sum(1 for r in self.requests if r.path.endswith("/chat/completions"))

    def chat_requests(self) -> list[RecordedRequest]:
        with self._lock:
            return [r for r in self.requests if r.path.endswith("/chat/completions")]

    def script(self, *replies: Reply) -> None:
        """Queue replies for the next requests, in arrival order."""
        with self._lock:
            self.queue.extend(replies)

    def reset(self) -> None:
        with self._lock:
            self.requests.clear()
            self.queue.clear()

    def start(self) -> "FakeOpenAIServer":
        server = self

        class Handler(_Handler):
            fake = server

        class Server(ThreadingHTTPServer):
            daemon_threads = True
            request_queue_size = 256  # a burst of concurrent connects must not hit a tiny listen backlog

        self._httpd = Server(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="fake-openai", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()  # wakes stalled handlers
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> "FakeOpenAIServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ answering
    def _next_reply(self, rec: RecordedRequest) -> Reply:
        with self._lock:
            scripted = self.queue.popleft() if self.queue else None
        if scripted is not None:
            return scripted
        reply = self.reply_fn(rec)
        return Reply(content=reply) if isinstance(reply, str) else reply

    def _completion_body(self, rec: RecordedRequest, reply: Reply) -> dict[str, Any]:
        req = rec.body
        logprobs = None
        if req.get("logprobs") and reply.top_logprobs is not None:
            k = int(req.get("top_logprobs") or 0)
            content = []
            for pos in reply.top_logprobs:
                ranked = sorted(pos.items(), key=lambda kv: -kv[1])
                tok, lp = ranked[0]
                content.append({
                    "token": tok, "logprob": lp, "bytes": list(tok.encode()),
                    "top_logprobs": [{"token": t, "logprob": v, "bytes": list(t.encode())} for t, v in ranked[:k]],
                })
            logprobs = {"content": content, "refusal": None}
        body: dict[str, Any] = {
            "id": f"chatcmpl-fake-{len(self.requests)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": req.get("model", self.model),
            "choices": [{
                "index": 0,
                "message": {"role": "assistant", "content": reply.content, "refusal": None},
                "logprobs": logprobs,
                "finish_reason": reply.finish_reason,
            }],
        }
        if reply.usage is not None:
            p, c = reply.usage
            body["usage"] = {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c}
        return body


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as real servers do
    # Headers and body go out in two writes; with Nagle on, the body waits for the client's
    # delayed ACK (about 40 ms on Linux) and every request looks 40 ms slower than scripted.
    disable_nagle_algorithm = True
    fake: FakeOpenAIServer

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def _record(self, raw: bytes) -> RecordedRequest:
        rec = RecordedRequest(self.command, self.path, {k: v for k, v in self.headers.items()}, raw, time.monotonic())
        with self.fake._lock:
            self.fake.requests.append(rec)
        return rec

    def _send(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> bool:
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(body)
            return True
        except (BrokenPipeError, ConnectionResetError):
            return False  # the client gave up (a timeout test)

    def do_GET(self) -> None:
        self._record(b"")
        if self.path.rstrip("/").endswith("/_stats"):  # for a server running in another process
            self._send(200, json.dumps({"chat_calls": self.fake.chat_calls, "requests": len(self.fake.requests)}).encode())
        elif self.path.rstrip("/").endswith("/models"):
            body = {"object": "list", "data": [{"id": self.fake.model, "object": "model", "created": 0, "owned_by": "fake"}]}
            self._send(200, json.dumps(body).encode())
        else:
            self._send(404, b'{"error": {"message": "not found"}}')

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        rec = self._record(raw)
        if self.fake._stopping.is_set():  # a stopped (dying) server drops its open connections
            self.close_connection = True
            return
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self._send(404, b'{"error": {"message": "not found"}}')
            return
        reply = self.fake._next_reply(rec)
        delay = self.fake.latency if reply.latency is None else reply.latency
        if reply.hang or delay:
            if self.fake._stopping.wait(reply.hang + delay):
                self.close_connection = True
                return
        body = reply.raw_body if reply.raw_body is not None else json.dumps(self.fake._completion_body(rec, reply)).encode()
        if self._send(reply.status, body, reply.headers):
            rec.answered = reply.status


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAIServer]:
    """A fresh server per test, stopped afterwards."""
    with FakeOpenAIServer() as server:
        yield server
