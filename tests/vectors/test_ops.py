"""Pure vector maths: unit rows and max pooling."""

from __future__ import annotations

import numpy as np

from smart_context.vectors.ops import max_pool, normalize_rows


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
