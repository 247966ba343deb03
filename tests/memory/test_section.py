"""The memory section: direct messages, then memories, within its room; what is left is said."""

from __future__ import annotations

from smart_context.memory.records import DirectMessage, Memory
from smart_context.memory.section import memory_section


def memory(i: int, text: str) -> Memory:
    return Memory(i, text, None, 0.5, "user", 0.0, 0.0)


def test_nothing_stored_is_no_section() -> None:
    assert memory_section((), (), 100).text == ""


def test_direct_messages_come_first_and_what_does_not_fit_is_counted() -> None:
    direct = [DirectMessage(1, "c", "Focus on the plan.", 0.9, "planner", 0.0, None)]
    memories = [memory(2, "Vegan."), memory(3, "x" * 500), memory(4, "Lives in Porto.")]
    section = memory_section(direct, memories, max_tokens=30)
    assert section.direct_ids == (1,) and section.memory_ids == (2, 4)
    assert section.left_out == 1
    text = section.text
    assert text.startswith("# Memory") and text.index("Focus on the plan.") < text.index("Vegan.")
    assert "1 more stored" in text and "from planner" in text


class OneTokenALine:
    """A tokenizer that finds one token in any line, however long."""

    name, exact, key = "one", True, "one"

    def count(self, texts: list[str]) -> list[int]:
        return [1 for _ in texts]


def test_lines_are_counted_by_the_chat_models_counter() -> None:
    memories = [memory(i, "x" * 400) for i in range(5)]
    assert memory_section((), memories, max_tokens=3).memory_ids == ()  # 100 estimated each
    section = memory_section((), memories, max_tokens=3, counter=OneTokenALine())
    assert section.memory_ids == (0, 1, 2) and section.left_out == 2
