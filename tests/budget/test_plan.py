"""The budget's pure choice: what fits, in which order, and never over."""

from __future__ import annotations

import numpy as np

from smart_context.budget.plan import (
    IMPORTANT,
    LEFT_OUT,
    PINNED,
    RECENT,
    RELEVANT,
    TURN,
    WHOLE,
    Budget,
    Inputs,
    Span,
    choose_summaries,
    plan,
)
from smart_context.turns import ASSISTANT, USER, partners


def inputs(n: int, tokens: int = 10, **overrides: object) -> Inputs:
    """``n`` messages taking turns, user first; the hits' partners as the budget finds them
    (``hit_partners`` overrides them)."""
    codes = np.array([USER if i % 2 == 0 else ASSISTANT for i in range(n)], dtype=np.int8)
    values: dict[str, object] = {
        "tokens": np.full(n, tokens, dtype=np.intp),
        "pinned": np.zeros(n, dtype=bool),
        "relevance": np.zeros(n, dtype=np.float32),
        "importance": np.zeros(n, dtype=np.float32),
        "hits": np.zeros(0, dtype=np.intp),
    }
    values.update(overrides)
    if "hit_partners" not in values:
        values["hit_partners"] = partners(codes, np.asarray(values["hits"], dtype=np.intp))
    return Inputs(**values)  # type: ignore[arg-type]


def alone(hits: np.ndarray) -> np.ndarray:
    """Partners for ``hits`` that have none."""
    return np.full(len(hits), -1, dtype=np.intp)


def test_a_history_that_fits_is_sent_whole() -> None:
    chosen = plan(inputs(20), [], Budget(room=200))
    assert chosen.whole and (chosen.why == WHOLE).all() and chosen.message_tokens == 200


def test_the_last_messages_come_first_then_pinned_then_relevant_with_their_turn() -> None:
    pinned = np.zeros(100, dtype=bool)
    pinned[3] = True
    hits = np.array([41, 60], dtype=np.intp)
    full = Budget(room=145, recent=10, recent_share=1.0, full_room=145)
    chosen = plan(inputs(100, pinned=pinned, hits=hits), [], full)
    assert (chosen.why[90:] == RECENT).all()
    assert chosen.why[3] == PINNED
    # 41 is an answer: its question (40) comes with it; 60's turn does not fit, so 60 does
    # not go alone (the importance fill takes the room left)
    assert chosen.why[41] == RELEVANT and chosen.why[40] == TURN
    assert chosen.why[60] == LEFT_OUT and chosen.why[61] == LEFT_OUT
    assert chosen.message_tokens == 140


def test_a_small_room_sends_the_last_turn_and_spends_the_rest_on_relevance() -> None:
    hits = np.arange(10, 90, 10, dtype=np.intp)
    strict = {"importance_threshold": 0.5}  # nothing fills the room by importance
    # hits without partners: each costs itself
    chosen = plan(
        inputs(100, hits=hits, hit_partners=alone(hits)), [], Budget(room=100, recent=10, **strict)
    )
    assert (chosen.why[98:] == RECENT).all()  # the last turn
    assert (chosen.why[90:98] == LEFT_OUT).all()  # the rest of the last ten gave way
    assert (chosen.why[hits] == RELEVANT).all()
    # a room as large as full_room gives the last ten all the share they need
    chosen = plan(inputs(100, hits=hits), [], Budget(room=200, recent=10, full_room=200))
    assert (chosen.why[90:] == RECENT).all()


def test_the_recent_run_ends_at_the_first_message_past_its_share() -> None:
    tokens = np.full(20, 10, dtype=np.intp)
    tokens[15] = 600
    budget = Budget(room=700, recent=10, full_room=700, importance_threshold=0.5)
    chosen = plan(inputs(20, tokens=tokens), [], budget)
    assert np.flatnonzero(chosen.why == RECENT).tolist() == [16, 17, 18, 19]
    assert (chosen.why[:16] == LEFT_OUT).all()  # nothing older while a newer one is left out


def test_a_hit_goes_with_its_whole_turn_or_not_at_all() -> None:
    tokens = np.full(100, 10, dtype=np.intp)
    tokens[61] = 100  # 60's answer is long
    hits = np.array([41, 60, 70], dtype=np.intp)
    budget = Budget(room=45, recent=0, importance_threshold=0.5)
    chosen = plan(inputs(100, tokens=tokens, hits=hits), [], budget)
    assert chosen.why[41] == RELEVANT and chosen.why[40] == TURN
    # 60 is not sent without its answer, and its turn not fitting leaves the room to 70's
    assert chosen.why[60] == LEFT_OUT and chosen.why[61] == LEFT_OUT
    assert chosen.why[70] == RELEVANT and chosen.why[71] == TURN


def test_a_hit_goes_with_the_partner_given_for_it() -> None:
    # a run: 6 asks, 7 adds to it, 8 answers; 6's partner is the answer, not the next message
    given = np.array([8], dtype=np.intp)
    hits = np.array([6], dtype=np.intp)
    strict = {"recent": 0, "importance_threshold": 0.5}
    chosen = plan(inputs(100, hits=hits, hit_partners=given), [], Budget(room=15, **strict))
    assert not chosen.keep.any()
    chosen = plan(inputs(100, hits=hits, hit_partners=given), [], Budget(room=20, **strict))
    assert chosen.why[6] == RELEVANT and chosen.why[8] == TURN and chosen.why[7] == LEFT_OUT


def test_of_two_equal_hits_the_one_whose_turn_is_relevant_too_goes_first() -> None:
    relevance = np.zeros(100, dtype=np.float32)
    relevance[[20, 30, 31]] = [0.5, 0.5, 0.4]
    hits = np.array([20, 30, 31], dtype=np.intp)
    budget = Budget(room=20, recent=0, importance_threshold=0.5)
    chosen = plan(inputs(100, relevance=relevance, hits=hits), [], budget)
    assert chosen.why[30] == RELEVANT and chosen.why[31] == TURN
    assert chosen.why[20] == LEFT_OUT


def test_a_small_room_keeps_nothing_for_summaries_before_the_search() -> None:
    hits = np.arange(10, 90, 10, dtype=np.intp)
    budget = Budget(room=100, recent=2, importance_threshold=0.5)
    chosen = plan(
        inputs(100, hits=hits, hit_partners=alone(hits)), leaf_tree(10, tokens=10), budget
    )
    assert (chosen.why[hits] == RELEVANT).all() and chosen.summaries == []
    # at a full room the summaries' share is kept while the search fills the rest
    budget = Budget(room=100, recent=2, importance_threshold=0.5, full_room=100)
    chosen = plan(
        inputs(100, hits=hits, hit_partners=alone(hits)), leaf_tree(10, tokens=10), budget
    )
    assert chosen.summaries and chosen.why[80] == LEFT_OUT


def test_never_over_the_room_whatever_the_sizes() -> None:
    rng = np.random.default_rng(7)
    for _ in range(200):
        n = int(rng.integers(1, 300))
        tokens = rng.integers(1, 400, n).astype(np.intp)
        room = int(rng.integers(0, 5000))
        importance = rng.random(n).astype(np.float32)
        hits = rng.permutation(n)[: int(rng.integers(0, 20))].astype(np.intp)
        spans = [Span(0, min(n, 10), 1, int(rng.integers(1, 300)))]
        pinned = rng.random(n) < 0.05
        relevance = np.zeros(n, dtype=np.float32)
        chosen = plan(
            Inputs(tokens, pinned, relevance, importance, hits, alone(hits)),
            spans,
            Budget(room=room, recent=int(rng.integers(0, 20))),
        )
        assert chosen.message_tokens + chosen.summary_tokens <= max(room, 0) or chosen.whole
        assert chosen.message_tokens == int(tokens[chosen.keep].sum())


def test_the_remaining_room_goes_by_importance_above_the_threshold() -> None:
    importance = np.zeros(50, dtype=np.float32)
    importance[[5, 7, 9]] = [0.9, 0.2, 0.5]
    chosen = plan(
        inputs(50, importance=importance),
        [],
        Budget(room=120, recent=10, importance_threshold=0.3),
    )
    assert chosen.why[5] == IMPORTANT and chosen.why[9] == IMPORTANT
    assert chosen.why[7] == LEFT_OUT  # under the threshold, though room was left


def test_the_fill_sorts_only_what_could_be_taken_and_takes_what_a_full_sort_would() -> None:
    from smart_context.budget.plan import SCAN_AFTER_FULL, _Filler

    def full_sort(tokens: np.ndarray, scores: np.ndarray, room: int) -> np.ndarray:
        why = np.zeros(len(tokens), dtype=np.int8)
        used = 0
        order = np.argsort(-scores, kind="stable")
        spent = np.cumsum(tokens[order])
        fits = int(np.searchsorted(spent, room, side="right"))
        why[order[:fits]] = IMPORTANT
        used = int(spent[fits - 1]) if fits else 0
        for i in order[fits : fits + SCAN_AFTER_FULL].tolist():
            if used + int(tokens[i]) <= room:
                used += int(tokens[i])
                why[i] = IMPORTANT
        return why

    rng = np.random.default_rng(11)
    partial = 0  # runs where only part of the candidates was sorted
    for _ in range(300):
        n = int(rng.integers(1, 3000))
        cheapest = int(rng.integers(1, 40))
        tokens = rng.integers(cheapest, cheapest + 60, n).astype(np.intp)
        # few distinct scores: ties at every cut
        scores = (rng.integers(0, int(rng.integers(1, 8)), n) / 7).astype(np.float32)
        room = int(rng.integers(0, 4000))
        filler = _Filler(tokens, np.zeros(n, dtype=np.int8), room)
        filler.fill(scores, 0.0)
        assert np.array_equal(filler.why, full_sort(tokens, scores, room))
        assert filler.used == int(tokens[filler.why == IMPORTANT].sum()) <= room
        partial += room // int(tokens.min()) + SCAN_AFTER_FULL + 1 < n
    assert partial > 50


def test_the_turns_are_taken_as_one_at_a_time_would_take_them() -> None:
    from smart_context.budget.plan import _Filler

    def one_at_a_time(filler: _Filler, hits: np.ndarray, mates: np.ndarray) -> None:
        for i, j in zip(hits.tolist(), mates.tolist(), strict=True):
            if filler.why[i] != LEFT_OUT:
                continue
            brings = j >= 0 and filler.why[j] == LEFT_OUT
            cost = int(filler.tokens[i]) + (int(filler.tokens[j]) if brings else 0)
            if filler.used + cost <= filler.room:
                filler.used += cost
                filler.why[i] = RELEVANT
                if brings:
                    filler.why[j] = TURN

    rng = np.random.default_rng(5)
    for _ in range(300):
        n = int(rng.integers(1, 200))
        tokens = rng.integers(1, 100, n).astype(np.intp)
        why = np.where(rng.random(n) < 0.1, RECENT, LEFT_OUT).astype(np.int8)
        hits = rng.permutation(n)[: int(rng.integers(0, 40))].astype(np.intp)
        # partners that are other hits, taken messages, none, or any other message
        mates = np.where(rng.random(len(hits)) < 0.3, -1, rng.integers(0, n, len(hits)))
        mates = np.where(mates == hits, -1, mates).astype(np.intp)
        room, used = int(rng.integers(0, 3000)), int(rng.integers(0, 200))
        batched = _Filler(tokens, why.copy(), room)
        single = _Filler(tokens, why.copy(), room)
        batched.used = single.used = used
        batched.take_turns(hits, mates)
        one_at_a_time(single, hits, mates)
        assert np.array_equal(batched.why, single.why)
        assert batched.used == single.used


def leaf_tree(n_leaves: int, tokens: int = 20) -> list[Span]:
    """Leaves of 10 messages and parents of 5 leaves over them."""
    spans = [Span(10 * i, 10 * i + 10, 1, tokens) for i in range(n_leaves)]
    for p in range(n_leaves // 5):
        children = tuple(range(5 * p, 5 * p + 5))
        spans.append(Span(50 * p, 50 * p + 50, 2, tokens, children))
    return spans


def test_summaries_start_coarse_and_get_finer_near_the_present() -> None:
    spans = leaf_tree(10)  # 100 messages, 2 parents
    left_out = np.ones(100, dtype=bool)
    relevance = np.zeros(100, dtype=np.float32)
    budget = Budget(room=0, detailed_age=50, high_level_age=100)
    # only the two parents fit
    assert choose_summaries(spans, left_out, 40, relevance, budget) == [10, 11]
    # room for the newer parent's leaves: it splits, the older does not (older than 50)
    chosen = choose_summaries(spans, left_out, 20 + 5 * 20, relevance, budget)
    assert chosen == [10, 5, 6, 7, 8, 9]


def test_summaries_skip_stretches_that_are_sent_and_drop_the_oldest_when_short() -> None:
    spans = leaf_tree(3)  # three leaves, no parent
    left_out = np.ones(30, dtype=bool)
    left_out[10:20] = False  # the middle leaf is sent whole
    relevance = np.zeros(30, dtype=np.float32)
    assert choose_summaries(spans, left_out, 100, relevance, Budget(room=0)) == [0, 2]
    assert choose_summaries(spans, left_out, 25, relevance, Budget(room=0)) == [2]


def test_summaries_use_the_room_kept_for_them_and_the_history_what_is_left() -> None:
    spans = leaf_tree(10, tokens=10)
    chosen = plan(inputs(100), spans, Budget(room=300, recent=10, summary_share=0.2))
    assert chosen.summary_tokens > 0 and chosen.summaries
    assert chosen.message_tokens + chosen.summary_tokens <= 300


def test_hits_without_their_partners_are_refused_plainly() -> None:
    import pytest

    hits = np.array([4, 2], dtype=np.intp)
    lacking = inputs(10, hits=hits, hit_partners=np.array([5], dtype=np.intp))
    with pytest.raises(ValueError, match="2 hits but 1 partners"):
        plan(lacking, [], Budget(room=50, recent=2))
