"""How fast an in-process judge has been on this machine, kept between runs, so that `--dry-run` can say how
long its requests will take (issue 47: 14 items with `explain: true` took 48 minutes on a CPU, and the dry run
said nothing about time).

Each call of the local backend records its wall seconds with the prompt characters and the generated tokens
of the requests it answered, under the judge's signature (weights, dtype, kernel, device) and the machine
(CPU model, cores): the last KEEP calls in `<cache>/judge_speed.json` (`evaluate.core.places.cache_dir`).
The estimate fits seconds = a x prompt characters + b x generated tokens to them by non-negative least
squares (prompts are read once per request, each generated token costs one forward pass) and applies it to
the requests still to send, their generated tokens counted at `max_tokens`: an upper bound where replies
end earlier. Its error on the development machine is in BENCHMARKS.md. Recording never fails a run.
"""

from __future__ import annotations

import json
import logging
import os
import platform
import threading
from dataclasses import dataclass
from typing import Any, Sequence

from ..core.io import atomic_write_text
from ..core.places import cache_dir
from .base import JudgeRequest

SPEED_FILE = "judge_speed.json"
KEEP = 200  # calls remembered per judge and machine
_LOCK = threading.Lock()
log = logging.getLogger(__name__)


def prompt_chars(request: JudgeRequest) -> int:
    return sum(len(content) for _, content in request.messages)


def machine() -> str:
    """The CPU model and the cores this process may use: a speed measured on one machine says little of another."""
    model = ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            model = next((line.split(":", 1)[1].strip() for line in fh if line.startswith("model name")), "")
    except OSError:
        pass
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 0
    return f"{model or platform.processor() or platform.machine()} x{cores}"


def _key(signature: dict[str, Any]) -> str:
    return json.dumps({"judge": signature, "machine": machine()}, sort_keys=True, ensure_ascii=False)


def _read() -> dict[str, list[list[float]]]:
    try:
        data = json.loads((cache_dir() / SPEED_FILE).read_text(encoding="utf-8"))
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def record(signature: dict[str, Any], seconds: float, requests: Sequence[JudgeRequest],
           completion_tokens: int) -> None:
    """One call's measurement: `seconds` for `requests` (their prompts) and the tokens it generated."""
    if not requests or seconds <= 0:
        return
    row = [round(seconds, 4), len(requests), sum(prompt_chars(r) for r in requests), int(completion_tokens)]
    try:
        with _LOCK:
            data = _read()
            rows = data.setdefault(_key(signature), [])
            rows.append(row)
            del rows[:-KEEP]
            atomic_write_text(cache_dir() / SPEED_FILE, json.dumps(data, indent=1, ensure_ascii=False))
    except OSError as exc:  # a read-only cache folder: no estimate later, nothing worse
        log.debug("judge speed not recorded: %s", exc)


@dataclass(frozen=True)
class Speed:
    """A judge's fitted cost on this machine: seconds per prompt character and per generated token."""

    per_char: float
    per_token: float
    calls: int
    requests: int
    generated: bool  # whether any measured call generated more than one token a request (b is measured)

    def seconds(self, requests: Sequence[JudgeRequest]) -> float:
        return sum(self.per_char * prompt_chars(r) + self.per_token * r.max_tokens for r in requests)

    def describe(self) -> str:
        return (f"{self.per_char * 1000:.2f} s per 1,000 prompt characters, "
                + (f"{self.per_token:.3f} s per generated token" if self.generated else
                   "generated tokens not measured yet (only one-token requests so far)")
                + f"; from {self.requests:,} requests in {self.calls} calls of this judge on this machine")


def measured(signature: dict[str, Any]) -> Speed | None:
    """The judge's speed on this machine, fitted to what was recorded; None before any record."""
    rows = _read().get(_key(signature)) or []
    if not rows:
        return None
    import numpy as np
    from scipy.optimize import nnls

    a = np.array([[r[2], r[3]] for r in rows], dtype=float)
    y = np.array([r[0] for r in rows], dtype=float)
    generated = any(r[3] > r[1] for r in rows)
    if not generated:  # one token a request: the token's cost cannot be told from the prompt's
        per_char = float(y.sum() / max(a[:, 0].sum(), 1.0))
        return Speed(per_char, 0.0, len(rows), int(sum(r[1] for r in rows)), False)
    scale = a.max(axis=0)
    scale[scale == 0] = 1.0
    coef, _ = nnls(a / scale, y)
    coef = coef / scale
    return Speed(float(coef[0]), float(coef[1]), len(rows), int(sum(r[1] for r in rows)), True)
