"""Pure vector maths: unit rows and max pooling."""

from __future__ import annotations

import numpy as np

from smart_context.vectors.ops import appended, max_pool, normalize_rows


def test_rows_become_unit_length_and_zero_rows_stay_zero() -> None:
    unit = normalize_rows([[3.0, 4.0], [0.0, 0.0]])
    assert unit.dtype == np.float32
    np.testing.assert_allclose(unit, [[0.6, 0.8], [0.0, 0.0]], atol=1e-7)


def test_max_pool_keeps_each_rows_best_score() -> None:
    a = np.array([0.1, 0.9, 0.3], dtype=np.float32)
    b = np.array([0.5, 0.2, 0.3], dtype=np.float32)
    c = np.array([0.0, 0.0, 0.7], dtype=np.float32)
    assert max_pool([a, b, c]).tolist() == np.array([0.5, 0.9, 0.7], dtype=np.float32).tolist()
    assert max_pool([a]) is a
    assert len(max_pool([])) == 0


def test_appended_writes_into_spare_room_and_leaves_every_view_handed_out_as_it_was() -> None:
    first = appended(np.zeros(0, dtype=np.intp), np.arange(3))
    second = appended(first, np.array([7, 8]))
    assert np.shares_memory(first, second)  # the room, not a copy
    assert first.tolist() == [0, 1, 2] and second.tolist() == [0, 1, 2, 7, 8]
    grown = second
    for k in range(100):  # past the room: made again, with room for as many more
        grown = appended(grown, np.array([k]))
    assert not np.shares_memory(first, grown) and grown[:5].tolist() == [0, 1, 2, 7, 8]
    assert grown[5:].tolist() == list(range(100)) and first.tolist() == [0, 1, 2]


def test_appended_grows_along_the_last_axis_and_copies_a_view_that_is_not_its_own() -> None:
    lengths = appended(np.zeros((2, 0), dtype=np.int32), np.array([[1, 2], [3, 4]]))
    more = appended(lengths, np.array([[5], [6]]))
    assert np.shares_memory(lengths, more) and more.tolist() == [[1, 2, 5], [3, 4, 6]]
    column = np.arange(6.0).reshape(3, 2)[:, 0]  # a view, but not the start of a row
    out = appended(column, np.array([9.0]))
    assert out.tolist() == [0.0, 2.0, 4.0, 9.0] and not np.shares_memory(column, out)
