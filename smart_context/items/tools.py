"""An MCP tool as an :class:`Item`: its parameters rendered as text, for the index and the UI.

A tool's input schema comes from a server we do not control: :mod:`.schema` reads it, leaving
out anything of the wrong shape, and long descriptions are cut so one tool cannot fill the
index.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from smart_context.items.model import TOOL_INCLUDE, IncludeMode, Item
from smart_context.items.schema import MAX_DESCRIPTION_CHARS, MAX_PARAMETERS, Parameter, parameters
from smart_context.shorten import shorten

__all__ = ["MAX_DESCRIPTION_CHARS", "MAX_PARAMETERS", "parameters_text", "tool_item"]


def tool_item(
    server_name: str,
    name: str,
    description: str | None = None,
    input_schema: Any = None,
    include: IncludeMode = TOOL_INCLUDE,
    enabled: bool = True,
) -> Item:
    """The item of tool ``name`` on ``server_name``; its text lists the schema's parameters."""
    return Item(
        type="tool",
        name=name,
        description=shorten(description or "", 4 * MAX_DESCRIPTION_CHARS, at_word=True),
        include=include,
        enabled=enabled,
        text=parameters_text(input_schema),
        source=server_name,
        server_name=server_name,
        input_schema=input_schema if isinstance(input_schema, Mapping) else None,
    )


def parameters_text(input_schema: Any) -> str:
    """One line per top-level parameter of a JSON schema: ``name (type, required): description``.

    >>> parameters_text({"properties": {"path": {"type": "string", "description": "Which file"}},
    ...                  "required": ["path"]})
    'path (string, required): Which file'
    """
    return "\n".join(map(_parameter_line, parameters(input_schema)))


def _parameter_line(parameter: Parameter) -> str:
    details = [d for d in (parameter.kind, "required" if parameter.required else "") if d]
    head = f"{parameter.name} ({', '.join(details)})" if details else parameter.name
    return f"{head}: {parameter.description}" if parameter.description else head
