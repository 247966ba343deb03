"""Claude's cache marks on a rebuilt request: at the end of the leading system messages and of
the kept history, never on what changes per message."""

from __future__ import annotations

from smart_context_hosts.proxy.breakpoints import MARK, with_breakpoints


def marked(message: dict) -> bool:  # type: ignore[type-arg]
    content = message["content"]
    return isinstance(content, list) and content[-1].get("cache_control") == MARK


def test_the_marks_close_the_stable_system_part_and_the_kept_history() -> None:
    messages = [
        {"role": "system", "content": "You are helpful."},
        {"role": "system", "content": "# Rules to follow ..."},
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": [{"type": "text", "text": "Hello"}, {"type": "x"}]},
        {"role": "system", "content": "recalled for this message"},
        {"role": "user", "content": "And now?"},
        {"role": "tool", "content": "a tool round after it"},
    ]
    out = with_breakpoints(messages, 5)
    assert [marked(m) if isinstance(m["content"], list) else False for m in out] == [
        False,
        True,
        False,
        False,
        False,
        False,
        False,
    ]
    assert out[1]["content"][0]["text"] == "# Rules to follow ..."
    assert out[3]["content"][0] == {"type": "text", "text": "Hello", "cache_control": MARK}
    assert messages[1]["content"] == "# Rules to follow ..."  # the caller's copies untouched
    assert out[4] is messages[4] and out[5] is messages[5]


def test_a_request_without_system_messages_or_text_marks_what_it_can() -> None:
    messages = [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "1"}]},
        {"role": "user", "content": "Go on"},
    ]
    out = with_breakpoints(messages, 2)
    assert out == messages  # no leading system message; the last kept one has no text
    assert with_breakpoints([{"role": "user", "content": "Hi"}], 0) == [
        {"role": "user", "content": "Hi"}
    ]
