"""Where each file of a save path lives, and the layout's version (docs/save-path.md lists them).

`LAYOUT_VERSION` is written into every manifest (`"layout"`); a reader refuses a save path whose
manifest names a newer layout than this version knows (`check_layout`, exit 2) and reads older
ones (a manifest without `"layout"` is layout 1, the layout before the number was written).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..core.errors import InputError
from ..core.io import safe_name

LAYOUT_VERSION = 1
LOCK_NAME = ".eval.lock"


class LayoutError(InputError):
    """The save path was written by a newer version whose layout this version cannot read."""


def results_dir(root: Path) -> Path:
    return Path(root) / "results"


def results_file(root: Path, model: str) -> Path:
    return results_dir(root) / f"{safe_name(model)}.json"


def pair_stem(model_a: str, model_b: str) -> str:
    """The file stem of the battle (and comparison) of two models: `<a>__vs__<b>`."""
    return f"{safe_name(model_a)}__vs__{safe_name(model_b)}"


def battles_dir(root: Path) -> Path:
    return Path(root) / "battles"


def battle_file(root: Path, stem: str) -> Path:
    return battles_dir(root) / f"{stem}.json"


def ranking_file(root: Path) -> Path:
    return battles_dir(root) / "ranking.json"


def comparisons_dir(root: Path) -> Path:
    return Path(root) / "comparisons"


def comparison_file(root: Path, model_a: str, model_b: str) -> Path:
    return comparisons_dir(root) / f"{pair_stem(model_a, model_b)}.json"


def comparisons_csv(root: Path) -> Path:
    return comparisons_dir(root) / "comparisons.csv"


def summary_csv(root: Path) -> Path:
    return Path(root) / "summary.csv"


def charts_dir(root: Path) -> Path:
    return Path(root) / "charts"


def chart_file(root: Path, family: str, name: str) -> Path:
    """`charts/<family>/<name>.png` (a category's bars, `overview`, `battle_<a>__vs__<b>`), names made file-safe."""
    return charts_dir(root) / safe_name(family) / f"{safe_name(name)}.png"


def report_file(root: Path) -> Path:
    return Path(root) / "report.html"


def manifest_file(root: Path) -> Path:
    return Path(root) / "manifest.json"


def run_manifest_file(root: Path, run_id: str) -> Path:
    return Path(root) / "runs" / f"{run_id}.json"


def runs_dir(root: Path) -> Path:
    return Path(root) / "runs"


def judge_checks_dir(root: Path) -> Path:
    return Path(root) / "judge_checks"


def judge_check_file(root: Path, key: str | None = None) -> Path:
    """`judge_checks/<key>.json` (the store), or `judge_check.json` (the last check) without a key."""
    return judge_checks_dir(root) / f"{key}.json" if key else Path(root) / "judge_check.json"


def sageval_dir(root: Path) -> Path:
    return Path(root) / "sageval"


def sageval_file(root: Path, model: str) -> Path:
    return sageval_dir(root) / f"{safe_name(model)}.json"


def answers_dir(root: Path) -> Path:
    return Path(root) / "answers"


def answers_file(root: Path, name: str, ext: str = "jsonl") -> Path:
    return answers_dir(root) / f"{safe_name(name)}.{ext.lstrip('.')}"


def answers_manifest_file(answer_file: Path) -> Path:
    """A generated answer file's manifest, beside it: `<file>.generation.json` (the generation's
    signature, counts, usage and the ids missing with why)."""
    answer_file = Path(answer_file)
    return answer_file.with_name(answer_file.name + ".generation.json")


def generate_cache_file(answer_file: Path) -> Path:
    """The generation's cache of the model's replies, beside its answer file (SQLite, not this format's)."""
    return Path(answer_file).parent / "generate_cache.sqlite"


def judge_cache_file(root: Path) -> Path:
    """The judge's replies (SQLite, `evaluate.backends.cache`'s schema), unless `judge.cache` says elsewhere."""
    return Path(root) / "judge_cache.sqlite"


def lock_file(root: Path) -> Path:
    """The running process (pid, host, run id), gone when the run ends (`lock.SaveLock`)."""
    return Path(root) / LOCK_NAME


def shard_dir(root: Path, index: int, count: int) -> Path:
    """The save path of shard `index` of `count` (`--shard I/N`), in this same layout."""
    return Path(root) / f"shard-{index}-of-{count}"


def shard_dirs(root: Path) -> list[Path]:
    """The shard folders a save path holds, in name order ([] for none)."""
    return sorted(p for p in Path(root).glob("shard-*") if p.is_dir()) if Path(root).is_dir() else []


def labels_file(root: Path) -> Path:
    """A person's labels of the run's items, one JSON line each (written by `eval.py view`)."""
    return Path(root) / "labels.jsonl"


def label_queue_file(root: Path) -> Path:
    """The label queue's state: each queue's drawn sequence and the draws handed out, one JSON line each."""
    return Path(root) / "labels" / "queue.jsonl"


def corrected_file(root: Path) -> Path:
    """The label-corrected estimates, rewritten by `eval.py label` whenever labels change."""
    return Path(root) / "labels" / "corrected.json"


def logs_dir(root: Path) -> Path:
    return Path(root) / "logs"


def server_log_file(root: Path, name: str) -> Path:
    """`logs/<name>.log`: the output of a server the tool started for the run (`vllm-<model>`)."""
    return logs_dir(root) / f"{safe_name(name)}.log"


def generated_answer_file(folder: Path, name: str, ext: str) -> Path:
    """A model's generated answers in a benchmark's answer folder (`model_answer/`, `model_outputs/`):
    `<name>.<ext>`, the name as given (the benchmark names the model by its file)."""
    return Path(folder) / f"{name}.{ext.lstrip('.')}"


# A benchmark's own files (FastChat's, Arena-Hard's, AlpacaEval's layouts) are declared in its package
# (`evaluate/benchmarks/<name>/files.py`): paths under the save path, written through this package's
# `write` like every other file. A benchmark command checks its own folders and these before any work.
# folders a run and a benchmark command write into: one that exists as a file is refused before any work
RUN_FOLDERS = ("results", "runs", "charts", "battles")
BENCHMARK_RUN_FOLDERS = ("results", "battles", "runs")  # the project's own folders a benchmark run writes


def layout_of(manifest: Any) -> int:
    """The layout a manifest was written under (1 when it does not say: written before the number was)."""
    value = manifest.get("layout", 1) if isinstance(manifest, dict) else 1
    return value if isinstance(value, int) and not isinstance(value, bool) else 1


def check_layout(root: Path, manifest: Any) -> None:
    """Refuse a save path of a newer layout than this version reads (LayoutError: exit 2)."""
    found = layout_of(manifest)
    if found > LAYOUT_VERSION:
        raise LayoutError(f"{manifest_file(root)}: save path layout {found} is newer than this version reads "
                          f"(layout {LAYOUT_VERSION}); read it with the version that wrote it, or upgrade")
