"""The topic map of real conversations: REALTALK's chats, mapped as the background pass maps them.

Run: ``python benchmarks/public/bench_real_topics.py --data PATH/TO/REALTALK [--part tune|report]``
(or ``SMART_CONTEXT_REALTALK``; a bare mirror works), ``--cache DIR`` for the embeddings.

SGD's chats (``bench_topics.py``) are assembled from service dialogues and have known subjects;
REALTALK's 10 chats (``data/Chat_*.json``) are two people talking over three weeks, as a user's
long chat is, and name no subjects, so there is no click to score. What this prints is what a
user would see in the panel: per chat, its bubbles, the share of the chat the largest one holds
(a bubble of most of the chat filters nothing), and their labels; per part, the chats where one
bubble holds more than half. Chats 1-5 are the tune part, 6-10 the report part, as in
``bench_history.py``. Through the real plugin: the offline extractor, the local model,
``similarity_threshold = "auto"``. A diagnostic, with no target.

``--windows`` also maps stretches of each chat (300, 500 and 800 messages, every 150) with the
same offline extractor, from the vectors the plugin keeps: five tune chats are few, and the
tune part's windows show what only the report part's whole chats did (one subject split off a
varied rest, a bubble of most of the chat).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))

from benchmarks.public.bench_history import PARTS, Chat, load  # noqa: E402
from benchmarks.public.snapshot import reported, snapshot  # noqa: E402
from benchmarks.topic_runs import start  # noqa: E402
from smart_context.paths import check_chat_id  # noqa: E402
from smart_context.topics.offline.cluster import extract_offline  # noqa: E402
from smart_context.topics.refresh import refresh  # noqa: E402

MOST = 0.5  # a bubble holding more than this share of a chat is "most of it"
WINDOWS = (300, 500, 800)  # --windows: stretches of a chat this long...
STEP = 150  # ...starting every this many messages


def bubbles(topics: list[dict[str, Any]]) -> list[tuple[str, int]]:
    """The map's bubbles as the panel shows them (sticky instructions aside): label, size."""
    return [
        (str(t.get("label", "")), len(t.get("message_ids", [])))
        for t in topics
        if not t.get("sticky")
    ]


def largest_share(found: list[tuple[str, int]], messages: int) -> float:
    """The share of the chat's messages the largest bubble holds (0 for no bubble)."""
    return max((size for _, size in found), default=0) / max(messages, 1)


def windows(n: int) -> list[tuple[int, int]]:
    """The stretches ``(first, end)`` of an ``n``-message chat that ``--windows`` maps."""
    return [
        (first, first + length) for length in WINDOWS for first in range(0, n - length + 1, STEP)
    ]


async def map_chats(
    chats: list[Chat], cache: Path, stretches: bool = False
) -> tuple[dict[int, list[tuple[str, int]]], dict[tuple[int, int, int], list[tuple[str, int]]]]:
    """Each chat mapped through the plugin's background pass: its bubbles, by chat number (the
    vectors are kept in memory as their cache file gives them back, so a first run, which
    embeds, maps what every later run does); with ``stretches``, also its :func:`windows`
    mapped by the offline extractor from those vectors, by ``(chat, first, end)``."""
    data = {f"realtalk-{c.number}": {"messages": [dict(m) for m in c.messages]} for c in chats}
    services = await start(cache, data, "auto")
    whole, parts = {}, {}
    try:
        for chat in chats:
            chat_id = check_chat_id(f"realtalk-{chat.number}")
            await refresh(services.topic_pass, chat_id)
            await services.chats.load(chat_id)
            whole[chat.number] = bubbles(list((await services.chats.view(chat_id)).topics))
            if stretches:
                vectors = await (await services.store()).sync_chat(chat_id, chat.messages)
                for first, end in windows(len(chat.messages)):
                    found = extract_offline(chat.messages[first:end], vectors[first:end])
                    parts[chat.number, first, end] = [(t.label, t.count) for t in found.topics]
    finally:
        await services.close()
    return whole, parts


def report(name: str, chats: list[Chat], found: dict[int, list[tuple[str, int]]]) -> None:
    print(f"\n== {name} part (chats {', '.join(str(c.number) for c in chats)})")
    shares = []
    for chat in chats:
        mapped = found[chat.number]
        share = largest_share(mapped, len(chat.messages))
        shares.append(share)
        labels = ", ".join(f"{label} {size}" for label, size in mapped)
        print(
            f"  chat {chat.number}: {len(chat.messages):,} messages, {len(mapped)} bubbles, "
            f"the largest {share:.0%}: {labels}"
        )
    most = sum(s > MOST for s in shares)
    print(
        f"  bubbles per chat {statistics.mean(len(found[c.number]) for c in chats):.1f}; "
        f"chats where one bubble holds more than half: {most} of {len(chats)}"
    )


def report_windows(found: dict[tuple[int, int, int], list[tuple[str, int]]]) -> None:
    print(f"\n== stretches of {', '.join(map(str, WINDOWS))} messages, every {STEP}")
    most = []
    for (number, first, end), mapped in sorted(found.items()):
        share = largest_share(mapped, end - first)
        if share > MOST:
            most.append(f"chat {number} [{first}:{end}] {len(mapped)} bubbles, {share:.0%}")
    print(f"  {len(found)} stretches; one bubble holds more than half in {len(most)}")
    for line in most:
        print(f"    {line}")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--data", help="REALTALK: a checkout or a bare mirror")
    cache = Path(tempfile.gettempdir()) / "sc-cache-real-topics"
    parser.add_argument("--cache", type=Path, default=cache, help="embeddings kept between runs")
    parser.add_argument("--part", choices=("tune", "report", "both"), default="both")
    parser.add_argument("--windows", action="store_true", help="also map stretches of each chat")
    args = parser.parse_args()
    source = snapshot("realtalk", args.data)
    if source is None:
        return
    chats = load(source, args.part)
    found, stretches = asyncio.run(map_chats(chats, args.cache, args.windows))
    for name, numbers in PARTS.items():
        part = [c for c in chats if c.number in numbers]
        if part:
            report(name, part, found)
    if stretches:
        report_windows(stretches)


if __name__ == "__main__":
    with reported():
        main()
