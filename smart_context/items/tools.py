"""An MCP tool as an :class:`Item`: its parameters rendered as text, for the index and the UI.

A tool's input schema comes from a server we do not control: anything that is not the expected
shape is left out, never an exception, and long descriptions are cut so one tool cannot fill
the index.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from smart_context.items.model import TOOL_INCLUDE, IncludeMode, Item
from smart_context.shorten import shorten

MAX_PARAMETERS = 50
MAX_DESCRIPTION_CHARS = 300


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
    if not isinstance(input_schema, Mapping):
        return ""
    properties = input_schema.get("properties")
    if not isinstance(properties, Mapping):
        return ""
    required = input_schema.get("required")
    required_names = (
        {r for r in required if isinstance(r, str)} if isinstance(required, list) else set()
    )
    lines = []
    for name, spec in list(properties.items())[:MAX_PARAMETERS]:
        if isinstance(name, str) and name.strip():
            lines.append(_parameter_line(name.strip(), spec, name in required_names))
    return "\n".join(lines)


def _parameter_line(name: str, spec: Any, required: bool) -> str:
    spec = spec if isinstance(spec, Mapping) else {}
    kind = spec.get("type")
    if isinstance(kind, list):  # ["string", "null"]
        kind = " or ".join(k for k in kind if isinstance(k, str))
    details = [
        k for k in (kind if isinstance(kind, str) else "", "required" if required else "") if k
    ]
    head = f"{name} ({', '.join(details)})" if details else name
    description = spec.get("description")
    if isinstance(description, str) and description.strip():
        return f"{head}: {shorten(description, MAX_DESCRIPTION_CHARS, at_word=True)}"
    return head
