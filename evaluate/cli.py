"""`python eval.py [COMMAND] ...`: the commands side by side, each a module of `evaluate.commands`
with `main(argv) -> int`; without a command name, the main job (`eval.py --config FILE`)."""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys

from .commands.common import EXIT_CODES, EXIT_INPUT, EXIT_INTERRUPTED, EXIT_OK, guarded
from .core.registry import suggest
from .core.version import __version__, program

# name -> (module, one line for `eval.py help`)
COMMANDS: dict[str, tuple[str, str]] = {
    "run": ("evaluate.commands.run", "the main job: answer files x categories x evaluator families (the default)"),
    "report": ("evaluate.commands.report", "write the HTML report of a save path"),
    "summary": ("evaluate.commands.summary", "print the closing lines of an earlier run"),
    "compare": ("evaluate.commands.compare", "compare two runs of the same models on the same items"),
    "view": ("evaluate.commands.view", "a local web app over save paths: runs, items, two runs, labels"),
    "prompts": ("evaluate.commands.prompts", "list the GPT metrics an evaluation prompt file defines"),
    "merge": ("evaluate.commands.merge", "join the save paths of sharded runs (--shard I/N)"),
    "meta-eval": ("evaluate.commands.metaeval", "how well an evaluator agrees with human labels"),
    "judge-check": ("evaluate.commands.judgecheck", "can I trust this judge on this kind of data?"),
    "label": ("evaluate.commands.label", "label a run's items on the label queue; label-corrected verdicts"),
    "repeval": ("repeval.cli", "RepEval: fit and apply hidden-state projections"),
    "leaderboard": ("evaluate.commands.leaderboard", "AlpacaEval 2 / Arena-Hard leaderboards from their files"),
    "alpaca-eval": ("evaluate.commands.alpaca_eval", "judge model outputs by AlpacaEval 2's protocol"),
    "arena-hard": ("evaluate.commands.arena_hard", "judge model answers by Arena-Hard's protocol"),
    "mt-bench": ("evaluate.commands.mt_bench", "MT-bench from FastChat's files and judge prompts"),
    "generate": ("evaluate.commands.generate", "ask a model the questions of a file; write its answers in that format"),
    "schema": ("evaluate.commands.schema", "print the JSON Schema of each file a save path holds"),
    "track": ("evaluate.commands.track", "send a finished run to MLflow or Weights & Biases"),
}


def _help() -> str:
    width = max(len(n) for n in COMMANDS)
    me = program()
    job, command = f"usage: {me} --config FILE [...]", f"       {me} COMMAND [...]"
    lines = [f"{me} {__version__}: evaluate LLM answers.", "",
             f"{job:<{len(job) + 8}}the main job ({me} run -h for its flags)",
             f"{command:<{len(job) + 8}}one of:", ""]
    lines += [f"  {name:<{width}}  {text}" for name, (module, text) in COMMANDS.items() if _available(module)]
    lines += [f"  {name:<{width}}  {text}" for name, text in _more_benchmarks().items()]
    lines += ["", f"{me} COMMAND -h says more about each.", EXIT_CODES]
    return "\n".join(lines)


def _more_benchmarks() -> dict[str, str]:
    """Benchmarks registered beyond the built-in commands (evaluate.benchmarks.benchmark): name -> line."""
    from .benchmarks.benchmark import benchmarks

    reg = benchmarks()
    return {n: reg.get(n).summary for n in reg.names() if n not in COMMANDS}


def _available(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def main(argv: list[str] | None = None) -> int:
    """Dispatch; a reader that closes the pipe early (`eval.py help | head -5`) ends the output quietly."""
    # before torch is imported (the console script and `python -m evaluate` do not pass through eval.py):
    # OpenMP spin-waiting slows CPU inference badly on busy machines
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    try:
        code = _dispatch(list(sys.argv[1:] if argv is None else argv))
        sys.stdout.flush()  # here, where a closed pipe can still be caught, not at the interpreter's exit
        return code
    except KeyboardInterrupt:  # outside a command (importing it): nothing was computed yet
        print("interrupted: before any work started (nothing to keep)", file=sys.stderr, flush=True)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # stdout's reader has gone: point stdout at devnull so the interpreter's final flush is silent
        try:
            sys.stdout = open(os.devnull, "w")
        except OSError:
            pass
        return EXIT_OK


def _dispatch(argv: list[str]) -> int:
    if argv[:1] in (["help"], ["-h"], ["--help"]) or not argv:
        print(_help())
        return EXIT_OK
    if argv[:1] == ["--version"]:
        print(f"{program()} {__version__}")
        return EXIT_OK
    if not argv[0].startswith("-") and argv[0] not in COMMANDS:
        more = _more_benchmarks()
        if argv[0] in more:
            from .commands.common import drive_benchmark

            return guarded(lambda rest: drive_benchmark(argv[0], rest), argv[1:])
        # a word before the flags is a command name: an unknown one is a typo, not the main job
        known = [n for n, (module, _) in COMMANDS.items() if _available(module)] + list(more)
        print(f'error: unknown command "{argv[0]}"{suggest(argv[0], known)} (commands: {", ".join(known)}; '
              "the main job is eval.py --config FILE)", file=sys.stderr)
        return EXIT_INPUT
    name = argv[0] if argv[0] in COMMANDS else "run"
    rest = argv[1:] if argv[0] in COMMANDS else argv
    module = importlib.import_module(COMMANDS[name][0])
    return guarded(module.main, rest)
