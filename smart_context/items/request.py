"""The request context of one message (docs/contract.md §8): which rules and references it is sent
with, the record of them, and the text the model receives.

Built fresh per request from the chat's session items, the ``agent`` items that agent
selection finds for this message, and the items expansion adds to those (``expansion``). The
record is what the host stores on the assistant message as ``request_context``; the model
receives exactly the rules and references the record names, as one system message
(docs/contract.md §9: before the history), and nothing else of the vault.
The session (``context_items`` on the chat, :mod:`.session`) gives the ``always`` and ``manual``
items; a chat that never changed its session has the vault's ``always`` items.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from smart_context.errors import SmartContextError
from smart_context.items.catalog import Found, ItemCatalog
from smart_context.items.files import Stamp
from smart_context.items.model import Item
from smart_context.items.query import MessageQuery
from smart_context.items.select import Limits
from smart_context.items.session import SESSION_KEY, resolve, session_of
from smart_context.mcp.config import function_name
from smart_context.store import VectorStore
from smart_context.vectors.ops import Matrix

SECTION_TITLES = {"rule": "Rules to follow", "reference": "Reference material"}
DOCUMENT_TYPES = ("rule", "reference")
MAX_TOOL_DESCRIPTION = 1024  # what OpenAI-compatible servers reliably accept
EMPTY_PARAMETERS: dict[str, Any] = {"type": "object", "properties": {}}


@dataclass(frozen=True)
class Chosen:
    """An item in the request context: how it got there, and its score when searched."""

    item: Item
    mode: str  # "always" | "manual" | "agent" | "expansion"
    score: float | None = None


@dataclass(frozen=True)
class RequestContext:
    """The items of one request, and why agent selection found none when it failed."""

    items: tuple[Chosen, ...] = ()
    error: str | None = None
    timestamp: str = field(default_factory=lambda: datetime.now(UTC).isoformat())

    def record(self) -> dict[str, Any]:
        """``request_context`` as docs/contract.md §8 names it."""
        items = []
        for chosen in self.items:
            entry: dict[str, Any] = {
                "type": chosen.item.type,
                "name": chosen.item.name,
                "include_mode": chosen.mode,
            }
            if chosen.item.server_name is not None:
                entry["server_name"] = chosen.item.server_name
            if chosen.score is not None:
                entry["similarity_score"] = round(chosen.score, 3)
            items.append(entry)
        out: dict[str, Any] = {"items": items, "timestamp": self.timestamp}
        if self.error:
            out["error"] = self.error
        return out

    def tools(self) -> list[dict[str, Any]]:
        """The tools the record names, as OpenAI-format function definitions (docs/contract.md §8):
        ``{server}__{tool}``, the description, and the server's schema when it is an object
        schema (anything else would make the endpoint refuse the whole request)."""
        out = []
        for chosen in sorted(self.items, key=lambda c: c.item.sort_key()):
            item = chosen.item
            name = function_name(item.server_name or "", item.name)
            if item.type != "tool" or name is None:
                continue
            schema = item.input_schema
            parameters = (
                dict(schema)
                if isinstance(schema, Mapping) and schema.get("type", "object") == "object"
                else EMPTY_PARAMETERS
            )
            function: dict[str, Any] = {"name": name, "parameters": parameters}
            if item.description:
                function["description"] = item.description[:MAX_TOOL_DESCRIPTION]
            out.append({"type": "function", "function": function})
        return out

    def sections(self) -> dict[str, str]:
        """The rules and the references as the model reads them, each by priority."""
        out = {}
        for kind, title in SECTION_TITLES.items():
            chosen = sorted((c.item for c in self.items if c.item.type == kind), key=_order)
            if chosen:
                body = "\n\n".join(f"## {item.name}\n{item.text.strip()}" for item in chosen)
                out[kind] = f"# {title}\n\n{body}"
        return out

    def system_text(self, memory: str = "", notes: str = "") -> str:
        """The system message: rules, then ``memory``, then the knowledge, references and
        ``notes`` (docs/contract.md §9's order)."""
        sections = self.sections()
        parts = [sections.get("rule", ""), memory, sections.get("reference", ""), notes]
        return "\n\n".join(p for p in parts if p)


async def build(
    catalog: ItemCatalog,
    store: Callable[[], Awaitable[VectorStore]],
    query: MessageQuery | str,
    limits: Limits,
    session: Any = None,
    tool_limits: Limits | None = None,
    files: Stamp | None = None,
) -> RequestContext:
    """The request context of ``query`` (the message, or the request's :class:`MessageQuery`:
    its sentences and their vectors, shared with the request's other searches): the session's
    items (``session`` is the chat's ``context_items`` as stored, ``None`` for the vault's
    seed), then what agent selection adds:
    rules and references within ``limits``, tools within ``tool_limits`` (default the same).
    ``store`` is asked for only when the vault has agent items. A failed search (or no
    embedder) costs the agent items only, and the record says why. ``files``: the catalog's
    look at its files, when the request took it already (:meth:`ItemCatalog.look`)."""
    # The message's sentences are embedded while the catalog checks its files (both wait on
    # threads): when the vault had agent items last time, it very likely still has.
    if isinstance(query, str):
        query = MessageQuery(query)
    early: asyncio.Future[Matrix] | None = None
    if catalog.latest.agent_types:
        early = asyncio.ensure_future(query.vectors(store))
    try:
        current = await catalog.current(files)
        entries = session_of({} if session is None else {SESSION_KEY: session}, current.items)
        chosen = [Chosen(item, mode) for item, mode in resolve(entries, current.items)]
        found: list[Found] = []
        error = None
        agent_types = current.agent_types
        if agent_types:
            try:
                vectors = await store()
                queries = await (early or query.vectors(store))
                # one look at the files per request: both searches use the catalog read above
                for types, kind_limits in (
                    (DOCUMENT_TYPES, limits),
                    (("tool",), tool_limits or limits),
                ):
                    if agent_types & set(types):
                        found += await catalog.search(
                            vectors,
                            query.text,
                            replace(kind_limits, expansion_depth=0),  # once, below, for all
                            types=types,
                            queries=queries,
                            catalog=current,
                            sentences=query.sentences,
                        )
                # expansion crosses kinds: a rule that says "check the plan" leads to the tool
                session_keys = {c.item.key for c in chosen}
                found += await catalog.expansion(
                    vectors, found, limits, catalog=current, skip=session_keys
                )
            except SmartContextError as exc:
                error = f"Agent selection skipped: {exc}"
                found = []
    finally:
        if early is not None and not early.done():  # the vault has no agent items any more
            early.cancel()
        if early is not None:
            await asyncio.gather(early, return_exceptions=True)  # its error is read, not lost
    present = {c.item.key for c in chosen}
    agent = [Chosen(f.item, f.mode, f.score) for f in found if f.item.key not in present]
    return RequestContext((*chosen, *agent), error)


def _order(item: Item) -> tuple[int, str]:
    return item.priority, item.name.casefold()
