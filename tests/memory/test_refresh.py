"""The background pass's summaries: the fast model when it answers, the offline picker when it
fails, and nothing made for a chat's open end."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from smart_context.config import Settings
from smart_context.memory import tree
from smart_context.memory.db import MemoryDB
from smart_context.memory.refresh import SeenChats, summarize_chat
from smart_context.paths import ChatId
from tests.fakes import FakeLLM, make_messages

TEXTS = [
    f"We settled on {i * 5} grams of rye for loaf {i}, baked at {200 + i} C." for i in range(32)
]


async def test_the_fast_model_writes_summaries_and_a_failure_falls_back_offline(
    tmp_path: Path,
) -> None:
    db = MemoryDB(tmp_path)
    llm = FakeLLM(["Rye amounts were settled per loaf.", RuntimeError("model down")])
    messages = make_messages(TEXTS)
    made = await summarize_chat(db, "c", messages, Settings(recent_messages=10), llm)
    stored = sorted(db.summaries("c"), key=lambda s: s.from_id)
    assert made == 2 and [s.size for s in stored] == [10, 10]
    by_source = {s.source: s for s in stored}
    assert by_source["llm"].text == "Rye amounts were settled per loaf."
    assert by_source["offline"].text  # the failed call's node got the picker's summary
    assert "transcript" not in llm.prompts[0][0]["content"]
    assert "rye" in llm.prompts[0][1]["content"]  # the model saw the stretch itself
    # nothing new: a second pass makes nothing and asks no model
    assert await summarize_chat(db, "c", messages, Settings(recent_messages=10), llm) == 0
    assert len(llm.prompts) == 2


async def test_offline_summaries_keep_numbers_and_speakers(tmp_path: Path) -> None:
    db = MemoryDB(tmp_path)
    settings = Settings(recent_messages=10, summarizer="offline")
    await summarize_chat(db, "c", make_messages(TEXTS), settings, FakeLLM())
    first = min(db.summaries("c"), key=lambda s: s.from_id)
    assert first.source == "offline" and "grams" in first.text
    assert first.text.startswith(("User:", "Assistant:"))


async def pass_seen(
    db: MemoryDB, seen: SeenChats, settings: Settings, messages: list[dict[str, Any]]
) -> int:
    """A memory pass over chat ``c`` as the background makes it: the keys and the summary
    checks from what ``seen`` kept of the pass before."""
    keyed, _ = seen.keys(ChatId("c"), messages)
    return await summarize_chat(
        db, "c", messages, settings, None, None, keyed, seen.checked(ChatId("c"))
    )


async def test_a_pass_over_a_chat_that_only_grew_hashes_only_its_new_summaries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stored summaries an earlier pass found valid or made keep their check while the chat
    only grows (a 10,000-message chat has some 1,250); an edit has every one checked again."""
    hashed: list[tuple[int, int]] = []
    hash_of = tree.covers

    def counted(keys: Any, start: int, end: int) -> str:
        hashed.append((start, end))
        return hash_of(keys, start, end)

    monkeypatch.setattr(tree, "covers", counted)
    db, seen = MemoryDB(tmp_path), SeenChats()
    settings = Settings(recent_messages=10, summarizer="offline")
    texts = TEXTS * 4

    first = await pass_seen(db, seen, settings, make_messages(texts[:70]))
    assert first and len(hashed) == first  # each made once
    hashed.clear()
    grown = make_messages(texts)
    made = await pass_seen(db, seen, settings, grown)
    assert made and len(hashed) == made  # the new ones only: the stored ones kept their check
    hashed.clear()
    assert await pass_seen(db, seen, settings, grown) == 0 and hashed == []
    edited = [{**grown[0], "content": "an edit"}, *grown[1:]]
    remade = await pass_seen(db, seen, settings, edited)
    assert len(hashed) == first + made + remade  # all checked again, the broken made anew
    assert len(db.summaries("c")) == first + made


async def test_two_passes_at_once_on_a_growing_chat_keep_only_true_checks(
    tmp_path: Path,
) -> None:
    """A forced pass beside the background's (the command does not wait for it), each over the
    chat as it read it: the checks they share hold over the messages as they stand, and a pass
    after them finds every summary valid and makes nothing."""
    db, seen = MemoryDB(tmp_path), SeenChats()
    settings = Settings(recent_messages=10, summarizer="offline")
    texts = TEXTS * 4

    await pass_seen(db, seen, settings, make_messages(texts[:60]))
    made = await asyncio.gather(
        pass_seen(db, seen, settings, make_messages(texts[:90])),
        pass_seen(db, seen, settings, make_messages(texts)),
    )
    assert sum(made) > 0
    grown = make_messages(texts)
    ids, keys = seen.keys(ChatId("c"), grown)[0]
    assert seen.checked(ChatId("c"))
    assert all(tree.covers(keys, s, e) == c for _, s, e, c in seen.checked(ChatId("c")))
    assert await summarize_chat(db, "c", grown, settings, None) == 0  # all checked from scratch
    stored = db.summaries("c")
    assert stored and all(
        tree.covers(keys, ids.index(s.from_id), ids.index(s.to_id) + 1) == s.covers for s in stored
    )
