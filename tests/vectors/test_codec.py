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


def test_quantize_round_trip_and_size_check() -> None:
    m = np.array([[0.6, -0.8], [0.0, 0.0]], dtype=np.float32)
    encoded = quantize(m)
    np.testing.assert_allclose(dequantize(encoded, 2, 2), m, atol=0.8 / 254)
    with pytest.raises(ValueError):
        dequantize(encoded, 3, 2)
    with pytest.raises(ValueError):
        dequantize({"scales": 1, "vectors": ""}, 0, 2)
