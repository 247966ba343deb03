"""The importance score: the parts and their weights, and the default that leaves the
recency curve out (the last messages are sent by the plan's first step anyway)."""

from __future__ import annotations

import numpy as np

from smart_context.budget.importance import SAMPLED, Weights, importance, recency, top_hits
from smart_context.config import Settings


def test_without_recency_weight_old_and_new_messages_rank_by_relevance_alone() -> None:
    relevance = np.array([0.5, 0.2, 0.2, 0.5], dtype=np.float32)
    none = np.zeros(4, dtype=np.float32)
    marked = np.zeros(4, dtype=bool)
    scores = importance(relevance, none, marked, Weights(recency=0.0))
    assert scores[0] == scores[3] and scores[1] == scores[2]
    assert np.allclose(scores, 0.6 * relevance)


def test_a_recency_weight_still_favours_the_newer_of_two_equal_messages() -> None:
    relevance = np.array([0.5, 0.5], dtype=np.float32)
    scores = importance(
        relevance, np.zeros(2, np.float32), np.zeros(2, bool), Weights(recency=0.2, half_life=1)
    )
    assert scores[1] > scores[0]
    assert np.isclose(scores[1] - scores[0], 0.2 * (recency(2, 1)[1] - recency(2, 1)[0]))


def test_entities_and_marks_add_their_weight() -> None:
    scores = importance(
        np.zeros(3, np.float32),
        np.array([0.0, 1.0, 0.0], np.float32),
        np.array([False, False, True]),
        Weights(),
    )
    assert np.allclose(scores, [0.0, 0.15, 0.1])


def test_the_settings_defaults_are_the_weights_defaults() -> None:
    settings, weights = Settings(), Weights()
    assert settings.importance_recency_weight == weights.recency == 0.0
    assert settings.importance_semantic_weight == weights.semantic
    assert settings.importance_entity_weight == weights.entity
    assert settings.importance_user_weight == weights.user


def test_entities_are_found_as_the_pattern_tried_at_every_character_found_them() -> None:
    """The entity pattern tries its kinds only where a word starts; it finds exactly what the
    same kinds tried at every character found, on hand-picked texts and on random ones made of
    the characters that decide (digits, separators, cases, underscores, non-ASCII)."""
    import random
    import re

    from smart_context.budget.importance import _ENTITY, entities

    everywhere = re.compile(
        r"\b\d[\d.,:/-]*\d\b|\b\d+\b"
        r"|\b\w+(?:[._]\w+)+\b"
        r"|\b[a-z]+[A-Z]\w*\b"
        r"|(?<=[a-z,;:] )[A-Z][a-zA-Z]+"
    )
    said = (
        "Ana moved 10.4.2.17 to parse_config in app.main; the Jeep's getValue at 3:15, 2024-01-05"
    )
    found = {"10.4.2.17", "parse_config", "app.main", "jeep", "getvalue", "3:15", "2024-01-05"}
    assert entities(said) == found  # "Ana" starts the sentence: not taken for a name
    rng = random.Random(7)
    characters = "aZbC_.,:/-90 ;Q\u00e9\u4e2d\n'"
    texts = ["".join(rng.choices(characters, k=rng.randint(0, 50))) for _ in range(20_000)]
    assert [_ENTITY.findall(t) for t in texts] == [everywhere.findall(t) for t in texts]


def test_the_top_hits_are_the_best_scores_and_of_equal_ones_the_earlier() -> None:
    """What ranking every score at or above the floor gives, by score then position, whether
    the history is short (every score ranked) or long (ranked past a sampled cut), with the
    ties of duplicate messages at the cut."""

    def ranked(scores: np.ndarray, limit: int, floor: float) -> np.ndarray:
        at = np.flatnonzero(scores >= floor)
        return at[np.lexsort((at, -scores[at]))][:limit]

    rng = np.random.default_rng(9)
    sampled = 0
    for trial in range(600):
        n, limit = int(rng.integers(0, 6000)), int(rng.integers(0, 150))
        if trial % 2:
            scores = (rng.standard_normal(n) * 0.2).astype(np.float32)
        else:  # few distinct values: ties everywhere
            scores = (rng.integers(0, 5, n) / 4).astype(np.float32)
        floor = float(rng.choice([1e-6, 0.0, 0.3, -1.0]))
        assert np.array_equal(top_hits(scores, limit, floor), ranked(scores, limit, floor))
        sampled += limit > 0 and n // (SAMPLED * limit) > 1
    assert sampled > 100
