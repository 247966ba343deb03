"""The plugin as the topic benchmarks run it: a real plugin manager, the real local model, chats
held in memory, the offline extractor (the background pass's default without a chat model) and
clicks through the product's own command.

Shared by ``bench_topic_filter.py`` (our labelled chats) and ``public/bench_topics.py``
(Schema-Guided Dialogue), so both measure the same path.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pluggy

import smart_context.hookspecs
from benchmarks.bench_context import Host
from smart_context.context.topic_filter import LAST_TURN
from smart_context.embeddings.local import shared_local_model
from smart_context.paths import check_chat_id
from smart_context.plugin import SmartContextPlugin
from smart_context.services import Services


class BenchHost(Host):
    """The in-memory host of ``bench_context`` with the settings table the benchmark gives."""

    def __init__(self, vault: Path, chats: dict[str, dict[str, Any]], table: dict[str, Any]):
        super().__init__(vault, chats)
        self.table = table

    def settings(self, name: str) -> dict[str, Any]:
        return self.table


async def start(vault: Path, chats: dict[str, dict[str, Any]], threshold: Any) -> Services:
    """The plugin started on ``chats`` (its embedding cache under ``vault/.memory``), mapping
    topics offline, with ``threshold`` as ``similarity_threshold``."""
    (vault / ".memory").mkdir(parents=True, exist_ok=True)
    pm = pluggy.PluginManager("sidecar")
    pm.add_hookspecs(smart_context.hookspecs)
    plugin = SmartContextPlugin(await asyncio.to_thread(shared_local_model))
    pm.register(plugin)
    table = {"topic_extractor": "offline", "similarity_threshold": threshold}
    for result in pm.hook.sidecar_startup(host=BenchHost(vault, chats, table)):
        await result
    assert plugin.services is not None
    return plugin.services


def turns(chat: dict[str, Any]) -> list[dict[str, Any]]:
    """A chat's messages as a host stores them: id, role, content."""
    return [{k: m[k] for k in ("id", "role", "content")} for m in chat["messages"]]


async def click(services: Services, chat_id: str, labels: Sequence[str]) -> tuple[set[str], str]:
    """Select ``labels`` as the panel does: the ids the next request keeps because of the
    click, and the mode. The chat's last turn goes whatever the click (docs/contract.md §6):
    it is set aside, as the sticky messages are, unless nothing is selected."""
    from smart_context.commands.topics import select

    cid = check_chat_id(chat_id)
    result = await select(services, cid, labels)
    kept = set(result["included_ids"])
    if labels and result["mode"] == "filtered":
        view = await services.chats.view(cid)
        kept -= {str(m.get("id")) for m in view.messages[-LAST_TURN:]}
    return kept, str(result["mode"])
