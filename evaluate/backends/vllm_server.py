"""vLLM's OpenAI-compatible server, started for a model and stopped when the tool is done with it.

One server per distinct `ServerSpec` (interpreter, weights folder, served name, engine flags and
environment) in the process, shared by every backend that asks for the same one (a judge and a
model under test that are the same model with the same engine settings): `acquire` counts the
users and starts the server for the first, `release` stops it after the last. Inside `hold()` (a
command of eval.py holds it for its whole run) a server whose users are all done is kept until the
hold ends, so a run that first generates answers with a model and then judges with it starts the
server once.

No server outlives the tool. The server runs under `server_watchdog.py`, a small process in a
session of its own that started the server in another session and holds the read end of a pipe
whose write end only this process has: when this process ends in any way (a normal end, an
error, Ctrl-C, SIGTERM, SIGKILL) the pipe reaches EOF and the watchdog stops the server's whole
process group (the API server, the engine core, its workers), SIGTERM then SIGKILL. `stop()`
closes the pipe and waits for that to be done.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Callable, Iterator

WATCHDOG = Path(__file__).with_name("server_watchdog.py")
ENTRY = "vllm.entrypoints.openai.api_server"
OWNER_ENV = "EVAL_VLLM_OWNER"  # set in the server's environment: the pid of the tool that started it
PROGRESS_EVERY = 15.0  # seconds between two "still loading" lines
STOP_WAIT = 30.0  # seconds `stop` waits for the watchdog to have stopped the server


class ServerFailed(Exception):
    """The server exited while starting or never answered; the message has the last lines of its log."""


@dataclass(frozen=True)
class ServerSpec:
    """What makes two servers the same server."""

    python: str
    folder: str
    served_name: str
    flags: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()

    def argv(self, port: int) -> list[str]:
        return [self.python, "-m", ENTRY, "--model", self.folder, "--served-model-name", self.served_name,
                "--host", "127.0.0.1", "--port", str(port), *self.flags]


def free_port() -> int:
    """A TCP port nothing listens on now, on 127.0.0.1."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def group_alive(pgid: int) -> bool:
    """Whether a process of group `pgid` still runs (an exited one not yet collected by its parent holds
    nothing and does not count). Linux: /proc; elsewhere whether the group can be signalled."""
    proc = Path("/proc")
    if not proc.is_dir():
        try:
            os.killpg(pgid, 0)
            return True
        except OSError:
            return False
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 2 and fields[2] == str(pgid) and fields[0] not in ("Z", "X"):
            return True
    return False


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


class ManagedServer:
    """One vLLM server process group under its watchdog. `start()` returns once /v1/models lists the
    model; `exit_code` is set once the server has exited; `stop()` ends it."""

    def __init__(self, spec: ServerSpec, *, log: BinaryIO | None = None, startup_timeout: float = 600.0,
                 say: Callable[[str], None] = _say):
        self.spec = spec
        self.startup_timeout = startup_timeout
        self._say = say
        if log is None:
            log = tempfile.NamedTemporaryFile(prefix=f"vllm-{_safe(spec.served_name)}-", suffix=".log", delete=False)
        self.log_path = str(getattr(log, "name", "?"))
        self._log = log
        # the save path's log holds every run's servers (appended): what this server says starts here, and only
        # that is quoted ("still loading", why it died), never an earlier run's last line (issue 47)
        try:
            self._log_start = log.tell()
        except (OSError, ValueError):
            self._log_start = 0
        self.port = 0
        self.pid: int | None = None
        self._watchdog: subprocess.Popen | None = None
        self._pipe: int | None = None  # the write end: closed (or this process gone) = stop the server
        self.ready = False
        self.stopped = False

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def describe(self) -> str:
        where = f"pid {self.pid}, 127.0.0.1:{self.port}" if self.pid else "not started"
        return f"the vllm server for {self.spec.served_name} ({where}; log: {self.log_path})"

    @property
    def exit_code(self) -> int | None:
        """The server's exit code (128 + N for a signal N) once it has exited, else None. A watchdog that
        was itself killed (a negative code) leaves vLLM's engine processes behind: they are killed here."""
        if self._watchdog is None:
            return None
        return self._after(self._watchdog.poll())

    def gone(self) -> bool:
        """The API server's process has ended (its watchdog may still be stopping the rest of its group, for up
        to its grace period: `exit_code` comes after that). A process that ended but is not yet reaped is a
        zombie: gone too (/proc says so where there is one)."""
        if self.exit_code is not None:
            return True
        if not self.pid:
            return False
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
        try:
            return Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] in ("Z", "X")
        except (OSError, IndexError):
            return False

    def wait_exit(self, seconds: float) -> int | None:
        """The exit code once the server has exited, waiting at most `seconds` for it; None if it runs on."""
        if self._watchdog is None:
            return None
        try:
            return self._after(self._watchdog.wait(timeout=seconds))
        except subprocess.TimeoutExpired:
            return None

    def _after(self, code: int | None) -> int | None:
        if code is not None and code < 0:
            self._kill_group()
        return code

    def _kill_group(self) -> None:
        """SIGKILL to whatever is left of the server's process group (the watchdog's work, when it is gone)."""
        if not self.pid:
            return
        deadline = time.monotonic() + 5.0
        while group_alive(self.pid) and time.monotonic() < deadline:
            with contextlib.suppress(OSError):
                os.killpg(self.pid, 9)
            time.sleep(0.1)

    def log_tail(self, lines: int = 15) -> str:
        """The last `lines` lines this server wrote to its log (not an earlier run's, in a log they share)."""
        try:
            with open(self.log_path, "rb") as fh:
                fh.seek(0, os.SEEK_END)
                fh.seek(max(self._log_start, fh.tell() - 64 * 1024))
                text = fh.read().decode("utf-8", "replace")
        except OSError:
            return "(no log)"
        rows = [r for r in text.splitlines() if r.strip() and not r.startswith("[watchdog")]
        return "\n".join("    " + r[:300] for r in rows[-lines:]) or "    (nothing in the log yet)"

    # ------------------------------------------------------------------ starting
    def start(self) -> "ManagedServer":
        for attempt in range(3):  # another process may take the free port before the server binds it
            try:
                return self._start_once()
            except ServerFailed as exc:
                if attempt == 2 or "address already in use" not in str(exc).lower():
                    raise
                self._say(f"vllm: port {self.port} was taken before the server bound it; trying another")
        raise AssertionError("unreachable")

    def _start_once(self) -> "ManagedServer":
        self.port = free_port()
        argv = self.spec.argv(self.port)
        env = dict(os.environ)
        env.update(dict(self.spec.env))
        env[OWNER_ENV] = str(os.getpid())
        read_end, write_end = os.pipe()  # both non-inheritable: only the watchdog gets the read end
        try:
            self._watchdog = subprocess.Popen(
                [sys.executable, str(WATCHDOG), "--", *argv], stdin=read_end, stdout=subprocess.PIPE,
                stderr=self._log.fileno(), env=env, start_new_session=True, close_fds=True)
        finally:
            os.close(read_end)
        self._pipe = write_end
        line = self._watchdog.stdout.readline() if self._watchdog.stdout else b""
        try:
            self.pid = int(line.strip())
        except ValueError:
            self.stop()
            raise ServerFailed(f"the vllm server for {self.spec.served_name} could not be started; the last lines "
                               f"of its log ({self.log_path}):\n{self.log_tail()}") from None
        self._say(f"vllm: starting the server for {self.spec.served_name} on 127.0.0.1:{self.port} "
                  f"(pid {self.pid}; log: {self.log_path})")
        self._wait_ready()
        return self

    def _answers(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/models", timeout=3) as resp:
                body = json.loads(resp.read().decode("utf-8"))
        except (OSError, ValueError, urllib.error.URLError):
            return False
        ids = [m.get("id") for m in body.get("data", []) if isinstance(m, dict)] if isinstance(body, dict) else []
        return self.spec.served_name in ids

    def _wait_ready(self) -> None:
        started = time.monotonic()
        next_line = started + PROGRESS_EVERY
        while True:
            code = self.exit_code
            if code is not None:
                raise ServerFailed(f"the vllm server for {self.spec.served_name} exited while starting (code {code}); "
                                   f"the last lines of its log ({self.log_path}):\n{self.log_tail()}")
            if self._answers():
                self.ready = True
                self._say(f"vllm: {self.spec.served_name} ready on 127.0.0.1:{self.port} after "
                          f"{time.monotonic() - started:.0f} s")
                return
            now = time.monotonic()
            if now - started > self.startup_timeout:
                tail = self.log_tail()
                self.stop()
                raise ServerFailed(f"the vllm server for {self.spec.served_name} did not answer within "
                                   f"startup_timeout {self.startup_timeout:g} s; stopped; the last lines of its log "
                                   f"({self.log_path}):\n{tail}")
            if now >= next_line:
                last = self.log_tail(1).strip()
                self._say(f"vllm: {self.spec.served_name} still loading ({now - started:.0f} s; log: "
                          f"{self.log_path}){': ' + last[:160] if last else ''}")
                next_line = now + PROGRESS_EVERY
            time.sleep(1.0)

    # ------------------------------------------------------------------ stopping
    def stop(self) -> None:
        """Stop the server (its whole process group) and wait until it is gone (at most STOP_WAIT s)."""
        if self.stopped:
            return
        self.stopped = True
        if self._pipe is not None:
            with contextlib.suppress(OSError):
                os.close(self._pipe)
            self._pipe = None
        wd = self._watchdog
        if wd is not None:
            try:
                wd.wait(timeout=STOP_WAIT)
            except subprocess.TimeoutExpired:  # the watchdog is stuck: do its work
                with contextlib.suppress(OSError):
                    os.killpg(wd.pid, 9)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    wd.wait(timeout=5)
            self._kill_group()  # nothing is left of the group, whatever became of the watchdog
            if wd.stdout is not None:
                wd.stdout.close()
        with contextlib.suppress(OSError):
            self._log.close()


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)[:80]


# ---------------------------------------------------------------------------------- sharing

@dataclass
class _Entry:
    server: ManagedServer
    users: int = 0
    lock: Any = None


_LOCK = threading.Lock()
_SERVERS: dict[ServerSpec, _Entry] = {}
_HOLDS = [0]


def acquire(spec: ServerSpec, make: Callable[[], ManagedServer]) -> ManagedServer:
    """The running server for `spec`, started by `make()` if there is none (or the last one exited);
    one more user of it until `release(spec)`."""
    with _LOCK:
        entry = _SERVERS.get(spec)
        if entry is not None and entry.server.exit_code is not None and entry.users == 0:
            entry.server.stop()
            entry = None
        if entry is None:
            entry = _SERVERS[spec] = _Entry(make(), 0, threading.Lock())
        entry.users += 1
    with entry.lock:
        if not entry.server.ready:
            try:
                if entry.server.stopped:
                    raise ServerFailed(f"{entry.server.describe()} failed to start earlier in this run")
                entry.server.start()
            except BaseException:
                with _LOCK:
                    entry.users -= 1
                    if entry.users == 0 and _SERVERS.get(spec) is entry:
                        del _SERVERS[spec]
                entry.server.stop()
                raise
    return entry.server


def release(spec: ServerSpec) -> None:
    """One user fewer; the last one stops the server, unless a `hold()` keeps it for the rest of the run."""
    with _LOCK:
        entry = _SERVERS.get(spec)
        if entry is None:
            return
        entry.users = max(0, entry.users - 1)
        if entry.users or _HOLDS[0]:
            return
        del _SERVERS[spec]
    entry.server.stop()


def stop_all() -> None:
    """Stop every server this process started (the end of a command, the interpreter's exit)."""
    with _LOCK:
        entries = list(_SERVERS.values())
        _SERVERS.clear()
    for e in entries:
        e.server.stop()


@contextlib.contextmanager
def hold() -> Iterator[None]:
    """Keep the servers started inside until the block ends (then stop them all, whatever happened)."""
    with _LOCK:
        _HOLDS[0] += 1
    try:
        yield
    finally:
        with _LOCK:
            _HOLDS[0] -= 1
            last = _HOLDS[0] == 0
        if last:
            stop_all()


atexit.register(stop_all)
