"""The budget's allocator for the fixed parts: the items a search chose give way, lowest score
first, before the last turn of the history does; what must be sent and does not fit is said."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from smart_context.context.allocate import Candidate, give_way, over_note
from tests.conftest import Ctx, call, write_chat
from tests.fakes import make_messages


def test_the_lowest_scores_give_way_and_no_more_than_needed() -> None:
    items = [Candidate("a", 100, 0.9), Candidate("b", 50, 0.2), Candidate("c", 80, 0.2)]
    assert give_way(items, 0) == frozenset()
    assert give_way(items, 60) == {"c"}  # equal scores: the larger frees more room first
    assert give_way(items, 100) == {"c", "b"}
    assert give_way(items, 10_000) == {"a", "b", "c"}


def test_the_note_names_the_parts_that_did_not_fit() -> None:
    note = over_note(753, 300, {"system": 272, "knowledge": 146, "tools": 316, "history": 0})
    assert note.startswith("Over the token budget by 453:")
    assert "tools 316, rules 272, references and notes 146 tokens" in note


def item(folder: Path, name: str, include: str, text: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    front = f"---\nname: {name}\ninclude: {include}\n---\n"
    (folder / f"{name.lower().replace(' ', '-')}.md").write_text(front + text, encoding="utf-8")


LONG = " ".join(["Sourdough bread needs a lively starter, flour, water and salt."] * 12)


async def run(start: Any, vault: Path, limit: int) -> dict[str, Any]:
    write_chat(vault, "c", make_messages(["How do I bake sourdough bread?", "Start a starter."]))
    running = await start(
        settings={"budget_tokens": limit, "token_model": "gpt-4o", "prompt_cache": "none"}
    )
    ctx = Ctx("c", make_messages(["How do I bake sourdough bread?", "Start a starter."]))
    ctx.message = "How long should my sourdough bread rise?"
    await call(running.pm.hook.pipeline_context, ctx=ctx)
    return dict(ctx.metadata)


async def test_items_chosen_by_search_give_way_so_the_request_fits(start: Any, vault: Path) -> None:
    item(vault / "rules", "Be Brief", "always", "Answer in two sentences.")
    item(vault / "references", "Sourdough Guide", "agent", LONG)
    item(vault / "references", "Bread Notes", "agent", LONG)
    roomy = await run(start, vault, 4000)
    assert {i["name"] for i in roomy["request_context"]["items"]} >= {
        "Be Brief",
        "Sourdough Guide",
    }
    assert "left_out_items" not in roomy["smart_context"]["budget"]
    tight = await run(start, vault, 400)
    budget = tight["smart_context"]["budget"]
    names = [i["name"] for i in tight["request_context"]["items"]]
    assert "Be Brief" in names  # asked for: always sent
    assert {i["name"] for i in budget["left_out_items"]} & {"Sourdough Guide", "Bread Notes"}
    assert not set(names) & {i["name"] for i in budget["left_out_items"]}
    assert budget["used"] <= 400 and "over" not in budget and "note" not in budget


async def test_what_must_be_sent_and_does_not_fit_is_said(start: Any, vault: Path) -> None:
    item(vault / "rules", "House Style", "always", LONG)
    item(vault / "references", "Sourdough Guide", "agent", LONG)
    metadata = await run(start, vault, 120)
    budget = metadata["smart_context"]["budget"]
    assert budget["used"] > 120 and budget["over"] == budget["used"] - 120
    assert budget["note"].startswith(f"Over the token budget by {budget['over']}:")
    assert [i["name"] for i in metadata["request_context"]["items"]] == ["House Style"]
