"""Exact int8 search against the float32 product it replaced, in one process.

Run: python benchmarks/bench_int8.py [--sizes 10000,100000] [--repeats 30]

For each size, unit vectors of 384 dimensions (random, a fixed seed) stored as the cache file
stores them (int8 codes and a float32 scale per row), scored against 2 query sentences:

- ``numkong``: the int8 dot products in NumKong's SIMD kernel, then the scales (what a chat's
  search runs now, ``smart_context/vectors/int8.py``);
- ``numpy int8``: the same integers through numpy (the path of a platform without the wheel);
- ``float32 einsum``: the product over float32 rows that was kept in memory before.

Then the memory a chat's vectors take (held in memory for as long as the chat is open): int8
codes and scales against float32 rows, and what loading the 100,000-row cache file costs at its
peak (tracemalloc), decoded to float32 as before or kept as int8 as now. Medians; one thread.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
import tracemalloc
from collections.abc import Callable

import numpy as np

from smart_context.vectors import int8
from smart_context.vectors.codec import as_hex, decode, encode, from_hex
from smart_context.vectors.ops import normalize_rows

DIM = 384


def timed(fn: Callable[[], object], repeats: int) -> float:
    """Median milliseconds of ``fn`` over ``repeats`` calls, after one warm-up call."""
    fn()
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples)


def bench_size(n: int, repeats: int) -> None:
    rng = np.random.default_rng(n)
    rows = normalize_rows(rng.standard_normal((n, DIM)).astype(np.float32))
    queries = normalize_rows(rng.standard_normal((2, DIM)).astype(np.float32))
    scales, codes = encode(rows)
    stored = decode(scales, codes)  # the float32 rows kept in memory before

    def kernel(name: str) -> Callable[[], object]:
        def run() -> object:
            int8.KERNEL = name
            return int8.cosines(codes, scales, queries)

        return run

    figures = {
        "numkong": timed(kernel("numkong"), repeats) if kernel_available() else None,
        "numpy int8": timed(kernel("numpy"), repeats),
        "float32 einsum": timed(
            lambda: np.einsum("nd,kd->nk", stored, queries, optimize=False), repeats
        ),
    }
    int8.KERNEL = "numkong" if kernel_available() else "numpy"
    base = figures["float32 einsum"]
    assert base is not None
    said = ", ".join(
        f"{name} {ms:.2f} ms ({ms / base:.2f}x)" for name, ms in figures.items() if ms is not None
    )
    print(f"{n:>7,} rows x 2 queries: {said}")
    as_int8 = codes.nbytes + scales.nbytes
    print(
        f"          vectors in memory: int8 {as_int8 / 1e6:.1f} MB, "
        f"float32 {stored.nbytes / 1e6:.1f} MB ({as_int8 / stored.nbytes:.2f}x)"
    )


def kernel_available() -> bool:
    try:
        import numkong  # noqa: F401
    except ImportError:
        return False
    return True


def bench_load(n: int) -> None:
    """Peak and kept memory of reading an ``n``-row cache file, both ways."""
    rng = np.random.default_rng(7)
    rows = normalize_rows(rng.standard_normal((n, DIM)).astype(np.float32))
    text = json.dumps(as_hex(*encode(rows)))
    for name, keep_int8 in (("float32 (before)", False), ("int8 (now)", True)):
        tracemalloc.start()
        data = json.loads(text)
        scales, codes = from_hex(data, n, DIM)
        kept = (scales, codes) if keep_int8 else decode(scales, codes)
        del data
        current, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        del kept
        print(
            f"loading a {n:,}-row cache file, kept as {name}: "
            f"{current / 1e6:.0f} MB kept, {peak / 1e6:.0f} MB at the peak"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args()
    print(f"{platform.machine()}, {platform.processor() or platform.platform()}, one thread")
    sizes = [int(s) for s in args.sizes.split(",")]
    for n in sizes:
        bench_size(n, args.repeats)
    bench_load(max(sizes))


if __name__ == "__main__":
    main()
