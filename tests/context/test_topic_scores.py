"""What a click keeps: members, close newcomers, the automatic cut, a fixed cut, the union."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from smart_context.context.topic_scores import TopicQuery, member_cut, score_topics, topic_vector
from smart_context.messages import History
from smart_context.vectors.chat import ChatVectors
from smart_context.vectors.keyed import MAX_DERIVED
from smart_context.vectors.ops import normalize_rows
from tests.fakes import make_messages

# Three directions: baking, asyncio, and a mixed one; each message a small wobble around one.
AXES = normalize_rows(np.eye(3, 8, dtype=np.float32) + 0.05)
PLAN = ["bake", "bake", "bake", "async", "async", "async", "bake", "async", "none"]


def chat() -> tuple[ChatVectors, History, np.ndarray]:
    rng = np.random.default_rng(7)
    direction = {"bake": AXES[0], "async": AXES[1], "none": AXES[2]}
    rows = [direction[p] + rng.normal(scale=0.08, size=8) for p in PLAN]
    messages = make_messages([f"{p} {i}" for i, p in enumerate(PLAN)])
    vectors = ChatVectors("m", 8)
    vectors.add_messages(messages, normalize_rows(np.array(rows)))
    history = History(messages)
    located, missing = vectors.locate(history)
    assert missing == []
    return vectors, history, located


TOPICS = [
    TopicQuery("Baking", frozenset({"m0", "m1", "m2"})),  # m6 is new since extraction
    TopicQuery("Asyncio", frozenset({"m3", "m4", "m5"})),  # m7 too
]
LABELS = normalize_rows(np.stack([AXES[0], AXES[1]]))


def grown(vectors: ChatVectors, turn: int, rng: np.random.Generator) -> np.ndarray:
    """The chat grown by a turn of two messages near one direction each: its rows, in order."""
    more = make_messages([f"later {turn} {k}" for k in range(2)], prefix=f"t{turn}-")
    rows = normalize_rows(AXES[rng.integers(0, 3, size=2)] + rng.normal(0, 0.08, (2, 8)))
    vectors.add_messages(more, rows)
    return np.arange(len(vectors), dtype=np.intp)


def kept(result_keep: np.ndarray) -> list[str]:
    return [f"m{i}" for i in np.flatnonzero(result_keep)]


def test_a_click_keeps_its_members_and_the_newcomers_closest_to_it() -> None:
    vectors, _, rows = chat()
    baking = score_topics(vectors, rows, TOPICS, LABELS, ["Baking"], None)
    assert kept(baking.keep) == ["m0", "m1", "m2", "m6"]  # not the asyncio ones, not m8
    asyncio = score_topics(vectors, rows, TOPICS, LABELS, ["Asyncio"], None)
    assert kept(asyncio.keep) == ["m3", "m4", "m5", "m7"]
    assert set(baking.cuts) == {"Baking"} and 0 < baking.cuts["Baking"] <= 1


def test_a_chat_that_grows_turn_by_turn_is_assigned_as_a_fresh_click_assigns_it() -> None:
    """A warm click assigns only the rows a turn added to the closest topic: the same as
    assigning the whole chat with nothing memoised. (The members' cut is kept from the first
    click by design, so the kept messages are compared through the assignment.)"""
    rng = np.random.default_rng(3)
    vectors, _, _ = chat()
    for turn in range(6):
        located = grown(vectors, turn, rng)
        warm = score_topics(vectors, located, TOPICS, LABELS, ["Baking", "Asyncio"], None)
        (memo,) = [v for k, v in vectors.derived.items() if k.startswith("assign")]
        fresh = ChatVectors("m", 8)
        fresh.add(list(vectors.keys), vectors.matrix)
        cold = score_topics(fresh, located, TOPICS, LABELS, ["Baking", "Asyncio"], None)
        (whole,) = [v for k, v in fresh.derived.items() if k.startswith("assign")]
        assert memo[0] == whole[0] == len(vectors)
        assert memo[1].tolist() == whole[1].tolist() and memo[2].tolist() == whole[2].tolist()
        assert np.array_equal(warm.values, cold.values)


@pytest.mark.parametrize(
    ("threshold", "extra", "held"),
    [(None, False, True), (0.3, False, True), (0.3, True, True), (None, True, False)],
)
def test_a_click_carried_to_the_next_turn_keeps_what_the_click_made_whole_keeps(
    monkeypatch: pytest.MonkeyPatch, threshold: float | None, extra: bool, held: bool
) -> None:
    """A click whose cuts hold still (a fixed one, or topics with members) is kept, and the
    next request over its history grown by a turn scores the turn's rows only: what it keeps
    is what the click made over the whole history keeps. A clicked topic without members
    (its cut moves with the chat) is made whole each time, as is a history that changed."""
    import smart_context.context.topic_scores as module

    scored: list[int] = []
    clicked = module._clicked

    def counted(vectors: ChatVectors, rows: np.ndarray, *rest: Any) -> Any:
        scored.append(len(rows))
        return clicked(vectors, rows, *rest)

    monkeypatch.setattr(module, "_clicked", counted)
    topics = [*TOPICS, TopicQuery("Other")] if extra else TOPICS
    labels = np.vstack([LABELS, AXES[2][None, :]]) if extra else LABELS
    selected = ["Baking", "Other"] if extra else ["Baking", "Asyncio"]
    rng = np.random.default_rng(5)
    vectors, _, _ = chat()
    for turn in range(5):
        located = grown(vectors, turn, rng)
        carried = score_topics(vectors, located, topics, labels, selected, threshold)
        assert scored[-1] == (2 if turn and held else len(located))
        for key in [k for k in vectors.derived if k.startswith("click")]:
            del vectors.derived[key]
        whole = score_topics(vectors, located, topics, labels, selected, threshold)
        assert scored[-1] == len(located)
        assert np.array_equal(carried.values, whole.values)
        assert np.array_equal(carried.keep, whole.keep) and carried.cuts == whole.cuts
    swapped = located.copy()
    swapped[[0, 1]] = swapped[[1, 0]]  # an edit: not the history the click was made over
    score_topics(vectors, swapped, topics, labels, selected, threshold)
    assert scored[-1] == len(located)


def test_clicking_both_keeps_the_union() -> None:
    vectors, _, rows = chat()
    both = score_topics(vectors, rows, TOPICS, LABELS, ["Baking", "Asyncio"], None)
    assert kept(both.keep) == [f"m{i}" for i in range(8)]


def test_a_fixed_cut_keeps_members_and_whatever_clears_it() -> None:
    vectors, _, rows = chat()
    strict = score_topics(vectors, rows, TOPICS, LABELS, ["Baking"], 0.99)
    assert kept(strict.keep) == ["m0", "m1", "m2"]  # members stay even below the cut
    loose = score_topics(vectors, rows, TOPICS, LABELS, ["Baking"], 0.0)
    assert len(kept(loose.keep)) == 9


def test_a_label_without_members_is_cut_by_the_chats_spread() -> None:
    vectors, _, rows = chat()
    topics = [*TOPICS, TopicQuery("Other")]
    labels = np.vstack([LABELS, AXES[2][None, :]])
    other = score_topics(vectors, rows, topics, labels, ["Other"], None)
    assert kept(other.keep) == ["m8"]


def test_topic_vector_leans_from_the_members_to_the_label() -> None:
    members = normalize_rows(np.array([[1, 0, 0], [1, 0.2, 0]], dtype=np.float32))
    label = np.array([0, 1, 0], dtype=np.float32)
    vector = topic_vector(label, members)
    assert np.isclose(np.linalg.norm(vector), 1.0) and 0 < vector[1] < vector[0]
    assert topic_vector(label, members[:0]) is label
    members_, others = np.array([0.9, 0.8, 0.5], np.float32), np.array([0.1, 0.2], np.float32)
    assert member_cut(members_, others[:0]) < 0.8
    assert others.max() < member_cut(members_, others) < member_cut(members_, others[:0])


def test_what_clicks_derive_stays_bounded_across_many_extractions() -> None:
    vectors, _, rows = chat()
    for n in range(400):  # every extraction names its topics anew: new members, new keys
        topics = [TopicQuery("Baking", frozenset({"m0", "m1", f"x{n}"})), TOPICS[1]]
        score_topics(vectors, rows, topics, LABELS, ["Baking"], None)
    assert len(vectors.derived) <= MAX_DERIVED
    assert kept(score_topics(vectors, rows, TOPICS, LABELS, ["Baking"], None).keep) == [
        "m0",
        "m1",
        "m2",
        "m6",
    ]
