"""``host.emit`` fan-out: every client gets every event; a slow client loses old events, not
time."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator, Mapping

from smart_context_hosts.sidecar.events import EventHub, format_sse


async def test_every_client_gets_every_event() -> None:
    hub = EventHub()
    with hub.subscribe() as first, hub.subscribe() as second:
        assert hub.client_count == 2
        payload = {"chat_id": "c1", "topics": [{"label": "</script>"}]}
        hub.emit("smart_context.topics_updated", payload)
        payload["chat_id"] = "changed later"
        for sub in (first, second):
            event = await sub.next(timeout=1)
            assert event is not None and event.name == "smart_context.topics_updated"
            assert json.loads(event.data)["chat_id"] == "c1"
    assert hub.client_count == 0
    hub.emit("nobody.listens", {})


class _Counted(Mapping[str, object]):
    """A payload that counts how often it is read whole (as encoding it does)."""

    reads = 0

    def __init__(self, **items: object) -> None:
        self._items = items

    def __getitem__(self, key: str) -> object:
        return self._items[key]

    def __iter__(self) -> Iterator[str]:
        _Counted.reads += 1
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)


async def test_an_event_no_one_listens_to_is_not_encoded() -> None:
    hub = EventHub()
    hub.emit("smart_context.topics_updated", _Counted(topics=list(range(10_000))))
    assert _Counted.reads == 0
    with hub.subscribe() as sub:
        hub.emit("smart_context.topics_updated", _Counted(topics=[1, 2]))
        event = await sub.next(timeout=1)
    assert _Counted.reads == 1
    assert event is not None and json.loads(event.data) == {"topics": [1, 2]}


async def test_a_slow_client_drops_its_oldest_events() -> None:
    hub = EventHub(queue_size=3)
    with hub.subscribe() as slow:
        for i in range(10):
            hub.emit("tick", {"i": i})
        got = [json.loads(e.data)["i"] for e in [await slow.next(0.1) for _ in range(3)] if e]
        assert got == [7, 8, 9]
        assert slow.dropped == 7
        assert await slow.next(timeout=0.01) is None


async def test_emit_from_a_worker_thread() -> None:
    hub = EventHub()
    with hub.subscribe() as sub:
        thread = threading.Thread(target=hub.emit, args=("from.thread", {"ok": True}))
        thread.start()
        event = await sub.next(timeout=2)
        await asyncio.to_thread(thread.join)
    assert event is not None and json.loads(event.data) == {"ok": True}


def test_wire_format_cannot_be_broken_by_names_or_data() -> None:
    text = format_sse("evil\nevent: other", json.dumps({"text": "a\nb"}))
    assert text == 'event: evil event: other\ndata: {"text": "a\\nb"}\n\n'
    assert format_sse("x", "line1\nline2") == "event: x\ndata: line1\ndata: line2\n\n"


async def test_close_wakes_every_client() -> None:
    hub = EventHub()
    with hub.subscribe() as sub:
        waiting = asyncio.create_task(sub.next(timeout=5))
        await asyncio.sleep(0)
        hub.close()
        assert hub.closed and await waiting is not None
