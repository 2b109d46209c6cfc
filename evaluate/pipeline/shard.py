"""`--shard I/N`: a deterministic slice of the items, for N jobs of a CI matrix.

A record belongs to shard `I` (1-based) of `N` when sha256 of its id, as a number, is `I-1`
modulo `N`: the same slice on every machine and for every model (answer files share their ids),
so both sides of a battle pair are always in the same shard. Each shard writes to its own save
path, `<save_path>/shard-I-of-N`; `eval.py merge OUT DIR...` joins them (evaluate/pipeline/merge.py).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Sequence

from ..core.errors import InputError
from ..savepath.layout import shard_dir


def parse_shard(text: str) -> tuple[int, int]:
    try:
        i, n = (int(x) for x in text.split("/"))
    except ValueError:
        raise InputError(f'--shard "{text}": expected I/N, e.g. 1/3 (shard I of N, I from 1 to N)') from None
    if n < 1 or not 1 <= i <= n:
        raise InputError(f'--shard "{text}": I must be between 1 and N, and N at least 1 (e.g. 1/3, 2/3, 3/3)')
    return i, n


def shard_of(record_id: str, n: int) -> int:
    """The 1-based shard of a record id among `n` (stable across runs, machines and models)."""
    return int(hashlib.sha256(str(record_id).encode("utf-8")).hexdigest()[:16], 16) % n + 1


def shard_save_path(save_path: Path, shard: tuple[int, int]) -> Path:
    return shard_dir(save_path, *shard)


def apply_shard(sets: Sequence[Any], shard: tuple[int, int] | None) -> None:
    """Keep each answer set's records of the shard (in place); no-op without a shard."""
    if not shard:
        return
    i, n = shard
    for s in sets:
        s.records = [r for r in s.records if shard_of(r.id, n) == i]
        s.empty_output_ids = [x for x in s.empty_output_ids if shard_of(x, n) == i]
