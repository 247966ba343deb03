"""The layers, read from the source: the hosts (``smart_context_hosts``) sit above the core
(``smart_context``), which imports none of them; neither layer has an import circle; and no lower
module of the core reaches for its composition root (``smart_context.services``).

Every import counts, wherever it is written: at the top, inside a function, under
``if TYPE_CHECKING``. A circle hidden in a function is still a circle (the memory MCP server once
reached up to the command line from inside a function), and an import for a type still says
which module leans on which.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import smart_context
import smart_context_hosts

CORE = "smart_context"
HOSTS = "smart_context_hosts"
PACKAGES = {
    CORE: Path(smart_context.__file__).parent,
    HOSTS: Path(smart_context_hosts.__file__).parent,
}
ROOT = "smart_context.services"
# Who may hold the whole of the composition root: the plugin that builds it, the command table
# at the composition's edge, and the request path (its sections still take the services).
MAY_IMPORT_ROOT = ("smart_context.plugin", "smart_context.commands", "smart_context.context")


def modules() -> dict[str, Path]:
    """Every module of both layers, by its dotted name."""
    found = {}
    for package, folder in PACKAGES.items():
        for path in sorted(folder.rglob("*.py")):
            parts = [package, *path.relative_to(folder).with_suffix("").parts]
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


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


def within(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(f"{prefix}.")


def import_graph(layer: str, found: dict[str, Path] | None = None) -> dict[str, set[str]]:
    """Each module of ``layer`` -> the modules of the same layer it imports."""
    found = modules() if found is None else found
    graph: dict[str, set[str]] = {}
    for name, path in found.items():
        if not within(name, layer):
            continue
        targets = set()
        for target in imported_names(name, path):
            while target and target not in found:  # a.b.some_function -> a.b
                target = target.rpartition(".")[0]
            if target and target != name and within(target, layer):
                targets.add(target)
        graph[name] = targets
    return graph


def upward_imports(found: dict[str, Path]) -> list[tuple[str, str]]:
    """(core module, host name) for each import of a host by the core."""
    return sorted(
        (name, target)
        for name, path in found.items()
        if within(name, CORE)
        for target in imported_names(name, path)
        if within(target, HOSTS)
    )


def reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen: set[str] = set()
    todo = list(graph[start])
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo.extend(graph.get(name, ()))
    return seen


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The circles: groups of modules each of which imports (at any depth) every other."""
    reach = {name: reachable(graph, name) for name in graph}
    circles = {
        frozenset(other for other in reach[name] if name in reach.get(other, ()))
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
    assert "smart_context.services" in import_graph(CORE)["smart_context.plugin"]
    assert import_cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_an_import_of_a_host_inside_a_function_is_seen(tmp_path: Path) -> None:
    source = tmp_path / "mcp_server.py"
    source.write_text(
        "async def serve() -> None:\n    from smart_context_hosts.cli import running_services\n"
    )
    found = {"smart_context.mcp.server": source}
    assert upward_imports(found) == [
        ("smart_context.mcp.server", "smart_context_hosts.cli"),
        ("smart_context.mcp.server", "smart_context_hosts.cli.running_services"),
    ]


def test_the_core_imports_no_host() -> None:
    assert upward_imports(modules()) == []


def test_no_import_cycles_in_the_core() -> None:
    assert import_cycles(import_graph(CORE)) == []


def test_no_import_cycles_in_the_hosts() -> None:
    graph = import_graph(HOSTS)
    assert "smart_context_hosts.cli" in graph and "smart_context_hosts.sidecar.app" in graph
    assert import_cycles(graph) == []


def test_only_the_composition_edge_imports_the_root() -> None:
    graph = import_graph(CORE)
    leaning = sorted(
        name
        for name, targets in graph.items()
        if ROOT in targets and not any(within(name, allowed) for allowed in MAY_IMPORT_ROOT)
    )
    assert leaning == []
