"""Errors the command line turns into a clear message and exit code 2."""

from __future__ import annotations


class InputError(Exception):
    """Bad user input: a config, answer, prompt or data file that cannot be used as it is.

    The message must name the file, the key path or record id, and what was expected.
    The CLI prints it and exits with code 2; nothing already written is removed.
    """


class ConfigError(InputError):
    """A config file (or CLI flag) that fails validation; carries every problem found."""

    def __init__(self, problems: list[str], source: str | None = None):
        self.problems = list(problems)
        self.source = source
        head = f"{source}: " if source else ""
        if len(self.problems) == 1:
            msg = head + self.problems[0]
        else:
            msg = head + f"{len(self.problems)} problems:\n" + "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(msg)
