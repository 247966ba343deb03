"""A faster copy of the packaged MiniLM model, derived from it once per machine and cached.

Why: the packaged ``model.onnx`` stores int8 weights that ``DequantizeLinear`` turns back into
floats, so every matrix product still runs in fp32. The recipe here keeps the int8 storage idea
but makes the arithmetic integer too:

1. onnxruntime optimizes the graph (``ORT_ENABLE_EXTENDED``) and saves it: the dequantized
   weights are constant-folded into a plain fp32 model, with its fusions
   (``SkipLayerNormalization``, ``FusedMatMul``) applied.
2. onnxruntime's dynamic quantizer turns the MatMuls with a constant weight (36 of them) into
   ``MatMulInteger`` with per-channel **uint8** weights, and stores the three embedding tables
   as uint8 again (without that the file and the session are 35 MB larger, for the same speed
   and accuracy). Activations are quantized on each call, over the whole batch. The attention
   products (two activations) stay in fp32.

Why uint8 weights and not int8: the same vectors on every CPU. With int8 weights onnxruntime
multiplies uint8 by int8, and its AVX2 kernel for that (``vpmaddubsw``) saturates pairs of
products at 16 bits, while an AVX-512 VNNI kernel (``vpdpbusd``) sums them exactly: the same
text got similarities up to 0.054 apart on the two kinds of machine, enough to flip a message
across a topic's cut. uint8 by uint8 has no saturating kernel on any CPU, so every integer
product is exact everywhere; ``tests/embeddings/test_onnx_build.py`` checks the model against
a twin that does its integer products in float64, bit for bit. uint8 weights are also a little
closer to the packaged model (mean cosine 0.993 against 0.991), at the same speed.

On a 2-core machine this runs about twice as fast as the packaged model. Over one text at a
time, its vectors have cosine >= 0.98 to the packaged model's for sentences (mean 0.992) and
>= 0.95 for two-word texts such as "Thank you!". Building takes about 3 seconds, 600 MB of
memory and 200 MB of scratch disk; the result is about 23 MB.

Cache file: ``{cache_dir}/{source stem}-dq-{key}.onnx``, where ``key`` hashes the source file's
sha256, :data:`RECIPE_VERSION` and the onnxruntime version (the optimized graph uses that
version's operator set), so a new package, recipe or runtime builds a new file. A build happens
in a private temporary folder inside ``cache_dir`` and ends with an atomic rename, so processes
that race each build their own copy and all end with a complete file.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from smart_context.errors import EmbeddingError

#: Bump when the recipe changes, so caches built by the old one are not reused.
RECIPE_VERSION = 3
CACHE_ENV = "SMART_CONTEXT_CACHE"
_BUILD_PREFIX = ".build-"
_STALE_BUILD_SECONDS = 3600  # a build takes seconds; an older folder is a killed process's
# "The quick brown fox jumps over the lazy dog." in MiniLM's (BERT uncased) vocabulary.
_CHECK_IDS = [101, 1996, 4248, 2829, 4419, 14523, 2058, 1996, 13971, 3899, 1012, 102]
_MIN_CHECK_COSINE = 0.98  # the recipe gives 0.993 on this sentence


def default_cache_dir() -> Path:
    """``$SMART_CONTEXT_CACHE``, else ``$XDG_CACHE_HOME/smart-context``, else ``~/.cache/...``."""
    explicit = os.environ.get(CACHE_ENV)
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    # The XDG spec says a relative path is invalid and must be ignored.
    base = Path(xdg) if xdg and os.path.isabs(xdg) else Path.home() / ".cache"
    return base / "smart-context"


def cache_key(source_sha256: str, recipe: int, runtime_version: str) -> str:
    """16 hex digits naming one (source file, recipe, onnxruntime version) combination."""
    text = f"{source_sha256}\n{recipe}\n{runtime_version}"
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def cached_model_path(source: Path, cache_dir: Path) -> Path:
    """Where the derived model of ``source`` lives in ``cache_dir`` (whether built or not)."""
    import onnxruntime as ort  # type: ignore[import-untyped]  # ships no type information

    with open(source, "rb") as f:
        # 23 MB hash in about 25 ms: cheap next to loading a model, and exact.
        digest = hashlib.file_digest(f, "sha256").hexdigest()
    key = cache_key(digest, RECIPE_VERSION, str(ort.__version__))
    return Path(cache_dir) / f"{Path(source).stem}-dq-{key}.onnx"


def fast_model_path(source: Path, cache_dir: Path) -> Path:
    """The derived model of ``source``, built into ``cache_dir`` first if it is not there yet.

    Raises whatever stopped the build (``ImportError`` without ``onnx``, ``OSError`` for an
    unwritable folder, onnxruntime's errors, :class:`EmbeddingError` if the result fails its
    accuracy check); nothing is left behind in ``cache_dir`` then.
    """
    target = cached_model_path(source, cache_dir)
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    _remove_stale_builds(target.parent)
    scratch = Path(tempfile.mkdtemp(prefix=_BUILD_PREFIX, dir=target.parent))
    try:
        built = build_fast_model(source, scratch)
        # A racing process may have renamed its copy meanwhile; both copies are complete
        # and equal, so replacing one with the other is harmless.
        os.replace(built, target)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return target


def build_fast_model(source: Path, workdir: Path) -> Path:
    """Derive the fast model of ``source`` inside ``workdir``; returns the checked, synced file."""
    import onnxruntime as ort
    from onnxruntime.quantization import (  # type: ignore[import-untyped]
        QuantType,
        quantize_dynamic,
    )

    folded = workdir / "folded.onnx"
    out = workdir / "quantized.onnx"
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    options.optimized_model_filepath = os.fspath(folded)
    options.log_severity_level = 3
    # Creating the session writes the optimized graph; the session also gives the reference
    # output that the quantized model is checked against.
    reference = ort.InferenceSession(
        os.fspath(source), sess_options=options, providers=["CPUExecutionProvider"]
    )
    with _quantizer_logging_muted():
        quantize_dynamic(
            folded,
            out,
            weight_type=QuantType.QUInt8,  # exact on every CPU: see above
            per_channel=True,
            op_types_to_quantize=["MatMul", "Gather"],
            # Only weight MatMuls: quantizing the attention products costs accuracy. (The
            # Gathers quantized are those reading a constant table: the embeddings.)
            extra_options={"MatMulConstBOnly": True},
        )
    folded.unlink()
    quiet = ort.SessionOptions()
    quiet.log_severity_level = 3
    candidate = ort.InferenceSession(
        os.fspath(out), sess_options=quiet, providers=["CPUExecutionProvider"]
    )
    check_agreement(reference, candidate)
    with open(out, "rb") as f:
        # The rename that publishes the file must not outlive its content in a power cut.
        os.fsync(f.fileno())
    return out


def check_agreement(reference: Any, candidate: Any) -> float:
    """Cosine of the two models' mean-pooled vectors of one sentence; raises if too low."""
    ids = np.array([_CHECK_IDS], dtype=np.int64)
    feed = {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": ids * 0}
    vectors = [
        np.asarray(s.run(["last_hidden_state"], feed)[0], dtype=np.float64)[0].mean(axis=0)
        for s in (reference, candidate)
    ]
    norms = float(np.linalg.norm(vectors[0]) * np.linalg.norm(vectors[1]))
    cosine = float(vectors[0] @ vectors[1]) / norms if norms > 0 else 0.0
    if not cosine >= _MIN_CHECK_COSINE:  # written so that NaN fails too
        raise EmbeddingError(
            f"The derived model disagrees with the packaged one (cosine {cosine:.3f}); "
            "it was not used."
        )
    return cosine


def _remove_stale_builds(cache_dir: Path) -> None:
    """Delete scratch folders that a killed build left behind (each holds up to 200 MB)."""
    cutoff = time.time() - _STALE_BUILD_SECONDS
    for path in cache_dir.glob(f"{_BUILD_PREFIX}*"):
        with contextlib.suppress(OSError):  # another process may be removing it right now
            if path.is_dir() and path.stat().st_mtime < cutoff:
                shutil.rmtree(path, ignore_errors=True)


class _DropBelowError(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.ERROR


@contextlib.contextmanager
def _quantizer_logging_muted() -> Iterator[None]:
    """Silence the quantizer's chatter for the duration of one build.

    It logs about a hundred lines through the root logger with ``logging.info()``, and that
    function calls ``logging.basicConfig()`` when the root logger has no handler, which would
    reconfigure the host's logging. A handler that discards everything prevents the latter; a
    filter on the root logger (it sees only records logged to the root itself, not those of
    named loggers passing through) drops the lines below ERROR.
    """
    root = logging.getLogger()
    guard, muted = logging.NullHandler(), _DropBelowError()
    root.addHandler(guard)
    root.addFilter(muted)
    try:
        yield
    finally:
        root.removeFilter(muted)
        root.removeHandler(guard)
