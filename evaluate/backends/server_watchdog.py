"""Starts a model server and makes sure that none of its processes outlives the tool that asked for it.

Run as a script by evaluate/backends/vllm_server.py (it imports nothing of the project, so it starts
in a few milliseconds):

    python server_watchdog.py -- SERVER ARGV...

stdin: a pipe whose other end only the tool holds; stdout: a pipe to the tool; stderr: the server's
log file. It runs in a session of its own (the tool starts it so), so a Ctrl-C at the terminal or a
signal to the tool's process group does not reach it; it ignores SIGINT and SIGHUP.

It starts the server in a new session as well (its process group holds the API server, vLLM's
EngineCore and workers and their resource tracker), with the parent-death signal SIGKILL (Linux's
prctl: should this watchdog be killed, the API server goes too), becomes a child subreaper (what
the server's processes leave behind when their parent dies is re-parented here, not to init), and
writes the server's pid on stdout. Then:
- stdin at EOF (the tool closed it, exited, crashed, or was killed by any signal, SIGKILL included):
  the server's group gets SIGTERM, then SIGKILL after a grace period; exit 0;
- the server exits on its own: what is left of its group is killed the same way; exit with the
  server's code (128 + N for a signal N);
- SIGTERM to the watchdog itself: as for EOF.
"""

from __future__ import annotations

import ctypes
import os
import select
import signal
import subprocess
import sys
import time

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
GRACE = 10.0  # seconds the server has to shut down after SIGTERM before SIGKILL


def _prctl(option: int, value: int) -> None:
    try:
        ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: the pipe's EOF still stops the server
        pass


def _note(text: str) -> None:
    try:
        sys.stderr.write(f"[watchdog {time.strftime('%H:%M:%S')}] {text}\n")
        sys.stderr.flush()
    except OSError:
        pass


def _alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def _reap() -> None:
    """Collect every exited child (the server and what was re-parented here)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _stop(server: subprocess.Popen, pgid: int) -> None:
    """SIGTERM to the server's group, SIGKILL to what is left after GRACE seconds."""
    for sig, wait in ((signal.SIGTERM, GRACE), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            pass
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            server.poll()
            _reap()
            if not _alive(pgid):
                return
            time.sleep(0.1)
    _note(f"process group {pgid} still has processes after SIGKILL")


def main(argv: list[str]) -> int:
    if "--" not in argv:
        sys.stderr.write("usage: server_watchdog.py -- SERVER ARGV...\n")
        return 2
    cmd = argv[argv.index("--") + 1:]
    for sig in (signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    stop = {"asked": False}

    def on_term(signum: int, frame: object) -> None:
        stop["asked"] = True

    signal.signal(signal.SIGTERM, on_term)
    _prctl(PR_SET_CHILD_SUBREAPER, 1)

    def child_setup() -> None:  # in the server, before exec: die with this watchdog
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.signal(signal.SIGHUP, signal.SIG_DFL)
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)

    server = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=sys.stderr.fileno(), stderr=subprocess.STDOUT,
                              start_new_session=True, preexec_fn=child_setup)
    pgid = server.pid
    _note(f"server started: pid {server.pid}, process group {pgid}")
    try:
        sys.stdout.write(f"{server.pid}\n")
        sys.stdout.flush()
    except OSError:
        stop["asked"] = True
    stdin = sys.stdin.fileno()
    while True:
        if stop["asked"]:
            _note("asked to stop")
            _stop(server, pgid)
            return 0
        try:
            ready, _, _ = select.select([stdin], [], [], 0.5)
        except InterruptedError:
            continue
        if ready:
            try:
                data = os.read(stdin, 4096)
            except OSError:
                data = b""
            if not data:  # the tool is gone or done with the server
                _note("the tool closed its end (done, or gone): stopping the server")
                _stop(server, pgid)
                return 0
        code = server.poll()
        if code is not None:
            _note(f"the server exited with code {code}; stopping what is left of its process group")
            _stop(server, pgid)
            return 128 - code if code < 0 else code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
