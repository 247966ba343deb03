"""Exact cosine scores over int8 vectors: the product's one kernel for scoring many rows.

Vectors are kept as they are stored (:mod:`.codec`): int8 codes with a float32 scale per row. A
query is encoded the same way, so a score is ``dot(codes, query codes) * row scale * query
scale``. The dot of two 384-long int8 rows is at most 384 * 127 * 127 = 6,193,536 in size, so it
is an integer below 2**24: exact in int32, exact in float32, whatever the order of the sums. The
scores are therefore the same on every CPU and with or without SIMD.

The sums come from NumKong's compiled SIMD kernels (``numkong.cdist``, int8 dot) where its wheel
is installed; elsewhere from numpy in float32, in blocks of rows (exact by the bound above). At
100,000 rows and 2 queries (x86_64, one thread): NumKong 8.7 ms, numpy 24 ms, the float32
product it replaces (over float32 rows, four times the memory) 20 ms (``benchmarks/bench_int8.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from smart_context.background import to_thread
from smart_context.vectors.codec import encode
from smart_context.vectors.ops import Matrix

Codes = npt.NDArray[np.int8]
Scales = npt.NDArray[np.float32]
# up to 1,040 dimensions an int8 dot fits float32 exactly; past it (an API model's 1,536) the
# sums are taken in float64, exact to 2**53, then rounded once to float32: the same everywhere
FLOAT32_EXACT_DIM = (2**24 - 1) // (127 * 127)
# rows converted to float32 at once by the numpy path (cache-sized: 8,192 was 3x slower)
_BLOCK = 512

try:  # a platform without its wheel scores through numpy, to the same integers
    import numkong
except ImportError:  # pragma: no cover - the numpy path is tested by forcing KERNEL
    KERNEL = "numpy"
else:
    KERNEL = "numkong"


def dots(codes: Codes, queries: Codes) -> Matrix:
    """``(len(codes), len(queries))`` exact integer dot products, as float32."""
    n, k = len(codes), len(queries)
    if codes.ndim != 2 or queries.ndim != 2 or codes.shape[1] != queries.shape[1]:
        raise ValueError(f"cannot score {queries.shape} queries over {codes.shape} rows")
    if not n or not k:
        return np.zeros((n, k), dtype=np.float32)
    exact32 = codes.shape[1] <= FLOAT32_EXACT_DIM
    if KERNEL == "numkong":
        return _numkong_dots(codes, queries, exact32)
    return _numpy_dots(codes, queries, exact32)


def _numkong_dots(codes: Codes, queries: Codes, exact32: bool) -> Matrix:
    out = numkong.cdist(
        np.ascontiguousarray(codes),
        np.ascontiguousarray(queries),
        metric="dot",
        out_dtype="float32" if exact32 else "float64",
    )
    return np.asarray(out).astype(np.float32, copy=False)


def _numpy_dots(codes: Codes, queries: Codes, exact32: bool) -> Matrix:
    wide = np.float32 if exact32 else np.float64
    q = queries.astype(wide).T
    out = np.empty((len(codes), len(queries)), dtype=wide)
    for start in range(0, len(codes), _BLOCK):
        np.matmul(codes[start : start + _BLOCK].astype(wide), q, out=out[start : start + _BLOCK])
    return out.astype(np.float32, copy=False)


def cosines(codes: Codes, scales: Scales, queries: Matrix) -> Matrix:
    """``(len(codes), len(queries))`` cosines of unit rows stored as ``codes * scales`` with the
    unit ``queries`` (float32), each query encoded to int8 as the rows are."""
    return coded_cosines(codes, scales, *encode_queries(queries))


def encode_queries(queries: Matrix) -> tuple[Scales, Codes]:
    """Unit ``queries`` (one, or rows) as :func:`cosines` encodes them: kept by a caller that
    scores the same query again (14 us a vector)."""
    return encode(np.atleast_2d(np.asarray(queries, dtype=np.float32)))


def coded_cosines(codes: Codes, scales: Scales, query_scales: Scales, query_codes: Codes) -> Matrix:
    """:func:`cosines` of queries already encoded (:func:`encode_queries`)."""
    out = dots(codes, query_codes)
    out *= scales[: len(codes), None]
    out *= query_scales[None, :]
    return out


@dataclass(frozen=True, eq=False)
class Coded:
    """Unit rows kept as the files store them, int8 codes with a scale per row, for scoring.
    Rows read from a file are such codes decoded, so encoding them again gives the same codes."""

    scales: Scales
    codes: Codes

    @classmethod
    def of(cls, matrix: Matrix) -> Coded:
        scales, codes = encode(matrix)
        return cls(scales.astype(np.float32, copy=False), codes)

    @property
    def shape(self) -> tuple[int, int]:
        """``(rows, dim)``, as the matrix's."""
        return (int(self.codes.shape[0]), int(self.codes.shape[1]))

    def scores(self, queries: Matrix) -> Matrix:
        """``(len(queries), rows)``: each query's cosine with each row (:func:`cosines`)."""
        out: Matrix = cosines(self.codes, self.scales, queries).T
        return out


class CodedOnce:
    """The :class:`Coded` of the last matrix given, encoded (in a worker thread) only when
    another matrix comes: an index's rows change by a new matrix, never in place."""

    def __init__(self) -> None:
        self._last: tuple[Matrix, Coded] | None = None

    async def of(self, matrix: Matrix) -> Coded:
        if self._last is None or self._last[0] is not matrix:
            self._last = (matrix, await to_thread(Coded.of, matrix))
        return self._last[1]
