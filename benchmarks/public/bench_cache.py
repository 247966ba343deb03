"""The bill of a long real chat replayed turn by turn, with the prompt cache modelled as providers
apply it: ``smart-context proxy`` beside the plain client that sends the whole conversation.

Data: REALTALK (``data/Chat_*.json``, read as ``bench_history.py`` reads it), ``speaker_1`` as the
user. Each run of one speaker's messages is one message (joined by a line break, in the session
of its last), so turns alternate. A stateless client (the ``openai`` way) sends, every turn, a
short system prompt and the whole conversation so far, ending with the user's message; the
upstream answers with the chat's own next message; after the last turn, the chat's questions
are asked one by one, each answered "OK". Time is simulated: turns 30 s apart, and a day from
the last turn of a session to the first of the next (REALTALK's sessions are half a day to days
apart), so every cache is cold when a session starts; the plugin reads that clock too
(``services.clock``).

Every request that reaches the upstream is scored by every cache of
:mod:`benchmarks.public.prompt_cache` (OpenAI's and Anthropic's in o200k tokens, vLLM's and
llama.cpp's in Llama 3's; how a request becomes tokens is said there). The upstream reports
``usage`` as its provider would: ``prompt_tokens`` and ``prompt_tokens_details.cached_tokens``,
by the cache of the configuration's model.

Configurations (``--configs``, default all): ``plain``, the client's own requests (always run:
every bill is relative to it); through the proxy, in process on a fresh vault per chat (offline
topics, the product's defaults otherwise: a budget of 8,000 tokens): ``today``
(``prompt_cache = "none"``, gpt-5: re-selected every turn, the product's old behaviour),
``gpt-5``, ``gpt-4o``, ``claude`` (claude-sonnet-4-5) and ``local`` (llama3.1:8b, its window
8,000 tokens). A configuration whose settings this version of the product refuses is skipped
with a note.

Printed per part, for the conversation's turns and for the questions apart, per configuration:
tokens sent per turn; the share OpenAI's rule serves from its cache; the input billed relative to
the plain client's by OpenAI's rule at read prices 0.1, 0.25, 0.5 and 1.0 (``*``: the
configuration's own price) and by Anthropic's (reads 0.1, writes 1.25); tokens to prefill per
turn, and their share of those sent, by vLLM's and llama.cpp's rules; the requests that do not
start with the one before (its last user message aside; the first turn of each session not
counted); and the questions' evidence recall: the share of a question's evidence messages whose
text is inside what went upstream (a short one, "Yes!", may be found in another message: alike
for every configuration), beside plain baselines given the room ``today`` gave the chat's own
messages (BM25, dense, hybrid: benchmarks/public/baselines.py, best first while they fit).

``--joined``: the part's chats end to end as one conversation, without questions, billed per
turn around 50k, 100k and 200k tokens of conversation (``--part both`` reaches 200k): whether
the bill stays flat once the conversation is past the budget.

The background passes are waited for before every ``--settle-every`` K-th turn (default 1: every
turn) and before each question, as a person's pauses allow. ``--turns N`` replays only each
chat's first N turns (the questions still follow), for a quick look.

Time (x86_64, 2 cores shared with other work): report chat 6, the longest (424 turns, 70
questions), takes 1-2 s for the plain client and 31-54 s per proxied configuration, 3-3.5 min
for all six; the whole report part (1,024 turns, 348 questions) 9 min for all six. ``--joined
--part both`` (1,899 turns, up to 217,000 tokens of conversation): 31 s for the plain client,
5-9 min per proxied configuration, 32 min for all six. So every turn is replayed by default.

    PYTHONPATH=. python benchmarks/public/bench_cache.py --data /path/to/REALTALK \\
        [--part report|tune|both] [--chats N] [--configs plain,today,...] [--turns N] \\
        [--settle-every K] [--joined] [--cache /tmp/sc-cache-history]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from benchmarks.budget_recall import default_settings, ready_chat
from benchmarks.proxy_in_process import proxy_in_process
from benchmarks.public import baselines
from benchmarks.public.baselines import fill_by_rank
from benchmarks.public.bench_history import CACHE, PARTS, Chat, load
from benchmarks.public.prompt_cache import Scored, Scorer, text_of
from benchmarks.public.snapshot import Snapshot, reported, snapshot
from smart_context.config import parse_settings
from smart_context.errors import SmartContextError
from smart_context_hosts.proxy.app import note_of
from smart_context_hosts.sidecar.runtime import Sidecar

SYSTEM = {"role": "system", "content": "You are a helpful assistant."}
SETTINGS = '[plugins.smart_context]\ntopic_extractor = "offline"\n'
START = 1_703_980_800.0  # 2023-12-31 UTC, when REALTALK's chats were held: a plausible clock
TURN_SECONDS = 30.0
DAY = 86_400.0
PRICES = (0.1, 0.25, 0.5, 1.0)
WINDOWS = (50_000, 100_000, 200_000)  # tokens of conversation the joined run is billed around
BASELINES = ("BM25", "dense", "hybrid (RRF)")


@dataclass(frozen=True)
class Config:
    """One way of sending the chat: ``model`` None is the plain client (no proxy); ``reports``,
    the cache whose figures the upstream reports; ``own``, the column that is its own target."""

    key: str
    name: str
    model: str | None = None
    settings: dict[str, Any] = field(default_factory=dict)
    reports: str = "openai"
    own: str = ""


CONFIGS = {
    c.key: c
    for c in (
        Config("plain", "plain client"),
        Config("today", "per-turn re-selection (today)", "gpt-5", {"prompt_cache": "none"}),
        Config("gpt-5", "ours, gpt-5", "gpt-5", own="x0.1"),
        Config("gpt-4o", "ours, gpt-4o", "gpt-4o", own="x0.5"),
        Config("claude", "ours, claude-sonnet-4-5", "claude-sonnet-4-5", {}, "anthropic", "Anth."),
        Config("local", "ours, local llama.cpp", "llama3.1:8b", {"budget_tokens": 8000}, "llama"),
    )
}


class Clock:
    """The simulated time, read by the plugin as ``services.clock``."""

    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> float:
        return self.now


@dataclass(frozen=True)
class Turn:
    at_message: int  # its user message's place in the conversation
    reply: str  # the chat's next message, or "OK" when the chat ends on the user
    session_start: bool
    time: float


@dataclass(frozen=True)
class Request:
    """What the client sends, when, and what the upstream answers; ``said``: how many of the
    conversation's messages it holds; ``question``: which one it asks, if any."""

    messages: list[dict[str, str]]
    time: float
    reply: str
    session_start: bool
    said: int
    question: int | None = None


def merged(chat: Chat) -> tuple[list[dict[str, str]], list[list[int]], list[str]]:
    """The chat with each run of one speaker's messages as one message (texts joined by a line
    break); the chat's messages each holds; the session of its last."""
    conversation: list[dict[str, str]] = []
    origins: list[list[int]] = []
    sessions: list[str] = []
    for i, m in enumerate(chat.messages):
        session = str(m["id"]).rsplit(":", 1)[0]
        if conversation and conversation[-1]["role"] == m["role"]:
            conversation[-1]["content"] += "\n" + m["content"]
            origins[-1].append(i)
            sessions[-1] = session
        else:
            conversation.append({"role": m["role"], "content": m["content"]})
            origins.append([i])
            sessions.append(session)
    return conversation, origins, sessions


def turns_of(chat: Chat, start: float = START) -> tuple[list[dict[str, str]], list[Turn]]:
    """The merged conversation and its turns, one per user message, timed (module docstring)."""
    conversation, _, sessions = merged(chat)
    turns: list[Turn] = []
    now, previous = start, None
    for i, message in enumerate(conversation):
        if message["role"] != "user":
            continue
        new = sessions[i] != previous
        if turns:
            now += DAY if new else TURN_SECONDS
        reply = conversation[i + 1]["content"] if i + 1 < len(conversation) else "OK"
        turns.append(Turn(i, reply, new, now))
        previous = sessions[i]
    return conversation, turns


def client_requests(chat: Chat, limit: int | None) -> Iterator[Request]:
    """Every request of the stateless client: the turns (the first ``limit``), then the
    questions, each with everything before it."""
    conversation, turns = turns_of(chat)
    turns = turns[:limit]
    for t in turns:
        said = t.at_message + 1
        yield Request([SYSTEM, *conversation[:said]], t.time, t.reply, t.session_start, said)
    if not turns:
        return
    asked, now = conversation[: turns[-1].at_message + 2], turns[-1].time
    said = len(asked)
    for k, question in enumerate(chat.questions):
        now += TURN_SECONDS
        asked = [*asked, {"role": "user", "content": question.text}]
        yield Request([SYSTEM, *asked], now, "OK", False, said, k)
        asked.append({"role": "assistant", "content": "OK"})


def joined(chats: Sequence[Chat]) -> Chat:
    """The chats end to end as one, without questions: each chat's sessions its own."""
    messages = [{**m, "id": f"{c.number}/{m['id']}"} for c in chats for m in c.messages]
    return Chat(0, messages, [], 0)


@dataclass
class Row:
    """One request that went upstream; ``changed``: it does not start with the one before (its
    last user message aside); ``size``: the client's request, in o200k tokens."""

    question: bool
    session_start: bool
    scored: Scored
    changed: bool
    size: int
    recall: float | None = None
    baselines: dict[str, float] = field(default_factory=dict)


def changed(before: dict[str, Any] | None, body: dict[str, Any]) -> bool:
    """Whether ``body`` does not continue ``before``: its messages but the last, its tools."""
    if before is None:
        return False
    kept = [unmarked(m) for m in before["messages"][:-1]]
    now = [unmarked(m) for m in body["messages"][: len(kept)]]
    return now != kept or before.get("tools") != body.get("tools")


def unmarked(message: dict[str, Any]) -> dict[str, Any]:
    """``message`` as a provider caches it: Anthropic's cache marks, which move to the end of
    each request's kept history, taken off (its text parts' texts joined)."""
    content = message.get("content")
    if isinstance(content, list) and all(
        isinstance(p, dict) and p.get("type") == "text" for p in content
    ):
        return {**message, "content": "".join(str(p.get("text", "")) for p in content)}
    return message


def recall(evidence: Sequence[str], messages: Sequence[dict[str, Any]]) -> float:
    """The share of ``evidence`` texts found inside the messages' texts."""
    sent = "\0".join(text_of(m) for m in messages)
    return sum(text in sent for text in evidence) / len(evidence)


def evidence_of(chat: Chat, request: Request) -> list[str]:
    assert request.question is not None
    return [chat.messages[p]["content"] for p in sorted(chat.questions[request.question].evidence)]


def row_of(
    chat: Chat, request: Request, body: dict[str, Any], scored: Scored, before: Any, size: int
) -> Row:
    """One request that went upstream as ``body``, after ``before``."""
    found = None
    if request.question is not None:
        found = recall(evidence_of(chat, request), body["messages"])
    return Row(
        request.question is not None,
        request.session_start,
        scored,
        changed(before, body),
        size,
        found,
    )


def plain(chat: Chat, limit: int | None) -> list[Row]:
    """The client's own requests, scored as they are sent."""
    scorer, rows = Scorer(), []
    for request in client_requests(chat, limit):
        scored = scorer.score(request.messages, request.time)
        body = {"messages": request.messages}
        rows.append(row_of(chat, request, body, scored, None, scored.sent))
    return rows


class Upstream:
    """Answers each request with the reply set for it, and reports ``usage`` as the
    configuration's provider would (``reports``: ``openai``, ``anthropic`` or ``llama``),
    scoring the request by every rule."""

    def __init__(self, scorer: Scorer, reports: str) -> None:
        self.scorer, self.reports = scorer, reports
        self.reply, self.now = "OK", 0.0
        self.body: dict[str, Any] = {}
        self.scored: Scored | None = None

    def __call__(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        scored = self.scorer.score(body["messages"], self.now, body.get("tools"))
        self.body, self.scored = body, scored
        prompt, cached = {
            "openai": (scored.sent, scored.openai),
            "anthropic": (scored.sent, scored.anthropic.cached),
            "llama": (scored.sent_local, scored.llama_cpp),
        }[self.reports]
        completion = len(self.scorer.o200k.ids([self.reply])[0])
        usage = {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": cached},
        }
        message = {"role": "assistant", "content": self.reply}
        reply = {
            "id": "chatcmpl-bench",
            "object": "chat.completion",
            "model": body.get("model"),
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
            "usage": usage,
        }
        return httpx.Response(200, json=reply)


def settings_of(config: Config) -> str:
    """The vault's ``.vault.toml`` for ``config`` (TOML strings and numbers are JSON's)."""
    return SETTINGS + "".join(f"{k} = {json.dumps(v)}\n" for k, v in config.settings.items())


@asynccontextmanager
async def proxy_for(
    config: Config, chat: Chat, upstream: Upstream, clock: Clock
) -> AsyncIterator[Callable[[Request, bool], Awaitable[str]]]:
    """The proxy in process on a fresh vault with ``config``'s settings, the plugin reading
    ``clock``; yields how a request is sent (after the background passes, when asked): its
    ``X-Smart-Context`` note comes back."""
    with tempfile.TemporaryDirectory() as tmp:
        vault = Path(tmp)
        (vault / ".vault.toml").write_text(settings_of(config), encoding="utf-8")
        sidecar = Sidecar(vault)
        headers = {"X-Smart-Context-Chat": f"realtalk-{chat.number}"}
        async with proxy_in_process(sidecar, upstream) as (proxy, client):
            plugin: Any = sidecar.pm.get_plugin("smart_context")
            services = plugin.services
            services.clock = clock  # read by the request layout, in a version that has one

            async def send(request: Request, settle: bool) -> str:
                clock.now = upstream.now = request.time
                upstream.reply = request.reply
                if settle:  # as a person's pause allows
                    await proxy.settle()
                    await services.settle(timeout=3600)
                answer = await client.post(
                    "/v1/chat/completions",
                    json={"model": config.model, "messages": request.messages},
                    headers=headers,
                )
                answer.raise_for_status()
                return note_of(answer.headers) or ""

            yield send


async def through_proxy(
    config: Config, chat: Chat, limit: int | None, settle_every: int, base: Baselines | None
) -> list[Row]:
    """The client's requests through the proxy; each scored as it reaches the upstream."""
    scorer = Scorer()
    upstream = Upstream(scorer, config.reports)
    rows: list[Row] = []
    before: dict[str, Any] | None = None
    passed: list[str] = []
    async with proxy_for(config, chat, upstream, Clock()) as send:
        for k, request in enumerate(client_requests(chat, limit)):
            settle = k > 0 and (request.question is not None or k % settle_every == 0)
            note = await send(request, settle)
            if note.startswith("off"):
                passed.append(note)
            assert upstream.scored is not None
            size = scorer.size(request.messages)
            row = row_of(chat, request, upstream.body, upstream.scored, before, size)
            if base is not None and request.question is not None:
                row.baselines = base.recalls(request, upstream.body["messages"])
            rows.append(row)
            before = upstream.body
    if passed:
        print(f"    {len(passed)} requests went as they came, not rebuilt: {passed[0]}")
    return rows


@dataclass
class Baselines:
    """BM25, dense and hybrid over the chat's own messages, each given the room the proxy's
    request gave them (the tokens, as the budget counts them, of the chat's messages it sent
    as they were), best first while they fit."""

    chat: Chat
    origins: list[list[int]]  # the chat's messages each merged message holds
    tokens: np.ndarray
    vectors: np.ndarray
    queries: list[np.ndarray]
    bm25: baselines.BM25

    @classmethod
    async def of(cls, chat: Chat, cache: Path, embedder: Any) -> Baselines:
        """The chat's messages and questions embedded (kept in ``cache``) and indexed."""
        async with ready_chat(
            f"realtalk-{chat.number}", chat.messages, cache, embedder, default_settings()
        ) as ready:
            queries = await ready.queries([q.text for q in chat.questions], cache)
            vectors, tokens = ready.vectors, ready.tokens
        bm25 = baselines.BM25([m["content"] for m in chat.messages])
        return cls(chat, merged(chat)[1], tokens, vectors, queries, bm25)

    def recalls(self, request: Request, sent: Sequence[dict[str, Any]]) -> dict[str, float]:
        """Each baseline's evidence recall for the question ``request`` asks."""
        assert request.question is not None
        question = self.chat.questions[request.question]
        said = sum(len(o) for o in self.origins[: request.said])  # what the chat holds so far
        room = int(sum(int(self.tokens[p]) for p in self._sent(sent, request.said)))
        lexical = self.bm25.scores(question.text)
        query = self.queries[request.question]
        dense = baselines.dense(self.vectors, query) if len(query) else np.zeros(len(lexical))
        orders = {
            "BM25": baselines.rank(lexical),
            "dense": baselines.rank(dense),
            "hybrid (RRF)": baselines.rank(baselines.rrf(lexical, dense)),
        }
        evidence = evidence_of(self.chat, request)
        out = {}
        for name, order in orders.items():
            taken = fill_by_rank([int(p) for p in order if p < said], self.tokens, room)
            texts = [self.chat.messages[p] for p in sorted(taken)]
            out[name] = recall(evidence, texts)
        return out

    def _sent(self, sent: Sequence[dict[str, Any]], said: int) -> list[int]:
        """The chat's messages among those ``sent`` as they were, in order."""
        by_text: dict[str, list[int]] = defaultdict(list)
        for i in range(said):
            by_text["\n".join(self.chat.messages[p]["content"] for p in self.origins[i])].append(i)
        out, at = [], 0
        for message in sent:
            later = [i for i in by_text.get(str(message.get("content")), []) if i >= at]
            if later and message.get("role") in ("user", "assistant"):
                out.extend(self.origins[later[0]])
                at = later[0] + 1
        return out


def sums(rows: Sequence[Row]) -> dict[str, float]:
    """Over ``rows``: tokens sent and cached, the bill by each rule, tokens to prefill."""
    out: dict[str, float] = defaultdict(float)
    for row in rows:
        s = row.scored
        out["sent"] += s.sent
        out["cached"] += s.openai
        for price in PRICES:
            out[f"x{price}"] += s.openai_bill(price)
        out["Anth."] += s.anthropic_bill
        out["sent_local"] += s.sent_local
        out["vLLM"] += s.sent_local - s.vllm
        out["llama.cpp"] += s.sent_local - s.llama_cpp
    return out


def report(name: str, chats: Sequence[Chat], found: dict[str, list[Row]]) -> None:
    """Per phase, each configuration beside the plain client (module docstring)."""
    numbers = ", ".join(str(c.number) for c in chats)
    print(f"{name} part (chats {numbers}):")
    for phase, asks in (("conversation", False), ("questions", True)):
        rows = {config: [r for r in found[config] if r.question == asks] for config in found}
        reference = sums(rows[CONFIGS["plain"].name])
        if not reference["sent"]:
            continue
        n = len(rows[CONFIGS["plain"].name])
        print(
            f"  {phase}: {n} requests; input billed relative to the plain client's (OpenAI's "
            "rule at read price x, *: the configuration's own; Anthropic's); tokens to prefill "
            "per turn (share of those sent); changed: requests not starting with the one before"
        )
        print(
            f"    {'configuration':<31}{'sent/turn':>10}{'cached':>7}"
            + "".join(f"{f'x{p}':>7}" for p in PRICES)
            + f"{'Anth.':>7} {'vLLM prefill':>17} {'llama.cpp prefill':>18} {'changed':>13}"
            + (f"{'recall':>8}" if asks else "")
        )
        for config, taken in rows.items():
            print("    " + _line(config, taken, reference) + (_recall(taken) if asks else ""))
        print(
            "    the plain client's bill per turn: "
            + ", ".join(
                f"{k} {reference[k] / n:,.0f}" for k in (*(f"x{p}" for p in PRICES), "Anth.")
            )
        )
        if asks and any(r.baselines for r in rows.get(CONFIGS["today"].name, [])):
            today = rows[CONFIGS["today"].name]
            print(
                f"    plain baselines at {CONFIGS['today'].name}'s room: "
                + ", ".join(
                    f"{b} {statistics.mean(r.baselines[b] for r in today):.3f}" for b in BASELINES
                )
            )


def _line(config: str, rows: Sequence[Row], reference: dict[str, float]) -> str:
    own = next(c.own for c in CONFIGS.values() if c.name == config)
    got = sums(rows)
    ratios = "".join(
        f"{got[k] / reference[k]:>6.3f}{'*' if k == own else ' '}"
        for k in (*(f"x{p}" for p in PRICES), "Anth.")
    )
    local = "".join(
        f"{got[k] / len(rows):>11,.0f} ({got[k] / got['sent_local']:>3.0%})"
        for k in ("vLLM", "llama.cpp")
    )
    counted = [r for r in rows if not r.session_start]
    moved = sum(r.changed for r in counted)
    return (
        f"{config:<31}{got['sent'] / len(rows):>10,.0f}{got['cached'] / got['sent']:>7.0%}"
        f"{ratios}{local} {moved:>5} ({moved / max(len(counted), 1):>4.0%})"
    )


def _recall(rows: Sequence[Row]) -> str:
    found = [r.recall for r in rows if r.recall is not None]
    return f"{statistics.mean(found):>8.3f}" if found else ""


def report_joined(chats: Sequence[Chat], found: dict[str, list[Row]]) -> None:
    """The billed input per turn of the joined conversation, around each window's size."""
    rows = found[CONFIGS["plain"].name]
    numbers = ", ".join(str(c.number) for c in chats)
    print(
        f"chats {numbers} joined: {len(rows)} turns, {rows[-1].size:,} tokens of conversation at "
        "the end; per turn: tokens sent, billed input (OpenAI's rule at x0.1 and x0.5, "
        "Anthropic's) and tokens to prefill (llama.cpp)"
    )
    for window in WINDOWS:
        if rows[-1].size < 0.9 * window:
            print(f"  around {window:,} tokens: not reached (--part both joins every chat)")
            continue
        print(f"  around {window:,} tokens of conversation (turns within 10%):")
        for config, taken in found.items():
            near = [r for r in taken if 0.9 * window <= r.size <= 1.1 * window]
            got, n = sums(near), max(len(near), 1)
            print(
                f"    {config:<31}{len(near):>5} turns  sent {got['sent'] / n:>8,.0f}  "
                f"x0.1 {got['x0.1'] / n:>8,.0f}  x0.5 {got['x0.5'] / n:>8,.0f}  "
                f"Anth. {got['Anth.'] / n:>8,.0f}  llama.cpp {got['llama.cpp'] / n:>8,.0f}"
            )


def usable(keys: Sequence[str], extra: dict[str, Any] | None = None) -> list[Config]:
    """The configurations asked for, the plain client first (every bill is relative to it);
    one whose settings this version of the product refuses is left out, with a note.
    ``extra``: settings for every proxied configuration (its own win)."""
    out = []
    for key in dict.fromkeys(["plain", *keys]):
        config = CONFIGS[key]
        if extra and config.model is not None:
            config = replace(config, settings={**extra, **config.settings})
        try:
            parse_settings({"topic_extractor": "offline", **config.settings})
        except SmartContextError as exc:
            print(f"{config.name}: skipped, this version refuses its settings: {exc}")
            continue
        out.append(config)
    return out


async def run(
    config: Config, chat: Chat, limit: int | None, settle_every: int, base: Baselines | None
) -> list[Row]:
    if config.model is None:
        return plain(chat, limit)
    return await through_proxy(config, chat, limit, settle_every, base)


def curve(shares: Sequence[float]) -> list[str]:
    """The local server's configuration once per ``recall_share``: what it prefills against the
    evidence it keeps as the recalled part grows."""
    local = CONFIGS["local"]
    for share in shares:
        key = f"local@{share}"
        CONFIGS[key] = replace(
            local,
            key=key,
            name=f"local, recall_share {share}",
            settings={**local.settings, "recall_share": share},
        )
    return [f"local@{share}" for share in shares]


async def main(source: Snapshot, args: argparse.Namespace) -> None:
    chats = load(source, args.part)[: args.chats]
    keys = curve(args.curve) if args.curve else args.configs
    configs = usable(keys, dict(args.setting))
    start = time.perf_counter()
    print(
        f"machine: {platform.machine()}, Python {platform.python_version()}; REALTALK replayed "
        f"turn by turn, the background passes waited for every {args.settle_every} turn(s)"
        + (f", the first {args.turns} turns of each chat" if args.turns else "")
    )
    if args.joined:
        chat = joined(chats)
        found = {}
        for config in configs:
            began = time.perf_counter()
            found[config.name] = await run(config, chat, args.turns, args.settle_every, None)
            print(f"  joined, {config.name}: {time.perf_counter() - began:.0f} s")
        report_joined(chats, found)
    else:
        by_part: dict[str, dict[str, list[Row]]] = defaultdict(dict)
        for chat in chats:
            await replay_chat(chat, configs, args, by_part)
        for name in PARTS:
            if name in by_part:
                report(name, [c for c in chats if c.number in PARTS[name]], by_part[name])
    print(f"({time.perf_counter() - start:.0f} s)")


async def replay_chat(
    chat: Chat,
    configs: Sequence[Config],
    args: argparse.Namespace,
    by_part: dict[str, dict[str, list[Row]]],
) -> None:
    """One chat by every configuration, its rows kept under its part."""
    base = None
    if any(c.key == "today" for c in configs) and chat.questions:
        from smart_context.embeddings.local import shared_local_model

        base = await Baselines.of(chat, args.cache, shared_local_model())
    name = next(p for p, numbers in PARTS.items() if chat.number in numbers)
    for config in configs:
        began = time.perf_counter()
        rows = await run(config, chat, args.turns, args.settle_every, base)
        by_part[name].setdefault(config.name, []).extend(rows)
        asked = sum(r.question for r in rows)
        print(
            f"  chat {chat.number}, {config.name}: {len(rows) - asked} turns, {asked} questions "
            f"({time.perf_counter() - began:.0f} s)"
        )


def _setting(text: str) -> tuple[str, Any]:
    """``KEY=VALUE``, the value read as TOML reads it (a bare word as text)."""
    import tomllib

    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    try:
        return key.strip(), tomllib.loads(f"v = {value.strip()}")["v"]
    except tomllib.TOMLDecodeError:
        return key.strip(), value.strip()


def _shares(text: str) -> list[float]:
    """``0.1,0.2,...``: recall shares, each 0 to 0.9 as the setting takes them."""
    try:
        shares = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected numbers such as 0.1,0.25, got {text!r}"
        ) from None
    if not shares or not all(0.0 <= v <= 0.9 for v in shares):
        raise argparse.ArgumentTypeError(f"each share is 0 to 0.9, got {text!r}")
    return shares


def _keys(text: str) -> list[str]:
    keys = [k.strip() for k in text.split(",") if k.strip()]
    unknown = [k for k in keys if k not in CONFIGS]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown {unknown}; known: {', '.join(CONFIGS)}")
    return keys


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--data", help="REALTALK: a checkout or a bare mirror")
    parser.add_argument("--cache", type=Path, default=CACHE, help="where vectors are kept")
    parser.add_argument("--part", choices=("tune", "report", "both"), default="report")
    parser.add_argument("--chats", type=int, default=None, help="only the first N chats")
    parser.add_argument("--configs", type=_keys, default=list(CONFIGS), help=", ".join(CONFIGS))
    parser.add_argument("--turns", type=int, default=None, help="only each chat's first N turns")
    parser.add_argument("--settle-every", type=int, default=1, metavar="K")
    parser.add_argument("--joined", action="store_true", help="the chats as one conversation")
    parser.add_argument(
        "--curve",
        type=_shares,
        metavar="S1,S2,...",
        help="instead of --configs: the local server at each recall_share (prefill vs recall)",
    )
    parser.add_argument(
        "--setting",
        type=_setting,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a setting for every proxied configuration (its own win), to try one on a part",
    )
    args = parser.parse_args()
    found = snapshot("realtalk", args.data)
    if found is None:
        sys.exit(0)
    args.cache.mkdir(parents=True, exist_ok=True)
    with reported():
        asyncio.run(main(found, args))
