"""The modules of helpers/ import each other in one direction only: no import cycle, at module level or inside a
function (a function-level import only postpones a cycle to the first call)."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "helpers"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported_modules(path: Path, modules: set[str]) -> set[str]:
    """Every module of helpers/ that ``path`` imports anywhere in its body (functions and classes included)."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                source = f"{base}.{node.module}" if node.module else base
            else:
                source = node.module or ""
            found.add(source)
            # `from helpers import metrics` imports the module helpers.metrics, not a name of helpers/__init__
            found.update(f"{source}.{alias.name}" for alias in node.names if f"{source}.{alias.name}" in modules)
    return {module for module in found if module in modules and module != name}


def import_graph() -> dict[str, set[str]]:
    paths = sorted((ROOT / PACKAGE).rglob("*.py"))
    modules = {module_name(path) for path in paths}
    return {module_name(path): imported_modules(path, modules) for path in paths}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as [a, b, ..., a], or None (depth-first search with an explicit path)."""
    state: dict[str, str] = {}  # "open" while on the current path, "done" after

    def visit(module: str, path: list[str]) -> list[str] | None:
        state[module] = "open"
        path.append(module)
        for target in sorted(graph[module]):
            if state.get(target) == "open":
                return path[path.index(target) :] + [target]
            if target not in state:
                cycle = visit(target, path)
                if cycle:
                    return cycle
        path.pop()
        state[module] = "done"
        return None

    for module in sorted(graph):
        if module not in state:
            cycle = visit(module, [])
            if cycle:
                return cycle
    return None


def test_the_graph_sees_every_kind_of_import():
    graph = import_graph()
    assert "helpers.metrics" in graph["helpers.stats"]  # from helpers import metrics
    assert "helpers.losses" in graph["helpers.suites"]  # from .losses import (...)
    assert "helpers.cclnet" in graph["helpers.suites"]  # from .cclnet import CCLNetLoss, inside a function
    assert "helpers.losses.base" in graph["helpers.losses.multiclass"]  # from .base import (...)


def test_find_cycle_reports_a_function_level_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert find_cycle(graph) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_helpers_has_no_import_cycle():
    cycle = find_cycle(import_graph())
    assert cycle is None, (
        "import cycle in helpers/: " + " -> ".join(cycle) + "; move the shared pieces into a "
        "lower module that both import"
    )
