"""A team on one machine: what one ``smart-context proxy --vaults DIR`` gives 10, 50 and 200 people.

Run: python benchmarks/bench_team.py [--teams 10,50,200] [--seconds 120] [--workers 4] [--settled]

Three kinds of process, as a team runs them:

- an upstream on loopback that streams like a real model: the first token after 300 ms, then
  40 tokens a second (a reply of 40 tokens), with ``usage`` at the end; it notes when each
  request arrived and when its first piece left;
- the proxy, as the command runs it: ``smart-context proxy --vaults DIR --user-header
  X-Bench-Person`` on the embedded offline default (the real local model), its background passes
  (embeddings, maps, summaries) running as they do;
- the people, ``--workers`` processes of asyncio clients: each person writes a turn every 10-30 s
  (uniform, a fixed seed) in one chat of their own, sending the whole history with each turn as
  OpenAI clients do, and streams the reply.

Each person's vault holds their chat before the run: one person in ten has 10,000 messages, one
3,000, three 300 and five 30, with the vectors of those messages already stored (random unit
vectors under the local model's name: the proxy embeds only what is new), and no topic map or
summaries yet: the proxy makes them during the run, as on the day a team's existing
chats first reach it. ``--settled`` seeds the vaults as the proxy's own passes leave them
(:func:`settled_vault`: embedded by the local model, mapped and summarized, about a
minute before the run), the team's steady state. Per team size, printed:

- the time the proxy adds to the first byte, p50 and p99, over all turns but each person's first
  (their chat's first read, printed apart): the client's wait for the first piece, from the
  moment its request body is written, less the upstream's own time (arrival to first piece
  sent), clocks compared on this machine's monotonic clock;
- the proxy's CPU (share of one core over the run) and resident memory, in all and per person,
  its worker processes (topic maps) counted in;
- the backlog: how long the proxy's background work runs on after the last turn (seconds until
  its CPU falls idle), and whether every message has its vector once it has stopped;
- messages lost or stored twice: each person's turns against their chat file (must be 0).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

from benchmarks.bench_server import family, family_rss_mb

if TYPE_CHECKING:
    from smart_context.services import Services

ROOT = Path(__file__).resolve().parents[1]
PERSON_HEADER = "X-Bench-Person"
# the proxy's command; ``{switch}``: the interpreter's switch interval it sets (how long a thread
# may keep the lock another asks for: the command's 0.001 s, Python's default 0.005)
PROXY_MAIN = (
    "import smart_context_hosts.sidecar.serve as s; s.SWITCH_INTERVAL = {switch}; "
    "from smart_context_hosts.cli import main; main()"
)
FIRST_TOKEN = 0.3  # seconds before the upstream's first piece
TOKENS_PER_SECOND = 40
REPLY_TOKENS = 40
SIZES = [10_000, 3_000, 300, 300, 300, 30, 30, 30, 30, 30]  # a chat's messages, by person % 10
SUBJECTS = [
    "the asyncio scraper gets rate limited by the shop after a few hundred pages",
    "a partial index on the orders table would help the postgres planner here",
    "nginx answers 502 right after docker compose brings the api container up",
    "the react search box re-renders on every keystroke and loses its state",
    "the hut at Lagazuoi in winter, the cold at night and what gear to bring",
    "the sourdough starter smells of acetone after three days in the fridge",
]


# --- the upstream ------------------------------------------------------------------------------


def upstream_app() -> Any:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, StreamingResponse
    from starlette.routing import Route

    timings: dict[str, list[float]] = {}

    async def completions(request: Request) -> StreamingResponse:
        arrived = time.monotonic()
        body = await request.json()
        key = request.headers.get("x-bench-turn", "")
        said = str(body["messages"][-1].get("content", ""))[:40]

        async def pieces() -> Any:
            await asyncio.sleep(FIRST_TOKEN)
            for i in range(REPLY_TOKENS):
                delta = {"content": f"reply to {said}:" if i == 0 else f" word{i}"}
                chunk = {"choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
                if i == 0:
                    timings[key] = [arrived, time.monotonic()]
                yield f"data: {json.dumps(chunk)}\n\n".encode()
                await asyncio.sleep(1 / TOKENS_PER_SECOND)
            done = {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
            yield f"data: {json.dumps(done)}\n\n".encode()
            usage = {"prompt_tokens": 1000, "completion_tokens": REPLY_TOKENS}
            yield f"data: {json.dumps({'choices': [], 'usage': usage})}\n\n".encode()
            yield b"data: [DONE]\n\n"

        return StreamingResponse(pieces(), media_type="text/event-stream")

    async def read_timings(request: Request) -> JSONResponse:
        return JSONResponse(timings)

    return Starlette(
        routes=[
            Route("/v1/chat/completions", completions, methods=["POST"]),
            Route("/bench/timings", read_timings, methods=["GET"]),
        ]
    )


def serve_upstream(port: int) -> None:
    import uvicorn

    uvicorn.run(upstream_app(), host="127.0.0.1", port=port, log_level="warning")


# --- the people --------------------------------------------------------------------------------


def reply_text(said: str) -> str:
    return f"reply to {said[:40]}:" + "".join(f" word{i}" for i in range(1, REPLY_TOKENS))


async def person(
    client: Any, url: str, name: str, history: list[dict[str, Any]], until: float, seed: int
) -> dict[str, Any]:
    rng = random.Random(seed)  # noqa: S311 (a benchmark's schedule, not a secret)
    turns: list[dict[str, Any]] = []
    await asyncio.sleep(rng.uniform(0, 20))  # the team does not start at one instant
    n = 0
    # the history as JSON, one piece a message, kept as the chat grows: a client process serves
    # a dozen people, and writing a 10,000-message body afresh each turn held its loop for tens
    # of milliseconds, late to read other people's first pieces (and timed as the proxy's)
    encoded = [json.dumps(m).encode() for m in history]
    while time.monotonic() < until:
        text = f"{SUBJECTS[(seed + n) % len(SUBJECTS)]}: {name} asks question {n}"
        history.append({"role": "user", "content": text})
        encoded.append(json.dumps(history[-1]).encode())
        body = b'{"model": "bench-model", "stream": true, "messages": [%s]}' % b", ".join(encoded)
        key = f"{name}-{n}"
        sent = time.monotonic()
        first = None
        got = ""
        try:
            async with client.stream(
                "POST",
                f"{url}/v1/chat/completions",
                content=body,
                headers={
                    PERSON_HEADER: name,
                    "X-Smart-Context-Chat": "c",
                    "X-Bench-Turn": key,
                    "Content-Type": "application/json",
                },
            ) as answer:
                if answer.status_code != 200:  # the proxy's error, said in its body
                    got = (await answer.aread()).decode("utf-8", "replace")
                async for line in answer.aiter_lines():
                    if line.startswith("data: {"):
                        first = first or time.monotonic()
                        data = json.loads(line[6:])
                        for choice in data.get("choices", []):
                            got += choice["delta"].get("content") or ""
                status = answer.status_code
        except Exception as exc:  # noqa: BLE001 - a failed turn is a figure, not a crash
            status, got = -1, f"{type(exc).__name__}: {exc}"
        ok = status == 200 and got == reply_text(text)
        history.append({"role": "assistant", "content": got if ok else ""})
        encoded.append(json.dumps(history[-1]).encode())
        if not ok:
            for kept in (history, encoded):
                del kept[-2:]
        error = None if ok else f"status {status}: {got[:160]!r}"
        turns.append(
            {"key": key, "sent": sent, "first": first, "ok": ok, "text": text, "error": error}
        )
        n += 1
        pause = rng.uniform(10, 30)
        if time.monotonic() + pause >= until:
            break
        await asyncio.sleep(pause)
    return {"name": name, "turns": turns}


async def people(url: str, names: list[str], root: Path, seconds: float, out: Path) -> None:
    import httpx

    until = time.monotonic() + seconds
    histories = {name: seed_history(root, name) for name in names}
    limits = httpx.Limits(max_connections=1000, max_keepalive_connections=1000)
    async with httpx.AsyncClient(timeout=600, limits=limits) as client:
        results = await asyncio.gather(
            *(person(client, url, name, histories[name], until, int(name[1:])) for name in names)
        )
    await asyncio.to_thread(out.write_text, json.dumps(results))


def seed_history(root: Path, name: str) -> list[dict[str, Any]]:
    """The person's chat as their client holds it: what the vault holds, without ids."""
    chat = json.loads((root / name / ".memory" / "c.json").read_text())
    return [{"role": m["role"], "content": m["content"]} for m in chat["messages"]]


# --- the vaults --------------------------------------------------------------------------------


def seed_vaults(root: Path, count: int, model_id: str, settled: bool = False) -> None:
    """Each person's vault with their chat and its vectors (module docstring); ``settled``: as
    the proxy itself leaves a vault (:func:`settled_vault`), one per chat length,
    copied to each person of that length."""
    if settled:
        made: dict[int, Path] = {}
        for i in range(count):
            size = SIZES[i % len(SIZES)]
            if size not in made:
                made[size] = settled_vault(root.parent / f"settled-{size}", size)
            shutil.copytree(made[size], root / f"p{i:03d}")
        return
    from smart_context.vectors import files
    from smart_context.vectors.chat import ChatVectors
    from smart_context.vectors.codec import cache_key

    rng = np.random.default_rng(0)
    for i in range(count):
        name = f"p{i:03d}"
        memory = root / name / ".memory"
        memory.mkdir(parents=True)
        size = SIZES[i % len(SIZES)]
        messages = write_chat(
            memory,
            f"{name}'s chat",
            [
                f"{SUBJECTS[(j // 8 + i) % len(SUBJECTS)]} (message {j} of {name})"
                for j in range(size)
            ],
        )
        vectors = rng.standard_normal((size, 384)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        matrix = ChatVectors(model_id, 384)
        matrix.add([cache_key(m["id"], m["content"]) for m in messages], vectors)
        files.save(memory / "c.embeddings.json", matrix)


def write_chat(memory: Path, title: str, texts: list[str]) -> list[dict[str, Any]]:
    """Chat ``c`` in the vault's ``memory`` folder: ``texts`` as its messages, the user's and
    the assistant's in turn; its messages returned."""
    messages = [
        {
            "id": f"m{j:05d}",
            "role": "user" if j % 2 == 0 else "assistant",
            "content": text,
            "created_at": "2026-11-01T00:00:00.000+00:00",
        }
        for j, text in enumerate(texts)
    ]
    chat = {"id": "c", "title": title, "messages": messages, "topics": []}
    (memory / "c.json").write_text(json.dumps(chat))
    return messages


@contextlib.asynccontextmanager
async def plugin_services(folder: Path) -> AsyncIterator[Services]:
    """The plugin's services over the vault at ``folder``, its sidecar started as the
    proxy's is, and stopped after."""
    from smart_context.plugin import SmartContextPlugin
    from smart_context_hosts.sidecar.runtime import Sidecar

    sidecar = Sidecar(folder)
    await sidecar.start()
    try:
        plugin = sidecar.pm.get_plugin("smart_context")
        assert isinstance(plugin, SmartContextPlugin) and plugin.services is not None
        yield plugin.services
    finally:
        await sidecar.stop()


def settled_vault(folder: Path, size: int) -> Path:
    """A vault whose chat of ``size`` messages the proxy's own passes have gone through, as
    after a team's first day: every message embedded by the local model, the chat's topic
    map made, its summaries written. The messages cycle through
    :data:`SUBJECTS` eight at a time, as the people's new turns do, so a new turn joins the map
    as a real one would; random vectors (the default seeding) join nothing, and every long
    chat's map is made again during the run."""
    from smart_context.memory.refresh import refresh_memory
    from smart_context.paths import ChatId
    from smart_context.topics.refresh import refresh

    memory = folder / ".memory"
    memory.mkdir(parents=True)
    texts = [f"{SUBJECTS[(j // 8) % len(SUBJECTS)]} (message {j})" for j in range(size)]
    write_chat(memory, "a settled chat", texts)

    async def settle() -> None:
        async with plugin_services(folder) as services:
            await refresh(services.topic_pass, ChatId("c"))
            await refresh_memory(services.memory_pass, ChatId("c"))

    start = time.monotonic()
    asyncio.run(settle())
    print(f"    a settled {size:,}-message vault made in {time.monotonic() - start:.0f} s")
    return folder


# --- measuring the proxy -----------------------------------------------------------------------


def cpu_seconds(pid: int) -> float:
    """CPU time of the process and its children, living (as now) and ended (as waited for)."""
    total = 0
    for at in family(pid):
        with contextlib.suppress(FileNotFoundError):  # a child that ended meanwhile
            fields = Path(f"/proc/{at}/stat").read_text().rsplit(")", 1)[1].split()
            total += sum(int(f) for f in fields[11:15])  # utime, stime, cutime, cstime
    return total / os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(url: str, process: subprocess.Popen[bytes]) -> None:
    import httpx

    for _ in range(1200):
        if process.poll() is not None:
            raise SystemExit(f"{url} did not start")
        try:
            httpx.get(url, timeout=2)
            return
        except httpx.TransportError:
            time.sleep(0.1)
    raise SystemExit(f"{url} did not answer")


def idle_after(pid: int, quiet: float = 0.05, window: float = 2.0, limit: float = 600) -> float:
    """Seconds until the process used under ``quiet`` of a core over ``window`` seconds."""
    start = time.monotonic()
    while time.monotonic() - start < limit:
        before = cpu_seconds(pid)
        time.sleep(window)
        if (cpu_seconds(pid) - before) / window < quiet:
            return time.monotonic() - start - window
    return float("inf")


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else float("nan")


def run_team(
    count: int,
    seconds: float,
    workers: int,
    model_id: str,
    log: Path | None = None,
    switch: float = 0.001,
    settled: bool = False,
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "vaults"
        seed_vaults(root, count, model_id, settled)
        up_port, proxy_port = free_port(), free_port()
        upstream = subprocess.Popen(
            [sys.executable, __file__, "--serve-upstream", str(up_port)], cwd=ROOT
        )
        proxy = subprocess.Popen(
            [
                *(sys.executable, "-c", PROXY_MAIN.format(switch=switch)),
                *("proxy", "--vaults", str(root), "--user-header", PERSON_HEADER),
                *("--upstream", f"http://127.0.0.1:{up_port}/v1", "--port", str(proxy_port)),
            ],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=log.open("wb") if log else subprocess.DEVNULL,
            # asyncio's debug mode logs each step that held the event loop over 100 ms
            env={**os.environ, "PYTHONASYNCIODEBUG": "1"} if log else None,
        )
        try:
            wait_for(f"http://127.0.0.1:{up_port}/bench/timings", upstream)
            wait_for(f"http://127.0.0.1:{proxy_port}/healthz", proxy)
            rss_start = family_rss_mb(proxy.pid)
            cpu_start, wall_start = cpu_seconds(proxy.pid), time.monotonic()
            names = [f"p{i:03d}" for i in range(count)]
            outs = [Path(tmp) / f"people{w}.json" for w in range(workers)]
            clients = [
                subprocess.Popen(
                    [
                        *(sys.executable, __file__, "--people", f"http://127.0.0.1:{proxy_port}"),
                        *("--names", ",".join(names[w::workers]), "--root", str(root)),
                        *("--seconds", str(seconds), "--out", str(outs[w])),
                    ],
                    cwd=ROOT,
                )
                for w in range(workers)
            ]
            peak = 0.0
            while any(c.poll() is None for c in clients):
                peak = max(peak, family_rss_mb(proxy.pid))
                time.sleep(1)
            cpu_run, wall_run = cpu_seconds(proxy.pid) - cpu_start, time.monotonic() - wall_start
            backlog = idle_after(proxy.pid)
            import httpx

            timings = httpx.get(f"http://127.0.0.1:{up_port}/bench/timings", timeout=30).json()
            results = [r for out in outs for r in json.loads(out.read_text())]
        finally:
            for process in (proxy, upstream):
                process.send_signal(signal.SIGINT)  # as a person stops it: what is due is saved
                try:
                    process.wait(60)
                except subprocess.TimeoutExpired:
                    process.kill()
        report(count, results, timings, root, cpu_run, wall_run, rss_start, peak, backlog)


def report(
    count: int,
    results: list[dict[str, Any]],
    timings: dict[str, list[float]],
    root: Path,
    cpu: float,
    wall: float,
    rss_start: float,
    rss_peak: float,
    backlog: float,
) -> None:
    added: list[float] = []
    first_turns: list[float] = []
    failed = 0
    reasons: set[str] = set()  # why turns failed
    parts: tuple[list[float], list[float]] = ([], [])  # before the upstream had it; after
    by_size: dict[int, list[float]] = {}
    later: list[float] = []  # turns sent after everyone's first minute
    start = min((t["sent"] for r in results for t in r["turns"]), default=0.0)
    for result in results:
        size = SIZES[int(result["name"][1:]) % len(SIZES)]
        for i, turn in enumerate(result["turns"]):
            upstream = timings.get(turn["key"])
            if not turn["ok"] or upstream is None or turn["first"] is None:
                failed += 1
                reasons.add(
                    turn.get("error")
                    or ("the upstream never had it" if upstream is None else "no piece came")
                )
                continue
            arrived, first_out = upstream
            ahead, behind = (arrived - turn["sent"]) * 1000, (turn["first"] - first_out) * 1000
            extra = ahead + behind
            (first_turns if i == 0 else added).append(extra)
            if i:
                parts[0].append(ahead)
                parts[1].append(behind)
                by_size.setdefault(size, []).append(extra)
                if turn["sent"] > start + 60:
                    later.append(extra)
    lost = twice = 0
    missing_vectors = 0
    for result in results:
        chat = json.loads((root / result["name"] / ".memory" / "c.json").read_text())
        stored = [m["content"] for m in chat["messages"] if m["role"] == "user"]
        for turn in result["turns"]:
            if turn["ok"]:
                found = stored.count(turn["text"])
                lost += found == 0
                twice += found > 1
        vectors = json.loads((root / result["name"] / ".memory" / "c.embeddings.json").read_text())
        missing_vectors += max(0, len(chat["messages"]) - len(vectors["keys"]))
    turns = len(added) + len(first_turns)
    print(
        f"{count} people, {turns} turns in {wall:.0f} s ({failed} failed): added to the first "
        f"byte p50 {percentile(added, 50):.1f} ms, p99 {percentile(added, 99):.1f} ms "
        f"(a person's first turn: p50 {percentile(first_turns, 50):.0f} ms, "
        f"max {max(first_turns, default=float('nan')):.0f} ms)"
    )
    print(
        f"    of which until the upstream had the request p50 {percentile(parts[0], 50):.1f} / "
        f"p99 {percentile(parts[0], 99):.1f} ms, from its first piece to the client's "
        f"p50 {percentile(parts[1], 50):.1f} / p99 {percentile(parts[1], 99):.1f} ms"
    )
    for reason in sorted(reasons)[:3]:
        print(f"    a turn failed: {reason}")
    print(
        f"    after the first minute: p50 {percentile(later, 50):.1f} ms, p99 "
        f"{percentile(later, 99):.1f} ms ({len(later)} turns)"
    )
    print(
        "    by the chat's length, p50 / p99: "
        + ", ".join(
            f"{size:,} messages {percentile(v, 50):.0f} / {percentile(v, 99):.0f} ms"
            for size, v in sorted(by_size.items())
        )
    )
    print(
        f"    proxy CPU {cpu / wall:.0%} of a core ({cpu / wall / count:.2%} a person); RSS "
        f"{rss_start:.0f} MB at start, {rss_peak:.0f} MB at the peak "
        f"({(rss_peak - rss_start) / count:.1f} MB a person)"
    )
    print(
        f"    background: idle {backlog:.1f} s after the last turn; messages without a vector "
        f"then: {missing_vectors}; messages lost: {lost}, stored twice: {twice}"
    )


def proxy_model_id() -> str:
    """The name the proxy's vaults keep their vectors under (a vault with no settings: the
    local model, through the host)."""

    async def ask() -> str:
        with tempfile.TemporaryDirectory() as tmp:
            (Path(tmp) / ".memory").mkdir()
            async with plugin_services(Path(tmp)) as services:
                return str((await services.store()).embedder.model_id)

    return asyncio.run(ask())


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--teams", default="10,50,200")
    parser.add_argument("--seconds", type=float, default=120)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument(
        "--settled",
        action="store_true",
        help="vaults as the proxy leaves them after its first day (embedded, mapped, "
        "summarized) rather than chats with random vectors and no map yet",
    )
    parser.add_argument(
        "--proxy-log",
        type=Path,
        help="the proxy's log here, with asyncio's debug mode (what held its loop over 100 ms)",
    )
    parser.add_argument(
        "--switch-interval",
        type=float,
        default=0.001,
        help="the proxy's sys.setswitchinterval (the command's 0.001; Python's default 0.005)",
    )
    parser.add_argument("--serve-upstream", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--people", help=argparse.SUPPRESS)
    parser.add_argument("--names", help=argparse.SUPPRESS)
    parser.add_argument("--root", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_upstream:
        serve_upstream(args.serve_upstream)
        return
    if args.people:
        names = args.names.split(",") if args.names else []
        asyncio.run(people(args.people, names, args.root, args.seconds, args.out))
        return
    import platform

    print(f"{platform.machine()}, {os.cpu_count()} cores, {platform.platform()}")
    model_id = proxy_model_id()
    for count in (int(t) for t in args.teams.split(",")):
        run_team(
            count,
            args.seconds,
            args.workers,
            model_id,
            args.proxy_log,
            args.switch_interval,
            args.settled,
        )


if __name__ == "__main__":
    main()
