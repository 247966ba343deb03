"""Where the reference sidecar's memory goes as one chat grows, message by message.

Run: python benchmarks/bench_memory.py [--messages 1000] [--writers 4] [--long 10000] [--trace 12]
[--as-served] [--warm 1000]

One vault on the embedded offline default (the real local model, no chat model), one chat:
``--writers`` clients post ``--messages`` messages to it in all through the page's HTTP app (in
process), as people typing at once would; the background passes (embeddings, the topic map)
run as they do. Printed: the resident memory (RSS, the topic worker's counted in) before and
after, per stored message (a posted text or its reply) against its own size (its text) plus its
vector, and where this process grew by allocator (Python's small-object arenas and the objects
in them, what ``malloc`` has in use); then, for a ``--long``
chat whose replies each carry the last reply's record, the Python memory of the chat parsed
whole against the chat as the sidecar holds it (each reply's record with its figures only,
the file keeping it whole), and the peak of each read; with ``--trace N``, in a
second run, the N Python allocations that grew most (tracemalloc, by line): what holds the
memory. Tracing keeps a record of every allocation, so the first run's figures are measured
without it. The target: growth per message at most 10x the message's own size plus its vector.
The sidecar runs in this process, so Python's cycle collector and glibc's arenas are left as
Python sets them unless ``--as-served`` sets them as the server commands do (and collects between
requests as their loops do). ``--warm N``: the
same writers post N messages to another chat first, as a server that has served a while has:
what fills once (numpy's cache of small buffers, up to 7 of each size under 1 KB, which one
chat growing message by message fills size by size; SQLite's page caches, 2 MB a connection;
the interpreter's table of interned strings doubling) is then filled before the measure, and
the growth is the chat's own.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import gc
import json
import os
import platform
import re
import sys
import tempfile
import tracemalloc
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx

from benchmarks.bench_server import family_rss_mb, rss_mb
from smart_context.allocator import MIN_GAP, collecting_between, fewer_arenas, quiet_collector
from smart_context.messages import message_text
from smart_context.plugin import SmartContextPlugin
from smart_context_hosts.sidecar import chatfile
from smart_context_hosts.sidecar.app import create_app
from smart_context_hosts.sidecar.memory import ChatMemory
from smart_context_hosts.sidecar.plugins import get_plugin_manager
from smart_context_hosts.sidecar.runtime import Sidecar

TOPICS = [
    "the asyncio scraper cancels its tasks when the shop rate limits it",
    "a partial index on the orders table for the postgres planner",
    "nginx answers 502 after docker compose brings the api up",
    "the react effect depends on the callback and the search box state",
    "the hut at Lagazuoi in winter and how cold the nights get",
]
VECTOR_BYTES = 384 + 4  # a message's vector as kept: int8 codes and a float32 scale


def message(i: int) -> str:
    return f"{TOPICS[i % len(TOPICS)]}, question {i}: what would you change first and why?"


_MALLINFO2 = "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost"


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in _MALLINFO2.split(" ")]


def allocator_parts() -> dict[str, float]:
    """This process's memory by allocator, in MB: Python's small-object arenas and the objects
    in them (``sys._debugmallocstats``, CPython), and what glibc's ``malloc`` has in use, its
    own heaps and its blocks mapped alone (``mallinfo2``); a part that cannot be read here is
    left out."""
    parts: dict[str, float] = {}
    with tempfile.TemporaryFile() as out:  # the statistics go to the C stderr
        sys.stderr.flush()
        saved = os.dup(2)
        try:
            os.dup2(out.fileno(), 2)
            sys._debugmallocstats()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        out.seek(0)
        text = out.read().decode(errors="replace")
    arenas = re.search(r"^\d+ arenas \* \d+ bytes/arena\s*=\s*([\d,]+)", text, re.M)
    objects = re.search(r"^# bytes in allocated blocks\s*=\s*([\d,]+)", text, re.M)
    if arenas and objects:
        parts["arenas"] = int(arenas.group(1).replace(",", "")) / 2**20
        parts["objects"] = int(objects.group(1).replace(",", "")) / 2**20
    with contextlib.suppress(OSError, AttributeError):  # glibc 2.33 and later only
        mallinfo2 = ctypes.CDLL("libc.so.6").mallinfo2
        mallinfo2.restype = _MallInfo2
        info = mallinfo2()
        parts["malloc"] = (info.uordblks + info.hblkhd) / 2**20
    return parts


def grown(before: dict[str, float], after: dict[str, float]) -> str:
    """What :func:`allocator_parts` grew by, as a line."""
    if "arenas" not in before or "arenas" not in after or "malloc" not in after:
        return "(not measurable on this platform)"
    arenas, objects, malloc = (after[k] - before[k] for k in ("arenas", "objects", "malloc"))
    return (
        f"Python's small-object arenas {arenas:+.1f} MB (its objects {objects:+.1f} MB, the "
        f"rest free blocks in arenas still in use), malloc in use {malloc:+.1f} MB"
    )


async def run(messages: int, writers: int, top: int, warm: int = 0) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / ".memory").mkdir()
        plugin = SmartContextPlugin()
        manager = get_plugin_manager(None, load_entrypoints=False)
        manager.register(plugin, name="smart_context")
        sidecar = Sidecar(root, plugin_manager=manager)
        await sidecar.start()
        transport = httpx.ASGITransport(app=create_app(sidecar))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:

            async def new_chat(title: str) -> str:
                chat = (await client.post("/api/chats", json={"title": title})).json()
                return str(chat.get("id") or chat.get("chat", {}).get("id"))

            async def post(url: str, count: int) -> int:
                """``count`` messages to ``url`` from ``writers`` at once; their bytes."""
                sent = 0

                async def writer(w: int) -> None:
                    nonlocal sent
                    for i in range(w, count, writers):
                        answer = await client.post(url, json={"content": message(i)})
                        assert answer.status_code == 200, answer.text
                        sent += len(message(i).encode())

                await asyncio.gather(*(writer(w) for w in range(writers)))
                return sent

            if warm:
                await post(f"/api/chats/{await new_chat('served before')}/messages", warm)
            chat_id = await new_chat("memory")
            url = f"/api/chats/{chat_id}/messages"
            for i in range(20):  # the model loaded, the caches warm
                await client.post(url, json={"content": message(i)})
            assert plugin.services is not None
            await plugin.services.settle(600)
            await asyncio.sleep(MIN_GAP + 1)  # idle, as at the measure after (below)
            gc.collect()
            before = family_rss_mb(os.getpid())
            own_before = rss_mb(os.getpid())
            parts_before = allocator_parts()
            if top:
                tracemalloc.start(int(os.environ.get("TRACE_DEPTH", "8")))
                first = tracemalloc.take_snapshot()
            sent = await post(url, messages)
            await plugin.services.settle(600)
            # as a server idles: the allocator's free memory given back, at most MIN_GAP after
            # the last pass ended (smart_context/allocator.py)
            await asyncio.sleep(MIN_GAP + 1)
            gc.collect()
            if top:
                last = tracemalloc.take_snapshot()
                tracing = tracemalloc.get_tracemalloc_memory() / 1024 / 1024
                tracemalloc.stop()
            after = family_rss_mb(os.getpid())
            own_after = rss_mb(os.getpid())
            parts_after = allocator_parts()
            trimmed = after
            with contextlib.suppress(OSError, AttributeError):  # glibc only
                ctypes.CDLL("libc.so.6").malloc_trim(0)
                trimmed = family_rss_mb(os.getpid())
            raw = (root / ".memory" / f"{chat_id}.json").read_bytes()
            stored: dict[str, Any] = json.loads(raw)
        await sidecar.stop()
    if top:
        print_allocations(first, last, top, tracing)
        return stored
    mine = stored["messages"][40:]  # this run's: each post stores the message and a reply
    count = len(mine)
    # a stored message's own size: its text, a posted one or a reply (each has its vector)
    own = sum(len(message_text(m).encode()) for m in mine) / max(count, 1) + VECTOR_BYTES
    posted = sent / messages + VECTOR_BYTES  # the divisor before: the posted texts only
    grew = (after - before) * 1024 * 1024 / max(count, 1)
    print(f"{platform.machine()}, {platform.processor() or platform.platform()}")
    served = f", after {warm} to another chat" if warm else ""
    print(
        f"{messages} messages by {writers} writers{served} ({count} stored with the replies): RSS "
        f"{before:.0f} -> {after:.0f} MB, {grew / 1024:.1f} KB a stored message, "
        f"{grew / own:.1f}x its own size plus its vector ({own:.0f} bytes; "
        f"{grew / posted:.1f}x a posted text's, {posted:.0f} bytes)"
    )
    print(
        f"    this process {own_before:.0f} -> {own_after:.0f} MB, its workers (topic maps) "
        f"{before - own_before:.0f} -> {after - own_after:.0f} MB"
    )
    print(f"    where this process grew: {grown(parts_before, parts_after)}")
    print(f"    the chat file: {len(raw) / len(stored['messages']) / 1024:.1f} KB a message")
    reply = next(m for m in reversed(stored["messages"]) if m["role"] == "assistant")
    parts = sorted(((len(json.dumps(v)), k) for k, v in reply.items()), reverse=True)
    record = reply.get("smart_context") or {}
    inner = sorted(((len(json.dumps(v)), k) for k, v in record.items()), reverse=True)
    print(
        "    the last reply's biggest parts (bytes): "
        + ", ".join(f"{k} {n:,}" for n, k in parts[:4])
        + "; of its record: "
        + ", ".join(f"{k} {n:,}" for n, k in inner[:6])
    )
    print(
        f"    after glibc's malloc_trim(0): {trimmed:.0f} MB (what the allocator held free: "
        f"{after - trimmed:.0f} MB)"
    )
    return stored


async def long_chat(reply: dict[str, Any], count: int) -> None:
    """A ``count``-message chat, each reply with ``reply``'s record, read from its file: the
    Python memory of the chat parsed whole against the chat as the sidecar holds it."""
    messages = []
    for i in range(count):
        if i % 2:
            messages.append({**reply, "id": f"r{i}"})
        else:
            messages.append({"id": f"u{i}", "role": "user", "content": message(i)})
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / ".memory").mkdir()
        raw, _ = chatfile.render({"messages": messages})
        (root / ".memory" / "long.json").write_bytes(raw)
        del messages
        sizes = []
        for read in (
            lambda: chatfile.parse(raw),
            lambda: ChatMemory(root).chat_snapshot("long"),
        ):
            gc.collect()
            tracemalloc.start()
            held: object = read()
            if asyncio.iscoroutine(held):
                held = await held
            gc.collect()
            sizes.append(tracemalloc.get_traced_memory())
            tracemalloc.stop()
            del held
    print(
        f"a {count:,}-message chat read from its file ({len(raw) / 1e6:.0f} MB, each reply's "
        f"record as above), in Python objects: parsed whole {sizes[0][0] / 1e6:.0f} MB (at the "
        f"peak of the read {sizes[0][1] / 1e6:.0f} MB), as the sidecar holds it "
        f"{sizes[1][0] / 1e6:.0f} MB (peak {sizes[1][1] / 1e6:.0f} MB)"
    )


def print_allocations(
    first: tracemalloc.Snapshot, last: tracemalloc.Snapshot, top: int, tracing: float
) -> None:
    print(
        f"Python allocations that grew most (a second run, traced; tracing kept {tracing:.0f} MB):"
    )
    for stat in last.compare_to(first, "lineno")[:top]:
        frame = stat.traceback[0]
        where = frame.filename.split("site-packages/")[-1]
        print(f"  {stat.size_diff / 1e6:+7.2f} MB  {where}:{frame.lineno}")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=1000)
    parser.add_argument("--writers", type=int, default=4)
    parser.add_argument("--trace", type=int, default=0, metavar="N")
    parser.add_argument("--long", type=int, default=10_000, metavar="N")
    parser.add_argument("--warm", type=int, default=0, metavar="N")
    parser.add_argument(
        "--as-served",
        action="store_true",
        help="the cycle collector and the allocator's arenas as `serve` and `proxy` set them "
        "(smart_context/allocator.py)",
    )
    args = parser.parse_args()
    if args.as_served:
        quiet_collector()
        fewer_arenas()
    # the servers' loop collects between requests; it makes no pass unless quiet_collector is on
    stored = asyncio.run(collecting_between(run(args.messages, args.writers, 0, args.warm)))
    if args.long:
        reply = next(m for m in reversed(stored["messages"]) if m["role"] == "assistant")
        asyncio.run(long_chat(reply, args.long))
    if args.trace:
        asyncio.run(run(args.messages, args.writers, args.trace, args.warm))


if __name__ == "__main__":
    main()
