"""Message text and the int8 encoding."""

from __future__ import annotations

import numpy as np
import pytest

from smart_context.messages import message_text
from smart_context.vectors.codec import cache_key, dequantize, quantize


@pytest.mark.parametrize(
    ("content", "text"),
    [
        ("plain", "plain"),
        ([{"type": "text", "text": "a"}, {"type": "image_url", "image_url": {}}, "b"], "a\nb"),
        (None, ""),
        (42, "42"),
    ],
)
def test_message_text_takes_the_text_parts(content: object, text: str) -> None:
    assert message_text({"content": content}) == text


def test_an_edit_changes_the_key_and_a_keep_does_not() -> None:
    assert cache_key("a", "x") == cache_key("a", "x") != cache_key("a", "y")


def test_every_holder_of_a_key_holds_one_string() -> None:
    # the vectors, the budget's facts and the text index each keep every message's key
    assert cache_key("a", "x" * 1000) is cache_key("a", "x" * 1000)


def test_quantize_round_trip_and_size_check() -> None:
    m = np.array([[0.6, -0.8], [0.0, 0.0]], dtype=np.float32)
    encoded = quantize(m)
    np.testing.assert_allclose(dequantize(encoded, 2, 2), m, atol=0.8 / 254)
    with pytest.raises(ValueError):
        dequantize(encoded, 3, 2)
    with pytest.raises(ValueError):
        dequantize({"scales": 1, "vectors": ""}, 0, 2)


def test_vectors_as_stored_are_what_a_file_gives_back_and_a_fixed_point() -> None:
    import numpy as np

    from smart_context.vectors.codec import as_stored, dequantize, quantize

    rng = np.random.default_rng(5)
    m = rng.normal(size=(500, 384)).astype(np.float32)
    m /= np.linalg.norm(m, axis=1, keepdims=True)
    kept = as_stored(m)
    assert np.array_equal(kept, dequantize(quantize(m), 500, 384))
    assert np.array_equal(as_stored(kept), kept)  # stored again: the same bits
    assert np.abs(kept - m).max() <= np.abs(m).max() / 254 + 1e-7  # within half an int8 step
    assert as_stored(np.zeros((2, 4), dtype=np.float32)).tolist() == [[0.0] * 4] * 2
