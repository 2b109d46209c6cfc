"""No module reaches into another package for a private name: `from ..pipeline.checkstore import _ci` (or
`store._ci` on an imported module) tied the judge check and MT-bench to the run's internals (issue 45).
What two packages share is public in one home (`evaluate/core/numbers.py` for the numbers' text).

Within a package a private name may be shared (`from .x import _helper`); across packages never. Each
rule is shown to catch a planted violation.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ROOTS = ("evaluate", "unieval", "repeval", "sageval")


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _absolute(node: ast.ImportFrom, package: str) -> str:
    """The module an ImportFrom names, absolute ('evaluate.judgecheck.store'); `package` is the importing
    file's folder ('evaluate/judgecheck')."""
    if not node.level:
        return node.module or ""
    base = package.split("/")
    base = base[:len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _package_of(module: str, repo: Path) -> str:
    """'evaluate.judgecheck.store' -> 'evaluate/judgecheck'; a package's own name -> its folder."""
    path = repo.joinpath(*module.split("."))
    if path.is_dir():
        return path.relative_to(repo).as_posix()
    return path.parent.relative_to(repo).as_posix()


def violations(path: Path, repo: Path = REPO) -> list[str]:
    """`from X import _name` and `X._name` (X a module or package imported from another package) in `path`."""
    package = path.parent.relative_to(repo).as_posix()
    tree = ast.parse(path.read_text(encoding="utf-8"))
    where = path.relative_to(repo).as_posix()
    out: list[str] = []
    foreign: dict[str, str] = {}  # a local name bound to another package's module -> that module
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            mod = _absolute(node, package)
            if mod.split(".")[0] not in ROOTS:
                continue
            for alias in node.names:
                sub = f"{mod}.{alias.name}"
                if repo.joinpath(*sub.split(".")).with_suffix(".py").is_file() or \
                        repo.joinpath(*sub.split(".")).is_dir():  # `from . import run as bench`: a module
                    if _package_of(sub, repo) != package:
                        foreign[alias.asname or alias.name] = sub
                    continue
                if _private(alias.name) and _package_of(mod, repo) != package:
                    out.append(f"{where}:{node.lineno}: from {mod} import {alias.name}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in ROOTS and _package_of(alias.name, repo) != package:
                    foreign[alias.asname or alias.name] = alias.name
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr) and isinstance(node.value, ast.Name) \
                and node.value.id in foreign:
            out.append(f"{where}:{node.lineno}: {foreign[node.value.id]}.{node.attr}")
    return out


def test_no_module_imports_another_packages_private_name():
    found = [v for root in ROOTS for p in sorted((REPO / root).rglob("*.py")) for v in violations(p)]
    assert found == []


def test_the_check_catches_planted_violations(tmp_path):
    pkg = tmp_path / "evaluate"
    for sub in ("a", "b"):
        (pkg / sub).mkdir(parents=True)
        (pkg / sub / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "b" / "store.py").write_text("def _ci(x): return x\ndef ci(x): return x\n")
    (pkg / "b" / "same.py").write_text("from .store import _ci\n")  # within its package: allowed
    planted = pkg / "a" / "user.py"
    planted.write_text("from ..b.store import _ci, ci\nfrom ..b import store\nimport evaluate.b.store as s\n"
                       "def f():\n    return store._ci(1), s._ci(2), store.ci(3)\n")
    got = violations(planted, tmp_path)
    assert got == [f"evaluate/a/user.py:1: from evaluate.b.store import _ci",
                   "evaluate/a/user.py:5: evaluate.b.store._ci", "evaluate/a/user.py:5: evaluate.b.store._ci"]
    assert violations(pkg / "b" / "same.py", tmp_path) == []
