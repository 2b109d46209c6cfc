"""The fake OpenAI-compatible server with the Batch API: /v1/files and /v1/batches.

Extends `FakeOpenAIServer` (chat completions stay as they are). A batch is answered line by line
with the server's `reply_fn`, like a chat call; what happens to it is scripted per batch in
`server.outcomes` (consumed in creation order, default "completed"):

    "completed"   every line answered
    "partial"     every other line fails (HTTP 500 in the error file), the rest answered
    "server_error" every line fails with HTTP 500
    "bad_request" every other line fails with HTTP 400 (not retryable)
    "expired"     the first half answered, the rest in the error file as batch_expired
    "cancelled"   the first half answered, then cancelled
    "failed"      the whole file refused (no output at all)

A batch stays `in_progress` for `polls_before_done` retrieves, and forever while `hold` is set
(to kill a client while it polls). Every created batch is kept in `batches` with its custom ids.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from email.parser import BytesParser
from email.policy import default as email_policy
from typing import Any, Iterator

import pytest

from fake_openai_server import FakeOpenAIServer, RecordedRequest, Reply, _Handler


class FakeBatchServer(FakeOpenAIServer):
    def __init__(self, *args: Any, polls_before_done: int = 1, **kw: Any):
        super().__init__(*args, **kw)
        self.files: dict[str, bytes] = {}
        self.batches: dict[str, dict[str, Any]] = {}
        self.outcomes: list[str] = []
        self.polls_before_done = polls_before_done
        self.hold = threading.Event()  # set: batches never finish
        self.uploads: list[bytes] = []

    def start(self) -> "FakeBatchServer":
        server = self

        class Handler(_BatchHandler):
            fake = server

        from http.server import ThreadingHTTPServer

        class Server(ThreadingHTTPServer):
            daemon_threads = True
            request_queue_size = 256

        self._httpd = Server(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True)
        self._thread.start()
        return self

    # ------------------------------------------------------------------ state
    def created_ids(self) -> list[str]:
        """Every custom_id of every batch created, in order (a request paid twice appears twice)."""
        with self._lock:
            return [cid for b in self.batches.values() for cid in b["custom_ids"]]

    def _new_file(self, data: bytes, purpose: str, name: str = "file.jsonl") -> dict[str, Any]:
        fid = "file-" + uuid.uuid4().hex[:12]
        with self._lock:
            self.files[fid] = data
        return {"id": fid, "object": "file", "bytes": len(data), "created_at": int(time.time()),
                "filename": name, "purpose": purpose, "status": "processed"}

    def _create_batch(self, body: dict[str, Any]) -> dict[str, Any]:
        fid = body["input_file_id"]
        lines = [json.loads(x) for x in self.files[fid].decode().splitlines() if x.strip()]
        with self._lock:
            outcome = self.outcomes.pop(0) if self.outcomes else "completed"
            bid = "batch_" + uuid.uuid4().hex[:12]
            self.batches[bid] = {"id": bid, "input_file_id": fid, "lines": lines, "outcome": outcome,
                                 "polls": 0, "status": "validating", "output_file_id": None,
                                 "error_file_id": None, "custom_ids": [x["custom_id"] for x in lines],
                                 "metadata": body.get("metadata"), "created_at": int(time.time())}
        return self._batch_json(bid)

    def _batch_json(self, bid: str) -> dict[str, Any]:
        b = self.batches[bid]
        errors = None
        if b["status"] == "failed":
            errors = {"object": "list", "data": [{"code": "invalid_request", "message": "the file was refused",
                                                  "line": 1, "param": None}]}
        return {"id": bid, "object": "batch", "endpoint": "/v1/chat/completions", "errors": errors,
                "input_file_id": b["input_file_id"], "completion_window": "24h", "status": b["status"],
                "output_file_id": b["output_file_id"], "error_file_id": b["error_file_id"],
                "created_at": b["created_at"], "metadata": b["metadata"],
                "request_counts": {"total": len(b["lines"]), "completed": 0, "failed": 0}}

    def _poll(self, bid: str) -> dict[str, Any]:
        with self._lock:
            b = self.batches[bid]
            if b["status"] in ("completed", "failed", "expired", "cancelled") or self.hold.is_set():
                if b["status"] == "validating":
                    b["status"] = "in_progress"
                return self._batch_json(bid)
            b["polls"] += 1
            if b["polls"] <= self.polls_before_done:
                b["status"] = "in_progress"
                return self._batch_json(bid)
        self._finish(b)
        with self._lock:
            return self._batch_json(bid)

    def _finish(self, b: dict[str, Any]) -> None:
        outcome, lines = b["outcome"], b["lines"]
        out, err = [], []
        half = len(lines) // 2
        for i, line in enumerate(lines):
            cid = line["custom_id"]
            fail = None
            if outcome in ("partial", "bad_request") and i % 2 == 1 or outcome == "server_error":
                fail = 400 if outcome == "bad_request" else 500
            if outcome in ("expired", "cancelled") and i >= half:
                if outcome == "expired":
                    err.append({"id": f"req_{i}", "custom_id": cid, "response": None,
                                "error": {"code": "batch_expired", "message": "This request could not be executed "
                                          "before the completion window expired."}})
                continue
            if outcome == "failed":
                continue
            if fail:
                err.append({"id": f"req_{i}", "custom_id": cid,
                            "response": {"status_code": fail, "request_id": f"r{i}",
                                         "body": {"error": {"message": f"scripted {fail}", "type": "x"}}},
                            "error": None})
                continue
            rec = RecordedRequest("POST", "/v1/chat/completions", {}, json.dumps(line["body"]).encode(), time.monotonic())
            reply = self.reply_fn(rec)
            reply = Reply(content=reply) if isinstance(reply, str) else reply
            body = self._completion_body(rec, reply)
            out.append({"id": f"req_{i}", "custom_id": cid,
                        "response": {"status_code": 200, "request_id": f"r{i}", "body": body}, "error": None})
        to_bytes = lambda rows: "".join(json.dumps(r) + "\n" for r in rows).encode()  # noqa: E731
        status = {"partial": "completed", "bad_request": "completed", "server_error": "completed"}.get(outcome, outcome)
        b["output_file_id"] = self._new_file(to_bytes(out), "batch_output")["id"] if out else None
        b["error_file_id"] = self._new_file(to_bytes(err), "batch_output")["id"] if err else None
        with self._lock:
            b["status"] = status


class _BatchHandler(_Handler):
    fake: FakeBatchServer

    def _json(self, status: int, obj: Any) -> None:
        self._send(status, json.dumps(obj).encode())

    def do_GET(self) -> None:
        path = self.path.split("?")[0].rstrip("/")
        parts = path.split("/")
        if "/files/" in path and path.endswith("/content"):
            self._record(b"")
            data = self.fake.files.get(parts[-2])
            if data is None:
                self._json(404, {"error": {"message": "no such file"}})
            else:
                self._send(200, data, {"Content-Type": "application/jsonl"})
        elif path.endswith("/batches"):
            self._record(b"")
            with self.fake._lock:
                data = [self.fake._batch_json(b) for b in reversed(list(self.fake.batches))]
            self._json(200, {"object": "list", "data": data, "has_more": False,
                             "first_id": data[0]["id"] if data else None, "last_id": data[-1]["id"] if data else None})
        elif "/batches/" in path:
            self._record(b"")
            if parts[-1] not in self.fake.batches:
                self._json(404, {"error": {"message": "no such batch"}})
            else:
                self._json(200, self.fake._poll(parts[-1]))
        else:
            super().do_GET()

    def do_POST(self) -> None:
        path = self.path.split("?")[0].rstrip("/")
        if path.endswith("/files"):
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self._record(raw)
            msg = BytesParser(policy=email_policy).parsebytes(
                b"Content-Type: " + self.headers["Content-Type"].encode() + b"\r\n\r\n" + raw)
            fields = {p.get_param("name", header="content-disposition"): p for p in msg.iter_parts()}
            data = fields["file"].get_payload(decode=True)
            self.fake.uploads.append(data)
            purpose = fields["purpose"].get_payload(decode=True).decode()
            self._json(200, self.fake._new_file(data, purpose, fields["file"].get_filename() or "f.jsonl"))
        elif path.endswith("/batches"):
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self._record(raw)
            self._json(200, self.fake._create_batch(json.loads(raw)))
        elif path.endswith("/cancel"):
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            bid = path.split("/")[-2]
            with self.fake._lock:
                self.fake.batches[bid]["outcome"] = "cancelled"
            self._json(200, self.fake._batch_json(bid))
        else:
            super().do_POST()


@pytest.fixture
def fake_batch() -> Iterator[FakeBatchServer]:
    with FakeBatchServer() as server:
        yield server
