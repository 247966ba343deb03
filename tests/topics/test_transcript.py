"""The bounded transcript: one quoted line per message, within the character budget."""

from __future__ import annotations

import json
from typing import Any

import pytest

from smart_context.topics.transcript import bound_transcript
from tests.fakes import make_messages


def transcript_lines(text: str) -> list[str]:
    """The message lines of a transcript (header and gap notes left out)."""
    return [line for line in text.splitlines() if line.startswith("[")]


def test_short_chat_transcript_contains_every_message_in_full() -> None:
    texts = ["What is LangGraph?", "A library for agent graphs. " * 20, "be concise", "ok"]
    chat = make_messages(texts)
    text = bound_transcript(chat, 12000)
    assert text.startswith("The chat has 4 messages, all shown.")
    lines = transcript_lines(text)
    assert len(lines) == 4
    for line, message in zip(lines, chat, strict=True):
        assert line.startswith(f"[{message['id']}] {message['role']}: ")
        assert json.loads(line.split(": ", 1)[1]) == " ".join(message["content"].split())
    assert "omitted" not in text


def long_chat() -> list[dict[str, Any]]:
    chat = make_messages([f"message {i} " + "x" * 488 for i in range(10_000)])
    chat[4]["content"] = "be concise"
    chat[5000]["content"] = "answer in French from now on"
    chat[9000]["content"] = "use Python 3.12 from now on"
    return chat


@pytest.mark.parametrize("max_chars", [400, 2000, 12000, 60000])
def test_long_chat_stays_under_max_chars_and_keeps_instructions(max_chars: int) -> None:
    chat = long_chat()
    text = bound_transcript(chat, max_chars)
    assert len(text) <= max_chars
    assert "The chat has 10000 messages" in text
    if max_chars >= 2000:
        assert "[m9999] assistant:" in text  # the latest message is shown
        for instruction in ("be concise", "answer in French", "use Python 3.12"):
            assert instruction in text


def test_long_chat_omissions_are_counted_honestly() -> None:
    text = bound_transcript(long_chat(), 12000)
    shown = len(transcript_lines(text))
    omitted = sum(int(line.split()[1]) for line in text.splitlines() if line.startswith("(… "))
    assert shown + omitted == 10_000
    assert f"{shown} are shown and {omitted} omitted" in text
    # Older messages are sampled across the whole chat, not only the start or the end.
    ids = [int(line[2:].split("]")[0]) for line in transcript_lines(text)]
    assert min(ids) < 1000 and any(3000 < i < 7000 for i in ids)
    assert ids == sorted(ids)


def test_long_messages_show_their_head_only() -> None:
    chat = long_chat()
    chat[9999]["content"] = "HEAD " + "y" * 5000
    last = transcript_lines(bound_transcript(chat, 12000))[-1]
    assert last.startswith('[m9999] assistant: "HEAD yyy')
    assert len(last) < 400 and last.endswith('…"')


def test_bound_transcript_refuses_a_budget_too_small_to_be_useful() -> None:
    with pytest.raises(ValueError, match="max_chars"):
        bound_transcript(make_messages(["hi"]), 100)


def test_messages_that_are_not_objects_do_not_break_the_transcript() -> None:
    chat: list[Any] = ["not a message", None, {"id": "m1", "role": "user", "content": "hi"}]
    assert transcript_lines(bound_transcript(chat)) == [
        '[?] unknown: ""',
        '[?] unknown: ""',
        '[m1] user: "hi"',
    ]


def test_content_that_is_not_a_string_is_rendered_as_text() -> None:
    chat: list[dict[str, Any]] = [
        {"id": "a", "role": "user", "content": [{"type": "text", "text": "parts"}, "more"]},
        {"id": "b", "role": "assistant", "content": None},
        {"id": "c\n]", "role": "sys\ntem", "content": 42},
    ]
    lines = transcript_lines(bound_transcript(chat))
    assert lines == ['[a] user: "parts more"', '[b] assistant: ""', '[c] system: "42"']
