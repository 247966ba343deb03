"""``kill -9`` in the middle of writing messages loses none that were acknowledged."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from smart_context_hosts.sidecar import chatfile
from smart_context_hosts.sidecar.memory import ChatMemory

WRITER = """
import asyncio, sys
from pathlib import Path
from smart_context_hosts.sidecar.memory import ChatMemory

async def main():
    memory = ChatMemory(Path(sys.argv[1]))
    for i in range(100_000):
        await memory.append_message("c1", {"id": f"m{i}", "role": "user", "content": "x" * 300})
        print(f"m{i}", flush=True)  # acknowledged: stored, as the pipeline would report it
        if i % 50 == 0:  # now and then a change that is not an append: a whole rewrite
            await memory.update_chat("c1", lambda d: {**d, "title": f"t{i}", "messages": [
                {**m, "seen": True} if m["id"] == "m0" else m for m in d["messages"]]})

asyncio.run(main())
"""


def test_kill_9_while_writing_loses_no_acknowledged_message(tmp_path: Path) -> None:
    path = tmp_path / ".memory" / "c1.json"
    for delay in (0.3, 0.45, 0.6, 0.8, 1.1):
        writer = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(tmp_path)],
            stdout=subprocess.PIPE,
            text=True,
            cwd=Path(__file__).resolve().parents[2],
        )
        assert writer.stdout is not None
        first = writer.stdout.readline()  # started (a loaded machine takes a while to import)
        time.sleep(delay)
        os.kill(writer.pid, signal.SIGKILL)
        out, _ = writer.communicate()
        acknowledged = (first + out).split()
        assert acknowledged, "the writer stored nothing before it was killed"
        stored = asyncio.run(ChatMemory(tmp_path).load_chat("c1"))  # finishes a pending journal
        ids = {m["id"] for m in stored["messages"]}
        assert set(acknowledged) <= ids
        assert json.loads(path.read_bytes()) == stored  # the file is whole, plain JSON
        assert not chatfile.journal_path(path).exists()
