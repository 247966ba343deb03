"""``smart-context stats`` on a big vault: the chat files alone, no model, no service.

Writes a vault of ``--chats`` chats of ``--messages`` messages each (half of them replies
carrying a usage record and a budget, as the plugin stores them) in a temporary folder, then
times reading it: :func:`smart_context.usage_stats.vault_usage` in process (median of 5), and
the whole command in a fresh interpreter (imports included).

    PYTHONPATH=. python benchmarks/bench_stats.py [--chats 50] [--messages 2000]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from smart_context.usage_stats import vault_usage

SECTIONS = {"system": 120, "memory": 80, "history": 3300, "summaries": 400, "message": 20}


def write_vault(root: Path, chats: int, messages: int) -> int:
    """The vault's chat files; returns their total size in bytes."""
    folder = root / ".memory"
    folder.mkdir(parents=True)
    size = 0
    for c in range(chats):
        rows: list[dict[str, Any]] = []
        for i in range(messages):
            if i % 2 == 0:
                rows.append({"id": f"u{i}", "role": "user", "content": f"Question {i}? " * 8})
                continue
            usage = {"sent_tokens": 3920, "full_tokens": 60 * i, "ratio": 1.0}
            record = {
                "mode": "full",
                "included_ids": [],
                "budget": {"limit": 4000, "used": 3920, "by_section": SECTIONS},
                "usage": usage | {"counted_with": "o200k_base", "exact": True},
            }
            answer = {"id": f"a{i}", "role": "assistant", "content": f"Answer {i}. " * 30}
            rows.append(answer | {"smart_context": record, "usage": {"prompt_tokens": 3950}})
        path = folder / f"chat-{c:03d}.json"
        path.write_text(json.dumps({"messages": rows, "title": f"Chat {c}"}))
        size += path.stat().st_size
    return size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chats", type=int, default=50)
    parser.add_argument("--messages", type=int, default=2000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        vault = Path(tmp)
        size = write_vault(vault, args.chats, args.messages)
        runs = []
        for _ in range(5):
            start = time.perf_counter()
            found = vault_usage(vault)
            runs.append(time.perf_counter() - start)
        start = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "smart_context_hosts.cli", "stats", str(vault)],
            check=True,
            capture_output=True,
        )
        command = time.perf_counter() - start
    replies = found.total.replies
    print(
        f"{args.chats} chats x {args.messages:,} messages ({replies:,} replies, "
        f"{size / 1e6:.0f} MB): read in {statistics.median(runs) * 1000:.0f} ms "
        f"(median of 5); the command, imports included: {command:.2f} s"
    )


if __name__ == "__main__":
    main()
