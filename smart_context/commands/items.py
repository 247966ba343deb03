"""The item commands of docs/contract.md §8: ``list_items``, ``add_item``, ``remove_item``,
``search_items``, ``set_session_settings`` and ``call_tool``."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from smart_context.commands.guard import BadArguments, Result, chat_id_argument
from smart_context.commands.memory_tools import run_memory_tool
from smart_context.errors import SmartContextError
from smart_context.events import ITEMS_CHANGED
from smart_context.host import resolve
from smart_context.items.catalog import item_row, problem_rows
from smart_context.items.model import ITEM_TYPES, Item
from smart_context.items.request import build
from smart_context.items.selection import (
    SETTINGS_KEY,
    BadSelectionSettings,
    chat_limits,
    checked_overrides,
    effective,
    preset_of,
    stored_overrides,
    vault_defaults,
)
from smart_context.items.session import (
    SESSION_KEY,
    Entry,
    identity,
    session_of,
    with_item,
    without_item,
)
from smart_context.mcp.config import PLUGIN_SERVER
from smart_context.paths import ChatId
from smart_context.services import Services

MAX_QUERY_CHARS = 20_000
MAX_ARGUMENTS_CHARS = 100_000


async def list_items(services: Services, chat_id: Any = None, with_text: Any = False) -> Result:
    """Every item of the vault, and whether the chat's session holds it (with a chat open).

    A row in the session also says how it got there (``include_mode``: ``always`` or
    ``manual``). ``with_text`` adds each item's ``text`` (a tool's: its parameters, one per
    line), for a view that shows it; the panel's frequent refreshes leave it out.
    """
    if not isinstance(with_text, bool):
        raise BadArguments("with_text must be true or false.")
    catalog = await services.items.current()
    session: dict[tuple[str, str, str | None], str] = {}
    overrides: dict[str, Any] = {}
    if chat_id is not None or services.current_chat_id is not None:
        chat = chat_id_argument(services, chat_id)
        view = await services.chats.view(chat)
        raw = {} if view.session is None else {SESSION_KEY: view.session}
        session = {identity(e): str(e["include_mode"]) for e in session_of(raw, catalog.items)}
        overrides = stored_overrides(view.context_settings)
    rows = []
    for item in catalog.items:
        mode = session.get((item.type, item.name, item.server_name))
        row = item_row(item) | {"in_session": mode is not None}
        if mode is not None:
            row["include_mode"] = mode
        if with_text:
            row["text"] = item.text
            if item.input_schema is not None:
                row["input_schema"] = dict(item.input_schema)
        rows.append(row)
    return {"items": rows, "problems": problem_rows(catalog.problems)} | _settings_answer(
        services, overrides
    )


async def add_item(
    services: Services,
    type: Any = None,  # the contract names it so
    name: Any = None,
    server_name: Any = None,
    chat_id: Any = None,
) -> Result:
    """Add a vault item to the chat's session by hand; returns the session's ``items``."""
    chat = chat_id_argument(services, chat_id)
    item = await _item_argument(services, type, name, server_name)
    return await _change_session(services, chat, lambda entries: with_item(entries, item))


async def remove_item(
    services: Services,
    type: Any = None,  # the contract names it so
    name: Any = None,
    server_name: Any = None,
    chat_id: Any = None,
) -> Result:
    """Remove an item from the chat's session; returns the session's ``items``."""
    chat = chat_id_argument(services, chat_id)
    key = _key_argument(type, name, server_name)
    return await _change_session(services, chat, lambda entries: without_item(entries, key))


async def search_items(services: Services, query: Any = None, chat_id: Any = None) -> Result:
    """What agent selection would add for ``query``, with scores, best first: rules and
    references, then tools, each within the chat's selection settings (the vault's without a
    chat)."""
    if not isinstance(query, str) or not query.strip():
        raise BadArguments("query is required: the message to select items for.")
    if len(query) > MAX_QUERY_CHARS:
        raise BadArguments(f"query is longer than {MAX_QUERY_CHARS} characters.")
    raw = None
    if chat_id is not None:
        raw = (await services.chats.view(chat_id_argument(services, chat_id))).context_settings
    documents, tools = chat_limits(services.settings, raw)
    # the request context of a chat with an empty session: exactly what agent selection adds
    request = await build(services.items, services.store, query, documents, [], tools)
    if request.error:
        raise SmartContextError(request.error)
    catalog = await services.items.current()
    return {
        "items": [
            item_row(c.item)
            | {"similarity_score": round(c.score or 0.0, 3), "include_mode": c.mode}
            for c in request.items
        ],
        "problems": problem_rows(catalog.problems),
    }


async def set_session_settings(
    services: Services, chat_id: Any = None, settings: Any = None
) -> Result:
    """Override the chat's selection settings (``null`` for a key: back to the vault's value;
    ``preset``: aggressive, normal or conservative); returns the effective ``settings``."""
    chat = chat_id_argument(services, chat_id)
    try:
        checked_overrides(settings)  # refuse bad input before touching the file
    except BadSelectionSettings as exc:
        raise BadArguments(str(exc)) from None

    def put(data: dict[str, Any]) -> dict[str, Any]:
        merged = checked_overrides(settings, stored_overrides(data.get(SETTINGS_KEY)))
        return {**data, SETTINGS_KEY: merged}

    view = await services.chats.update(chat, put)
    return _settings_answer(services, stored_overrides(view.context_settings))


async def call_tool(
    services: Services,
    server_name: Any = None,
    name: Any = None,
    arguments: Any = None,
    chat_id: Any = None,
) -> Result:
    """Run one tool of a declared MCP server, or one of the plugin's memory tools (server
    ``smart_context``) on the chat ``chat_id`` the host's model is answering in; ``result`` is
    ``{ok, text, structured, summary}`` (``ok`` false: the tool reported an error, for the
    model to read)."""
    if not isinstance(server_name, str) or not server_name.strip():
        raise BadArguments("server_name is required: the MCP server, as named in .vault.toml.")
    if not isinstance(name, str) or not name.strip():
        raise BadArguments("name is required: the tool's name.")
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        raise BadArguments("arguments must be an object of the tool's parameters.")
    if len(json.dumps(arguments, default=str)) > MAX_ARGUMENTS_CHARS:
        raise BadArguments(f"arguments are longer than {MAX_ARGUMENTS_CHARS} characters.")
    if server_name == PLUGIN_SERVER:
        return {"result": (await run_memory_tool(services, name, arguments, chat_id)).as_dict()}
    try:
        result = await services.items.servers.call(server_name, name, arguments)
    except LookupError as exc:
        raise BadArguments(str(exc)) from None
    return {"result": result.as_dict()}


def _settings_answer(services: Services, overrides: dict[str, Any]) -> dict[str, Any]:
    """``settings`` (effective), the chat's ``overrides``, the ``vault_settings`` they
    inherit from, and the ``preset`` the effective values match (or ``custom``)."""
    values = effective(services.settings, overrides)
    return {
        "settings": values,
        "overrides": overrides,
        "vault_settings": vault_defaults(services.settings),
        "preset": preset_of(values),
    }


def _key_argument(kind: Any, name: Any, server_name: Any) -> tuple[str, str, str | None]:
    if kind not in ITEM_TYPES:
        raise BadArguments("type must be one of " + ", ".join(ITEM_TYPES) + ".")
    if not isinstance(name, str) or not name.strip():
        raise BadArguments("name is required: the item's name.")
    if server_name is not None and not isinstance(server_name, str):
        raise BadArguments("server_name must be a string.")
    if (kind == "tool") != (server_name is not None):
        raise BadArguments("server_name is required for a tool, and only for a tool.")
    return str(kind), name, server_name


async def _item_argument(services: Services, kind: Any, name: Any, server_name: Any) -> Item:
    key = _key_argument(kind, name, server_name)
    catalog = await services.items.current()
    for item in catalog.items:
        if (item.type, item.name, item.server_name) == key:
            return item
    raise BadArguments(f"The vault has no {key[0]} named {key[1]!r}.")


async def _change_session(
    services: Services, chat: ChatId, change: Callable[[list[Entry]], list[Entry]]
) -> Result:
    catalog = await services.items.current()

    def put(data: dict[str, Any]) -> dict[str, Any]:
        return {**data, SESSION_KEY: change(session_of(data, catalog.items))}

    view = await services.chats.update(chat, put)
    items = list(view.session or [])
    await resolve(services.host.emit(ITEMS_CHANGED, {"chat_id": chat, "items": items}))
    return {"items": items}
