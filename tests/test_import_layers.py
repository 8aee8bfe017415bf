"""The architecture of helpers/, enforced: sub-packages in layers that import downward only (entry blocks included),
no import cycle, no call into another module's private names, no module over ~600 lines, no function over 80 lines.

Each rule is a function of source text, so each is shown failing on a small broken example that breaks that rule
only, beside the check that the real tree keeps it."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "helpers"

#: which sub-packages each sub-package may import (besides its own modules). The layers, top to bottom:
#: course → lessons → plots → training, calibration → metrics, losses, data → utils.
ALLOWED_IMPORTS = {
    "utils": set(),
    "data": {"utils"},
    "losses": {"utils"},
    "metrics": {"utils"},
    "calibration": {"utils", "data", "metrics"},
    "training": {"utils", "data", "losses", "metrics"},
    "plots": {"utils", "metrics", "calibration"},
    "lessons": {"utils", "data", "losses", "metrics", "calibration", "training", "plots"},
    "course": {"utils", "data", "losses", "metrics", "calibration", "training", "plots", "lessons"},
}
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 80


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(source: str, name: str, is_package: bool, modules: set[str]) -> set[str]:
    """Every module of ``modules`` that the module ``name`` imports anywhere: module level, inside functions, and in
    its ``if __name__ == "__main__":`` block (an entry block imports downward too)."""
    package = name if is_package else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                source_module = f"{base}.{node.module}" if node.module else base
            else:
                source_module = node.module or ""
            submodules = {f"{source_module}.{a.name}" for a in node.names} & modules
            # `from helpers.metrics import core` imports the module helpers.metrics.core; the package's __init__ is
            # an edge only when a name of it is imported (`from helpers.metrics import ece`)
            found.update(submodules)
            if len(submodules) < len(node.names):
                found.add(source_module)
    return {module for module in found if module in modules and module != name}


def tree_sources(root: Path = ROOT) -> dict[str, tuple[str, bool]]:
    """{module name: (source, is a package __init__)} for every module of helpers/ under ``root``."""
    return {
        module_name(path, root): (path.read_text(encoding="utf-8"), path.name == "__init__.py")
        for path in sorted((root / PACKAGE).rglob("*.py"))
    }


def import_graph(sources: dict[str, tuple[str, bool]]) -> dict[str, set[str]]:
    modules = set(sources)
    return {name: imports_of(source, name, is_package, modules) for name, (source, is_package) in sources.items()}


def sub_package(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


def layer_violations(graph: dict[str, set[str]], allowed: dict[str, set[str]] = ALLOWED_IMPORTS) -> list[str]:
    """``"a imports b"`` for every edge from one sub-package to another that the table does not allow (and for any
    module outside the table: every module lives in a sub-package)."""
    found = []
    for module, targets in sorted(graph.items()):
        here = sub_package(module)
        if here is None:
            if targets:
                found.append(f"{module} imports {sorted(targets)} (helpers/__init__ imports nothing)")
            continue
        if here not in allowed:
            found.append(f"{module} is in no layer: add helpers/{here}/ to ALLOWED_IMPORTS or move it")
            continue
        for target in sorted(targets):
            there = sub_package(target)
            if there is not None and there != here and there not in allowed[here]:
                found.append(f"{module} imports {target}: helpers.{here} may import only {sorted(allowed[here])}")
    return found


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as [a, b, ..., a], or None (depth-first search with an explicit path)."""
    state: dict[str, str] = {}  # "open" while on the current path, "done" after

    def visit(module: str, path: list[str]) -> list[str] | None:
        state[module] = "open"
        path.append(module)
        for target in sorted(graph.get(module, ())):
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


def private_calls(source: str, name: str, modules: set[str]) -> list[str]:
    """Uses of another module's private names: ``from helpers.x import _f`` or ``alias._f`` where ``alias`` is an
    imported module of helpers/ (the module's own privates, and dunder names, are fine)."""
    tree = ast.parse(source)
    aliases, found = {}, []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(PACKAGE):
            for alias in node.names:
                target = f"{node.module}.{alias.name}"
                if target in modules and target != name:
                    aliases[alias.asname or alias.name] = target
                elif alias.name.startswith("_") and not alias.name.startswith("__") and node.module != name:
                    found.append(f"{name} imports {node.module}.{alias.name}")
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases:
            if node.attr.startswith("_") and not node.attr.startswith("__"):
                found.append(f"{name} uses {aliases[node.value.id]}.{node.attr}")
    return found


def oversized_modules(sources: dict[str, tuple[str, bool]], limit: int = MAX_MODULE_LINES) -> list[str]:
    return [
        f"{name}: {source.count(chr(10))} lines" for name, (source, _) in sources.items() if source.count("\n") > limit
    ]


def long_functions(source: str, name: str, limit: int = MAX_FUNCTION_LINES) -> list[str]:
    return [
        f"{name}.{node.name}: {node.end_lineno - node.lineno + 1} lines"
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.end_lineno - node.lineno + 1 > limit
    ]


# ---------------------------------------------------------------------------------------------------------------
# the real tree


SOURCES = tree_sources()
GRAPH = import_graph(SOURCES)


def test_every_module_lives_in_a_layer_and_imports_downward_only():
    assert layer_violations(GRAPH) == []


def test_helpers_has_no_import_cycle():
    cycle = find_cycle(GRAPH)
    assert cycle is None, "import cycle in helpers/: " + " -> ".join(cycle) + "; move the shared piece lower"


def test_no_module_calls_another_modules_private_names():
    modules = set(SOURCES)
    assert [call for name, (source, _) in SOURCES.items() for call in private_calls(source, name, modules)] == []


def test_no_module_is_over_the_size_limit():
    assert oversized_modules(SOURCES) == []


def test_no_function_is_over_the_size_limit():
    assert [hit for name, (source, _) in SOURCES.items() for hit in long_functions(source, name)] == []


def test_the_graph_sees_every_kind_of_import():
    assert "helpers.metrics" in GRAPH["helpers.training.run_store"] or any(
        target.startswith("helpers.training.") for target in GRAPH["helpers.training.run_store"]
    )
    assert "helpers.losses.multilabel_ldace" in GRAPH["helpers.losses.properness"]  # inside a function
    assert "helpers.course.cli" in GRAPH["helpers.course.__main__"]  # the program's entry


# ---------------------------------------------------------------------------------------------------------------
# each rule fails on a broken example, and only that rule


def _tree(tmp_path: Path, files: dict[str, str]) -> dict[str, tuple[str, bool]]:
    for relative, text in files.items():
        path = tmp_path / PACKAGE / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tree_sources(tmp_path)


def _all_rules(sources: dict[str, tuple[str, bool]]) -> dict[str, bool]:
    graph = import_graph(sources)
    modules = set(sources)
    return {
        "layers": bool(layer_violations(graph)),
        "cycle": find_cycle(graph) is not None,
        "private": any(private_calls(source, name, modules) for name, (source, _) in sources.items()),
        "module size": bool(oversized_modules(sources)),
        "function size": any(long_functions(source, name) for name, (source, _) in sources.items()),
    }


GOOD = {
    "__init__.py": "",
    "utils/__init__.py": "",
    "utils/paths.py": "ROOT = 1\n",
    "metrics/__init__.py": "from helpers.metrics.core import ece\n",
    "metrics/core.py": "from helpers.utils import paths\n\n\ndef ece():\n    return paths.ROOT\n",
    "plots/__init__.py": "",
    "plots/reliability.py": "from helpers import metrics\n\n\ndef draw():\n    return metrics.ece()\n",
}
BROKEN = {
    # a metric importing the figures' package: upward (and no cycle: helpers/plots/__init__ imports nothing)
    "layers": {"metrics/core.py": "def ece():\n    from helpers import plots\n\n    return plots\n"},
    # two modules of one layer importing each other
    "cycle": {
        "utils/paths.py": "from helpers.utils import atomic\n\nROOT = 1\n",
        "utils/atomic.py": "from helpers.utils import paths\n",
    },
    "private": {"plots/reliability.py": "from helpers.metrics import core\n\n\ndef draw():\n    return core._bins()\n"},
    "module size": {"utils/paths.py": "ROOT = 1\n" + "#\n" * MAX_MODULE_LINES},
    "function size": {"utils/paths.py": "def f():\n" + "    x = 1\n" * MAX_FUNCTION_LINES + "    return x\n"},
}


def test_the_good_example_keeps_every_rule(tmp_path):
    assert not any(_all_rules(_tree(tmp_path, GOOD)).values())


@pytest.mark.parametrize("rule", sorted(BROKEN))
def test_each_broken_example_fails_its_rule_only(tmp_path, rule):
    broken = _all_rules(_tree(tmp_path, GOOD | BROKEN[rule]))
    assert broken == {name: name == rule for name in broken}


def test_an_upward_import_in_an_entry_block_is_a_layer_violation(tmp_path):
    """``if __name__ == "__main__":`` runs only when the module is the program, but it is still this module reaching
    up: the program's entry belongs in the top layer (``helpers/course/__main__.py``)."""
    entry = 'def ece():\n    return 1\n\n\nif __name__ == "__main__":\n    from helpers import plots\n'
    assert _all_rules(_tree(tmp_path, GOOD | {"metrics/core.py": entry}))["layers"]
