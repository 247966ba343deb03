"""Throughput of the local MiniLM backend on chat-sized messages (about 50 tokens each).

Run: ``python benchmarks/bench_local_embedder.py [--messages 256] [--threads 1 2]``. Prints the
load time, the latency of one message, and messages/second for a whole batch, per thread count.
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import time

from smart_context.embeddings.local import LocalMiniLM

_VOCABULARY = (
    "python asyncio event loop task coroutine gather timeout cancel kubernetes pod deployment "
    "service ingress replica sourdough starter flour hydration oven crumb proof japan kyoto "
    "tokyo rail pass ryokan temple itinerary budget weather ramen sushi shrine the a of to and "
    "in is it for on with that this how why when what should could would"
)
_WORDS = _VOCABULARY.split()


def make_messages(count: int, words: int = 35) -> list[str]:
    """Deterministic pseudo-sentences; 35 words make about 50 tokens with [CLS] and [SEP]."""
    out = []
    for i in range(count):
        # A linear congruential walk: varied but reproducible word choice, no random module.
        picked = [_WORDS[(i * 31 + j * 17 + (i * j) % 7) % len(_WORDS)] for j in range(words)]
        out.append(" ".join(picked).capitalize() + "?")
    return out


def measure(model: LocalMiniLM, texts: list[str], repeats: int) -> tuple[float, float]:
    """Median messages per wall-clock second and per CPU second over ``repeats`` batch runs.

    The CPU figure counts all of the process's threads, so it does not depend on what else the
    machine is doing; wall-clock throughput on a busy machine falls well below it.
    """
    wall, cpu = [], []
    for _ in range(repeats):
        start, start_cpu = time.perf_counter(), time.process_time()
        model.embed_sync(texts)
        wall.append(len(texts) / (time.perf_counter() - start))
        cpu.append(len(texts) / (time.process_time() - start_cpu))
    return statistics.median(wall), statistics.median(cpu)


def main() -> None:
    """Print the benchmark figures."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--messages", type=int, default=256)
    parser.add_argument("--threads", type=int, nargs="*", default=[1, 2])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    texts = make_messages(args.messages)
    print(f"cpus visible: {os.cpu_count()}, messages: {len(texts)}")
    for threads in args.threads:
        start = time.perf_counter()
        model = LocalMiniLM.from_package(threads=threads)
        load = time.perf_counter() - start
        tokens = statistics.mean(model.token_counts(texts))
        model.embed_sync(texts[:32])  # warm-up: the first run allocates onnxruntime's arenas
        single = [time.perf_counter()]
        for text in texts[:20]:
            model.embed_sync([text])
            single.append(time.perf_counter())
        latency_ms = statistics.median(b - a for a, b in itertools.pairwise(single)) * 1000
        rate, cpu_rate = measure(model, texts, args.repeats)
        print(
            f"threads={threads}: load {load:.2f} s, {tokens:.0f} tokens/message, "
            f"one message {latency_ms:.1f} ms, batch {rate:.0f} messages/s "
            f"({cpu_rate:.0f} messages per CPU second)"
        )


if __name__ == "__main__":
    main()
