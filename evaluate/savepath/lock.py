"""One run at a time per save path: a lock file `<save_path>/.eval.lock` holding the owner's pid,
host and start time. Two runs writing the same result files would each keep only their own
scores (read, add, rewrite), so a second run is refused with a message naming the holder. A lock
left by a run that died (its pid gone on this host) is taken over."""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path

from ..core.errors import InputError
from .layout import LOCK_NAME, lock_file  # noqa: F401  (LOCK_NAME: the file's name, for tests and docs)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class SaveLock:
    def __init__(self, path: Path):
        self.path = path

    @classmethod
    def acquire(cls, save_path: Path, run_id: str = "") -> "SaveLock":
        path = lock_file(save_path)
        me = {"pid": os.getpid(), "host": socket.gethostname(), "run_id": run_id,
              "started": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
        for _ in range(3):
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
            except FileExistsError:
                try:
                    holder = json.loads(path.read_text(encoding="utf-8"))
                except (OSError, ValueError):
                    holder = {}
                if holder.get("host") == me["host"] and isinstance(holder.get("pid"), int) \
                        and (holder["pid"] == me["pid"] or not _alive(holder["pid"])):
                    path.unlink(missing_ok=True)  # left by a run that died (or an earlier run of this process)
                    continue
                if not holder:  # being written this instant, or unreadable
                    time.sleep(0.2)
                    holder = _read(path)
                raise InputError(
                    f"save_path {save_path} is in use by another run (pid {holder.get('pid', '?')} on "
                    f"{holder.get('host', '?')}, run {holder.get('run_id') or '?'}, since {holder.get('started', '?')}); "
                    f"wait for it to finish or use another save_path (if no such run exists, delete {path}). "
                    "Nothing was written.")
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(me, fh)
            return cls(path)
        raise InputError(f"save_path {save_path}: cannot take the lock {path}")

    def release(self) -> None:
        try:
            self.path.unlink()
        except FileNotFoundError:
            pass


def _read(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
