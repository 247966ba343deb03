"""Where a long chat's request goes, step by step: the floors left under the 2 ms target, named.

Run: python benchmarks/bench_request_steps.py [--size 10000] [--turns 60] [--warm 20]
[--model gpt-4o | --model none]

The setting of ``bench_context.py``'s turn-by-turn row (random vectors, a topic click on two of
six topics, the default budget, gpt-4o named so the request is laid out for its prompt cache;
``--model none`` names no model, so the budget chooses the history anew each turn, as for a
model no cache model knows, the team benchmark's):
each request brings the last one's history with its turn added, the host stores the turn and
the background pass settles between requests. The named steps below are timed each time they
run on the event loop's thread during a request (a timer around each; the background's calls in
its threads are left out), and printed per request beside the request's own median. The steps
nest (indented: the plan holds the store's reads, the cache layout holds the layout), and
the dense scores are a task the plan starts, run beside the rest (its time includes waiting for
the message's vectors), so the times do not add up to the whole; what is left after the named
steps is the hook's own glue and steps too small to name. The timers add a few microseconds a
call. Last, the item files' stamp alone against the careful way it took before, alternating.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import importlib
import inspect
import platform
import statistics
import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pluggy

import smart_context.hookspecs
from benchmarks.bench_context import Ctx, Host, RandomEmbedder, make_chat, mapped, turn_by_turn
from smart_context.items.files import _listing, folder_stamp, vault_root
from smart_context.plugin import SmartContextPlugin

# (what is timed, its module, the function, its class when a method), in the order of a request
STEPS: list[tuple[str, str, str, str | None]] = [
    ("history read through its index", "smart_context.history_index", "read", "HistoryIndexes"),
    ("plan: the reads and stamps", "smart_context.context.plan", "look_now", None),
    ("  the store's reads", "smart_context.memory.reads", "read_chat", None),
    ("  the item files' stamps", "smart_context.items.catalog", "look", "ItemCatalog"),
    ("budget: dense scores (a task)", "smart_context.budget.budgeter", "dense", "Budgeter"),
    ("topic click", "smart_context.context.assemble", "assemble", None),
    ("  the topic scores", "smart_context.context.topic_scores", "score_topics", None),
    ("  the topic rule", "smart_context.context.topic_filter", "decide", None),
    ("items and layout", "smart_context.context.assemble", "request_items", None),
    ("  the budget's facts", "smart_context.budget.facts", "update", "MessageFacts"),
    ("  the keyword search", "smart_context.budget.facts", "text_scores", "Facts"),
    ("  the cache layout", "smart_context.context.stable", "stable_request", None),
    ("    the layout", "smart_context.context.layout", "lay_out", None),
    ("    the frame's decision", "smart_context.context.layout", "decide", None),
    ("  the budget's fit", "smart_context.budget.budgeter", "fit", "Budgeter"),
    ("    the plan", "smart_context.budget.plan", "plan", None),
    ("    the plan in turns", "smart_context.budget.turns", "in_turns", None),
    ("the record, as written", "smart_context.record", "as_dict", "RequestRecord"),
]
LAID_OUT = {"  the cache layout", "    the layout", "    the frame's decision"}  # a model named
PER_TURN = {"  the budget's fit", "    the plan", "    the plan in turns"}  # none named
# run by the cache layout only when it leaves messages out, which a short chat's does not
WHEN_RECALLING = {"  the keyword search"}


def steps_of(model: str | None) -> list[str]:
    """The labels of the steps a request runs, laid out for ``model``'s cache or (``None``)
    chosen anew each turn."""
    left_out = PER_TURN if model else LAID_OUT
    return [label for label, *_ in STEPS if label not in left_out]


def timed(steps: list[tuple[str, str, str, str | None]]) -> tuple[dict[str, float], list[bool]]:
    """Wrap each step in a timer (every module's reference to a function, the class's to a
    method): its seconds while ``measuring[0]`` and on the main thread, by label."""
    spent: dict[str, float] = defaultdict(float)
    measuring = [False]
    main = threading.main_thread()
    for label, module_name, name, cls in steps:
        module = importlib.import_module(module_name)
        owner: Any = getattr(module, cls) if cls else module
        original: Callable[..., Any] = getattr(owner, name)

        def count(started: float, label: str = label) -> None:
            if measuring[0] and threading.current_thread() is main:
                spent[label] += time.perf_counter() - started

        wrapper: Callable[..., Any]
        if inspect.iscoroutinefunction(original):

            @functools.wraps(original)
            async def wrapper(*args: Any, _f: Any = original, _c: Any = count, **kw: Any) -> Any:
                started = time.perf_counter()
                try:
                    return await _f(*args, **kw)
                finally:
                    _c(started)

        else:

            @functools.wraps(original)
            def wrapper(*args: Any, _f: Any = original, _c: Any = count, **kw: Any) -> Any:
                started = time.perf_counter()
                try:
                    return _f(*args, **kw)
                finally:
                    _c(started)

        setattr(owner, name, wrapper)
        if cls is None:  # the modules that imported the function by name hold it too
            for other in list(sys.modules.values()):
                if getattr(other, name, None) is original:
                    setattr(other, name, wrapper)
    return spent, measuring


async def run(vault: Path, size: int, turns: int, warm: int, model: str | None) -> None:
    spent, measuring = timed(STEPS)
    chat_id = f"c{size}"
    chats: dict[str, dict[str, Any]] = {
        chat_id: {
            "messages": make_chat(size),
            "topics": mapped(make_chat(size)),
            "smart_context": {"active_topics": ["Asyncio Scraper", "Trip Planning"]},
        }
    }
    pm = pluggy.PluginManager("sidecar")
    pm.add_hookspecs(smart_context.hookspecs)
    plugin = SmartContextPlugin(RandomEmbedder())
    pm.register(plugin)
    for result in pm.hook.sidecar_startup(host=Host(vault, chats, "auto", None, "auto")):
        await result
    modes: list[str] = []

    @contextmanager
    def measured(k: int, ctx: Ctx) -> Iterator[None]:
        measuring[0] = k >= warm  # the request only: not the background pass after it
        try:
            yield
        finally:
            measuring[0] = False
            modes.append(str(ctx.metadata["smart_context"].get("mode")))

    times = await turn_by_turn(pm, plugin, chats, chat_id, model, warm + turns, measured)
    assert plugin.services is not None
    await plugin.services.close()
    samples = [t / 1000 for t in times[warm:]]
    mode = modes[-1]
    total = sum(samples)
    print(f"{platform.machine()}, {platform.processor() or platform.platform()}")
    how = f"laid out for {model}'s cache" if model else "no model named: chosen anew each turn"
    print(
        f"{size:,} messages, {turns} requests turn by turn ({mode}, {how}): median "
        f"{statistics.median(samples) * 1e3:.2f} ms, mean {total / turns * 1e3:.2f} ms; per "
        "request, in the steps timed (nested ones indented):"
    )
    for label in steps_of(model):
        share = spent[label] / total if total else 0.0
        print(f"  {label:34s} {spent[label] / turns * 1e3:6.3f} ms  ({share:4.0%})")


def stamps(vault: Path, repeats: int = 2000) -> None:
    """The item files' stamp (a rules and a references folder of three files each) against the
    careful way it took before for every folder (the vault and the folder resolved, as
    :func:`load_items` reads them), alternating in this process: medians of ``repeats``."""
    for folder in ("rules", "references"):
        (vault / folder).mkdir(exist_ok=True)
        for k in range(3):
            (vault / folder / f"{folder}-{k}.md").write_text("Be brief.\n")

    def careful() -> list[tuple[str, int, int]]:
        root = vault_root(vault)
        out = []
        for folder in ("rules", "references"):
            prefix, listing, _ = _listing(root, folder)
            out += [(prefix + e.name, e.stat().st_mtime_ns, e.stat().st_size) for e in listing]
        return out

    assert list(folder_stamp(vault)) == careful()  # the same stamp either way
    times: dict[str, list[float]] = {"plain": [], "careful": []}
    for _ in range(repeats):
        for name, take in (("plain", lambda: folder_stamp(vault)), ("careful", careful)):
            started = time.perf_counter()
            take()
            times[name].append(time.perf_counter() - started)
    plain, slow = (statistics.median(times[k]) * 1e6 for k in ("plain", "careful"))
    print(
        f"the item files' stamp alone (6 files): {plain:.0f} us against {slow:.0f} us the "
        f"careful way ({plain / slow:.2f} x, alternating in this process)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--turns", type=int, default=60)
    parser.add_argument("--warm", type=int, default=20)
    parser.add_argument(
        "--model", default="gpt-4o", help="the chat model named; none: no model named"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        vault = Path(tmp)
        (vault / ".memory").mkdir()
        asyncio.run(
            run(
                vault,
                args.size,
                args.turns,
                args.warm,
                None if args.model == "none" else args.model,
            )
        )
        stamps(vault)


if __name__ == "__main__":
    main()
