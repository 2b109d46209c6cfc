"""A benchmark as one shape: what `eval.py <benchmark>` needs of it, and the registry of benchmarks.

A benchmark reads its own files, says which judge requests it still needs, judges them, computes its
scores and the rows of its leaderboard, and leaves its files and the project's own outputs in the
save path. One driver (`evaluate.benchmarks.driver.run_benchmark`) runs any of them the same way:
flags, the judge (`--judge-config`'s `judge:` block, the one judge-cache rule, metered for the
manifest), `--dry-run` (the requests counted and priced, nothing contacted), the table, the stored
judge check of this judge, the manifest and report through `benchmarks.outputs.write_run`, and the exit
code (0 done, 2 bad input, 3 the judge failed on some calls or nothing could be scored).

A fourth benchmark is one module with a `Benchmark` subclass decorated `@register_benchmark`, and
one line: its module in BUILTIN (or any import before `eval.py` dispatches); `eval.py NAME` then
runs it and `eval.py help` lists it::

    @register_benchmark
    class Toy(Benchmark):
        name, key, family, summary = "toy", "toy", "Toy", "a toy benchmark"
        def add_arguments(self, p): ...        # must define --judge-config, --save_path, --dry-run
        def read(self, args, judge): ...       # its files, checked; InputError names file and record
        def requests(self, inputs): ...        # {model: [JudgeRequest]} still to send
        def judge(self, inputs, backend): ...  # send them (backend.complete_many); what came back
        def scores(self, inputs, judged): ...  # Scored: the table's text, the leaderboard rows
        def save(self, save, inputs, judged, scored, judge): ...  # results, battles, manifest entries into `save`

What a benchmark may change of the driver's defaults (MT-bench uses each): `judge_options` (a judge:
block from its own config file), `judge_file` (the file the judge cache path is relative to), `notes`
(said on stderr before judging), `lock` (held from opening the judge to the last file written: FastChat's
files are appended), `check_judge` (the judge check after the table, the judge still open), `metered`,
`dry_run_cost`, `written` (its own files, for the closing line), `closing` and `exit_line` (from the
run's log, once every output is written). Every benchmark's manifest is made by the driver
(`outputs.write_run`, through the one manifest builder) from what `save` put in `save.header`.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from ..core.registry import Registry

# the built-in benchmarks' modules, imported the first time the registry is read
BUILTIN = ("evaluate.benchmarks.arena_hard.outputs", "evaluate.benchmarks.alpaca_eval.outputs",
           "evaluate.benchmarks.mt_bench.outputs")


class ScoringFailed(Exception):
    """Nothing could be scored (every judgment invalid): exit 3 with this message, no outputs written."""


@dataclass
class Scored:
    text: str  # what the terminal shows: the table with the line that says how each number was counted
    columns: list[str] = field(default_factory=list)  # the leaderboard's columns
    rows: list[dict[str, Any]] = field(default_factory=list)  # one per model
    errors: list[str] = field(default_factory=list)  # what failed (the manifest's errors), e.g. judge calls
    exit_line: str = ""  # the last line on stderr when the run exits 3 (the judge failed, nothing valid)
    detail: dict[str, Any] = field(default_factory=dict)  # whatever save() needs beyond the rows


class Benchmark:
    name: ClassVar[str] = ""  # the command: eval.py NAME
    key: ClassVar[str] = ""  # the manifest's `benchmark`
    family: ClassVar[str] = ""  # the family of its scores in the save path (AlpacaEval/preference, ...)
    summary: ClassVar[str] = ""  # one line for eval.py help
    description: ClassVar[str] = ""  # the top of its -h
    # the question kind `--generate NAME=MODEL.yaml` answers (evaluate.generation), "" for none; a benchmark
    # that sets it says where its questions are and where generated answers go (`generation`)
    generates: ClassVar[str] = ""
    config_block: ClassVar[str] = ""  # the block its --config file holds (a run config meeting it names this command)
    metered: ClassVar[bool] = True  # the judge wrapped in a meter (the usage in the driver's manifest)
    dry_run_cost: ClassVar[bool] = True  # the dry run ends with the cost line when the judge has a price

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        raise NotImplementedError

    def check(self, args: argparse.Namespace) -> None:
        """Flag values argparse cannot check (before anything is read)."""

    def judge_options(self, args: argparse.Namespace, load: Any) -> Any:
        """The judge's options; `load(path)` reads and checks the judge: block of a file."""
        return load(args.judge_config)

    def judge_file(self, args: argparse.Namespace) -> Path | None:
        """The file that holds the judge: block (a relative `judge.cache` is relative to it)."""
        return args.judge_config

    def notes(self, inputs: Any, judge: Any) -> str:
        """What to say on stderr before judging ("" for nothing)."""
        return ""

    def lock(self, args: argparse.Namespace) -> Any:
        """A context held from opening the judge to the last file written."""
        return contextlib.nullcontext()

    def check_judge(self, args: argparse.Namespace, inputs: Any, judged: Any, backend: Any,
                    signature: dict[str, Any], log: Any) -> tuple[str, int]:
        """After the table, the judge still open: (the text to print, 0 or the exit code 3 when the
        check could not run). By default the line on the stored judge check of this judge."""
        from .tables import judge_check_line

        return judge_check_line(args.save_path, signature), 0

    def generation(self, args: argparse.Namespace) -> tuple[Path, Path]:
        """(the question file, the folder generated answers are written to) for `--generate`."""
        raise NotImplementedError

    def read(self, args: argparse.Namespace, judge: Any) -> Any:
        raise NotImplementedError

    def requests(self, inputs: Any) -> dict[str, list[Any]]:
        raise NotImplementedError

    def dry_run_text(self, inputs: Any, requests: dict[str, list[Any]], judge: Any) -> str:
        lines = [f"{self.name} dry run: judge {judge.model}"]
        lines += [f"  {m}: {len(r)} judge calls" for m, r in requests.items()]
        return "\n".join(lines + [f"total: {sum(len(r) for r in requests.values())} judge calls"]) + "\n"

    def judge(self, inputs: Any, backend: Any) -> Any:
        raise NotImplementedError

    def scores(self, inputs: Any, judged: Any) -> Scored:
        raise NotImplementedError

    def save(self, save: Any, inputs: Any, judged: Any, scored: Scored, judge: dict[str, Any]) -> None:
        """Add the run to `save` (the run in progress, a SaveDir): each model's results (`open_model`,
        `add`) and battles (`add_battle`), and to `save.header` the manifest's entries of this run:
        `models` (one entry per model, at least its name) and the benchmark's own block under its `key`
        (`config`, `judge_check`: what the manifest says instead of the driver's)."""
        raise NotImplementedError

    def written(self, log: Any) -> list[str]:
        """Where the benchmark's own files of this run are, for the closing line ([] for none); `log`:
        the run's RunLog."""
        return []

    def closing(self, log: Any, report: Path | None) -> str:
        """The last line of stdout: where the files are (`log`: the run's RunLog)."""
        return "written: " + ", ".join([*self.written(log), *([str(report)] if report else [])]) + "\n"

    def exit_line(self, log: Any, scored: Scored) -> str:
        """The last line on stderr when the run exits 3 ("" for none), once its outputs are written."""
        return scored.exit_line


BENCHMARKS: Registry[type[Benchmark]] = Registry("benchmark")
_loaded = False


def register_benchmark(cls: type[Benchmark]) -> type[Benchmark]:
    """Class decorator: `eval.py cls.name` runs this benchmark."""
    if not cls.name:
        raise ValueError(f"{cls.__name__}: a benchmark needs a name")
    if cls.name in BENCHMARKS:
        BENCHMARKS._items[BENCHMARKS.canonical(cls.name)] = cls  # the same module imported twice
    else:
        BENCHMARKS.add(cls.name, cls)
    return cls


def benchmarks() -> Registry[type[Benchmark]]:
    """The registry, the built-in benchmarks loaded."""
    global _loaded
    if not _loaded:
        _loaded = True
        for module in BUILTIN:
            importlib.import_module(module)
    return BENCHMARKS
