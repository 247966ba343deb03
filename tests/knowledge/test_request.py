"""Vault notes in a request, through the real plugin on real files: cited by path in the system
message, inside the token budget (re-counted with ``prompt_tokens``), named in the record."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Ctx, call, write_chat
from tests.context.test_budgeted import long_chat, sent_tokens
from tests.fakes import FakeEmbedder
from tests.knowledge.test_section import DISTRACTORS, STARTER, write_notes

QUESTION = "My rye starter smells of nail polish remover. How often should I feed it?"


@pytest.fixture
def notes_vault(vault: Path) -> Path:
    write_notes(vault, {**DISTRACTORS, "kitchen/starter.md": STARTER})
    (vault / "references").mkdir()
    (vault / "references" / "flour.md").write_text(
        "---\ninclude: always\n---\nRye flour for the starter.\n", encoding="utf-8"
    )
    return vault


async def ask(running: Any, chat: list[dict[str, Any]], message: str = QUESTION) -> Ctx:
    ctx = Ctx("long", chat, message)
    ctx.metadata["model"] = "gpt-4o"
    await call(running.pm.hook.pipeline_context, ctx=ctx)
    return ctx


async def test_notes_are_cited_by_path_after_the_references_within_the_budget(
    start: Any, notes_vault: Path
) -> None:
    chat = long_chat(300)
    write_chat(notes_vault, "long", chat)
    running = await start(settings={"budget_tokens": 2000, "prompt_cache": "none"})
    await running.settle()  # the notes were indexed in the background at start-up
    ctx = await ask(running, chat)
    record = ctx.metadata["smart_context"]
    system = ctx.history[0]
    assert system["role"] == "system"
    text = system["content"]
    assert text.index("Rye flour for the starter") < text.index("## kitchen/starter.md")
    assert "nail polish remover" in text and "cite" in text
    assert record["knowledge"][0]["path"] == "kitchen/starter.md"
    assert record["knowledge"][0]["score"] >= 0.3
    assert "garden/beds.md" not in text  # notes the message is not about stay out
    budget = record["budget"]
    assert budget["by_section"]["knowledge"] > 0
    assert sent_tokens(ctx) <= budget["used"] <= 2000


@pytest.mark.parametrize(("budget", "share"), [(700, 0.9), (400, 0.5), (0, 0.2)])
async def test_notes_never_push_the_prompt_over_the_budget(
    start: Any, notes_vault: Path, budget: int, share: float
) -> None:
    long_note = "\n\n".join(
        f"Starter diary, day {i}: fed the rye starter, it smelled of nail polish remover "
        "again, so it was fed twice. " + "It rose and fell. " * 20
        for i in range(30)
    )
    write_notes(notes_vault, {"kitchen/diary.md": long_note})
    chat = long_chat(60)
    write_chat(notes_vault, "long", chat)
    settings = {
        "budget_tokens": budget,
        "knowledge_share": share,
        "knowledge_passages": 4,
        "memory_tools": False,  # their 311 tokens would leave a 400-token budget no room for notes
        "prompt_cache": "none",  # the per-turn budget (the layout: tests/context/test_layout.py)
    }
    running = await start(settings=settings)
    ctx = await ask(running, chat)
    record = ctx.metadata["smart_context"]
    assert record["knowledge"], record
    if budget:
        assert sent_tokens(ctx) <= budget
        assert record["budget"]["by_section"]["knowledge"] <= share * budget + 40  # + references
    else:
        assert "budget" not in record and [m["id"] for m in ctx.history[1:]] == [
            m["id"] for m in chat
        ]


async def test_without_an_embedder_notes_are_found_by_their_words(
    start: Any, notes_vault: Path, embedder: FakeEmbedder, caplog: pytest.LogCaptureFixture
) -> None:
    embedder.fail_with = "the embedding server is down"
    chat = long_chat(4)
    write_chat(notes_vault, "long", chat)
    running = await start(settings={"budget_tokens": 4000, "prompt_cache": "none"})
    with caplog.at_level(logging.WARNING):
        ctx = await ask(running, chat)
    assert "words only" in caplog.text
    assert [n["path"] for n in ctx.metadata["smart_context"]["knowledge"]] == ["kitchen/starter.md"]


async def test_no_knowledge_folders_no_notes(start: Any, notes_vault: Path) -> None:
    chat = long_chat(4)
    write_chat(notes_vault, "long", chat)
    running = await start(settings={"knowledge_folders": []})
    await running.settle()
    ctx = await ask(running, chat)
    assert "knowledge" not in ctx.metadata["smart_context"]
    assert "kitchen/starter.md" not in ctx.history[0]["content"]
    assert not (notes_vault / ".memory" / "smart_context" / "knowledge.embeddings.json").exists()


async def test_an_edited_note_is_seen_by_the_next_request_and_embedded_alone(
    start: Any, notes_vault: Path, embedder: FakeEmbedder
) -> None:
    chat = long_chat(4)
    write_chat(notes_vault, "long", chat)
    running = await start(settings={"budget_tokens": 4000, "prompt_cache": "none"})
    await running.settle()
    (notes_vault / "kitchen" / "starter.md").write_text(
        "The rye starter now lives on the counter and is fed each morning.", encoding="utf-8"
    )
    embedder.calls.clear()
    ctx = await ask(running, chat, "How often is the rye starter fed? Where does it live?")
    embedded = embedder.embedded
    assert (
        "starter\n\nThe rye starter now lives on the counter and is fed each morning." in embedded
    )
    assert not any(text.split("\n\n")[0] in {"beds", "lisbon", "postgres"} for text in embedded)
    assert "on the counter" in ctx.history[0]["content"]


async def test_the_parts_beside_the_history_are_counted_once_per_request(
    start: Any, notes_vault: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import smart_context.budget.budgeter as budgeted
    import smart_context.context.assemble as assemble

    calls: list[str] = []
    real = budgeted.fixed_costs

    def counted(counter: Any, fixed: Any) -> dict[str, int]:
        calls.append("count")
        return real(counter, fixed)

    monkeypatch.setattr(assemble, "fixed_costs", counted)
    monkeypatch.setattr(budgeted, "fixed_costs", counted)
    chat = long_chat(300)
    write_chat(notes_vault, "long", chat)
    running = await start(settings={"budget_tokens": 2000, "prompt_cache": "none"})
    await running.settle()
    ctx = await ask(running, chat)
    record = ctx.metadata["smart_context"]
    assert record["knowledge"] and record["budget"]["by_section"]["knowledge"] > 0
    assert calls == ["count"]  # the notes' room and the budget share one count
    assert sent_tokens(ctx) <= record["budget"]["used"] <= 2000
