"""Exact int8 scores: NumKong's kernel and the numpy path give the same integers, so the same
scores on every CPU."""

from __future__ import annotations

import numpy as np
import pytest

from smart_context.vectors import int8
from smart_context.vectors.codec import decode, encode
from smart_context.vectors.keyed import KeyedMatrix
from smart_context.vectors.ops import normalize_rows

KERNELS = ["numkong", "numpy"]


def unit_rows(n: int, dim: int, seed: int) -> np.ndarray:
    return normalize_rows(np.random.default_rng(seed).standard_normal((n, dim)).astype(np.float32))


@pytest.fixture(params=KERNELS)
def kernel(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "numkong":
        pytest.importorskip("numkong")
    monkeypatch.setattr(int8, "KERNEL", request.param)
    return str(request.param)


@pytest.mark.parametrize("dim", [384, 1536])  # the local model's, an API model's
def test_the_dots_are_the_exact_integer_sums(kernel: str, dim: int) -> None:
    rng = np.random.default_rng(dim)
    codes = rng.integers(-127, 128, (20_000, dim), dtype=np.int8)
    codes[0] = 127  # the largest sums there are
    queries = rng.integers(-127, 128, (3, dim), dtype=np.int8)
    queries[0] = 127
    exact = codes.astype(np.int64) @ queries.astype(np.int64).T
    got = int8.dots(codes, queries)
    assert got.dtype == np.float32 and got.shape == (20_000, 3)
    # float32 holds every sum exactly up to 1,040 dimensions; past it, rounded once
    assert np.array_equal(got, exact.astype(np.float32))
    if dim <= int8.FLOAT32_EXACT_DIM:
        assert np.array_equal(got.astype(np.int64), exact)


def test_both_kernels_give_the_same_scores_bit_for_bit(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("numkong")
    scales, codes = encode(unit_rows(10_000, 384, 1))
    queries = unit_rows(2, 384, 2)
    monkeypatch.setattr(int8, "KERNEL", "numkong")
    simd = int8.cosines(codes, scales, queries)
    monkeypatch.setattr(int8, "KERNEL", "numpy")
    assert np.array_equal(simd, int8.cosines(codes, scales, queries))


def test_cosines_are_within_a_hundredth_of_the_float_products(kernel: str) -> None:
    rows, queries = unit_rows(5_000, 384, 3), unit_rows(4, 384, 4)
    scales, codes = encode(rows)
    got = int8.cosines(codes, scales, queries)
    assert np.abs(got - rows @ queries.T).max() < 0.01
    # a row scores itself (as stored) at about 1
    assert np.allclose(
        int8.cosines(codes[:3], scales[:3], decode(scales[:3], codes[:3])).diagonal(), 1, atol=0.01
    )


def test_no_rows_or_no_queries_score_nothing_and_a_wrong_width_says_so(kernel: str) -> None:
    scales, codes = encode(unit_rows(4, 8, 5))
    assert int8.cosines(codes[:0], scales[:0], unit_rows(2, 8, 6)).shape == (0, 2)
    assert int8.dots(codes, np.zeros((0, 8), dtype=np.int8)).shape == (4, 0)
    with pytest.raises(ValueError, match="cannot score"):
        int8.dots(codes, np.zeros((1, 9), dtype=np.int8))


def test_a_matrix_keeps_int8_rows_a_quarter_of_float32(kernel: str) -> None:
    rows = unit_rows(1_000, 384, 7)
    matrix = KeyedMatrix("m", 384)
    matrix.add([f"k{i}" for i in range(1_000)], rows)
    scales, codes = matrix.stored
    assert codes.dtype == np.int8 and scales.dtype == np.float32
    assert codes.nbytes + scales.nbytes < rows.nbytes / 3.5
    query = rows[10]
    scores = matrix.scores("q", query)
    assert int(np.argmax(scores)) == 10
    assert np.array_equal(scores, matrix.cosines(query[None, :])[:, 0])
    assert np.allclose(matrix.rows_at(np.array([10, 3])), rows[[10, 3]], atol=0.005)


def test_scores_extended_turn_by_turn_equal_scores_made_whole(kernel: str) -> None:
    """A chat grows by a few rows a turn: the memoised query's scores are extended with its
    encoding kept, bit for bit what scoring every row afresh gives; a new vector for the same
    query is encoded again."""
    rows = unit_rows(60, 384, 3)
    matrix = KeyedMatrix("m", 384)
    matrix.add([f"k{i}" for i in range(20)], rows[:20])
    query = rows[59]
    matrix.scores("q", query)
    for start in range(20, 58, 2):
        matrix.add([f"k{start}", f"k{start + 1}"], rows[start : start + 2])
        assert np.array_equal(matrix.scores("q", query), matrix.cosines(query[None, :])[:, 0])
    other = rows[0].copy()  # the same query key with another vector (a topic's members moved)
    matrix.add(["k58"], rows[58:59])
    assert matrix.scores("q", other)[-1] == matrix.cosines(other[None, :])[-1, 0]


def test_queries_scored_together_take_one_kernel_call_and_equal_each_alone(
    kernel: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A chat's topics, each request: the rows added since take one call of the kernel for all
    the queries that left off at the same row, each column bit for bit its query's alone."""
    rows = unit_rows(40, 384, 4)
    together, alone = KeyedMatrix("m", 384), KeyedMatrix("m", 384)
    for matrix in (together, alone):
        matrix.add([f"k{i}" for i in range(20)], rows[:20])
    queries = [(f"q{k}", rows[30 + k]) for k in range(5)]
    calls: list[int] = []
    scored = int8.coded_cosines

    def counted(*args: np.ndarray) -> np.ndarray:
        calls.append(len(args[3]))
        return scored(*args)

    monkeypatch.setattr("smart_context.vectors.keyed.coded_cosines", counted)
    together.scores_of(queries[:3])  # three scored afresh, one call each
    assert calls == [1, 1, 1]
    for matrix in (together, alone):
        matrix.add(["k20", "k21"], rows[20:22])
    calls.clear()
    got = together.scores_of(queries)  # three grown by two rows together; two new ones whole
    assert sorted(calls) == [1, 1, 3]
    for (query, vector), scores in zip(queries, got, strict=True):
        assert len(scores) == 22
        assert np.array_equal(scores, alone.scores(query, vector))
    calls.clear()
    assert all(a is b for a, b in zip(together.scores_of(queries), got, strict=True))
    assert calls == []  # nothing new: the memos as they are


def test_items_and_notes_score_on_the_kernel_with_rows_as_read_from_their_files(
    kernel: str,
) -> None:
    """The items' and notes' search (``hybrid_scores``) scores through the same kernel: a
    matrix read from a file (int8 decoded) is encoded back to the same codes, so its scores
    equal those of the codes kept as :class:`~smart_context.vectors.int8.Coded`, and a chunk
    not embedded yet (a zero row) scores 0."""
    from smart_context.items.lexical import hybrid_scores

    rows = unit_rows(300, 384, 5)
    rows[7] = 0.0
    scales, codes = encode(rows)
    read = decode(scales, codes)
    coded = int8.Coded.of(read)
    assert np.array_equal(coded.codes, codes) and np.array_equal(coded.scales, scales)
    queries = unit_rows(2, 384, 6)
    got = hybrid_scores(queries, read, ["a", "b"], None, 0.0)
    assert got.shape == (2, 300) and np.array_equal(got, int8.cosines(codes, scales, queries).T)
    assert np.array_equal(hybrid_scores(queries, coded, ["a", "b"], None, 0.0), got)
    assert not got[:, 7].any()
    picked = hybrid_scores(queries, coded, ["a", "b"], None, 0.0, np.array([9, 3]))
    assert np.array_equal(picked, got[:, [9, 3]])
