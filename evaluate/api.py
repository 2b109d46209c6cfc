"""The Python API, for notebooks and scripts (docs/api.md): run a config with overrides, open a save
path, read its scores as rows or a pandas DataFrame, its paired comparisons and battles, and gate
it as `eval.py summary SAVE --fail-under ...` does.

    from evaluate import api
    run = api.run("configs/example.yaml", overrides={"save_path": "results/nb", "limit": 5})
    run.scores()          # [ScoreRow(model, category, id, score, value, invalid), ...]
    run.frame()           # the same rows as a pandas DataFrame (pandas installed)
    run.comparisons()     # one row per pair, category and score: difference, interval, p, verdict
    run.battles()         # one dict per pair of models: wins, ties, losses, win rate, interval
    run.gate(fail_under=["F1=0.3"])   # [GateResult(...)], each .passed and .line()
    bench = api.benchmark("mt-bench", data="...", answers=[...], judge_config="judge.yaml", mode="single",
                          save_path="results/mt")   # BenchmarkRun: .code, .text, .run (its SavedRun)

    api.next_to_label("results/nb", 5, annotator="ana")   # the label queue's next items (dicts)
    api.add_labels("results/nb", [{"id": "3", "model_a": "a", "model_b": "b", "verdict": "A"}], annotator="ana")
    api.corrected("results/nb")   # {"pairs": [{model_a, model_b, label_corrected, labels_only, judge_only, ...}]}

Bad input raises evaluate.core.errors.InputError (ConfigError is one) with the message the command
line prints; nothing here prints or exits.
"""

from __future__ import annotations

import argparse
import copy
import io
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

from .core.errors import InputError
from .core.io import read_structured
from .core.registry import suggest
from .ci.gates import GateResult, GateView, check_names, evaluate, needs_labels, parse_gates
from .savepath.log import NoResults, RunLog, ScoreRow

__all__ = ["BenchmarkRun", "ScoreRow", "SavedRun", "benchmark", "open_run", "run", "InputError", "corrected",
           "next_to_label", "add_labels"]


def corrected(save_path: str | Path, *, level: float = 0.95) -> dict[str, Any]:
    """The label-corrected verdicts of a save path (docs/labels.md): per pair the win rate of model_a as people
    would judge it, from the labels on the queue and every item's judge verdict, beside labels only and judge
    only; ratings; annotators' kappa."""
    from .judgecheck.corrected import corrected as compute

    return compute(Path(save_path), level=level)


def next_to_label(save_path: str | Path, n: int = 1, *, design: str | None = None, seed: int | None = None,
                  annotator: str | None = None, metric: str | None = None) -> list[dict[str, Any]]:
    """The next `n` items of the label queue for this annotator, recorded as handed out (as `eval.py label
    --next`): each {id, category, kind, model_a, model_b (or model, metric), answer, queue}. `metric`: draw
    answers to score on that GPT metric instead of battles."""
    from .judgecheck.queue import next_units

    return [u.to_dict() for u in next_units(Path(save_path), n, kind="rating" if metric else "battle",
                                            design=design, seed=seed, annotator=annotator, metric=metric)]


def add_labels(save_path: str | Path, labels: Iterable[dict[str, Any]], *, annotator: str | None = None
               ) -> list[dict[str, Any]]:
    """Store labels (battle: {id, verdict A|B|tie, model_a, model_b, category?}; rating: {"kind": "rating", id,
    model, metric, score}), all or none (InputError naming the label, its field and what was expected);
    each is on the queue when the queue handed its item out. Returns them as stored; the corrected verdicts
    are rewritten (labels/corrected.json)."""
    from .judgecheck.labelling import add_labels as store

    return [lab.to_dict() for lab in store(Path(save_path), list(labels), annotator=annotator).labels]


class SavedRun:
    """A save path for a notebook: its run log (`log`, an `evaluate.savepath.RunLog`, read once from
    results/, comparisons/, battles/, manifest.json), with the log's rows by the API's names and the
    gates of `eval.py summary`. Everything it says comes from the log."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        try:
            self.log: RunLog = RunLog.read(self.path)
        except NoResults as exc:
            raise InputError(str(exc)) from None
        from .pipeline.comparisons import current

        fresh = current(self.log)  # comparison files of an older version: decided again in memory
        if fresh is not None:
            self.log.comparisons = fresh

    @property
    def data(self) -> RunLog:
        """The run log (the name this attribute had before the log had its own type)."""
        return self.log

    def __repr__(self) -> str:
        return f"SavedRun({str(self.path)!r}, models={self.models})"

    @property
    def models(self) -> list[str]:
        return list(self.log.models)

    @property
    def categories(self) -> list[str]:
        """The categories with scores (records of categories the config left out are kept, unscored)."""
        return self.log.scored_categories

    @property
    def manifest(self) -> dict[str, Any]:
        return dict(self.log.manifest or {})

    @property
    def status(self) -> str | None:
        """The run's own status (ok, finished with errors, failed); gates not included."""
        return self.log.status

    def scores(self) -> list[ScoreRow]:
        """Every item's scores, valid and invalid, in model, item and score order."""
        return self.log.scores()

    def frame(self) -> Any:
        """The rows of `scores()` as a pandas DataFrame (columns model, category, id, score, value,
        invalid); ImportError naming the package when pandas is not installed."""
        try:
            import pandas  # noqa: F401
        except ImportError:
            raise ImportError("SavedRun.frame() needs pandas: pip install pandas (or the `api` extra); "
                              "SavedRun.scores() gives the same rows without it") from None
        return self.log.frame()

    def means(self) -> dict[str, dict[str, float | None]]:
        """model -> score -> its mean over all items (the closing lines' table)."""
        return self.log.means()

    def comparisons(self) -> list[dict[str, Any]]:
        """One row per pair, category ("(all)" over every item) and score: model_a, model_b, mean_a,
        mean_b, diff (A - B), interval, level, p, p_adj, role (confirmatory or exploratory), verdict."""
        return self.log.comparison_rows()

    def battles(self) -> list[dict[str, Any]]:
        """One summary per battled pair: model_a, model_b, wins / ties / losses of model_a, invalid,
        win_rate of model_a (ties half) and its 95% interval."""
        return self.log.battle_summaries()

    def gate(self, fail_under: Iterable[str] = (), fail_if_worse: Iterable[str] = (),
             fail_under_win_rate: Iterable[str] = (), untrusted_judge: bool = False) -> list[GateResult]:
        """The gates of `eval.py summary SAVE --fail-under ...`, over the models the run scored;
        InputError for a gate naming what the run does not hold."""
        gates = parse_gates(list(fail_under), list(fail_if_worse), list(fail_under_win_rate), untrusted_judge)
        view = GateView.of(self.log)
        view.gated = [m for m in self.models if m in view.gated]
        check_names(gates, view.known())
        if needs_labels(gates):
            from .judgecheck.corrected import current

            view.corrected = current(self.path)
        return evaluate(gates, view)


def open_run(save_path: str | Path) -> SavedRun:
    """A finished run's save path; InputError when it holds no results."""
    return SavedRun(save_path)


REPLACED = ("category",)  # top-level keys an override replaces whole: the categories are one choice


def _merge(base: dict[str, Any], over: dict[str, Any], top: bool = True) -> dict[str, Any]:
    """`over` into `base`: mappings merged key by key (except REPLACED at the top), anything else replaced."""
    out = copy.deepcopy(base)
    for k, v in over.items():
        nested = isinstance(v, dict) and isinstance(out.get(k), dict) and not (top and k in REPLACED)
        out[k] = _merge(out[k], v, top=False) if nested else copy.deepcopy(v)
    return out


def run(config: str | Path | dict[str, Any], overrides: dict[str, Any] | None = None, *,
        families: list[str] | None = None, charts: bool = False, log: Callable[[str], None] = lambda s: None,
        missing: str | None = None) -> SavedRun:
    """Run a config (a file, or a mapping as a config file would hold it) with `overrides` merged in
    (nested mappings key by key: {"judge": {"model": "x"}} keeps the rest of `judge`; `category`
    replaces the config's categories whole), then open its
    save path. Relative paths in a file are relative to the file, as on the command line.
    `families`: e.g. ["Metrics"]; default all. `log`: the progress lines (default: none)."""
    from .pipeline.config import parse_config
    from .pipeline.plan import select_families
    from .judgecheck.store import attach_to_run
    from .pipeline.run import run_job

    if isinstance(config, dict):
        raw, source = config, None
    else:
        source = Path(config)
        raw = read_structured(source, "config")
        if not isinstance(raw, dict):
            raise InputError(f"{source}: expected a mapping of config keys")
    cfg = parse_config(_merge(raw, overrides or {}), source=source)
    if missing is not None:
        cfg.missing = missing
    outcome = run_job(cfg, families=select_families(families, None), charts=charts, log=log,
                      attach_check=attach_to_run)
    return SavedRun(cfg.save_path)


@dataclass
class BenchmarkRun:
    """A benchmark run from Python: the exit code `eval.py NAME` gives (0 done; 3 the judge failed on some
    calls or nothing could be scored; a benchmark's own, e.g. MT-bench's failed judge check), what it
    prints (its table, the judge check, the closing lines), and its save path opened (None after a dry
    run, or when no run log was written)."""

    code: int
    text: str
    run: SavedRun | None


class _Flags(argparse.ArgumentParser):
    """A benchmark's own flags, read from keyword arguments: a mistake raises InputError, never exits."""

    def error(self, message: str) -> None:
        raise InputError(f"{self.prog}: {message}")


def _argv(parser: argparse.ArgumentParser, name: str, options: dict[str, Any]) -> list[str]:
    """Keyword arguments as the command line would hold them: `judge_config="j.yaml"` -> `--judge-config
    j.yaml`, a list -> its values, True -> the bare flag, None or False -> left out."""
    flags = {a.dest: a for a in parser._actions if a.option_strings and a.dest != "help"}
    argv: list[str] = []
    for key, value in options.items():
        action = flags.get(key)
        if action is None:
            raise InputError(f'benchmark {name}: no option "{key}"{suggest(key, list(flags))} '
                             f"(known: {', '.join(sorted(flags))})")
        flag = next((o for o in action.option_strings if o.startswith("--")), action.option_strings[0])
        if value is None or value is False:
            continue
        if value is True and action.nargs == 0:
            argv.append(flag)
        elif isinstance(value, (list, tuple)):
            argv += [flag, *map(str, value)]
        else:
            argv += [flag, str(value)]
    return argv


def benchmark(name: str, *, log: Callable[[str], None] = lambda s: None, **options: Any) -> BenchmarkRun:
    """Run a registered benchmark (`mt-bench`, `alpaca-eval`, `arena-hard`, or one a package registers) as
    `eval.py NAME` does, through the same driver (evaluate.benchmarks.driver). `options`: its flags by their
    Python names (`data=`, `answers=[...]`, `judge_config=`, `mode=`, `save_path=`, `limit=`, `dry_run=True`,
    ...; `eval.py NAME -h` lists them). What the command prints is returned as `text`; its stderr lines go
    to `log`. Bad input (an unknown benchmark or option, a bad file) raises InputError before any judge call."""
    from .benchmarks.benchmark import benchmarks
    from .benchmarks.driver import run_benchmark

    bench = benchmarks().get(name, "benchmark")()
    parser = _Flags(prog=bench.name, allow_abbrev=False)
    bench.add_arguments(parser)
    generate = None
    if bench.generates:
        from .generation.benchmark_flag import add_generate_argument, generate_for_benchmark

        add_generate_argument(parser)
        generate = generate_for_benchmark
    args = parser.parse_args(_argv(parser, bench.name, options))
    out, err = io.StringIO(), io.StringIO()
    try:
        with redirect_stdout(out), redirect_stderr(err):
            code = run_benchmark(bench, args, generate=generate)
    finally:
        for line in err.getvalue().splitlines():
            log(line)
    saved = None
    if not getattr(args, "dry_run", False):
        try:
            saved = SavedRun(args.save_path)
        except InputError:  # nothing scored was written
            saved = None
    return BenchmarkRun(code, out.getvalue(), saved)
