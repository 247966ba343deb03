"""The chat list's turn counts: only what a chat added is looked at."""

from __future__ import annotations

from typing import Any

from smart_context_hosts.sidecar.turn_counts import TurnCounts
from tests.fakes import LookedAt


def turn(i: int, **extra: Any) -> dict[str, Any]:
    return {
        "id": f"m{i}",
        "role": "user" if i % 2 == 0 else "assistant",
        "content": f"t{i}",
        **extra,
    }


def test_a_grown_chat_counts_only_its_new_messages() -> None:
    counts = TurnCounts()
    messages = [LookedAt(turn(i)) for i in range(100)]
    assert counts.count("c", {"messages": messages}) == 100
    LookedAt.reads.clear()
    grown = [*messages, turn(100), turn(101, notice="no_model")]
    assert counts.count("c", {"messages": grown}) == 101  # the notice is no turn
    assert LookedAt.reads["role"] <= 1  # the last message counted before, checked by its key


def test_a_changed_last_message_or_a_shorter_chat_counts_again() -> None:
    counts = TurnCounts()
    messages = [turn(i) for i in range(4)]
    assert counts.count("c", {"messages": messages}) == 4
    failed = [*messages[:3], turn(3, error="model unreachable")]
    assert counts.count("c", {"messages": failed}) == 3
    assert counts.count("c", {"messages": messages[:2]}) == 2
    assert counts.count("c", {"messages": "not a list"}) == 0
    assert counts.count("other", {"messages": []}) == 0
