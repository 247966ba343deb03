"""The in-memory chat views: reads that start together share one read of the file."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from smart_context.chats import ChatViews
from smart_context.paths import check_chat_id

CHAT = check_chat_id("c")


class SlowMemory:
    """A host's chat store that counts its reads and takes a moment for each."""

    def __init__(self) -> None:
        self.data: dict[str, Any] = {"messages": [{"id": "m0", "role": "user", "content": "hi"}]}
        self.reads = 0

    async def load_chat(self, chat_id: str) -> dict[str, Any]:
        self.reads += 1
        snapshot = dict(self.data)
        await asyncio.sleep(0.01)
        return snapshot

    def save_chat(self, chat_id: str, data: dict[str, Any]) -> None:
        self.data = data

    async def update_chat(
        self, chat_id: str, fn: Callable[[dict[str, Any]], dict[str, Any]]
    ) -> dict[str, Any]:
        self.data = fn(self.data)
        return self.data


async def test_reads_that_start_together_share_one() -> None:
    memory = SlowMemory()
    views = ChatViews(memory)
    first, second = await asyncio.gather(views.load(CHAT), views.load(CHAT))
    assert memory.reads == 1 and first is second
    await views.load(CHAT)  # a read after they ended reads again
    assert memory.reads == 2


async def test_a_read_never_joins_one_that_began_before_our_write() -> None:
    memory = SlowMemory()
    views = ChatViews(memory)
    early = asyncio.ensure_future(views.load(CHAT))
    await asyncio.sleep(0.005)  # the first read is under way
    await views.update(CHAT, lambda data: {**data, "topics": [{"label": "New"}]})
    late = await views.load(CHAT)
    assert "topics" not in await early and late["topics"] == [{"label": "New"}]
    assert memory.reads == 2


async def test_a_failed_read_fails_every_caller_and_the_next_reads_again() -> None:
    memory = SlowMemory()
    views = ChatViews(memory)
    memory.data = None  # type: ignore[assignment]  # the host's read fails
    results = await asyncio.gather(views.load(CHAT), views.load(CHAT), return_exceptions=True)
    assert all(isinstance(r, Exception) for r in results) and memory.reads == 1
    memory.data = {"messages": []}
    assert (await views.load(CHAT))["messages"] == []


def test_a_topic_whose_members_did_not_change_keeps_its_query() -> None:
    from smart_context.chats import ChatView, view_of

    bread = {"label": "Bread", "message_ids": ["m0", "m1"]}
    boats = {"label": "Boats", "message_ids": ["m2"]}
    sticky = {"label": "Instructions", "sticky": True, "message_ids": ["m3"]}
    before = view_of({"messages": [], "topics": [bread, sticky, boats]})
    grown = {**boats, "message_ids": ["m2", "m4"]}
    after = view_of({"messages": [], "topics": [dict(bread), sticky, grown]}, before)
    assert [q.label for q in after.queries] == ["Bread", "Boats"]
    assert after.queries[0] is before.queries[0]  # the same members: not built again
    assert after.queries[1].member_ids == frozenset({"m2", "m4"})  # new members: built
    renamed = view_of({"messages": [], "topics": [{**bread, "label": "Rye"}]}, before)
    assert renamed.queries[0].label == "Rye" and renamed.queries[0] is not before.queries[0]
    # a view made by hand, its queries not those of its topics: nothing is taken from it
    odd = ChatView(topics=[bread, boats], queries=before.queries[:1])
    assert view_of({"messages": [], "topics": [bread]}, odd).queries[0] is not before.queries[0]


class SharedMemory(SlowMemory):
    """A chat store another process writes too, which can say cheaply what the chat's other
    keys are now (the sidecar's ``chat_state``)."""

    def __init__(self) -> None:
        super().__init__()
        self.states = 0

    async def chat_state(self, chat_id: str) -> dict[str, Any]:
        self.states += 1
        return {k: v for k, v in self.data.items() if k != "messages"}


async def test_a_selection_made_by_another_process_is_seen_by_the_next_request() -> None:
    memory = SharedMemory()
    memory.data["topics"] = [{"label": "Bread", "count": 1, "message_ids": ["m0"]}]
    views = ChatViews(memory)
    assert (await views.view(CHAT)).active_topics == ()
    assert (await views.view(CHAT)).active_topics == () and memory.reads == 1  # unchanged: no read
    memory.data = {**memory.data, "smart_context": {"active_topics": ["Bread"]}}  # the page's click
    assert (await views.view(CHAT)).active_topics == ("Bread",) and memory.reads == 2
    assert (await views.view(CHAT, fresh=False)).active_topics == ("Bread",) and memory.reads == 2
    memory.data = {**memory.data, "topics": [{"label": "Rye", "count": 2, "message_ids": ["m0"]}]}
    assert [t["label"] for t in (await views.view(CHAT)).topics] == ["Rye"]  # a map made elsewhere


async def test_our_own_selection_is_never_undone_by_the_file_it_has_not_reached_yet() -> None:
    memory = SharedMemory()
    memory.data["topics"] = [{"label": "Bread", "count": 1, "message_ids": ["m0"]}]
    views = ChatViews(memory)
    await views.view(CHAT)
    views.select(CHAT, ["Bread"])  # saved in the background
    assert (await views.view(CHAT)).active_topics == ("Bread",)
    await views.settle(5)
    reads = memory.reads
    assert (await views.view(CHAT)).active_topics == ("Bread",) and memory.reads == reads


async def test_a_host_that_cannot_say_keeps_the_view_until_the_next_read() -> None:
    memory = SlowMemory()
    views = ChatViews(memory)
    await views.view(CHAT)
    memory.data = {**memory.data, "smart_context": {"active_topics": ["Bread"]}}
    assert (await views.view(CHAT)).active_topics == () and memory.reads == 1
