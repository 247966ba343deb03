"""Chat writes inside Tailor: ``update_chat`` over Tailor's memory commands (the stand-in of
tests/tailor/standin, whose memory plugin reads and writes JSON files as Tailor's does).

1. The race: a writer appends ``--rounds`` messages as Tailor's plugins do (load, await up to
   2 ms, save) while topics are written ``--rounds`` times, by our ``update_chat`` and by the
   load-await-save pattern of Tailor's old Smart Context plugin; messages kept of each.
2. The cost of one topic write (read, write, read back) on chats of 1,000 and 10,000 messages,
   median of 5.

    PYTHONPATH=. python benchmarks/bench_tailor_memory.py [--rounds 200] [--seeds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "tailor" / "standin"))

from tests.tailor.conftest import make_vault, responder

HOLD = 0.002


async def start(root: Path, yields: bool) -> Any:
    from sidecar.services.llm_service import LLMService
    from sidecar.vault_brain import VaultBrain

    vault = make_vault(root, {"summarizer": "offline"}, {"yield_in_commands": yields})
    brain = VaultBrain(vault, LLMService(responder))
    await brain.initialize()
    return brain


async def race(brain: Any, update: Any, rounds: int, seed: int) -> int:
    """Messages of the appending writer still in the chat afterwards."""
    run = brain.execute_command
    await run("memory.save_chat", chat_id="race", data={"messages": []})
    rng_a, rng_b = random.Random(seed), random.Random(seed + 1)  # noqa: S311 - repeatable timing

    async def append() -> None:
        for i in range(rounds):
            data = (await run("memory.load_chat", chat_id="race"))["data"]
            await asyncio.sleep(rng_a.random() * HOLD)
            data["messages"].append({"id": f"r{i}", "role": "user", "content": str(i)})
            await run("memory.save_chat", chat_id="race", data=data)
            await asyncio.sleep(rng_a.random() * HOLD)

    async def topics() -> None:
        for j in range(rounds):
            await update("race", lambda d, j=j: {**d, "topics": [{"label": f"T{j}"}]})
            await asyncio.sleep(rng_b.random() * HOLD)

    await asyncio.gather(append(), topics())
    stored = (await run("memory.load_chat", chat_id="race"))["data"]
    return sum(1 for m in stored["messages"] if m["id"].startswith("r"))


def load_await_save(brain: Any, rng: random.Random) -> Any:
    async def update(chat_id: str, fn: Any) -> None:
        data = (await brain.execute_command("memory.load_chat", chat_id=chat_id))["data"]
        await asyncio.sleep(rng.random() * HOLD)  # the old plugin awaited the model here
        await brain.execute_command("memory.save_chat", chat_id=chat_id, data=fn(data))

    return update


async def write_cost(brain: Any, messages: int) -> float:
    chat = {
        "messages": [
            {"id": f"m{i}", "role": "user", "content": "word " * 40} for i in range(messages)
        ]
    }
    await brain.execute_command("memory.save_chat", chat_id="big", data=chat)
    memory = brain.plugins["smart_context"].smart_context.core.services.host.memory
    times = []
    for n in range(5):
        began = time.perf_counter()
        await memory.update_chat("big", lambda d, n=n: {**d, "topics": [{"label": f"T{n}"}]})
        times.append(time.perf_counter() - began)
    return statistics.median(times)


async def main(rounds: int, seeds: int) -> None:
    for yields in (False, True):
        with tempfile.TemporaryDirectory() as folder:
            brain = await start(Path(folder), yields)
            memory = brain.plugins["smart_context"].smart_context.core.services.host.memory
            for seed in range(seeds):
                ours = await race(brain, memory.update_chat, rounds, seed)
                pattern = load_await_save(brain, random.Random(seed))  # noqa: S311 - repeatable
                theirs = await race(brain, pattern, rounds, seed)
                print(
                    f"commands {'yield' if yields else 'as Tailor'}, seed {seed}: "
                    f"update_chat kept {ours}/{rounds}, load-await-save kept {theirs}/{rounds}"
                )
            print(f"  rewrites after a stale writer undid ours: {memory.retries}")
            if not yields:
                for size in (1_000, 10_000):
                    cost = await write_cost(brain, size)
                    size_mb = (Path(folder) / "vault" / ".memory" / "big.json").stat().st_size / 1e6
                    ms = cost * 1000
                    print(f"  one topic write, {size} messages ({size_mb:.1f} MB): {ms:.0f} ms")
            for name in list(brain.plugins):
                await brain.unload_plugin(name)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--seeds", type=int, default=3)
    args = parser.parse_args()
    asyncio.run(main(args.rounds, args.seeds))
