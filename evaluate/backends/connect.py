"""Whether a failure was one to *connect* (refused, DNS, TLS, no route, the handshake timed out), which
more retries will not fix for minutes, or one after a connection was made (a reset, a hang-up, a read
timeout), which they may. The HTTP backend (openai_compat.py) and the probe before a run (probe.py)
both ask it.
"""

from __future__ import annotations

import errno
import socket
import ssl

CONNECT_TIMEOUT = 10.0  # seconds for the TCP and TLS handshake; a live server answers it in milliseconds


def _chain(exc: BaseException) -> list[BaseException]:
    out: list[BaseException] = []
    e: BaseException | None = exc
    while e is not None and e not in out and len(out) < 12:
        out.append(e)
        e = e.__cause__ or e.__context__
    return out


def connect_failure(exc: BaseException, connect_timeout: float | None = None) -> str | None:
    """What kept a connection from being made (refused, DNS, TLS, no route, handshake timed out),
    or None when a connection was made and the failure came later (reset, hang-up, read timeout)."""
    chain = _chain(exc)
    names = {type(e).__name__ for e in chain}
    if "ConnectTimeout" in names:
        after = f" after {connect_timeout:g}s" if connect_timeout else ""
        return (f"connect timed out{after} (no answer to the TCP handshake: the host is down, a firewall drops "
                f"the packets, or the server's accept queue is full)")
    raw = [e for e in chain if isinstance(e, OSError)]
    if "ConnectError" not in names and not any(isinstance(e, (ConnectionRefusedError, socket.gaierror)) for e in raw):
        return None
    for e in raw:
        if isinstance(e, ConnectionRefusedError):
            return "connection refused (nothing listens on that port)"
        if isinstance(e, socket.gaierror):
            return f"DNS lookup failed ({e.strerror or e})"
        if isinstance(e, ssl.SSLError):
            return f"TLS handshake failed ({e.reason or e}; is it an http:// server behind an https:// URL?)"
        if e.errno in (errno.ENETUNREACH, errno.EHOSTUNREACH):
            return f"no route to host ({e.strerror or e})"
    return f"cannot connect ({raw[-1] if raw else chain[-1]})"
