"""The context-injection rule (docs/contract.md §6), case by case, on the pure function."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from smart_context.context import topic_filter
from smart_context.context.topic_filter import Selection
from smart_context.context.topic_scores import TopicScores
from smart_context.history_index import HistoryIndex
from smart_context.messages import History
from smart_context.record import included_ids
from tests.fakes import make_messages

HISTORY = make_messages(
    ["asyncio event loop", "use gather", "be concise", "ok", "paris trip", "louvre"]
)


# every case twice: a history read plainly (the command line's) and one read through a chat's
# index, whose ids come with their positions (a request's)
READERS: dict[str, Callable[[list[Any]], History]] = {
    "plain": History,
    "indexed": lambda messages: HistoryIndex().read(messages),
}
_read = History


@pytest.fixture(autouse=True, params=sorted(READERS))
def reader(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys.modules[__name__], "_read", READERS[request.param])


class Applied:
    """The rule's result as the host sees it: the history and the record's dict."""

    def __init__(self, decision: topic_filter.Decision) -> None:
        self.history = decision.history
        self.record = decision.record.as_dict()


def decide(
    messages: list,
    sticky: list,
    active: list[str],
    values: np.ndarray | None,
    threshold: float,
    search_enabled: bool = True,
) -> Applied:
    selection = Selection(tuple(active), threshold, search_enabled)
    scores = None if values is None else TopicScores(values, values >= threshold, {})
    return Applied(topic_filter.decide(_read(messages), sticky, selection, scores))


def scores(*values: float) -> np.ndarray:
    return np.array(values, dtype=np.float32)


def ids(messages: list) -> list[str]:
    return [m["id"] for m in messages]


def test_no_filter_passes_full_history() -> None:
    d = decide(HISTORY, [], [], None, 0.4)
    assert d.history == HISTORY
    assert d.record["mode"] == "full"
    assert d.record["total_messages"] == 6
    assert included_ids(d.record, ids(HISTORY)) == ids(HISTORY)


def test_search_disabled_passes_full_history_even_with_topics() -> None:
    d = decide(HISTORY, [], ["Python"], scores(1, 1, 0, 0, 0, 0), 0.4, search_enabled=False)
    assert d.history == HISTORY and d.record["mode"] == "full"


def test_filter_keeps_messages_at_or_above_threshold() -> None:
    d = decide(HISTORY, [], ["Python Async"], scores(0.8, 0.4, 0.1, 0.0, 0.2, 0.39), 0.4)
    # and the last turn, whatever its topic: the user's message follows it
    assert ids(d.history) == ["m0", "m1", "m4", "m5"]
    assert d.record["mode"] == "filtered"
    assert d.record["scores"] == {"m0": 0.8, "m1": 0.4, "m4": 0.2, "m5": 0.39}
    assert d.record["active_topics"] == ["Python Async"]
    assert included_ids(d.record, ids(HISTORY)) == ["m0", "m1", "m4", "m5"]


def test_fallback_when_nothing_clears_threshold() -> None:
    d = decide(HISTORY, [], ["Cooking"], scores(0.1, 0.2, 0.3, 0.0, 0.1, 0.05), 0.4)
    assert d.history == HISTORY
    assert d.record["mode"] == "fallback"
    assert d.record["best_score"] == 0.3


def test_sticky_message_below_threshold_is_kept() -> None:
    sticky = [HISTORY[2]]
    d = decide(HISTORY, sticky, ["Travel"], scores(0.0, 0.0, 0.05, 0.0, 0.9, 0.7), 0.4)
    assert ids(d.history) == ["m2", "m3", "m4", "m5"]  # the sticky question brings its answer
    assert d.record["sticky_ids"] == ["m2"]
    assert d.record["scores"]["m2"] == 0.05


def test_sticky_outside_host_window_is_put_first_and_order_is_chronological() -> None:
    window = HISTORY[3:]
    sticky = [HISTORY[2]]
    d = decide(window, sticky, ["Travel"], scores(0.0, 0.9, 0.8), 0.4)
    assert ids(d.history) == ["m2", "m4", "m5"]
    full = decide(window, sticky, [], None, 0.4)
    assert ids(full.history) == ["m2", "m3", "m4", "m5"]


def test_two_different_messages_sharing_an_id_are_both_kept() -> None:
    clash = [*HISTORY, {"id": "m0", "role": "user", "content": "a different message"}]
    d = decide(clash, [], [], None, 0.4)
    assert d.history == clash


def test_unhashable_ids_do_not_break_the_rule() -> None:
    odd = [
        {"id": ["x"], "role": "user", "content": "a"},
        {"id": {"y": 1}, "role": "assistant", "content": "b"},
        {"id": ["z"], "role": "user", "content": "c"},
    ]
    d = decide(odd, [], ["T"], scores(0.1, 0.1, 0.9), 0.4)
    # the last turn (b, c) brings b's question
    assert [m["content"] for m in d.history] == ["a", "b", "c"] and d.record["mode"] == "filtered"


def test_the_last_turn_goes_whatever_its_topic() -> None:
    """The settings say the last two messages always go: under a click too (a reply to "and
    the second one?" needs the turn before it)."""
    d = decide(HISTORY, [], ["Python"], scores(0.9, 0.1, 0.1, 0.1, 0.0, 0.0), 0.4)
    assert ids(d.history)[-2:] == ["m4", "m5"] and "m2" not in ids(d.history)
    one = decide(HISTORY[:1], [], ["Paris"], scores(0.0), 0.4)
    assert ids(one.history) == ["m0"] and one.record["mode"] == "fallback"


def test_duplicate_ids_are_sent_once() -> None:
    doubled = [*HISTORY, dict(HISTORY[0])]
    d = decide(doubled, [HISTORY[0]], [], None, 0.4)
    assert ids(d.history) == ids(HISTORY)
    f = decide(doubled, [], ["Python"], scores(0.9, 0, 0, 0, 0, 0, 0.9), 0.4)
    assert ids(f.history) == ["m0", "m1", "m4", "m5"]  # the question brings its answer


class Written(str):
    """A message's text that counts how often it is written out (``repr``)."""

    times = 0

    def __repr__(self) -> str:
        Written.times += 1
        return super().__repr__()


def test_a_repeat_is_found_among_the_messages_sharing_its_id_only() -> None:
    """A long chat holding one repeat compares the contents of the messages with that id, not
    of every message (each written out took 24 ms a request at 10,000 messages)."""
    many = [{**m, "content": Written(m["content"])} for m in make_messages(["x"] * 500)]
    Written.times = 0
    d = decide([*many, dict(many[7]), dict(many[9])], [], [], None, 0.4)
    assert ids(d.history) == ids(many)
    assert Written.times == 4, "the two repeats and their first sayings, nothing else"


def test_record_stays_small_by_listing_the_shorter_side() -> None:
    many = make_messages([f"message {i}" for i in range(1000)])
    values = np.full(1000, 0.9, dtype=np.float32)
    values[4:6] = 0.0  # one turn: a question and its answer
    d = decide(many, [], ["Anything"], values, 0.4)
    assert d.record["excluded_ids"] == ["m4", "m5"] and "included_ids" not in d.record
    assert len(included_ids(d.record, ids(many))) == 998
    full = decide(many, [], [], None, 0.4)
    assert full.record["excluded_ids"] == []


def test_scores_are_rounded_to_three_decimals() -> None:
    d = decide(HISTORY[:1], [], ["X"], scores(0.123456), 0.1)
    assert d.record["scores"] == {"m0": 0.123}


def test_empty_history() -> None:
    d = decide([], [], ["X"], scores(), 0.4)
    assert d.history == [] and d.record["mode"] == "full"


def test_a_click_that_keeps_questions_sends_their_answers_so_turns_alternate() -> None:
    # the topic is close to the two questions only; sent alone they were two user turns in a row
    d = decide(HISTORY, [], ["Python"], scores(0.9, 0.1, 0.8, 0.1, 0.1, 0.1), 0.4)
    assert ids(d.history) == ["m0", "m1", "m2", "m3", "m4", "m5"]
    roles = [m["role"] for m in d.history]
    assert roles == ["user", "assistant"] * 3


def test_what_a_filter_keeps_is_read_by_position_until_it_is_read_whole() -> None:
    sticky = [HISTORY[2]]
    d = decide(HISTORY, sticky, ["Paris"], scores(0.1, 0.1, 0.1, 0.1, 0.8, 0.7), 0.5)
    kept = d.history
    assert isinstance(kept, topic_filter.Picked) and len(kept) == 4
    assert kept[0]["id"] == "m2" and kept[-1]["id"] == "m5"  # a budget's reads
    assert ids(kept[-2:]) == ["m4", "m5"] and ids(kept[1:3]) == ["m3", "m4"]
    assert kept._list is None  # not made into a list by those reads
    assert kept == [HISTORY[i] for i in (2, 3, 4, 5)] and kept != HISTORY
    assert ids(list(kept)) == ["m2", "m3", "m4", "m5"] and kept._list is not None
    # a sticky message older than the history comes first, by position too
    older = {"id": "s0", "role": "user", "content": "always answer in French"}
    d = decide(HISTORY, [older], ["Paris"], scores(0.1, 0.1, 0.1, 0.1, 0.8, 0.7), 0.5)
    assert d.history[0]["id"] == "s0" and ids(d.history) == ["s0", "m4", "m5"]
