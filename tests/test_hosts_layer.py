"""The hosts sit above the core: no module of ``smart_context`` imports ``smart_context_hosts``,
wherever the import is written (at the top, inside a function, under ``if TYPE_CHECKING``; the
memory MCP server once reached up to the command line from inside a function), and the hosts' own
imports make no circle.
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


def modules() -> dict[str, Path]:
    """Every module of both packages, by its dotted name."""
    found = {}
    for package, folder in PACKAGES.items():
        for path in sorted(folder.rglob("*.py")):
            parts = [package, *path.relative_to(folder).with_suffix("").parts]
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def imported_names(name: str, path: Path) -> Iterator[str]:
    """Every name ``path`` imports, absolute: ``a.b`` and, for ``from a.b import c``, ``a.b.c``."""
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


def in_package(name: str, package: str) -> bool:
    return name == package or name.startswith(f"{package}.")


def upward_imports(found: dict[str, Path]) -> list[tuple[str, str]]:
    """(core module, host name) for each import of a host by the core."""
    return sorted(
        (name, target)
        for name, path in found.items()
        if in_package(name, CORE)
        for target in imported_names(name, path)
        if in_package(target, HOSTS)
    )


def host_graph(found: dict[str, Path]) -> dict[str, set[str]]:
    """Each host module -> the host modules it imports."""
    graph: dict[str, set[str]] = {}
    for name, path in found.items():
        if not in_package(name, HOSTS):
            continue
        targets = set()
        for target in imported_names(name, path):
            while target and target not in found:  # a.b.some_function -> a.b
                target = target.rpartition(".")[0]
            if in_package(target, HOSTS) and target != name:
                targets.add(target)
        graph[name] = targets
    return graph


def in_a_circle(graph: dict[str, set[str]]) -> list[str]:
    """The modules that import themselves at some depth."""
    circled = []
    for start in graph:
        seen: set[str] = set()
        todo = list(graph[start])
        while todo:
            name = todo.pop()
            if name not in seen:
                seen.add(name)
                todo.extend(graph.get(name, ()))
        if start in seen:
            circled.append(start)
    return sorted(circled)


def test_an_import_inside_a_function_is_seen(tmp_path: Path) -> None:
    source = tmp_path / "mcp_server.py"
    source.write_text(
        "async def serve() -> None:\n    from smart_context_hosts.cli import running_services\n"
    )
    found = {"smart_context.memory.mcp_server": source}
    assert upward_imports(found) == [
        ("smart_context.memory.mcp_server", "smart_context_hosts.cli"),
        ("smart_context.memory.mcp_server", "smart_context_hosts.cli.running_services"),
    ]
    assert in_a_circle({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == ["a", "b"]


def test_the_core_imports_no_host() -> None:
    assert upward_imports(modules()) == []


def test_the_hosts_import_no_circle() -> None:
    graph = host_graph(modules())
    assert "smart_context_hosts.cli" in graph and "smart_context_hosts.sidecar.app" in graph
    assert in_a_circle(graph) == []
