"""The item commands of CONTRACT §8 that stand on the vault alone: ``search_items``."""

from __future__ import annotations

from typing import Any

from smart_context.commands.guard import BadArguments, Result
from smart_context.items.catalog import found_rows
from smart_context.items.select import Limits
from smart_context.services import Services

MAX_QUERY_CHARS = 20_000


async def search_items(services: Services, query: Any = None, chat_id: Any = None) -> Result:
    """What agent selection would add for ``query``, with scores, best first.

    ``chat_id`` is accepted for the contract's sake; per-chat selection settings come with
    session context, until then the vault's defaults apply.
    """
    if not isinstance(query, str) or not query.strip():
        raise BadArguments("query is required: the message to select items for.")
    if len(query) > MAX_QUERY_CHARS:
        raise BadArguments(f"query is longer than {MAX_QUERY_CHARS} characters.")
    store = await services.store()
    found = await services.items.search(store, query, Limits())
    catalog = await services.items.current()
    return {
        "items": found_rows(found),
        "problems": [{"source": p.source, "message": p.message} for p in catalog.problems],
    }
