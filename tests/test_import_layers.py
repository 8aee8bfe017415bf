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


def _without_main_block(tree: ast.Module) -> ast.Module:
    """The module without its ``if __name__ == "__main__":`` block: that code runs only when the file is the program
    (module ``__main__``, e.g. ``python -m helpers.course``), never when another module imports it, so an import
    there is the program's entry importing the library, not an edge between library modules."""
    tree.body = [node for node in tree.body if not _is_main_block(node)]
    return tree


def _is_main_block(node: ast.stmt) -> bool:
    return (
        isinstance(node, ast.If)
        and isinstance(node.test, ast.Compare)
        and isinstance(node.test.left, ast.Name)
        and node.test.left.id == "__name__"
        and any(isinstance(c, ast.Constant) and c.value == "__main__" for c in node.test.comparators)
    )


def imported_modules(path: Path, modules: set[str]) -> set[str]:
    """Every module of helpers/ that ``path`` imports anywhere in its body (functions and classes included)."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(_without_main_block(ast.parse(path.read_text(encoding="utf-8"), filename=str(path)))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                source = f"{base}.{node.module}" if node.module else base
            else:
                source = node.module or ""
            found.add(source)
            # `from helpers import metrics` imports the module helpers.metrics.functional, not a name of
            # helpers/__init__
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
    assert "helpers.metrics.functional" in graph["helpers.metrics.stats"]  # from helpers import metrics
    assert "helpers.losses" in graph["helpers.course.suites"]  # from .losses import (...)
    assert (
        "helpers.losses.cclnet" in graph["helpers.course.suites"]
    )  # from .cclnet import CCLNetLoss, inside a function
    assert "helpers.losses.base" in graph["helpers.losses.multiclass"]  # from .base import (...)


def test_an_import_in_the_main_block_is_the_programs_entry_not_an_edge():
    """``python -m helpers.course run --engine ray`` passes helpers.course.ray_engine (which imports
    helpers.course.runner) to main from
    the ``__main__`` block; the same import anywhere else in course.py would be a cycle."""
    graph = import_graph()
    assert "helpers.course.runner" in graph["helpers.course.ray_engine"]
    assert (
        "helpers.course.ray_engine" not in graph["helpers.course.runner"]
        and "helpers.course.ray_engine" not in graph["helpers.course.suites"]
    )
    source = 'import os\ndef f():\n    from helpers import scale\nif __name__ == "__main__":\n    import json\n'
    tree = _without_main_block(ast.parse(source))
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    assert imported == {"os"}


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
