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
    return charts_dir(root) / family / f"{name}.png"


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


def logs_dir(root: Path) -> Path:
    return Path(root) / "logs"


def server_log_file(root: Path, name: str) -> Path:
    """`logs/<name>.log`: the output of a server the tool started for the run (`vllm-<model>`)."""
    return logs_dir(root) / f"{safe_name(name)}.log"


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
