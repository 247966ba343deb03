"""Context expansion: the relationship graph of chunk vectors, and the passes over it."""

from __future__ import annotations

import numpy as np
import pytest

from smart_context.items.expand import Expanded, expand, relationship_graph
from smart_context.items.select import Limits


def unit(rows: list[list[float]]) -> np.ndarray:
    m = np.asarray(rows, dtype=np.float32)
    return m / np.linalg.norm(m, axis=1, keepdims=True)


def chain_graph(links: dict[tuple[int, int], float], n: int) -> np.ndarray:
    """A symmetric graph with the given links and -1 elsewhere."""
    g = np.full((n, n), -1.0, dtype=np.float32)
    for (a, b), score in links.items():
        g[a, b] = g[b, a] = score
    return g


def limits(depth: int, threshold: float = 0.75, top_n: int = 3) -> Limits:
    return Limits(expansion_depth=depth, expansion_threshold=threshold, expansion_top_n=top_n)


EVERY = np.ones(5, dtype=np.bool_)


def test_an_items_link_is_its_best_chunk_pair_and_never_itself() -> None:
    index = unit([[1, 0, 0], [0, 1, 0], [0.8, 0.6, 0], [0, 0, 1]])
    owner = np.array([0, 1, 1, 2])  # item 0: x; item 1: y and (x+y); item 2: z; item 3: none
    graph = relationship_graph(index, owner, 4)
    assert graph[0, 1] == pytest.approx(0.8) and graph[1, 0] == pytest.approx(0.8)
    assert graph[0, 2] == pytest.approx(0.0) and graph[1, 2] == pytest.approx(0.0)
    assert np.diag(graph).tolist() == [-1.0] * 4
    assert graph[3].tolist() == [-1.0] * 4 and graph[:, 3].tolist() == [-1.0] * 4


def test_the_graph_is_the_same_whatever_the_chunk_order_and_the_block_size() -> None:
    rng = np.random.default_rng(7)
    index = rng.standard_normal((60, 16)).astype(np.float32)
    index /= np.linalg.norm(index, axis=1, keepdims=True)
    owner = rng.integers(0, 12, 60)
    sims = index @ index.T
    brute = np.full((13, 13), -1.0, dtype=np.float32)  # item 12 has no chunks
    for a in range(12):
        for b in range(12):
            if a != b and (owner == a).any() and (owner == b).any():
                brute[a, b] = sims[np.ix_(owner == a, owner == b)].max()
    for block in (1, 5, 17, 1024):
        assert np.allclose(relationship_graph(index, owner, 13, block=block), brute, atol=1e-6)


def test_no_chunks_no_links() -> None:
    empty = np.zeros((0, 3), dtype=np.float32)
    assert relationship_graph(empty, np.zeros(0, dtype=np.intp), 2).tolist() == [[-1, -1]] * 2


def test_depth_zero_is_off() -> None:
    graph = chain_graph({(0, 1): 0.9}, 5)
    assert expand(graph, [0], EVERY, limits(0)) == []


def test_depth_one_adds_the_neighbours_of_what_was_found_and_depth_two_theirs() -> None:
    graph = chain_graph({(0, 1): 0.9, (1, 2): 0.8, (2, 3): 0.95}, 5)
    assert expand(graph, [0], EVERY, limits(1)) == [Expanded(1, pytest.approx(0.9), 0, 1)]
    two = expand(graph, [0], EVERY, limits(2))
    assert [(e.item, e.via, e.depth) for e in two] == [(1, 0, 1), (2, 1, 2)]
    assert [e.item for e in expand(graph, [0], EVERY, limits(5))] == [1, 2, 3]


def test_a_link_below_the_threshold_is_not_followed() -> None:
    graph = chain_graph({(0, 1): 0.74, (0, 2): 0.75}, 5)
    assert [e.item for e in expand(graph, [0], EVERY, limits(3))] == [2]
    assert [e.item for e in expand(graph, [0], EVERY, limits(3, threshold=0.7))] == [2, 1]


def test_top_n_per_pass_keeps_the_best_links_of_any_found_item() -> None:
    graph = chain_graph({(0, 2): 0.8, (0, 3): 0.9, (1, 3): 0.95, (1, 4): 0.85}, 5)
    one = expand(graph, [0, 1], EVERY, limits(1, top_n=2))
    assert [(e.item, e.via) for e in one] == [(3, 1), (4, 1)]
    assert expand(graph, [0, 1], EVERY, limits(1, top_n=0)) == []


def test_a_cycle_ends_the_walk_and_nothing_is_added_twice() -> None:
    graph = chain_graph({(0, 1): 0.9, (1, 2): 0.9, (2, 0): 0.9, (2, 3): 0.8}, 5)
    added = expand(graph, [0], EVERY, limits(10, top_n=1))
    assert [e.item for e in added] == [1, 2, 3]


def test_only_candidates_are_added_and_found_items_are_not_added_again() -> None:
    graph = chain_graph({(0, 1): 0.9, (0, 2): 0.85, (1, 2): 0.99}, 5)
    candidates = np.array([True, False, True, True, True])
    assert [e.item for e in expand(graph, [0], candidates, limits(2))] == [2]
    assert [e.item for e in expand(graph, [0, 2], EVERY, limits(1))] == [1]


def test_nothing_found_nothing_expanded() -> None:
    graph = chain_graph({(0, 1): 0.9}, 5)
    assert expand(graph, [], EVERY, limits(2)) == []
