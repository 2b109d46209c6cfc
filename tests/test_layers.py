"""The layers: no import cycle between modules (each module a node, those at the root of a
package included) nor between packages, the core imports nothing of the project, commands sit side
by side (no command imports another), and only the command line imports the commands.

Every import counts, those inside functions too; only imports under `if TYPE_CHECKING:` are left
out (they never run). Each rule is also shown to catch a planted violation.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ROOTS = ("evaluate", "unieval", "repeval", "sageval")
CORE = ("evaluate/core",)
LOW = ("evaluate/core", "evaluate/backends")  # what every evaluator may build on
SAVEPATH = "evaluate/savepath"  # the save path's format: every layer that writes or reads one builds on it
# each benchmark a package, above the run (found, not listed: a new benchmark touches no file outside its package)
BENCHMARKS = ("evaluate/benchmarks", *sorted(f"evaluate/benchmarks/{p.name}" for p in (REPO / "evaluate/benchmarks").iterdir()
                                              if (p / "__init__.py").is_file()))
ABOVE_RUN = ("evaluate/ci", "evaluate/metaeval", "evaluate/compare", "evaluate/judgecheck", "evaluate/generation",
             *BENCHMARKS)  # what builds on a run: gates and CI files, meta-evaluation, run-to-run comparison, ...
RUN_MODULES = {"config", "answers", "plan", "run", "schedule", "shard", "merge", "collect", "savedir", "results",
               "outputs", "comparisons", "item_sets"}  # pipeline/ holds the run and nothing else


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


def _module_of(module: str) -> str | None:
    """'evaluate.core.io' -> 'evaluate.core.io' if it is a file, its package if it names a package,
    None for a name inside a module (`from x import name` adds both; the name is dropped)."""
    path = REPO.joinpath(*module.split("."))
    if path.with_suffix(".py").is_file():
        return module
    if (path / "__init__.py").is_file():
        return module + ".__init__"
    return None


def _module_name(path: Path) -> str:
    rel = path.relative_to(REPO).with_suffix("")
    return ".".join(rel.parts)


def module_graph() -> dict[str, set[str]]:
    """Every module of the project -> the project modules it imports."""
    graph: dict[str, set[str]] = {}
    for root in ROOTS:
        for path in (REPO / root).rglob("*.py"):
            pkg = path.parent.relative_to(REPO).as_posix()
            node = _module_name(path)
            deps = graph.setdefault(node, set())
            for mod in _imports(path, pkg):
                if mod.split(".")[0] not in ROOTS:
                    continue
                target = _module_of(mod)
                if target and target != node:
                    deps.add(target)
    return graph


def package_graph() -> dict[str, set[str]]:
    """Packages (a folder and its modules) -> packages they import; a module at the root of a
    package that holds subpackages (evaluate/cli.py) is a node of its own."""
    def node_of(module: str) -> str:
        parts = module.split(".")
        pkg = "/".join(parts[:-1])
        if len(parts) == 2 and parts[1] != "__init__" and any((REPO / parts[0]).glob("*/__init__.py")):
            return "/".join(parts)  # a root module: its own node
        return pkg

    out: dict[str, set[str]] = {}
    for mod, deps in module_graph().items():
        n = node_of(mod)
        out.setdefault(n, set()).update(node_of(d) for d in deps if node_of(d) != n)
    return out


def strict_package_graph() -> dict[str, set[str]]:
    """The package view with the root package whole: a module at a package's root (evaluate/cli.py,
    evaluate/__init__.py) is the package, so `pipeline` importing `evaluate/__init__` while the root
    package's cli imports the commands (which import the pipeline) is the cycle it is."""
    def node_of(module: str) -> str:
        return "/".join(module.split(".")[:-1])

    out: dict[str, set[str]] = {}
    for mod, deps in module_graph().items():
        n = node_of(mod)
        out.setdefault(n, set()).update(node_of(d) for d in deps if node_of(d) != n)
    return out


def layer_violations(graph: dict[str, set[str]]) -> list[str]:
    """The layer rules over a module graph; [] when they hold."""
    problems = []
    core = lambda m: m.startswith("evaluate.core.")  # noqa: E731
    command = lambda m: m.startswith("evaluate.commands.") and not m.endswith((".__init__", ".common"))  # noqa: E731
    for mod, deps in graph.items():
        for d in sorted(deps):
            if core(mod) and not core(d):
                problems.append(f"the core imports the project: {mod} -> {d}")
            if command(mod) and command(d):
                problems.append(f"a command imports another command: {mod} -> {d}")
            if d.startswith("evaluate.commands.") and not (mod.startswith("evaluate.commands.") or mod == "evaluate.cli"):
                problems.append(f"only the command line imports commands: {mod} -> {d}")
    return problems


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


def test_no_import_cycle_between_modules():
    graph = module_graph()
    assert "evaluate.cli" in graph and "evaluate.pipeline.run" in graph and "evaluate.core.io" in graph
    assert _cycles(graph) == []


def test_no_import_cycle_between_packages():
    graph = package_graph()
    assert "evaluate/core" in graph and "evaluate/families" in graph and "evaluate/cli" in graph
    assert _cycles(graph) == []


def test_no_import_cycle_between_packages_with_the_root_package_whole():
    graph = strict_package_graph()
    assert "evaluate" in graph and "evaluate/commands" in graph["evaluate"]  # cli.py is the root package's
    assert _cycles(graph) == []


def test_the_root_package_view_catches_a_planted_cycle(monkeypatch):
    """pipeline -> evaluate/__init__ (the version, as before evaluate/core/version.py) closes a cycle
    through the root package's cli.py."""
    real = module_graph()
    planted = {k: set(v) for k, v in real.items()}
    planted["evaluate.pipeline.run"].add("evaluate.__init__")
    monkeypatch.setitem(globals(), "module_graph", lambda: planted)
    cycles = _cycles(strict_package_graph())
    assert cycles and any("evaluate" in c and "evaluate/pipeline" in c for c in cycles)


def test_layer_rules_hold():
    assert layer_violations(module_graph()) == []


def test_commands_are_modules_with_main():
    """Every command the user types is one module with `main(argv) -> int`, listed by `eval.py help`."""
    from evaluate.cli import COMMANDS

    for name, (module, _) in COMMANDS.items():
        path = REPO.joinpath(*module.split(".")).with_suffix(".py")
        if not path.is_file():  # a command whose module is not in this checkout
            continue
        assert "def main(" in path.read_text(encoding="utf-8"), f"{name}: {module} has no main(argv)"


def test_each_rule_catches_a_planted_violation():
    assert _cycles({"a": {"b"}, "b": {"a"}, "c": set()}) == [["a", "b"]]
    planted = {
        "evaluate.core.io": {"evaluate.pipeline.run"},
        "evaluate.commands.merge": {"evaluate.commands.run", "evaluate.commands.common"},
        "evaluate.pipeline.run": {"evaluate.commands.report"},
        "evaluate.cli": {"evaluate.commands.run"},
    }
    got = layer_violations(planted)
    assert any("core imports" in p for p in got)
    assert any("another command" in p and "commands.merge" in p for p in got)
    assert any("only the command line" in p and "pipeline.run" in p for p in got)
    assert not any("evaluate.cli" in p or "commands.common" in p for p in got)


def test_core_imports_nothing_above_it():
    graph = package_graph()
    for pkg in CORE:
        assert graph[pkg] == set(), f"{pkg} imports {graph[pkg]}"


def test_the_save_path_package_builds_on_the_core_alone():
    """The save path's one owner sits right above the core, so that every layer (backends, families,
    report, pipeline, generation, benchmarks) can write and read through it."""
    graph = package_graph()
    assert graph[SAVEPATH] <= {"evaluate/core"}, graph[SAVEPATH]
    users = {p for p, deps in graph.items() if SAVEPATH in deps}
    assert {"evaluate/pipeline", "evaluate/report", "evaluate/generation", *BENCHMARKS[1:]} <= users


def test_the_run_sits_below_what_builds_on_it():
    """`pipeline/` holds the run; the benchmarks (each in its package), generation, the judge check and
    its store, the gates and CI files, meta-evaluation and run-to-run comparison build on it and never
    the other way round (the run is handed the judge check's lookup, `run_job(attach_check=...)`)."""
    graph = package_graph()
    assert set(ABOVE_RUN) <= set(graph)
    for pkg in ("evaluate/pipeline", "evaluate/report", "evaluate/families"):
        assert not graph[pkg] & set(ABOVE_RUN), (pkg, graph[pkg] & set(ABOVE_RUN))
    assert "evaluate/pipeline" not in graph["evaluate/report"]  # the charts read results, typed only for the checker


def test_the_run_package_holds_only_the_run():
    """Gates, CI reports, meta-evaluation, the judge check's store, charts and `compare` left pipeline/ for
    the packages whose job they are; a module added to pipeline/ is named here or goes elsewhere."""
    modules = {p.stem for p in (REPO / "evaluate" / "pipeline").glob("*.py")}
    assert modules == RUN_MODULES, modules ^ RUN_MODULES


def test_evaluators_build_only_on_the_lower_layers():
    """Judges, metrics, models, UniEval, RepEval, SAGEval and the statistics are peers: none of them
    imports the families, the pipeline, the commands or the report."""
    graph = package_graph()
    above = {"evaluate/families", "evaluate/report", "evaluate/pipeline", "evaluate/commands", "evaluate/judgecheck",
             "evaluate/cli", "evaluate/api", "evaluate/generation", *BENCHMARKS}
    for pkg in ("evaluate/judges", "evaluate/metrics", "evaluate/stats", "evaluate/backends", "evaluate/models",
                "unieval", "repeval", "sageval"):
        assert not graph[pkg] & above, f"{pkg} imports {graph[pkg] & above}"


def test_the_walk_sees_function_level_imports(tmp_path):
    """The check would be worthless if it missed an import inside a function: plant one and see it."""
    src = "def f():\n    from evaluate.families import base\n\nif TYPE_CHECKING:\n    import evaluate.pipeline.run\n"
    path = tmp_path / "m.py"
    path.write_text(src)
    found = _imports(path, "evaluate/core")
    assert "evaluate.families" in found and "evaluate.pipeline.run" not in found


def _all_missing(path: Path) -> list[str]:
    """Names an `__all__` lists that the module neither defines nor imports."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    bound: set[str] = set()
    listed: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
            if node.name == "__getattr__":  # names the module hands out lazily (unieval: torch on first use)
                bound.update(c.value for c in ast.walk(node)
                             if isinstance(c, ast.Constant) and isinstance(c.value, str))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    bound.add(target.id)
                    if target.id == "__all__" and isinstance(node.value, (ast.List, ast.Tuple)):
                        listed = [e.value for e in node.value.elts if isinstance(e, ast.Constant)]
    return [name for name in listed if name not in bound]


def test_every_all_names_what_the_module_has(tmp_path):
    """`from evaluate.judges import *` failed on a `rank` that __all__ listed and nothing defined."""
    missing = {p.relative_to(REPO).as_posix(): m for root in ROOTS for p in (REPO / root).rglob("*.py")
               if (m := _all_missing(p))}
    assert missing == {}
    planted = tmp_path / "m.py"
    planted.write_text("from .x import a\ndef b(): pass\n__all__ = ['a', 'b', 'rank']\n")
    assert _all_missing(planted) == ["rank"]
