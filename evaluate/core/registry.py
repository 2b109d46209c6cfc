"""Name -> implementation registries.

Names a user writes in a config ("BLEU", "summarization-fluency", "fluency") are keys of a
registry. An unknown name fails at config load, with the closest known names, before any model
is loaded or any call is paid for.
"""

from __future__ import annotations

import difflib
from typing import Callable, Generic, Iterator, TypeVar

from .errors import InputError

T = TypeVar("T")


def suggest(name: str, known: list[str]) -> str:
    """' did you mean "X"?' for the closest known names (case-insensitive), or ''."""
    lowered = {k.lower(): k for k in known}
    close = difflib.get_close_matches(name.lower(), list(lowered), n=2, cutoff=0.5)
    if not close:
        return ""
    return "; did you mean " + " or ".join(f'"{lowered[c]}"' for c in close) + "?"


class Registry(Generic[T]):
    """A case-insensitive mapping from names (and aliases) to registered objects."""

    def __init__(self, kind: str):
        self.kind = kind
        self._items: dict[str, T] = {}
        self._canonical: dict[str, str] = {}  # lower-cased name or alias -> canonical name

    def register(self, name: str, *aliases: str) -> Callable[[T], T]:
        def deco(obj: T) -> T:
            self.add(name, obj, *aliases)
            return obj

        return deco

    def add(self, name: str, obj: T, *aliases: str) -> None:
        for key in (name, *aliases):
            low = key.lower()
            if low in self._canonical and self._canonical[low] != name:
                raise ValueError(f"{self.kind} name {key!r} registered twice")
            self._canonical[low] = name
        self._items[name] = obj

    def remove(self, name: str) -> None:
        """Forget `name` and its aliases (a plugin unloaded, a test cleaning up)."""
        canon = self.canonical(name)
        if canon is None:
            return
        self._items.pop(canon, None)
        for key in [k for k, v in self._canonical.items() if v == canon]:
            del self._canonical[key]

    def canonical(self, name: str) -> str | None:
        return self._canonical.get(str(name).lower())

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.canonical(name) is not None

    def get(self, name: str, where: str = "") -> T:
        canon = self.canonical(name)
        if canon is None:
            raise InputError(self.unknown_message(name, where))
        return self._items[canon]

    def unknown_message(self, name: str, where: str = "") -> str:
        prefix = f"{where}: " if where else ""
        return f'{prefix}unknown {self.kind} "{name}"{suggest(str(name), self.names())}' \
            f" (known: {', '.join(self.names())})"

    def names(self) -> list[str]:
        return list(self._items)

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)
