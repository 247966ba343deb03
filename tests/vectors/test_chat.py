"""A chat's vectors found by message id and content: the right rows, and the per-message path
taken only for what no recent history covers."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from smart_context.messages import History, Message
from smart_context.vectors.chat import ChatVectors
from smart_context.vectors.ops import normalize_rows


class CountingVectors(ChatVectors):
    """The real vectors, noting how many messages each locate looked at one by one."""

    looked: list[int]

    def _locate_each(self, messages: Sequence[Message], start: int) -> tuple[np.ndarray, list[int]]:
        self.looked.append(len(messages) - start)
        return super()._locate_each(messages, start)


def chat(n: int) -> list[dict[str, str]]:
    return [{"id": f"m{i}", "role": "user", "content": f"text {i}"} for i in range(n)]


def vectors_of(messages: list[dict[str, str]]) -> CountingVectors:
    out = CountingVectors("fake", 4)
    out.looked = []
    rng = np.random.default_rng(0)
    out.add_messages(messages, normalize_rows(rng.normal(size=(len(messages), 4))))
    return out


def test_a_whole_and_a_filtered_history_in_turn_are_each_located_from_memory() -> None:
    messages = chat(100)
    vectors = vectors_of(messages)
    whole, part = History(messages), History(messages[::3])
    expected_whole, _ = vectors.locate(whole)
    expected_part, _ = vectors.locate(part)
    vectors.looked.clear()
    for _ in range(3):  # request after request: the filter's history, then the budget's
        assert vectors.locate(History(list(messages)))[0].tolist() == expected_whole.tolist()
        assert vectors.locate(History(messages[::3]))[0].tolist() == expected_part.tolist()
    assert vectors.looked == [0] * 6
    grown = [*messages, {"id": "new", "role": "user", "content": "new"}]
    rows, missing = vectors.locate(History(grown))
    assert missing == [100] and rows[100] == -1 and vectors.looked[-1] == 1


def test_an_edited_message_is_not_found_from_memory() -> None:
    messages = chat(10)
    vectors = vectors_of(messages)
    vectors.locate(History(messages))
    edited = [*messages[:4], {**messages[4], "content": "changed"}, *messages[5:]]
    rows, missing = vectors.locate(History(edited))
    assert missing == [4] and rows[4] == -1 and rows[5] == 5
