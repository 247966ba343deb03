"""The package's import graph, read from the source: no import circles, and no lower module
reaches for the composition root (``smart_context.services``).

Every import counts, wherever it is written: at the top, inside a function, under
``if TYPE_CHECKING``. A circle hidden in a function is still a circle, and an import for a type
still says which module leans on which.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import smart_context

PACKAGE = Path(smart_context.__file__).parent
ROOT = "smart_context.services"
# Who may hold the whole of the composition root: the plugin that builds it, the command table
# at the composition's edge, and (until its rewrite lands) the request path.
MAY_IMPORT_ROOT = ("smart_context.plugin", "smart_context.commands", "smart_context.context")


def module_name(path: Path) -> str:
    parts = ["smart_context", *path.relative_to(PACKAGE).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def within(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(f"{prefix}.")


def imported_names(name: str, path: Path) -> Iterator[str]:
    """Every name ``path`` imports, absolute: ``a.b`` and, for ``from a.b import c``, ``a.b.c``
    (which is a module or a name in ``a.b``)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            yield base
            yield from (f"{base}.{alias.name}" for alias in node.names)


def import_graph() -> dict[str, set[str]]:
    """Each module of the package -> the package modules it imports."""
    paths = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}
    graph: dict[str, set[str]] = {}
    for name, path in paths.items():
        targets = set()
        for target in imported_names(name, path):
            while target and target not in paths:  # a.b.some_function -> a.b
                target = target.rpartition(".")[0]
            if target and target != name:
                targets.add(target)
        graph[name] = targets
    return graph


def reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen: set[str] = set()
    todo = list(graph[start])
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo.extend(graph[name])
    return seen


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The circles: groups of modules each of which imports (at any depth) every other."""
    reach = {name: reachable(graph, name) for name in graph}
    circles = {
        frozenset(other for other in reach[name] if name in reach[other])
        for name in graph
        if name in reach[name]
    }
    return sorted(sorted(circle) for circle in circles)


def test_the_graph_sees_every_import(tmp_path: Path) -> None:
    source = tmp_path / "smart_context" / "topics" / "example.py"
    source.parent.mkdir(parents=True)
    source.write_text(
        "from typing import TYPE_CHECKING\n"
        "from . import model\n"
        "if TYPE_CHECKING:\n"
        "    from smart_context.store import VectorStore\n"
        "def later() -> None:\n"
        "    import smart_context.services\n"
    )
    names = set(imported_names("smart_context.topics.example", source))
    assert {"smart_context.topics.model", "smart_context.store.VectorStore"} <= names
    assert "smart_context.services" in names
    assert "smart_context.services" in import_graph()["smart_context.plugin"]
    assert import_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_cycles() -> None:
    assert import_cycles(import_graph()) == []


def test_only_the_composition_edge_imports_the_root() -> None:
    graph = import_graph()
    leaning = sorted(
        name
        for name, targets in graph.items()
        if ROOT in targets and not any(within(name, allowed) for allowed in MAY_IMPORT_ROOT)
    )
    assert leaning == []
