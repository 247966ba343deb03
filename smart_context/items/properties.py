"""The properties of a rule or reference: its YAML front matter, read as hostile input.

YAML is parsed with PyYAML's safe loader (no Python objects), after a scan of its events that
refuses what ``safe_load`` would still do to us: aliases (``*a``), since a few lines of them
expand to billions of nodes ("billion laughs"), and nesting deeper than ``MAX_DEPTH``, which
would exhaust the recursive composer. Dates stay text: a mistyped ``created: 2024-02-30`` is
somebody else's property and must not cost the file.

Each of our properties is checked on its own; a bad value is reported with the property's name
and replaced by a safe one (:func:`read_properties`).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from smart_context.items.model import (
    DEFAULT_PRIORITY,
    FILE_INCLUDE,
    INCLUDE_MODES,
    MAX_PRIORITY,
    MIN_PRIORITY,
    IncludeMode,
)

MAX_FRONT_MATTER_CHARS = 64_000
MAX_DEPTH = 20
MAX_NAME_CHARS = 200
KNOWN = ("name", "description", "priority", "include", "enabled")
_TRUE = {"true", "yes", "on", "1"}
_FALSE = {"false", "no", "off", "0"}
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


class _PropertiesLoader(yaml.SafeLoader):
    """``safe_load`` read as Obsidian reads it (YAML 1.2): ``010`` is ten, not octal eight, and
    timestamps stay the text they were written as."""


def _timestamp_as_text(loader: yaml.SafeLoader, node: yaml.Node) -> str:
    assert isinstance(node, yaml.ScalarNode)
    return loader.construct_scalar(node)


def _int_as_written(loader: yaml.SafeLoader, node: yaml.Node) -> int:
    assert isinstance(node, yaml.ScalarNode)
    digits = loader.construct_scalar(node).replace("_", "")
    if re.fullmatch(r"[-+]?0[0-9]+", digits):  # the UI shows 010, so people write it
        return int(digits, 10)
    return loader.construct_yaml_int(node)


_PropertiesLoader.add_constructor("tag:yaml.org,2002:timestamp", _timestamp_as_text)
_PropertiesLoader.add_constructor("tag:yaml.org,2002:int", _int_as_written)


@dataclass(frozen=True)
class Properties:
    """Our five properties, each valid."""

    name: str
    description: str = ""
    priority: int = DEFAULT_PRIORITY
    include: IncludeMode = FILE_INCLUDE
    enabled: bool = True


def parse_front_matter(text: str) -> Mapping[Any, Any] | str:
    """The front matter as a mapping (empty for an empty block), or what is wrong with it."""
    if len(text) > MAX_FRONT_MATTER_CHARS:
        return f"the properties are longer than {MAX_FRONT_MATTER_CHARS:,} characters"
    try:
        refused = _refused(text)
        if refused:
            return refused
        data = yaml.load(text, Loader=_PropertiesLoader)  # noqa: S506 (a SafeLoader subclass)
    except yaml.MarkedYAMLError as exc:
        where = f" on line {exc.problem_mark.line + 2}" if exc.problem_mark else ""  # after ---
        return f"the properties are not valid YAML{where}: {exc.problem or exc}"
    except yaml.YAMLError as exc:
        return f"the properties are not valid YAML: {exc}"
    except ValueError:  # Python refuses to convert integers of more than 4,300 digits
        return "the properties hold a number too long to read"
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        return f"the properties must be `key: value` lines, not {_kind(data)}"
    return data


def _refused(text: str) -> str | None:
    depth = 0
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        if isinstance(event, yaml.AliasEvent):
            return "the properties use a YAML alias (*name), which is not accepted here"
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                return f"the properties are nested more than {MAX_DEPTH} levels deep"
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1
    return None


def read_properties(raw: Mapping[Any, Any], stem: str) -> tuple[Properties, list[tuple[str, str]]]:
    """Our properties from ``raw`` (the file's stem as the default name), and the
    ``(property, message)`` of each value that was replaced or key that looks mistyped."""
    problems: list[tuple[str, str]] = []

    def check(key: str, value: Any, default: Any, fallback: Any) -> Any:
        if value is None or (isinstance(value, str) and not value.strip()):
            return default  # an emptied property (`key:` is null to YAML) is an unset one
        result, error = _CHECKS[key](value)
        if error is None:
            return result
        using = f"using {_show(fallback)}" if fallback != "" else "leaving it empty"
        problems.append((key, f"{key} {error}, got {_show(value)}; {using}"))
        return fallback

    props = Properties(
        name=check("name", raw.get("name"), stem, stem),
        description=check("description", raw.get("description"), "", ""),
        priority=check("priority", raw.get("priority"), DEFAULT_PRIORITY, DEFAULT_PRIORITY),
        include=check("include", raw.get("include"), FILE_INCLUDE, FILE_INCLUDE),
        # false: a value nobody can read must not switch an item on
        enabled=check("enabled", raw.get("enabled"), True, False),
    )
    problems.extend(_near_misses(raw))
    return props, problems


def name_error(name: str) -> str | None:
    """What ``name`` lacks to name an item (it is shown in the UI and stored in chats), or None."""
    if not name:
        return "must not be empty"
    if len(name) > MAX_NAME_CHARS:
        return f"must be at most {MAX_NAME_CHARS} characters"
    if _CONTROL.search(name):
        return "must not hold a line break or another control character"
    return None


def _name(value: Any) -> tuple[Any, str | None]:
    if not isinstance(value, str):
        return None, "must be text (put it in quotes)"
    name = value.strip()
    return name, name_error(name)


def _description(value: Any) -> tuple[Any, str | None]:
    if not isinstance(value, str):
        return None, "must be text"
    return value.strip(), None


def _priority(value: Any) -> tuple[Any, str | None]:
    number: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, str) and re.fullmatch(r"\d{1,3}", value.strip()):
        number = int(value.strip())
    if number is None or not MIN_PRIORITY <= number <= MAX_PRIORITY:
        return None, f"must be a whole number from {MIN_PRIORITY} to {MAX_PRIORITY} (001 works too)"
    return number, None


def _include(value: Any) -> tuple[Any, str | None]:
    mode = value.strip().lower() if isinstance(value, str) else None
    if mode not in INCLUDE_MODES:
        return None, f"must be one of {', '.join(INCLUDE_MODES)}"
    return mode, None


def _enabled(value: Any) -> tuple[Any, str | None]:
    if isinstance(value, bool):
        return value, None
    word = str(value).strip().lower() if isinstance(value, str | int) else None
    if word in _TRUE or word in _FALSE:
        return word in _TRUE, None
    return None, "must be true or false"


_CHECKS = {
    "name": _name,
    "description": _description,
    "priority": _priority,
    "include": _include,
    "enabled": _enabled,
}


def _near_misses(raw: Mapping[Any, Any]) -> list[tuple[str, str]]:
    problems = []
    for key in raw:
        if not isinstance(key, str) or key in KNOWN:
            continue
        close = difflib.get_close_matches(key.strip().lower(), KNOWN, n=1, cutoff=0.8)
        if close:
            problems.append(
                (close[0], f"unknown property {_show(key)} ignored; did you mean {close[0]!r}?")
            )
    return problems


def _show(value: Any) -> str:
    """A value as a message quotes it: short, on one line."""
    text = str(value).lower() if isinstance(value, bool) else repr(value)  # as YAML spells it
    return text if len(text) <= 60 else f"{text[:57]}..."


def _kind(value: Any) -> str:
    if isinstance(value, list):
        return "a list"
    return f"a single value ({_show(value)})"
