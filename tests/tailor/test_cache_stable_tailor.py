"""The cache-stable layout inside (a stand-in of) Tailor (docs/contract.md §9, "The layout"): 30
turns of a long chat through Tailor's pipeline, model ``gpt-5``. What Tailor's LLM node sends
starts with the previous request outside cuts; what is chosen for each message goes as a system
message before it, so Tailor's memory plugin saves the user's own message."""

from __future__ import annotations

import json
from typing import Any

from tests.context.test_budgeted import long_chat
from tests.context.test_layout import Clock
from tests.layout_checks import cuts_of, longer
from tests.tailor.conftest import StartTailor, Tailor

TURNS = 30
TAILOR_SYSTEM = {"role": "system", "content": "You are a helpful assistant."}


async def turn(tailor: Tailor, text: str) -> Any:
    """What the chat window's ``chat.send`` does, with the model named in the metadata."""
    history = (await tailor.brain.execute_command("chat.get_history", chat_id="long"))["history"]
    ctx = await tailor.brain.pipeline.run(
        text, history, stream=False, metadata={"chat_id": "long", "model": "gpt-5"}
    )
    await tailor.settle()
    return ctx


def stable_part(request: list[dict[str, str]]) -> list[dict[str, str]]:
    """What the next request must start with: all but the user's message and the system
    message of what was chosen for it, just before it."""
    head = request[:-1]
    return head[:-1] if len(head) > 2 and head[-1]["role"] == "system" else head


async def test_thirty_tailor_turns_start_with_the_previous_request_outside_cuts(
    start_tailor: StartTailor,
) -> None:
    chat = longer(long_chat(400), TURNS, 6)  # its replies are short: the questions grow it
    start = len(chat) - 2 * TURNS
    # a budget the chat's history does not fit whole (it is cut and recalled from), and a cut
    # that keeps 95% of the high mark, so that 30 turns (Tailor's replies are short) pass it again
    tailor = await start_tailor(settings={"budget_tokens": 2000, "topic_extractor": "offline"})
    memory = tailor.vault / ".memory"
    (memory / "long.json").write_text(json.dumps({"messages": chat[:start]}), "utf-8")
    clock = Clock()
    tailor.ours.core.services.clock = clock
    asked = [m["content"] for m in chat[start::2]]
    records = []
    for text in asked:
        clock.now += 30
        ctx = await turn(tailor, text)
        assert ctx.message == text and ctx.response.startswith("Noted:")
        records.append(ctx.metadata["smart_context"])

    # what Tailor's LLM node sent: its system prompt, the history, the user's message
    requests = [m for category, m in tailor.llm.calls if category == "fast"]
    assert len(requests) == TURNS
    cuts_of(requests, records, stable_part)
    assert all(r["layout"]["recalled_in"] == "system" for r in records)
    assert any(r["layout"]["start_id"] is not None for r in records)
    assert any(r["layout"]["recalled_ids"] for r in records)
    for request, record, text in zip(requests, records, asked, strict=True):
        assert request[0] == TAILOR_SYSTEM
        assert request[-1] == {"role": "user", "content": text}  # the message as the user sent it
        assert not any("<context>" in m["content"] for m in request)
        if record["layout"]["recalled_ids"]:  # the chosen part: a system message before it
            assert request[-2]["role"] == "system" and "recalled" in request[-2]["content"]
    # Tailor's memory plugin saved the user's own messages
    stored = tailor.chat_file("long")["messages"]
    users = [m["content"] for m in stored if m["role"] == "user"]
    assert users == [m["content"] for m in chat if m["role"] == "user"]
    assert sum(m["role"] == "system" for m in stored) == 0
