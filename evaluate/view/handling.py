"""How the viewer's server reads requests and keeps its connections: the standard library's http.server
(one thread per connection, HTTP/1.1 keep-alive), held to the rules a well-kept server follows.

On a kept-alive connection the bytes after a request's headers are its body, exactly Content-Length of
them, and then the next request. The standard library leaves the body to the handler, so a handler that
answers without reading it (a refusal, a wrong token, an unknown route) leaves it to be parsed as the
next request: a label body over the size limit answered 413, and a `GET /favicon.ico` placed inside it
was then served (issue 47). Here, below every route:

- the body is framed before any route runs: Content-Length only (a Transfer-Encoding, which
  http.server does not decode, is refused with 411; a malformed or repeated length with 400), at most
  `MAX_BODY` bytes (else 413, and to an `Expect: 100-continue` a 413 instead of the 100);
- a route reads the body through `rfile`, which is that body alone: reading past it gives nothing,
  never the next request;
- whatever a route left unread is read and dropped after its answer (at most `MAX_BODY`), so the
  connection stays usable; a refused body is not read but the connection is closed (`Connection:
  close`) after up to `DISCARD_LIMIT` bytes of it are drained, so that the client, still sending, gets
  the answer instead of a reset;
- errors the standard library answers itself (a bad request line, an unsupported method) are JSON,
  with `Connection: close`;
- at most `MAX_CONNECTIONS` connections are served at once; one more is answered 503 with Retry-After
  (the page retries), and the listen backlog is `LISTEN_BACKLOG`, not the standard library's 5, which
  reset 22 to 33 of 50 label writes sent at once;
- a connection idle (or a body not arriving) for `IDLE_TIMEOUT` seconds is closed.

Why not an ASGI framework served by uvicorn: docs/view.md ("How the server handles requests").
"""

from __future__ import annotations

import json
import socket
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, BinaryIO

MAX_BODY = 64 * 1024  # the largest request body read (a label is a few hundred bytes)
DISCARD_LIMIT = 1024 * 1024  # bytes of a refused body drained before its connection is closed
DRAIN_SECONDS = 2.0  # ... for at most this long
MAX_CONNECTIONS = 64  # connections served at once (a browser keeps about 6)
LISTEN_BACKLOG = 128  # connections the kernel queues before they are accepted
IDLE_TIMEOUT = 30.0  # seconds a connection may sit idle, or a declared body take to arrive
RETRY_AFTER = 1  # seconds, in a 503's Retry-After


class Body:
    """The request's body as a file: at most `length` bytes of the connection, then end of file."""

    def __init__(self, raw: BinaryIO, length: int):
        self.raw = raw
        self.left = length

    def read(self, n: int = -1) -> bytes:
        n = self.left if n is None or n < 0 else min(n, self.left)
        data = self.raw.read(n) if n else b""
        self.left -= len(data)
        if n and not data:  # the client closed before sending what it declared
            self.left = 0
        return data

    def readline(self, limit: int = -1) -> bytes:
        limit = self.left if limit is None or limit < 0 else min(limit, self.left)
        data = self.raw.readline(limit) if limit else b""
        self.left -= len(data)
        if limit and not data:
            self.left = 0
        return data

    def drain(self) -> bool:
        """Read and drop what is left; False when it did not all arrive (the connection must close)."""
        try:
            while self.left > 0:
                if not self.read(min(self.left, 65536)):
                    return False
        except OSError:  # a timeout included
            return False
        return True


class ViewServer(ThreadingHTTPServer):
    """ThreadingHTTPServer with a listen backlog for bursts and a bound on the connections served."""

    daemon_threads = True
    request_queue_size = LISTEN_BACKLOG

    def __init__(self, address: Any, handler: type, max_connections: int = MAX_CONNECTIONS):
        self.slots = threading.BoundedSemaphore(max_connections)
        super().__init__(address, handler)


class Handler(BaseHTTPRequestHandler):
    """The request-handling layer under the viewer's routes (the module docstring): body framing,
    keep-alive, the connection bound, error answers. Routes see `rfile` as the body alone."""

    protocol_version = "HTTP/1.1"
    timeout = IDLE_TIMEOUT
    _over_capacity = False
    _body: Body | None = None

    # --- connections ------------------------------------------------------------------------------
    def handle(self) -> None:
        slots = getattr(self.server, "slots", None)
        if slots is not None and not slots.acquire(blocking=False):
            self._over_capacity = True  # one request is read and answered 503, then the connection closes
            self.close_connection = True
            self.handle_one_request()
            return
        try:
            super().handle()
        finally:
            if slots is not None:
                slots.release()

    def handle_one_request(self) -> None:
        try:
            super().handle_one_request()
        finally:
            body, self._body = self._body, None
            if body is not None:
                self.rfile = body.raw  # type: ignore[assignment]
                if body.left and not self.close_connection and not body.drain():
                    self.close_connection = True

    # --- framing ----------------------------------------------------------------------------------
    def _framing(self) -> tuple[int, HTTPStatus | None, str]:
        """(the body's length, or an error status and why) from the request's headers."""
        if self.headers.get("Transfer-Encoding") is not None:
            return 0, HTTPStatus.LENGTH_REQUIRED, "a request body needs a Content-Length (Transfer-Encoding is not read)"
        values = self.headers.get_all("Content-Length") or []
        if not values:
            return 0, None, ""
        if len(set(values)) > 1 or not values[0].strip().isdigit():
            return 0, HTTPStatus.BAD_REQUEST, "Content-Length: expected one number of bytes"
        length = int(values[0])
        if length > MAX_BODY:
            return length, HTTPStatus.REQUEST_ENTITY_TOO_LARGE, f"a request body is at most {MAX_BODY} bytes"
        return length, None, ""

    def handle_expect_100(self) -> bool:
        length, status, why = self._framing()
        if status is not None or self._over_capacity:
            self._refuse(status or HTTPStatus.SERVICE_UNAVAILABLE, why or _BUSY, drain=0)
            return False
        return super().handle_expect_100()

    def parse_request(self) -> bool:
        if not super().parse_request():
            return False
        length, status, why = self._framing()
        if status is not None:
            self._refuse(status, why, drain=length or DISCARD_LIMIT)
            return False
        if self._over_capacity:
            self._refuse(HTTPStatus.SERVICE_UNAVAILABLE, _BUSY, drain=length)
            return False
        self._body = Body(self.rfile, length)
        self.rfile = self._body  # type: ignore[assignment]
        return True

    # --- answers ----------------------------------------------------------------------------------
    def _refuse(self, status: HTTPStatus, why: str, drain: int) -> None:
        """Answer `status` and close the connection, first reading up to `drain` bytes of the body the
        client may still be sending (so that it reads the answer rather than a reset)."""
        self.send_error(status, why)
        self.wfile.flush()
        left = min(drain, DISCARD_LIMIT)
        try:
            self.connection.settimeout(DRAIN_SECONDS)
            while left > 0:
                got = self.rfile.read1(min(left, 65536)) if hasattr(self.rfile, "read1") else self.rfile.read(
                    min(left, 65536))
                if not got:
                    break
                left -= len(got)
        except (OSError, socket.timeout):
            pass

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """The standard library's own refusals (and ours) as JSON, closing the connection."""
        try:
            status = HTTPStatus(code)
        except ValueError:
            status = HTTPStatus.INTERNAL_SERVER_ERROR
        body = json.dumps({"error": message or status.phrase}).encode("utf-8")
        self.log_error("code %d, message %s", code, message)
        self.send_response(code, status.phrase)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Cache-Control", "no-store")
        if code == HTTPStatus.SERVICE_UNAVAILABLE:
            self.send_header("Retry-After", str(RETRY_AFTER))
        self.send_header("Connection", "close")  # also sets close_connection
        self.end_headers()
        if getattr(self, "command", None) != "HEAD":
            self.wfile.write(body)


_BUSY = "the viewer is serving as many connections as it takes; try again in a moment"
