"""The request context of one message (CONTRACT §8): which rules and references it is sent with,
the record of them, and the text the model receives.

Built fresh per request from the chat's session items, the ``agent`` items that agent
selection finds for this message, and the items expansion adds to those (``expansion``). The
record is what the host stores on the assistant message as ``request_context``; the model
receives exactly the rules and references the record names, as one system message (CONTRACT
§9: before the history), and nothing else of the vault.
The session (``context_items`` on the chat, :mod:`.session`) gives the ``always`` and ``manual``
items; a chat that never changed its session has the vault's ``always`` items.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from smart_context.errors import SmartContextError
from smart_context.items.catalog import Found, ItemCatalog
from smart_context.items.model import Item
from smart_context.items.select import Limits
from smart_context.items.session import SESSION_KEY, resolve, session_of
from smart_context.store import VectorStore

SECTION_TITLES = {"rule": "Rules to follow", "reference": "Reference material"}


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
        """``request_context`` as CONTRACT §8 names it."""
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

    def system_text(self) -> str:
        """The rules and references as the model reads them, rules first, by priority."""
        sections = []
        for kind, title in SECTION_TITLES.items():
            chosen = sorted((c.item for c in self.items if c.item.type == kind), key=_order)
            if chosen:
                body = "\n\n".join(f"## {item.name}\n{item.text.strip()}" for item in chosen)
                sections.append(f"# {title}\n\n{body}")
        return "\n\n".join(sections)


async def build(
    catalog: ItemCatalog,
    store: Callable[[], Awaitable[VectorStore]],
    message: str,
    limits: Limits,
    session: Any = None,
) -> RequestContext:
    """The request context of ``message``: the session's items (``session`` is the chat's
    ``context_items`` as stored, ``None`` for the vault's seed), then what agent selection adds.
    ``store`` is asked for only when the vault has agent items. A failed search (or no
    embedder) costs the agent items only, and the record says why."""
    current = await catalog.current()
    entries = session_of({} if session is None else {SESSION_KEY: session}, current.items)
    chosen = [Chosen(item, mode) for item, mode in resolve(entries, current.items)]
    found: Sequence[Found] = ()
    error = None
    if any(i.enabled and i.include == "agent" for i in current.items):
        try:
            found = await catalog.search(await store(), message, limits)
        except SmartContextError as exc:
            error = f"Agent selection skipped: {exc}"
    present = {c.item.key for c in chosen}
    agent = [Chosen(f.item, f.mode, f.score) for f in found if f.item.key not in present]
    return RequestContext((*chosen, *agent), error)


def _order(item: Item) -> tuple[int, str]:
    return item.priority, item.name.casefold()
