"""What looking at the vault's notes costs a request.

Run: ``python benchmarks/bench_note_scan.py [--notes 500,2000,5000] [--requests 40]``.

Writes that many small notes into a temporary vault (20 folders), reads them once, then times
:meth:`KnowledgeIndex.current` for ``--requests`` requests with nothing changed, two ways in the
same process: looking at every file each time (no background look available, as before), and as
the plugin runs it (a background look asked for past ``LARGE_VAULT`` notes). The figures are the
median and p95 of a request's wait, in milliseconds.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from smart_context.knowledge.index import LARGE_VAULT, KnowledgeIndex


def write_vault(root: Path, notes: int) -> None:
    for n in range(notes):
        folder = root / f"area-{n % 20}"
        folder.mkdir(exist_ok=True)
        (folder / f"note-{n}.md").write_text(f"# Note {n}\n\nSome text about thing {n}.\n")


async def waits(index: KnowledgeIndex, requests: int) -> list[float]:
    await index.current()  # the first look reads every note
    out = []
    for _ in range(requests):
        started = time.perf_counter()
        await index.current()
        out.append((time.perf_counter() - started) * 1000)
    return out


def line(name: str, ms: list[float]) -> str:
    p95 = sorted(ms)[int(0.95 * (len(ms) - 1))]
    return f"    {name:<38} median {statistics.median(ms):7.3f} ms   p95 {p95:7.3f} ms"


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--notes", default="500,2000,5000")
    parser.add_argument("--requests", type=int, default=40)
    args = parser.parse_args()
    print(
        f"machine: {platform.machine()}, Python {platform.python_version()}; "
        f"LARGE_VAULT = {LARGE_VAULT}"
    )
    for notes in (int(n) for n in args.notes.split(",")):
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            write_vault(root, notes)
            every = KnowledgeIndex(root, ["."])
            asked: list[int] = []
            background = KnowledgeIndex(root, ["."])
            background.on_stale = functools.partial(asked.append, 1)
            print(f"  {notes} notes:")
            print(line("every file, every request (before)", await waits(every, args.requests)))
            print(line("as the plugin runs now", await waits(background, args.requests)))
            print(f"    background looks asked for: {len(asked)}")


if __name__ == "__main__":
    asyncio.run(main())
