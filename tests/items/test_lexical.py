"""Keyword scores: words as BM25 counts them, BM25 on tiny corpora, and the two fusions."""

from __future__ import annotations

import math

import numpy as np
import pytest

from smart_context.items.lexical import LexicalIndex, fuse, reciprocal_rank_fusion, words


def test_identifiers_split_plurals_fold_and_function_words_go() -> None:
    assert words("createIssue create_issue Create-Issue") == ["create", "issue"] * 3
    assert words("List the open issues in my repos") == ["list", "open", "issue", "repo"]
    assert words("class glass bus") == ["class", "glass", "bus"]  # "ss" and short words stay


def test_bm25_of_one_word_in_one_of_three_documents() -> None:
    index = LexicalIndex.build(["slack message", "github issue", "github pull request"])
    scores = index.scores(["slack"])
    idf = math.log1p((3 - 1 + 0.5) / (1 + 0.5))
    lengths = [2, 2, 3]
    norm = 1.2 * (1 - 0.75 + 0.75 * lengths[0] / (sum(lengths) / 3))
    assert scores[0, 0] == pytest.approx(idf * 2.2 / (1 + norm), rel=1e-5)
    assert scores[0, 1:].tolist() == [0.0, 0.0]


def test_a_rare_word_outweighs_a_common_one_and_a_shorter_document_wins_a_tie() -> None:
    index = LexicalIndex.build(["github issue", "github pull request review", "gitlab issue"])
    [scores] = index.scores(["github"])
    assert scores[0] > scores[1] > 0 and scores[2] == 0  # same count, shorter document
    [scores] = index.scores(["gitlab issue"])
    assert scores.argmax() == 2


def test_a_word_counts_once_per_query_and_each_query_is_a_row() -> None:
    index = LexicalIndex.build(["deploy failed", "send email"])
    once, twice, none = index.scores(["deploy", "deploy deploy", "weather tomorrow"])
    assert once.tolist() == twice.tolist()
    assert none.tolist() == [0.0, 0.0]


def test_an_empty_corpus_and_empty_queries() -> None:
    assert LexicalIndex.build([]).scores(["anything"]).shape == (1, 0)
    index = LexicalIndex.build(["", "the and of"])
    assert index.scores(["the"]).tolist() == [[0.0, 0.0]]
    assert index.scores([]).shape == (0, 2)


def test_fuse_weighs_cosine_against_squashed_bm25() -> None:
    dense = np.array([[0.5, 0.5, 0.2]], dtype=np.float32)
    lexical = np.array([[0.0, 4.0, 400.0]], dtype=np.float32)
    fused = fuse(dense, lexical, weight=0.5, saturation=4.0)
    assert fused[0].tolist() == pytest.approx([0.25, 0.5, 0.1 + 0.5 * 400 / 404])
    assert fuse(dense, lexical, weight=0.0) is dense


def test_reciprocal_rank_fusion_rewards_agreement() -> None:
    dense = np.array([[0.9, 0.8, 0.1]], dtype=np.float32)
    lexical = np.array([[0.0, 5.0, 1.0]], dtype=np.float32)
    fused = reciprocal_rank_fusion(dense, lexical, k=1.0)
    # ranks: dense 1, 2, 3; lexical 3, 1, 2
    assert fused[0].tolist() == pytest.approx([1 / 2 + 1 / 4, 1 / 3 + 1 / 2, 1 / 4 + 1 / 3])
    assert fused[0].argmax() == 1
