"""Figures for the reference sidecar (run: python benchmarks/bench_server.py).

Starts ``smart-context serve`` on a vault holding one 10,000-message chat, on the embedded
offline default, and reports:
- time until the page answers, and the server's memory (RSS) then;
- memory after opening the chat (``GET /api/chats/{id}``) and asking for its topics, which maps
  the unmapped chat in the background (embedding every message with the local model);
- how long that first mapping takes, and a filter click (``set_filter``) once it is warm.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

SUBJECTS = {
    "asyncio": "my asyncio scraper hangs when a task is cancelled inside gather with a timeout",
    "postgres": "the postgres query plan shows a sequential scan, should I add a btree index",
    "docker": "the docker container behind nginx returns 502 after a rebuild of the image",
    "react": "the react component re-renders forever because the effect updates its own state",
    "hiking": "which huts in the Dolomites are open in December and what winter gear to pack",
}


def make_chat(n: int) -> dict[str, Any]:
    subjects = list(SUBJECTS.values())
    messages = []
    for i in range(n):
        text = subjects[(i // 4) % len(subjects)]
        role = "user" if i % 2 == 0 else "assistant"
        messages.append(
            {
                "id": f"b{i:05d}",
                "role": role,
                "content": f"{text} (note {i})",
                "created_at": "2026-11-01T00:00:00Z",
            }
        )
    return {"id": "big", "title": "A very long chat", "messages": messages, "topics": []}


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def family(pid: int) -> list[int]:
    """The process and its children, theirs too (the topic workers a server starts)."""
    out, todo = [], [pid]
    while todo:
        at = todo.pop()
        out.append(at)
        for task in Path(f"/proc/{at}/task").glob("*/children"):
            with contextlib.suppress(FileNotFoundError):  # a thread that ended meanwhile
                todo.extend(int(child) for child in task.read_text().split())
    return out


def family_rss_mb(pid: int) -> float:
    """The resident memory of the process and its children."""
    total = 0.0
    for at in family(pid):
        with contextlib.suppress(FileNotFoundError):  # a child that ended meanwhile
            total += rss_mb(at)
    return total


def post(base: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
    req = urllib.request.Request(
        base + path,
        data=json.dumps(body).encode(),
        method="POST",
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=600) as resp:
        return dict(json.loads(resp.read()))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=10_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        vault = Path(tmp)
        (vault / ".memory").mkdir()
        (vault / ".memory" / "big.json").write_text(json.dumps(make_chat(args.messages)))
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        exe = Path(sys.executable).with_name("smart-context")
        t0 = time.perf_counter()
        server = subprocess.Popen(
            [str(exe), "serve", str(vault), "--port", str(port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            while True:
                try:
                    urllib.request.urlopen(base + "/", timeout=1).read()
                    break
                except OSError:
                    if time.perf_counter() - t0 > 120:
                        raise SystemExit("the server did not answer within 120 s") from None
                    time.sleep(0.05)
            print(
                f"page answers after {time.perf_counter() - t0:.2f} s; "
                f"server RSS {rss_mb(server.pid):.0f} MB"
            )
            urllib.request.urlopen(f"{base}/api/chats/big", timeout=60).read()
            print(
                f"after opening the {args.messages:,}-message chat: RSS {rss_mb(server.pid):.0f} MB"
            )
            t1 = time.perf_counter()
            result = post(base, "/api/commands/smart_context.get_topics", {"chat_id": "big"})
            while not result["topics"] or result.get("extracting"):
                time.sleep(0.5)
                result = post(base, "/api/commands/smart_context.get_topics", {"chat_id": "big"})
            mapped = time.perf_counter() - t1
            labels = [t["label"] for t in result["topics"] if not t.get("sticky")]
            print(
                f"first mapping (embed all + offline topics): {mapped:.1f} s "
                f"({args.messages / mapped:.0f} messages/s); topics: {', '.join(labels)}"
            )
            print(f"after mapping: RSS {rss_mb(server.pid):.0f} MB")
            clicks = []
            for label in labels[:3] * 3:
                t2 = time.perf_counter()
                res = post(
                    base,
                    "/api/commands/smart_context.set_filter",
                    {"chat_id": "big", "topics": [label]},
                )
                clicks.append((time.perf_counter() - t2) * 1000)
                assert res["status"] == "success", res
            clicks.sort()
            print(
                f"set_filter on the warm chat over HTTP: median {clicks[len(clicks) // 2]:.0f} ms "
                f"(the choice is saved to the chat file in the background)"
            )
            print(f"final RSS {rss_mb(server.pid):.0f} MB")
        finally:
            server.terminate()
            server.wait(timeout=30)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
