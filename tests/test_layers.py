"""The package layers: no import cycle between packages, and the core imports nothing above it.

A package is a folder and the modules directly in it. Every import counts, those inside functions
too; only imports under `if TYPE_CHECKING:` are left out (they never run).
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ROOTS = ("evaluate", "unieval", "repeval", "sageval")
CORE = ("evaluate/core",)
LOW = ("evaluate/core", "evaluate/backends")  # what every evaluator may build on


def _package_of(module: str) -> str | None:
    """'evaluate.core.io' -> 'evaluate/core' (the folder holding the module)."""
    parts = module.split(".")
    for n in range(len(parts), 0, -1):
        folder = REPO.joinpath(*parts[:n])
        if folder.is_dir() and (folder / "__init__.py").exists():
            return "/".join(parts[:n])
    return None


def _is_type_checking(node: ast.If) -> bool:
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or \
        (isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING")


def _imports(path: Path, package: str) -> set[str]:
    """Absolute module names imported anywhere in `path` (TYPE_CHECKING blocks excluded)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split("/")  # `.` is the module's folder, `..` its parent
                base = base[:len(base) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            out.add(mod)
            for a in node.names:  # `from . import x` may import a subpackage x
                out.add(f"{mod}.{a.name}")
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return out


def package_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for root in ROOTS:
        for path in (REPO / root).rglob("*.py"):
            pkg = path.parent.relative_to(REPO).as_posix()
            deps = graph.setdefault(pkg, set())
            for mod in _imports(path, pkg):
                if mod.split(".")[0] not in ROOTS:
                    continue
                target = _package_of(mod)
                if target and target != pkg:
                    deps.add(target)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one package (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def strong(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            strong(v)
    return out


def test_no_import_cycle_between_packages():
    graph = package_graph()
    assert "evaluate/core" in graph and "evaluate/families" in graph
    assert _cycles(graph) == []


def test_core_imports_nothing_above_it():
    graph = package_graph()
    for pkg in CORE:
        assert graph[pkg] == set(), f"{pkg} imports {graph[pkg]}"


def test_evaluators_build_only_on_the_core_and_backends():
    """Judges, metrics, UniEval, RepEval, SAGEval and the statistics are peers: none of them imports
    the families or the app layer (config, runner, results, charts...)."""
    graph = package_graph()
    above = {"evaluate", "evaluate/families", "evaluate/report"}
    for pkg in ("evaluate/judges", "evaluate/metrics", "evaluate/stats", "evaluate/backends", "unieval", "repeval",
                "sageval"):
        assert not graph[pkg] & above, f"{pkg} imports {graph[pkg] & above}"


def test_the_walk_sees_function_level_imports(tmp_path):
    """The check would be worthless if it missed an import inside a function: plant one and see it."""
    src = "def f():\n    from evaluate.families import base\n\nif TYPE_CHECKING:\n    import evaluate.runner\n"
    path = tmp_path / "m.py"
    path.write_text(src)
    found = _imports(path, "evaluate/core")
    assert "evaluate.families" in found and "evaluate.runner" not in found
    assert _cycles({"a": {"b"}, "b": {"a"}, "c": set()}) == [["a", "b"]]
