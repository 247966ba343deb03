"""The memory tools (``retrieve_context``, ``store_memory``) in Tailor's tool registry.

Tailor lets a plugin add a model-callable tool with ``brain.tool_registry.register(fn)``, ``fn``
carrying the metadata of its ``@tool`` decorator; the registry derives the JSON schema from
``fn``'s signature and runs calls with ``fn(**arguments)``, turning the result into text. Our
tools keep the names the reference sidecar offers (``smart_context__retrieve_context``...), and
their signatures are built from the same definitions the model reads elsewhere
(:data:`smart_context.memory.model_tools.PARAMETERS`).

Tailor's registry passes no chat: a call works on the chat of the request being answered (the
one the last ``pipeline.context`` named), as the model's own chat.
"""

from __future__ import annotations

import inspect
import logging
import typing
from collections.abc import Callable, Mapping
from typing import Any

from smart_context.commands.guard import BadArguments
from smart_context.commands.memory_tools import run_memory_tool
from smart_context.mcp.config import PLUGIN_SERVER
from smart_context.memory.model_tools import PARAMETERS, memory_tool_definitions
from smart_context.services import Services

log = logging.getLogger("smart_context")

ToolDecorator = Callable[..., Callable[[Callable[..., Any]], Callable[..., Any]]]
_JSON_TYPES: dict[str, type] = {"string": str, "integer": int, "number": float, "boolean": bool}


def tailor_tool_decorator() -> ToolDecorator | None:
    """Tailor's ``@tool`` decorator, or None where this Tailor has no tool registry."""
    try:
        from sidecar.decorators import tool

        return typing.cast(ToolDecorator, tool)
    except ImportError:
        return None


def memory_tools(services: Services, decorate: ToolDecorator) -> list[Callable[..., Any]]:
    """The two tools as Tailor tools, bound to ``services``."""
    made = []
    for definition in memory_tool_definitions():
        function = definition["function"]
        full_name = str(function["name"])
        short = full_name.removeprefix(f"{PLUGIN_SERVER}__")
        run = _runner(services, short)
        run.__name__ = full_name
        run.__signature__ = _signature(PARAMETERS[short])  # type: ignore[attr-defined]
        made.append(
            decorate(name=full_name, description=function["description"], category="information")(
                run
            )
        )
    return made


def _runner(services: Services, name: str) -> Callable[..., Any]:
    async def run(**arguments: Any) -> str:
        try:
            result = await run_memory_tool(services, name, arguments, services.current_chat_id)
        except BadArguments as exc:  # the tools are off, or no chat is being answered
            return str(exc)
        return result.text

    return run


def _signature(schema: Mapping[str, Any]) -> inspect.Signature:
    """A signature Tailor's registry turns back into ``schema``: required parameters first,
    the others ``Optional[T] = None``."""
    required = set(schema.get("required", []))
    parameters = []
    for name, spec in sorted(schema["properties"].items(), key=lambda kv: kv[0] not in required):
        kind: Any = _JSON_TYPES.get(str(spec.get("type")), str)
        keyword = inspect.Parameter.KEYWORD_ONLY
        if name in required:
            parameters.append(inspect.Parameter(name, keyword, annotation=kind))
        else:  # typing.Optional, not ``kind | None``: Tailor's registry reads typing.Union
            optional = typing.Optional[kind]  # noqa: UP045
            parameters.append(inspect.Parameter(name, keyword, default=None, annotation=optional))
    return inspect.Signature(parameters, return_annotation=str)


class ToolRegistration:
    """Our tools in Tailor's registry, from ``on_load`` to ``on_unload``."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self._registry: Any = None

    def register(self, registry: Any, services: Services) -> list[str]:
        """Add the tools when the memory tools are on and Tailor has a registry; their names."""
        decorate = tailor_tool_decorator()
        if registry is None or decorate is None or not services.settings.memory_tools:
            return []
        for tool in memory_tools(services, decorate):
            registry.register(tool)
            self.names.append(getattr(tool, "_tool_meta", {}).get("name", tool.__name__))
        self._registry = registry
        return list(self.names)

    def unregister(self) -> None:
        """Take our tools out again."""
        for name in self.names:
            self._registry.unregister(name)
        self.names.clear()
