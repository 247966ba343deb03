"""Ward's clustering: the same tree as the textbook algorithm, cuts that keep copies
together, and long chats clustered on spaced rows."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from smart_context.topics.offline import ward
from smart_context.vectors.ops import normalize_rows


def textbook_ward(points: np.ndarray, k: int) -> list[frozenset[int]]:
    """Merge, again and again, the two groups whose union adds least to the sum of squares."""
    groups = [[i] for i in range(len(points))]

    def cost(a: list[int], b: list[int]) -> float:
        ca, cb = points[a].mean(axis=0), points[b].mean(axis=0)
        return len(a) * len(b) / (len(a) + len(b)) * float(((ca - cb) ** 2).sum())

    while len(groups) > k:
        i, j = min(
            itertools.combinations(range(len(groups)), 2),
            key=lambda p: cost(*map(groups.__getitem__, p)),
        )
        groups[i] += groups.pop(j)
    return [frozenset(g) for g in groups]


def partition(labels: np.ndarray) -> set[frozenset[int]]:
    return {frozenset(np.flatnonzero(labels == c).tolist()) for c in set(labels.tolist())}


@pytest.mark.parametrize("seed", range(5))
def test_every_cut_is_the_textbook_clustering(seed: int) -> None:
    points = normalize_rows(np.random.default_rng(seed).normal(size=(24, 6)).astype(np.float32))
    tree = ward.ward_tree(points)
    assert tree.shape == (23, 3) and np.all(np.diff(tree[:, 2]) >= 0)
    in_one_pass = ward.cuts(tree, len(points), range(8, 0, -1))
    for k in range(1, 9):
        labels = ward.cut(tree, len(points), k)
        assert np.array_equal(in_one_pass[k], labels)
        assert partition(labels) == set(textbook_ward(points.astype(np.float64), k))
        assert labels[0] == 0 and set(labels.tolist()) == set(range(k))  # numbered by first row


def test_copies_of_one_point_are_never_split() -> None:
    points = normalize_rows(np.array([[1, 0, 0]] * 6 + [[0, 1, 0]] * 3, dtype=np.float32))
    tree = ward.ward_tree(points)
    assert partition(ward.cut(tree, 9, 5)) == {frozenset(range(6)), frozenset(range(6, 9))}
    assert ward.cut(ward.ward_tree(points[:6]), 6, 3).tolist() == [0] * 6


def test_no_rows_or_one_row() -> None:
    assert ward.ward_tree(np.zeros((0, 4), dtype=np.float32)).shape == (0, 3)
    one = ward.ward_tree(np.ones((1, 4), dtype=np.float32))
    assert ward.cut(one, 1, 3).tolist() == [0]


def test_a_long_chat_is_clustered_on_spaced_rows_and_the_rest_joins_the_nearest_group() -> None:
    rng = np.random.default_rng(7)
    n = 60
    centres = np.eye(8, dtype=np.float32)[:3]
    truth = np.arange(n) % 3  # interleaved, as subjects are in a chat
    points = normalize_rows(centres[truth] + 0.2 * rng.normal(size=(n, 8)).astype(np.float32))
    rows = ward.spaced_rows(n, limit=20)
    assert len(rows) == 20 and rows[0] == 0 and rows[-1] == n - 1
    assert np.array_equal(ward.spaced_rows(15, limit=20), np.arange(15))
    labels = ward.nearest_centroid(points, rows, ward.cut(ward.ward_tree(points[rows]), 20, 3))
    assert partition(labels) == partition(truth)
