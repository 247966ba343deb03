"""A tool's refusal of its arguments, in words a person (and the model) can act on.

MCP servers written with the Python SDK validate a call's arguments with pydantic and answer a
bad call with pydantic's own report::

    Error executing tool time_in: 1 validation error for time_inArguments
    timezone
      Field required [type=missing, input_value={'zone': 'Asia/Tokyo'}, input_type=dict]
        For further information visit https://errors.pydantic.dev/2.14/v/missing

:func:`explain_tool_error` turns that into "time_in needs the argument “timezone” (it was
given “zone”)." Any other error text is kept, without pydantic's links.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

MAX_PROBLEMS = 5
"""Problems named one by one; the rest are counted."""

_HEADER = re.compile(r"\d+ validation errors? for \S+\n")
_PROBLEM = re.compile(
    r"^(?P<loc>\S[^\n]*)\n {2}(?P<msg>[^\n]*?) \[type=(?P<type>[\w.]+)[^\n]*$", re.MULTILINE
)
_LINK = re.compile(r"^\s*For further information visit \S+\s*$\n?", re.MULTILINE)

_MISSING = {"missing", "missing_argument", "missing_keyword_only_argument"}
_UNKNOWN = {"extra_forbidden", "unexpected_keyword_argument", "unexpected_positional_argument"}
_KINDS: dict[str, str] = {
    "string_type": "must be text",
    "string_sub_type": "must be text",
    "int_type": "must be a whole number",
    "int_parsing": "must be a whole number",
    "int_from_float": "must be a whole number",
    "float_type": "must be a number",
    "float_parsing": "must be a number",
    "decimal_type": "must be a number",
    "decimal_parsing": "must be a number",
    "bool_type": "must be true or false",
    "bool_parsing": "must be true or false",
    "list_type": "must be a list",
    "tuple_type": "must be a list",
    "set_type": "must be a list",
    "dict_type": "must be an object",
    "model_type": "must be an object",
    "model_attributes_type": "must be an object",
}
# pydantic's own sentences for the rest ("String should have at most 64 characters"): their
# subject becomes the argument's name.
_SUBJECT = re.compile(r"^(?:Input|String|List|Value|Dictionary|Tuple|Set|Decimal)\s+should\b")


def explain_tool_error(tool: str, text: str, given: Iterable[str] = ()) -> str:
    """``text`` (a failed call's error) in words; ``given``: the argument names that were sent."""
    header = _HEADER.search(text)
    problems = list(_PROBLEM.finditer(text, header.end())) if header else []
    if not problems:
        return _LINK.sub("", text).strip() or text
    sent = [name for name in given if isinstance(name, str)]
    missing = [m["loc"] for m in problems if m["type"] in _MISSING]
    parts: list[str] = []
    if missing:
        unknown = [name for name in sent if name not in {m["loc"] for m in problems}]
        part = f"{tool} needs the argument{'s' if len(missing) > 1 else ''} {_names(missing)}"
        parts.append(part + (f" (it was given {_names(unknown)})" if unknown else ""))
    others = [m for m in problems if m["type"] not in _MISSING]
    for m in others[:MAX_PROBLEMS]:
        parts.append(_problem(tool, m["loc"], m["type"], m["msg"]))
    if len(others) > MAX_PROBLEMS:
        parts.append(f"and {len(others) - MAX_PROBLEMS} more")
    return "; ".join(parts) + "."


def _problem(tool: str, loc: str, kind: str, msg: str) -> str:
    name = _quoted(loc)
    if kind in _UNKNOWN:
        return f"{tool} has no argument {name}"
    if kind in _KINDS:
        return f"{name} {_KINDS[kind]}"
    if kind == "value_error":
        return f"{name}: {msg.removeprefix('Value error, ')}"
    said = _SUBJECT.sub("must", msg)
    return f"{name} {said}" if said != msg else f"{name}: {msg}"


def _quoted(loc: str) -> str:
    return f"“{loc}”"


def _names(locs: list[str]) -> str:
    quoted = [_quoted(loc) for loc in locs]
    return quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " and " + quoted[-1]
