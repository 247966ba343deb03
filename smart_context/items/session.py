"""A chat's session context (docs/contract.md §8): ``context_items`` on the chat file, pure
functions.

An entry is ``{"type", "name", "server_name" (tools only), "include_mode": "always" |
"manual"}``. A chat without the key has the vault's ``always`` items, as a new session is
seeded; adding or removing an item writes the key, seeded first, so the session is the user's
from then on. Entries written by hand or by another program are checked: a malformed one is
left out, never an error.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from smart_context.items.model import ITEM_TYPES, Item

SESSION_KEY = "context_items"
SESSION_MODES = ("always", "manual")

Entry = dict[str, Any]


def entry_of(item: Item, mode: str) -> Entry:
    """The session entry naming ``item``."""
    entry: Entry = {"type": item.type, "name": item.name, "include_mode": mode}
    if item.server_name is not None:
        entry["server_name"] = item.server_name
    return entry


def identity(entry: Mapping[str, Any]) -> tuple[str, str, str | None]:
    """What names an item: its type, name and server."""
    server = entry.get("server_name")
    return (
        str(entry.get("type")),
        str(entry.get("name")),
        server if isinstance(server, str) else None,
    )


def seeded(items: Sequence[Item]) -> list[Entry]:
    """A new session: every enabled ``always`` item of the vault."""
    return [entry_of(i, "always") for i in items if i.enabled and i.include == "always"]


def session_of(data: Mapping[str, Any], items: Sequence[Item]) -> list[Entry]:
    """The chat's session entries (seeded when the chat has none), malformed ones left out."""
    raw = data.get(SESSION_KEY)
    if not isinstance(raw, list):
        return seeded(items)
    entries = []
    for entry in raw:
        if (
            isinstance(entry, dict)
            and entry.get("type") in ITEM_TYPES
            and isinstance(entry.get("name"), str)
            and entry.get("include_mode") in SESSION_MODES
        ):
            entries.append(
                {k: entry[k] for k in ("type", "name", "server_name", "include_mode") if k in entry}
            )
    return entries


def with_item(entries: Sequence[Entry], item: Item) -> list[Entry]:
    """``entries`` with ``item`` added by hand (``manual``), unless it is there already."""
    if any(identity(e) == identity(entry_of(item, "manual")) for e in entries):
        return list(entries)
    return [*entries, entry_of(item, "manual")]


def without_item(entries: Sequence[Entry], key: tuple[str, str, str | None]) -> list[Entry]:
    """``entries`` without the item ``key`` names."""
    return [e for e in entries if identity(e) != key]


def resolve(entries: Sequence[Entry], items: Sequence[Item]) -> list[tuple[Item, str]]:
    """The vault's items the entries name, with their session mode; an entry whose item is gone
    or disabled is skipped."""
    by_key = {identity(entry_of(i, "always")): i for i in items if i.enabled}
    out = []
    for entry in entries:
        item = by_key.get(identity(entry))
        if item is not None:
            out.append((item, str(entry["include_mode"])))
    return out
