"""The background pass's summaries: the fast model when it answers, the offline picker when it
fails, and nothing made for a chat's open end."""

from __future__ import annotations

from pathlib import Path

from smart_context.config import Settings
from smart_context.memory.db import MemoryDB
from smart_context.memory.refresh import summarize_chat
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
