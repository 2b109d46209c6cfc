"""The `track:` block: which trackers a run is sent to, each with its typed options.

    track: mlflow                                  # or [mlflow, wandb], or a mapping:
    track:
      mlflow: {uri: sqlite:///runs/mlflow.db, experiment: nightly}
      wandb:  {project: nightly, mode: offline, dir: runs}

`--track mlflow|wandb` adds a tracker with its defaults (or the block's options where the config has
one). Paths in the block (`wandb.dir`, a relative `sqlite:///` or plain-folder `mlflow.uri`) are
relative to the config file. The packages are optional extras (`pip install ".[mlflow]"`,
`".[wandb]"`): a tracker whose package is missing is refused before the run starts (exit 2), naming
the extra.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Literal

from ..core.errors import InputError
from ..core.options import option, parse_options, short, type_name
from ..core.registry import suggest


@dataclass
class MlflowOptions:
    uri: str | None = option(None, "tracking URI: http(s)://server, sqlite:///file.db, databricks (default: "
                                   "$MLFLOW_TRACKING_URI, else MLflow's own default, sqlite:///mlflow.db here)")
    experiment: str = option("llm-eval", "the experiment the run is logged in (created when missing)", nonempty=True)
    run_name: str | None = option(None, "the MLflow run's name (default: the save path's folder and the run id)")
    timeout: float = option(10.0, "seconds to wait for a tracking server before the tracker is skipped", gt=0)


@dataclass
class WandbOptions:
    project: str = option("llm-eval", "the W&B project", nonempty=True)
    entity: str | None = option(None, "the W&B entity (team or user; default: yours)")
    mode: Literal["offline", "online"] = option("offline", "offline: a run folder that `wandb sync` uploads "
                                                           "later; online: sent now (needs WANDB_API_KEY)")
    dir: str | None = option(None, "the folder the run folder goes in (default: the current folder, as wandb)")
    run_name: str | None = option(None, "the W&B run's name (default: the save path's folder and the run id)")


TRACKERS: dict[str, type] = {"mlflow": MlflowOptions, "wandb": WandbOptions}
EXTRAS = {"mlflow": "mlflow", "wandb": "wandb"}  # tracker -> the pyproject extra that installs its package


def parse_track(raw: Any, where: str = "track",
                resolve: Callable[[str], Path] | None = None) -> tuple[dict[str, Any], list[str]]:
    """`track:` as {tracker: its options}, and every problem with its key path."""
    if raw is None:
        return {}, []
    if isinstance(raw, str):
        raw = [raw]
    if isinstance(raw, list):
        bad = [f"{where}[{i}]: expected a tracker name ({', '.join(TRACKERS)}), got {type_name(v)} {short(v)}"
               for i, v in enumerate(raw) if not isinstance(v, str)]
        if bad:
            return {}, bad
        raw = {name: {} for name in raw}
    if not isinstance(raw, dict):
        return {}, [f"{where}: expected a tracker name, a list of them or a mapping tracker -> options "
                    f"({', '.join(TRACKERS)}), got {type_name(raw)} {short(raw)}"]
    out: dict[str, Any] = {}
    problems: list[str] = []
    for name, block in raw.items():
        if name not in TRACKERS:
            problems.append(f'{where}: unknown tracker "{name}"{suggest(str(name), list(TRACKERS))} '
                            f"(known: {', '.join(TRACKERS)})")
            continue
        opts, probs = parse_options(TRACKERS[name], block, f"{where}.{name}")
        problems.extend(probs)
        out[name] = _resolved(opts, resolve) if resolve is not None else opts
    return out, problems


def _resolved(opts: Any, resolve: Callable[[str], Path]) -> Any:
    """A config's relative paths made absolute against the config file's folder."""
    if isinstance(opts, WandbOptions) and opts.dir:
        return replace(opts, dir=str(resolve(opts.dir)))
    if isinstance(opts, MlflowOptions) and opts.uri:
        uri = opts.uri
        if uri.startswith("sqlite:///") and not uri.startswith("sqlite:////"):
            return replace(opts, uri="sqlite:///" + str(resolve(uri[len("sqlite:///"):])))
        if "://" not in uri and uri != "databricks" and not uri.startswith("databricks"):
            return replace(opts, uri=str(resolve(uri)))
    return opts


def with_flags(configured: dict[str, Any], flags: list[str] | None) -> dict[str, Any]:
    """The config's trackers plus those named by `--track` (with the config's options where it has a block)."""
    out = dict(configured)
    for name in flags or []:
        if name not in TRACKERS:
            raise InputError(f'--track: unknown tracker "{name}"{suggest(name, list(TRACKERS))} '
                             f"(known: {', '.join(TRACKERS)})")
        out.setdefault(name, TRACKERS[name]())
    return out


def check_installed(trackers: dict[str, Any], where: str = "track") -> None:
    """Exit 2 before any work when a tracker's package is missing, naming the extra that installs it."""
    missing = [name for name in trackers if importlib.util.find_spec(EXTRAS[name]) is None]
    if missing:
        raise InputError("; ".join(f'{where}.{name}: the "{EXTRAS[name]}" package is not installed: pip install '
                                   f'".[{EXTRAS[name]}]" (or pip install {EXTRAS[name]}), or leave {name} out'
                                   for name in missing))
