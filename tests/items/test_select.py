"""Agent selection: topK chunks grouped per item, topN, includeScore, and every sentence heard."""

from __future__ import annotations

import numpy as np

from smart_context.items.select import Limits, item_scores, select


def test_an_item_scores_its_best_chunk_for_each_sentence() -> None:
    scores = np.array([[0.1, 0.9, 0.2], [0.5, 0.1, 0.3]], dtype=np.float32)
    owner = np.array([0, 0, 2])
    per_item = item_scores(scores, owner, 3)
    assert per_item.tolist() == [
        [np.float32(0.9), -1.0, np.float32(0.2)],
        [0.5, -1.0, np.float32(0.3)],
    ]


def test_sorted_and_shuffled_owners_give_the_same_item_scores() -> None:
    rng = np.random.default_rng(7)
    owner = np.sort(rng.integers(0, 40, size=300))  # some items have no chunk
    scores = rng.random((3, 300), dtype=np.float32)
    order = rng.permutation(300)
    fast = item_scores(scores, owner, 45)
    assert np.array_equal(fast, item_scores(scores[:, order], owner[order], 45))
    assert (fast[:, np.setdiff1d(np.arange(45), owner)] == -1).all()


def test_top_n_of_the_top_k_chunks_and_everything_above_include_score() -> None:
    scores = np.array([[0.9, 0.8, 0.75, 0.4, 0.2]], dtype=np.float32)
    owner = np.arange(5)
    chosen = select(scores, owner, 5, Limits(top_k=3, top_n=2, include_score=0.7))
    assert [c.item for c in chosen] == [0, 1, 2]  # top 2, and item 2 by include_score
    assert select(scores, owner, 5, Limits(top_k=1, top_n=5, include_score=0.95))[0].item == 0


def test_each_sentence_of_a_request_brings_its_own_best_item() -> None:
    # sentence 0 is about issues (three trackers score high); sentence 1 about Slack
    scores = np.array([[0.80, 0.78, 0.77, 0.20], [0.10, 0.12, 0.11, 0.55]], dtype=np.float32)
    owner = np.arange(4)
    plain = select(scores[:1].repeat(1, axis=0), owner, 4, Limits(top_k=4, top_n=3, per_query=1))
    assert 3 not in [c.item for c in plain]
    chosen = select(scores, owner, 4, Limits(top_k=4, top_n=3, include_score=0.9, per_query=1))
    assert 3 in [c.item for c in chosen]
    weak = select(
        scores, owner, 4, Limits(top_k=4, top_n=3, include_score=0.9, per_query=1, floor=0.6)
    )
    assert 3 not in [c.item for c in weak]  # too far from its sentence to be worth a place


def test_nothing_to_choose_from_chooses_nothing() -> None:
    empty = np.zeros((1, 0), dtype=np.float32)
    assert select(empty, np.zeros(0, dtype=np.intp), 0, Limits()) == []


def test_top_n_does_not_fill_up_with_items_far_below_the_best() -> None:
    # one item matches well, the others barely: topN 5 must not add the stragglers
    scores = np.array([[0.6, 0.35, 0.1, 0.04]], dtype=np.float32)
    owner = np.arange(4)
    chosen = select(scores, owner, 4, Limits(top_n=5, include_score=2.0))
    assert [c.item for c in chosen] == [0, 1]
    everything = select(
        scores, owner, 4, Limits(top_n=5, include_score=2.0, relative_floor=0, absolute_floor=0)
    )
    assert len(everything) == 4
    unrelated = np.array([[-0.2, -0.1]], dtype=np.float32)
    assert select(unrelated, np.arange(2), 2, Limits()) == []


def test_a_message_that_matches_nothing_adds_nothing() -> None:
    # "hello" against the example vault: every item between 0.01 and 0.14 (fused scores), the
    # best of them far from related; the relative floor alone would let the first four in
    hello = np.array([[0.14, 0.08, 0.07, 0.03, 0.01]], dtype=np.float32)
    owner = np.arange(5)
    assert select(hello, owner, 5, Limits()) == []
    two_sentences = np.vstack([hello, hello[:, ::-1]])  # each sentence's own best: none close
    assert select(two_sentences, owner, 5, Limits(per_query=1, floor=0.0)) == []  # nor per sentence
    # a message that does match keeps its item, and still not the stragglers
    dough = np.array([[0.55, 0.08, 0.07, 0.03, 0.25]], dtype=np.float32)
    assert [c.item for c in select(dough, owner, 5, Limits())] == [0, 4]
    assert [c.item for c in select(dough, owner, 5, Limits(absolute_floor=0.3))] == [0]


def test_an_item_far_below_the_best_is_never_added() -> None:
    scores = np.array([[0.9, 0.5, 0.35, 0.3]], dtype=np.float32)
    chosen = select(scores, np.arange(4), 4, Limits(top_n=5, include_score=2.0))
    assert [c.item for c in chosen] == [0, 1]  # 0.35 < 0.4 x 0.9, though over the floor


def test_an_item_over_include_score_still_needs_the_absolute_floor() -> None:
    # the vault's notes set the absolute floor to their knowledge_min_score, which may sit above
    # include_score: a close item goes only when it clears both
    scores = np.array([[0.72, 0.6]], dtype=np.float32)
    limits = Limits(top_n=1, include_score=0.7, absolute_floor=0.75)
    assert select(scores, np.arange(2), 2, limits) == []
    assert [
        c.item for c in select(scores, np.arange(2), 2, Limits(top_n=1, include_score=0.7))
    ] == [0]
