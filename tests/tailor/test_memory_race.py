"""``update_chat`` over Tailor's memory commands, which have no atomic update, raced by a writer
that appends as Tailor's own plugins do: it loads a chat, awaits something, then saves its copy.
No appended message may be lost, over many rounds; the way Tailor's old Smart Context plugin
wrote topics (load, await the model, save) loses them in the same race."""

from __future__ import annotations

import asyncio
import copy
import random
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from smart_context.errors import SmartContextError
from smart_context_hosts.tailor.memory import TailorMemory, change_held
from tests.tailor.conftest import StartTailor

ROUNDS = 200
HOLD = 0.002  # seconds a writer may hold its copy (a model call, a file read)

Update = Callable[[str, Callable[[dict[str, Any]], dict[str, Any]]], Awaitable[Any]]


async def racing_writer(brain: Any, chat_id: str, rng: random.Random) -> None:
    """Appends ROUNDS messages, each through load, an await, save (Tailor's pattern)."""
    for i in range(ROUNDS):
        data = (await brain.execute_command("memory.load_chat", chat_id=chat_id))["data"]
        await asyncio.sleep(rng.random() * HOLD)
        data["messages"].append({"id": f"r{i}", "role": "user", "content": f"racing {i}"})
        await brain.execute_command("memory.save_chat", chat_id=chat_id, data=data)
        await asyncio.sleep(rng.random() * HOLD)


async def topic_writer(update: Update, chat_id: str, rng: random.Random) -> None:
    """Writes topics ROUNDS times, as the topic pass does after each reply."""
    for j in range(ROUNDS):
        await update(
            chat_id, lambda data, j=j: {**data, "topics": [{"label": f"T{j}", "count": j}]}
        )
        await asyncio.sleep(rng.random() * HOLD)


def racing_ids(stored: dict[str, Any]) -> list[str]:
    return [m["id"] for m in stored["messages"] if m["id"].startswith("r")]


async def race(tailor: Any, update: Update, seed: int) -> dict[str, Any]:
    chat_id = "race"
    await tailor.brain.execute_command(
        "memory.save_chat", chat_id=chat_id, data={"messages": [], "title": "kept"}
    )
    await asyncio.gather(
        racing_writer(tailor.brain, chat_id, random.Random(seed)),
        topic_writer(update, chat_id, random.Random(seed + 1)),
    )
    return tailor.chat_file(chat_id)


@pytest.mark.parametrize("yields", [False, True], ids=["tailor-commands", "yielding-commands"])
async def test_no_message_is_lost_to_our_updates(start_tailor: StartTailor, yields: bool) -> None:
    tailor = await start_tailor(memory={"yield_in_commands": yields})
    memory = tailor.ours.core.services.host.memory
    assert isinstance(memory, TailorMemory)
    stored = await race(tailor, memory.update_chat, seed=7)
    assert racing_ids(stored) == [f"r{i}" for i in range(ROUNDS)]
    assert stored["title"] == "kept"
    final = await memory.update_chat("race", lambda d: {**d, "topics": [{"label": "Last"}]})
    assert final["topics"] == [{"label": "Last"}] == tailor.chat_file("race")["topics"]
    assert racing_ids(tailor.chat_file("race")) == [f"r{i}" for i in range(ROUNDS)]


async def test_the_race_is_real_for_a_load_then_save_writer(start_tailor: StartTailor) -> None:
    tailor = await start_tailor()
    brain, rng = tailor.brain, random.Random(3)

    async def load_await_save(chat_id: str, fn: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
        data = (await brain.execute_command("memory.load_chat", chat_id=chat_id))["data"]
        await asyncio.sleep(rng.random() * HOLD)  # Tailor's old plugin awaited the model here
        await brain.execute_command("memory.save_chat", chat_id=chat_id, data=fn(data))

    stored = await race(tailor, load_await_save, seed=7)
    assert len(racing_ids(stored)) < ROUNDS  # messages were lost


class StaleWriterBrain:
    """Tailor's commands, and another writer whose stale copy (with a new message) lands right
    after our first save, as if it had loaded before we did."""

    def __init__(self) -> None:
        self.stored: dict[str, Any] = {"messages": [{"id": "a", "content": "hi"}]}
        self.saves = 0

    async def execute_command(self, command_id: str, **kwargs: Any) -> Any:
        if command_id == "memory.load_chat":
            return {"status": "success", "data": copy.deepcopy(self.stored)}
        self.stored = kwargs["data"]
        self.saves += 1
        if self.saves == 1:
            self.stored = {
                "messages": [{"id": "a", "content": "hi"}, {"id": "b", "content": "new"}]
            }
        return {"status": "success"}


async def test_a_stale_writer_that_undoes_our_change_is_answered_by_writing_again() -> None:
    brain = StaleWriterBrain()
    memory = TailorMemory(lambda: brain)
    stored = await memory.update_chat("c", lambda d: {**d, "topics": [{"label": "X"}]})
    assert memory.retries == 1 and brain.saves == 2
    assert stored == brain.stored
    assert stored["topics"] == [{"label": "X"}]
    assert [m["id"] for m in stored["messages"]] == ["a", "b"]


class OverwritingBrain:
    """Tailor's commands where another writer overwrites every save at once."""

    def __init__(self) -> None:
        self.stored: dict[str, Any] = {"messages": [{"id": "a", "content": "hi"}]}

    async def execute_command(self, command_id: str, **kwargs: Any) -> Any:
        if command_id == "memory.load_chat":
            return {"status": "success", "data": self.stored}
        self.stored = {"messages": [{"id": "a", "content": "hi"}]}  # ours is undone
        return {"status": "success"}


async def test_a_change_that_never_holds_is_an_error_not_a_hang() -> None:
    brain = OverwritingBrain()
    memory = TailorMemory(lambda: brain)
    with pytest.raises(SmartContextError, match="kept being rewritten"):
        await memory.update_chat("c", lambda d: {**d, "topics": [{"label": "X"}]})
    assert memory.retries == 5


async def test_tailor_errors_are_ours_with_a_hint() -> None:
    class NoMemoryPlugin:
        async def execute_command(self, command_id: str, **kwargs: Any) -> Any:
            raise LookupError(command_id)

    memory = TailorMemory(lambda: NoMemoryPlugin())
    with pytest.raises(SmartContextError, match=r"\[plugins.memory\] enabled = true"):
        await memory.load_chat("c")
    with pytest.raises(SmartContextError, match="not JSON"):
        await memory.save_chat("c", {"messages": [object()]})


def test_change_held_by_key_and_by_message_id() -> None:
    base = {"messages": [{"id": "1", "content": "a"}], "topics": []}
    written = {"messages": [{"id": "1", "content": "a"}], "topics": [{"label": "T"}]}
    appended = {**written, "messages": [*written["messages"], {"id": "2", "content": "b"}]}
    assert change_held(base, written, appended)  # another writer's message on top of ours
    assert not change_held(base, written, {**base, "messages": appended["messages"]})
    edited = {**base, "messages": [{"id": "1", "content": "A"}]}
    assert change_held(base, edited, {**edited, "extra": 1})
    assert not change_held(base, edited, base)
    removed = {**base, "messages": []}
    assert not change_held(base, removed, base)
    assert change_held(base, removed, {**base, "messages": [{"id": "3", "content": "c"}]})


async def test_an_update_that_changes_nothing_writes_nothing() -> None:
    brain = StaleWriterBrain()
    memory = TailorMemory(lambda: brain)
    assert await memory.update_chat("c", lambda d: d) == brain.stored
    assert brain.saves == 0
