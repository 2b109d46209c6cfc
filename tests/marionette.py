"""A minimal client of Firefox's Marionette protocol (JSON over TCP), enough to load a page and run
script in it: Debian ships firefox-esr but no geckodriver, and nothing may be downloaded."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import tempfile
import time
from typing import Any

FIREFOX = shutil.which("firefox-esr") or shutil.which("firefox")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Firefox:
    def __init__(self, width: int = 1280, height: int = 1000):
        self.profile = tempfile.mkdtemp(prefix="ff-profile-")
        port = _free_port()
        with open(f"{self.profile}/user.js", "w") as fh:
            fh.write(f'user_pref("marionette.port", {port});\n')
        self.proc = subprocess.Popen([FIREFOX, "--headless", "--marionette", "--no-remote", "--profile", self.profile,
                                      f"--width={width}", f"--height={height}"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self._id = 0
        deadline = time.monotonic() + 60
        while True:
            try:
                self.sock = socket.create_connection(("127.0.0.1", port), timeout=60)
                break
            except OSError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    self.close()
                    raise RuntimeError("firefox did not open its Marionette port")
                time.sleep(0.2)
        self._recv()  # the server's hello
        self.call("WebDriver:NewSession", {"capabilities": {}})

    def _recv(self) -> Any:
        head = b""
        while not head.endswith(b":"):
            head += self.sock.recv(1)
        n = int(head[:-1])
        body = b""
        while len(body) < n:
            body += self.sock.recv(n - len(body))
        return json.loads(body)

    def call(self, name: str, params: dict[str, Any]) -> Any:
        self._id += 1
        data = json.dumps([0, self._id, name, params]).encode()
        self.sock.sendall(str(len(data)).encode() + b":" + data)
        while True:
            kind, msg_id, error, result = self._recv()
            if kind == 1 and msg_id == self._id:
                if error:
                    raise RuntimeError(f"{name}: {error}")
                return result

    def get(self, url: str) -> None:
        self.call("WebDriver:Navigate", {"url": url})

    def js(self, script: str, *args: Any) -> Any:
        return self.call("WebDriver:ExecuteScript", {"script": script, "args": list(args)})["value"]

    def close(self) -> None:
        try:
            self.call("WebDriver:DeleteSession", {})
        except Exception:  # noqa: BLE001 - closing anyway
            pass
        self.proc.kill()
        self.proc.wait(10)
        shutil.rmtree(self.profile, ignore_errors=True)
