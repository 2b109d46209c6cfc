"""Every name a bench/ script imports from the package exists (issue 45 moved modules; bench/ppi_coverage.py and
bench/judge_repetition.py still named the old places, and nothing ran them). Checked from the source, so no
bench script's own work runs here."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"


def _imports(path: Path) -> list[tuple[int, str, list[str]]]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == "evaluate":
            out.append((node.lineno, node.module, [a.name for a in node.names]))
        elif isinstance(node, ast.Import):
            out += [(node.lineno, a.name, []) for a in node.names if a.name.split(".")[0] == "evaluate"]
    return out


@pytest.mark.parametrize("script", sorted(BENCH.glob("*.py")), ids=lambda p: p.name)
def test_every_package_name_a_bench_script_imports_exists(script: Path) -> None:
    missing = []
    for line, module, names in _imports(script):
        try:
            mod = importlib.import_module(module)
        except ImportError as exc:
            missing.append(f"{script.name}:{line}: {module} ({exc})")
            continue
        missing += [f"{script.name}:{line}: {module}.{n}" for n in names if n != "*" and not hasattr(mod, n)
                    and importlib.util.find_spec(f"{module}.{n}") is None]
    assert not missing, "bench imports that no longer resolve:\n" + "\n".join(missing)
