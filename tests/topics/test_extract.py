"""Background topic extraction through pipeline_output: writes, coalescing, fallbacks."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.conftest import Ctx, Running, call, read_chat, write_chat
from tests.fakes import FakeEmbedder, FakeLLM, make_messages, word_vector

TEXTS = [
    "How do I cancel an asyncio task in Python?",
    "Call task.cancel() and await it.",
    "Always answer in French.",
    "D'accord.",
    "What should I see in Paris in two days?",
    "Le Louvre et la Seine.",
]
GOOD = json.dumps(
    {
        "topics": [{"label": "python asyncio", "count": 2}, {"label": "Paris Trip", "count": 2}],
        "sticky_message_ids": ["m2"],
    }
)


async def reply_done(running: Running, chat_id: str = "c1") -> None:
    ctx = Ctx(chat_id, [])
    ctx.response = "a reply"
    await call(running.pm.hook.pipeline_output, ctx=ctx)


async def test_topics_are_written_with_update_chat_and_announced(start: Any, vault: Path) -> None:
    write_chat(vault, "c1", make_messages(TEXTS), notes="other plugin data")
    llm = FakeLLM([f"Here you go:\n```json\n{GOOD}\n```\nHope this helps!"])
    running: Running = await start(llm=llm)
    await reply_done(running)
    await running.settle()
    stored = read_chat(vault, "c1")
    assert stored["topics"] == [
        {"label": "Python Asyncio", "count": 2},
        {"label": "Paris Trip", "count": 2},
        {"label": "Instructions & Preferences", "sticky": True, "message_ids": ["m2"], "count": 1},
    ]
    assert stored["notes"] == "other plugin data" and len(stored["messages"]) == 6
    event, payload = running.host.events[-1]
    assert event == "smart_context.topics_updated"
    assert payload == {"chat_id": "c1", "topics": stored["topics"], "total_messages": 6}
    assert llm.prompts[0][0]["role"] == "system"


async def test_pipeline_output_returns_at_once(start: Any, vault: Path) -> None:
    write_chat(vault, "c1", make_messages(TEXTS))
    llm = FakeLLM([GOOD])
    llm.gate = asyncio.Event()
    running: Running = await start(llm=llm)
    await asyncio.wait_for(reply_done(running), timeout=1)  # the model is still "thinking"
    assert running.plugin.services is not None and running.plugin.services.background.running
    llm.gate.set()
    await running.settle()


async def test_message_appended_during_extraction_is_not_lost(start: Any, vault: Path) -> None:
    write_chat(vault, "c1", make_messages(TEXTS))
    llm = FakeLLM([GOOD])
    llm.gate = asyncio.Event()
    running: Running = await start(llm=llm)
    await reply_done(running)
    while not llm.prompts:  # extraction has read the chat and is waiting on the model
        await asyncio.sleep(0.01)
    await running.host.memory.append_message(
        "c1", {"id": "late", "role": "user", "content": "one more"}
    )
    llm.gate.set()
    await running.settle()
    stored = read_chat(vault, "c1")
    assert [m["id"] for m in stored["messages"]][-1] == "late"
    assert stored["topics"][0]["label"] == "Python Asyncio"
    assert running.host.events[-1][1]["total_messages"] == 7


async def test_a_burst_of_replies_yields_one_more_run_not_a_queue(start: Any, vault: Path) -> None:
    write_chat(vault, "c1", make_messages(TEXTS))
    llm = FakeLLM([GOOD] * 10)
    llm.gate = asyncio.Event()
    running: Running = await start(llm=llm)
    for _ in range(5):
        await reply_done(running)
    while not llm.prompts:
        await asyncio.sleep(0.01)
    for _ in range(5):
        await reply_done(running)
    llm.gate.set()
    await running.settle()
    assert len(llm.prompts) == 2


async def test_previous_labels_are_offered_to_the_model(start: Any, vault: Path) -> None:
    write_chat(
        vault, "c1", make_messages(TEXTS), topics=[{"label": "Asyncio Cancellation", "count": 2}]
    )
    llm = FakeLLM([GOOD])
    running: Running = await start(llm=llm)
    await reply_done(running)
    await running.settle()
    assert "Asyncio Cancellation" in json.dumps(llm.prompts[0])


async def test_background_pass_warms_the_cache_before_the_user_filters(
    start: Any, vault: Path, embedder: FakeEmbedder
) -> None:
    write_chat(vault, "c1", make_messages(TEXTS))
    running: Running = await start(llm=FakeLLM([GOOD]))
    await reply_done(running)
    await running.settle()
    # every message, then the new labels (a first click on a bubble is warm)
    assert sorted(embedder.embedded) == sorted([*TEXTS, "Python Asyncio", "Paris Trip"])
    assert (vault / ".memory" / "c1.embeddings.json").exists()
    embedder.calls.clear()
    await running.command("set_filter", topics=["Python Asyncio"], chat_id="c1")
    assert embedder.embedded == []  # the pass embedded the new labels too


async def test_unusable_reply_keeps_old_topics_when_offline_finds_nothing(
    start: Any, vault: Path
) -> None:
    old = [{"label": "Old Subject", "count": 3}]
    write_chat(vault, "c1", make_messages(["ok", "thanks"]), topics=old)
    running: Running = await start(llm=FakeLLM(["I cannot help with that."]))
    await reply_done(running)
    await running.settle()
    assert read_chat(vault, "c1")["topics"] == old
    assert not [e for e in running.host.events if e[0] == "smart_context.topics_updated"]


async def test_model_failure_falls_back_to_offline_topics(start: Any, vault: Path) -> None:
    texts = []
    for i in range(6):
        texts += [
            f"python asyncio task cancel question {i}",
            f"python asyncio task cancel answer {i}",
            f"paris louvre museum trip question {i}",
            f"paris louvre museum trip answer {i}",
            f"sourdough bread starter flour question {i}",
            f"sourdough bread starter flour answer {i}",
        ]
    write_chat(vault, "c1", make_messages([*texts, "Always answer in French."]))
    running: Running = await start(llm=FakeLLM([TimeoutError("model timed out")]))
    await reply_done(running)
    await running.settle()
    topics = read_chat(vault, "c1")["topics"]
    regular = [t for t in topics if not t.get("sticky")]
    assert 3 <= len(regular) <= 8
    assert sum(t["count"] for t in regular) <= len(texts) + 1
    sticky = [t for t in topics if t.get("sticky")]
    assert sticky and sticky[0]["message_ids"] == [f"m{len(texts)}"]


async def test_a_bad_reply_keeps_the_chats_topics_instead_of_offline_ones(
    start: Any, vault: Path, caplog: pytest.LogCaptureFixture
) -> None:
    old = [{"label": "Python Asyncio", "count": 4, "message_ids": ["m0", "m1"]}]
    write_chat(vault, "c1", make_messages(TEXTS), topics=old)
    running: Running = await start(llm=FakeLLM(["Sure! Here are the topics: none."]))
    await reply_done(running)
    await running.settle()
    assert read_chat(vault, "c1")["topics"] == old  # the offline extractor would make others
    assert "keeping the chat's previous topics" in caplog.text


async def test_offline_extractor_setting_never_calls_the_model(start: Any, vault: Path) -> None:
    write_chat(vault, "c1", make_messages(TEXTS))
    llm = FakeLLM()
    running: Running = await start({"topic_extractor": "offline"}, llm=llm)
    await reply_done(running)
    await running.settle()
    assert llm.prompts == []
    assert "topics" in read_chat(vault, "c1")


async def test_shutdown_drains_background_work(start: Any, vault: Path) -> None:
    write_chat(vault, "c1", make_messages(TEXTS))
    running: Running = await start(llm=FakeLLM([GOOD]))
    await reply_done(running)
    await call(running.pm.hook.sidecar_shutdown)
    assert running.plugin.services is not None and not running.plugin.services.background.running
    assert read_chat(vault, "c1")["topics"][0]["label"] == "Python Asyncio"


async def test_opening_an_unmapped_chat_maps_it_in_the_background(start: Any, vault: Path) -> None:
    write_chat(vault, "c1", make_messages(TEXTS))
    running: Running = await start(llm=FakeLLM([GOOD]))
    first = await running.command("get_topics", chat_id="c1")
    assert first["topics"] == [] and first["extracting"] is True
    await running.settle()
    second = await running.command("get_topics", chat_id="c1")
    assert second["topics"][0]["label"] == "Python Asyncio" and second["extracting"] is False
    assert running.host.events[0][0] == "smart_context.topics_updated"


async def test_mapping_waits_for_phrase_vectors_without_taking_the_loops_last_thread(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A team's vaults mapping at once filled the loop's thread pool with extractors, each
    waiting for phrase vectors that a thread of the same pool had to embed: every map stalled
    for the phrase timeout. One thread in the loop's pool shows it."""
    import concurrent.futures
    import logging

    from smart_context.topics import extract
    from smart_context.vectors.ops import normalize_rows

    monkeypatch.setattr(extract, "PHRASE_TIMEOUT", 5.0)
    loop = asyncio.get_running_loop()
    loop.set_default_executor(concurrent.futures.ThreadPoolExecutor(1))
    embedded: list[int] = []

    def embed(texts: list[str]) -> np.ndarray:
        return normalize_rows(np.stack([word_vector(t) for t in texts]))

    async def embed_phrases(phrases: list[str]) -> Any:
        vectors = await asyncio.to_thread(embed, phrases)  # as the local model does
        embedded.append(len(phrases))
        return vectors

    texts = ["How do I proof sourdough bread overnight?", "Sourdough bread proofs in the fridge."]
    messages = make_messages(texts * 3)
    vectors = embed([m["content"] for m in messages])
    with caplog.at_level(logging.INFO):
        found = await asyncio.wait_for(extract.offline(messages, vectors, [], embed_phrases), 30)
    assert embedded and found.topics
    assert "key words only" not in caplog.text


async def test_the_prompt_is_made_off_the_event_loop(
    start: Any, vault: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A step per message (0.7 s for 100,000): made on the loop, it held every request."""
    import threading

    import smart_context.topics.extract as extract_module

    made_in: list[threading.Thread] = []
    real = extract_module.build_extraction_messages

    def build(*args: Any) -> list[dict[str, str]]:
        made_in.append(threading.current_thread())
        return real(*args)

    monkeypatch.setattr(extract_module, "build_extraction_messages", build)
    write_chat(vault, "c1", make_messages(TEXTS))
    llm = FakeLLM([GOOD])
    running: Running = await start(llm=llm)
    await reply_done(running)
    await running.settle()
    assert made_in and threading.main_thread() not in made_in
    assert llm.prompts[0] == real(make_messages(TEXTS), [], 12000)
    assert read_chat(vault, "c1")["topics"][0]["label"] == "Python Asyncio"
