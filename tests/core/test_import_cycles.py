"""No import cycles among the modules of leanseg.core and leanseg.gui.

The graph is read from the source with `ast` (nothing is imported, so this runs without Qt); every import
counts, also those inside functions and under `if TYPE_CHECKING:`, because each one is a dependency.
"""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = {"leanseg.core": ROOT / "core", "leanseg.gui": ROOT / "gui"}


def module_files() -> dict[str, Path]:
    """Dotted module name -> source file, for every module of the packages (a package is its __init__)."""
    modules: dict[str, Path] = {}
    for package, folder in PACKAGES.items():
        for path in sorted(folder.rglob("*.py")):
            parts = path.relative_to(folder).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            modules[".".join((package, *parts))] = path
    return modules


def imported_modules(name: str, path: Path, known: set[str]) -> set[str]:
    """The modules in `known` that the module `name` (source `path`) imports, anywhere in its body."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
        else:
            continue
        found.update(target for target in targets if target in known and target != name)
    return found


def import_graph() -> dict[str, set[str]]:
    """Module -> the project modules it imports."""
    files = module_files()
    known = set(files)
    return {name: imported_modules(name, path, known) for name, path in files.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for succ in sorted(graph[node]):
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_graph_sees_relative_and_absolute_imports() -> None:
    graph = import_graph()
    assert "leanseg.core.predict" in graph["leanseg.core.cli"] or any(
        "leanseg.core.commands" in m for m in graph["leanseg.core.cli"])
    assert "leanseg.gui.main_window.window" in graph["leanseg.gui.main_window.screenshot"]


def test_cycles_finds_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_cycles_in_core_or_gui() -> None:
    found = cycles(import_graph())
    assert found == [], "import cycles:\n" + "\n".join(" <-> ".join(c) for c in found)
