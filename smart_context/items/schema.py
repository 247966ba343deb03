"""A tool's input schema read as its top-level parameters, one reader for the text the UI shows
and the text the index embeds.

The schema comes from a server we do not control: anything that is not the expected shape is
left out, never an exception, and the parameters, their names and their descriptions are
bounded (a name on one line too) so one tool cannot fill the index or fake a parameter.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from itertools import islice
from typing import Any

from smart_context.shorten import shorten

MAX_PARAMETERS = 50
MAX_NAME_CHARS = 64
MAX_DESCRIPTION_CHARS = 300


@dataclass(frozen=True)
class Parameter:
    """One top-level parameter: its name, JSON type(s) (``""`` when not said), whether it is
    required, and its description (one line, bounded)."""

    name: str
    kind: str
    required: bool
    description: str


def parameters(input_schema: Any) -> list[Parameter]:
    """The first :data:`MAX_PARAMETERS` top-level parameters of a JSON schema, in its order."""
    if not isinstance(input_schema, Mapping):
        return []
    properties = input_schema.get("properties")
    if not isinstance(properties, Mapping):
        return []
    required = input_schema.get("required")
    required_names = (
        {r for r in required if isinstance(r, str)} if isinstance(required, list) else set()
    )
    return [
        _parameter(_name(name), spec, name in required_names)
        for name, spec in islice(properties.items(), MAX_PARAMETERS)
        if isinstance(name, str) and _name(name)
    ]


def _name(name: str) -> str:
    """A parameter's name on one line, bounded: a line break in it would read as another
    parameter in the UI, and a long one would fill the index."""
    return shorten(name, MAX_NAME_CHARS)


def _parameter(name: str, spec: Any, required: bool) -> Parameter:
    spec = spec if isinstance(spec, Mapping) else {}
    kind = spec.get("type")
    if isinstance(kind, list):  # ["string", "null"]
        kind = " or ".join(k for k in kind if isinstance(k, str))
    description = spec.get("description")
    text = (
        shorten(description, MAX_DESCRIPTION_CHARS, at_word=True)
        if isinstance(description, str)
        else ""
    )
    return Parameter(name, kind if isinstance(kind, str) else "", required, text)
