"""The background long-memory pass of one chat, run after replies: the summary tree brought up
to date, so the next request finds it (it never waits for it).

The tree of :mod:`.tree` over the chat's messages, once the chat has ``summarization_threshold``
messages. Stored nodes an edit or a deletion broke are dropped; missing ones are made bottom-up
(a node of level 2 from its children's summaries), by the host's fast model when
``summarizer = "llm"`` and one answers, else by the offline picker (:mod:`.extractive`). Nodes
are written as they are made, a level at a time, so a long chat's first pass shows progress and
a stop loses little. A pass after a reply (the chat as last seen, plus new messages) hashes only
the new messages (:class:`SeenChats`), and plans the summaries again only when the chat changed
some other way or its settled messages reached a new leaf's worth.

The pass works with the :class:`MemoryPass` it is given, nothing else: the composition root
builds one.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from smart_context.background import to_thread
from smart_context.budget.tokens import CHARS_PER_TOKEN
from smart_context.config import Settings
from smart_context.events import MEMORY_PROGRESS
from smart_context.host import LLM, Emit, resolve
from smart_context.memory.db import MemoryDB
from smart_context.memory.extractive import Line, summarize
from smart_context.memory.records import Summary
from smart_context.memory.tree import LEAF, Check, Node, checks, plan_tree
from smart_context.messages import History, common_start, message_text
from smart_context.paths import ChatId
from smart_context.topics.extract import reply_text
from smart_context.vectors.codec import cache_key

if TYPE_CHECKING:
    from smart_context.chats import ChatViews

CHARS = int(CHARS_PER_TOKEN)  # the estimate's characters per token

log = logging.getLogger(__name__)

CAPS = {1: 150, 2: 150}  # most tokens of a summary by level; key facts (3+) take KEY_FACTS_CAP
KEY_FACTS_CAP = 120
MIN_TOKENS = 30
LLM_CALLS_PER_PASS = 20  # a long chat's first pass asks the model for its newest nodes only


@dataclass(frozen=True)
class MemoryPass:
    """What the long-memory pass works with."""

    chats: ChatViews  # reads the latest chat
    db: MemoryDB  # the summaries
    settings: Callable[[], Settings]  # read per pass: a command may replace them meanwhile
    llm: LLM  # the fast model, when ``summarizer = "llm"``
    emit: Emit  # the panel's progress (``memory_progress``)
    # told when a pass made summaries of a chat: what was planned with the old ones is stale
    summaries_made: Callable[[ChatId, int], Awaitable[None]]  # and of how many first messages
    seen: SeenChats = field(default_factory=lambda: SeenChats())  # what earlier passes read
    # shown the chat's messages on each pass: the requests' index of the chat compares them all
    # (history_index.HistoryIndex.verify), off the request path
    verify: Callable[[ChatId, Sequence[Mapping[str, Any]], History], None] | None = None


@dataclass
class _Seen:
    ids: list[str]
    contents: list[Any]
    keys: list[str]
    leaves: int = -1  # settled messages // LEAF when the summaries were last complete
    # the summary nodes (level, start, end, covers) found valid or made over these messages
    checked: set[Check] = field(default_factory=set)


class SeenChats:
    """Each chat's messages as the last memory pass saw them (ids, contents, keys), so the next
    pass reads only what is new. One background pass runs per
    chat at a time (the coalescer); a forced pass (the ``summarize_conversation`` command) may run
    beside it. Their summary checks stay true either way: a set is shared only while the chat
    only grew, so each check holds over the messages both passes share, and a chat that changed
    gets a new set. Passes of two chats may run in worker threads together, and at worst one's
    :data:`MAX_CHATS` clearing costs the other a whole reading of its chat on its next pass."""

    MAX_CHATS = 64

    def __init__(self) -> None:
        self._chats: dict[ChatId, _Seen] = {}

    def keys(
        self,
        chat_id: ChatId,
        messages: Sequence[Mapping[str, Any]],
        read: History | None = None,
    ) -> tuple[Keyed, int]:
        """The messages' ids and keys, hashing only those past the last pass's when the chat
        only grew; and how many leading messages the last pass saw as they are (0: none, or
        the chat changed otherwise). ``read``: the messages with their ids and contents read,
        when the caller has them."""
        read = History(messages) if read is None else read
        ids, contents = list(map(str, read.ids)), read.contents
        last = self._chats.get(chat_id)
        known = len(last.ids) if last is not None else 0
        if last is None or common_start(ids, contents, last.ids, last.contents) != known:
            last, known = _Seen([], [], []), 0
        keys = [
            *last.keys,
            *(cache_key(ids[k], message_text(messages[k])) for k in range(known, len(ids))),
        ]
        if len(self._chats) >= self.MAX_CHATS and chat_id not in self._chats:
            self._chats.clear()  # a long-running sidecar visits many chats
        self._chats[chat_id] = _Seen(ids, contents, keys, last.leaves, last.checked)
        return (ids, keys), known

    def checked(self, chat_id: ChatId) -> set[Check]:
        """The summary nodes found valid or made over the chat's messages as last seen (the
        chat only grew since: a change starts the set afresh), for the pass to add to: their
        hashes are not computed again (:func:`~smart_context.memory.tree.plan_tree`)."""
        seen = self._chats.get(chat_id)
        return seen.checked if seen is not None else set()

    def summarized(self, chat_id: ChatId, settled: int) -> bool:
        """Whether the summaries were complete when ``settled`` messages were already in the
        same leaf count: the chat only grew since, and no new leaf is due."""
        seen = self._chats.get(chat_id)
        return seen is not None and seen.leaves == settled // LEAF

    def summaries_done(self, chat_id: ChatId, settled: int) -> None:
        """The chat's summaries are complete over its first ``settled`` messages."""
        seen = self._chats.get(chat_id)
        if seen is not None:
            seen.leaves = settled // LEAF


@dataclass(frozen=True)
class Made:
    """A summary to store."""

    node: Node
    text: str
    source: str


async def refresh_memory(parts: MemoryPass, chat_id: ChatId, force: bool = False) -> None:
    """One pass over the chat (module docstring); ``force`` summarises a chat under the
    ``summarization_threshold`` too (the ``summarize_conversation`` command)."""
    data = await parts.chats.load(chat_id)
    messages = [m for m in data.get("messages") or [] if isinstance(m, dict)]
    settings = parts.settings()

    def checked_keys() -> tuple[Keyed, int]:
        read = History(messages)  # the ids and contents read once, for both
        if parts.verify is not None:
            parts.verify(chat_id, messages, read)
        # hashed once for both parts, and only what is new since the last pass
        return parts.seen.keys(chat_id, messages, read)

    keyed, known = await to_thread(checked_keys)
    if len(messages) < settings.summarization_threshold and not force:
        return
    settled = max(len(messages) - settings.recent_messages, 0)
    if known and not force and parts.seen.summarized(chat_id, settled):
        return  # only grew, and not by a new leaf's worth: nothing to summarise or drop
    progress = _progress(parts.emit, chat_id, "summaries")
    checked = parts.seen.checked(chat_id)
    made = await summarize_chat(
        parts.db, chat_id, messages, settings, parts.llm, progress, keyed, checked
    )
    parts.seen.summaries_done(chat_id, settled)
    if made:
        await parts.summaries_made(chat_id, settled)


def _progress(emit: Emit, chat_id: ChatId, what: str) -> Progress:
    """Reports ``smart_context.memory_progress`` for the panel: ``what`` is under way."""

    async def progress(done: int, total: int) -> None:
        payload = {"chat_id": chat_id, "done": done, "total": total, "what": what}
        await resolve(emit(MEMORY_PROGRESS, payload))

    return progress


Keyed = tuple[list[str], list[str]]  # the messages' ids as text, and their content keys


def message_keys(messages: Sequence[Mapping[str, Any]]) -> Keyed:
    """Each message's id as text and its key (``{id}:{content hash}``, docs/contract.md §2)."""
    ids = [str(m.get("id")) for m in messages]
    return ids, [cache_key(i, message_text(m)) for i, m in zip(ids, messages, strict=True)]


Progress = Callable[[int, int], Any]


async def summarize_chat(
    db: MemoryDB,
    chat_id: str,
    messages: Sequence[Mapping[str, Any]],
    settings: Settings,
    llm: LLM | None,
    progress: Progress | None = None,
    keyed: Keyed | None = None,
    checked: set[Check] | None = None,
) -> int:
    """Make the chat's missing summaries and drop the broken ones; returns how many were made.
    ``checked``: the nodes found valid or made over these messages by an earlier pass (the chat
    only grew since), not hashed again; this pass's valid and made nodes are added to it."""
    if keyed is None:
        keyed = await to_thread(message_keys, messages)
    ids, keys = keyed
    stored = await to_thread(db.summaries, chat_id)
    settled = max(len(ids) - settings.recent_messages, 0)
    known = checked if checked is not None else set()
    tree = await to_thread(plan_tree, ids, keys, stored, settled, known)
    known.clear()  # what no longer holds is forgotten
    known.update(checks(tree.valid))
    if tree.invalid:
        drop = [(s.level, s.from_id, s.to_id) for s in tree.invalid]
        await to_thread(db.drop_summaries, chat_id, drop)
    if not tree.missing:
        return 0
    texts = {(s.level, s.from_id, s.to_id): s.text for s in stored}
    writer = _Writer(settings, llm)
    total, done = len(tree.missing), 0
    if progress is not None:
        await progress(0, total)  # the panel shows the pass from its start
    for level in sorted({n.level for n in tree.missing}):
        batch = [n for n in tree.missing if n.level == level]
        batch.sort(key=lambda n: -n.start)  # the newest first: the model's calls go there
        out: list[Summary] = []
        for node in batch:
            made = await writer.write(node, messages, ids, texts)
            texts[node.key(ids)] = made.text
            out.append(_row(chat_id, made, ids, messages))
        await to_thread(db.put_summaries, chat_id, out)
        known.update(checks(batch))
        done += len(batch)
        if progress is not None:
            await progress(done, total)
    return total


class _Writer:
    """Writes one summary: the model while it answers and has calls left, else the picker."""

    def __init__(self, settings: Settings, llm: LLM | None) -> None:
        self.settings = settings
        self.llm = llm if settings.summarizer == "llm" else None
        self.calls_left = LLM_CALLS_PER_PASS

    async def write(
        self,
        node: Node,
        messages: Sequence[Mapping[str, Any]],
        ids: Sequence[str],
        texts: Mapping[tuple[int, str, str], str],
    ) -> Made:
        lines = _lines(node, messages, ids, texts)
        limit = _max_tokens(node, messages, self.settings)
        if self.llm is not None and self.calls_left > 0:
            self.calls_left -= 1
            try:
                text = await _ask(self.llm, self.settings, lines, limit, node.level)
                if text:
                    return Made(node, text, "llm")
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - a host's model may fail any way: pick instead
                log.info("Smart Context: summary by the fast model failed (%s); offline", exc)
                self.llm = None  # do not wait on a failing model for every node of this pass
        text = await to_thread(summarize, lines, limit, node.level >= 3)
        return Made(node, text, "offline")


def _lines(
    node: Node,
    messages: Sequence[Mapping[str, Any]],
    ids: Sequence[str],
    texts: Mapping[tuple[int, str, str], str],
) -> list[Line]:
    """What a node summarises: its messages (a leaf) or its children's summaries."""
    if node.level == 1 or not node.children:
        return [
            Line(str(m.get("role") or "note"), message_text(m))
            for m in messages[node.start : node.end]
            if not m.get("notice") and not m.get("error")
        ]
    return [Line("summary", texts.get(c.key(ids), "")) for c in node.children]


def _max_tokens(node: Node, messages: Sequence[Mapping[str, Any]], settings: Settings) -> int:
    source = sum(len(message_text(m)) for m in messages[node.start : node.end]) / CHARS
    if node.level == 1:
        keep = 1 - settings.compression_detailed
    elif node.level == 2:
        keep = 1 - settings.compression_high_level
    else:
        keep = 1 - settings.compression_key_facts
    cap = CAPS.get(node.level, KEY_FACTS_CAP)
    return int(max(MIN_TOKENS, min(cap, keep * source)))


_INSTRUCTIONS = {
    1: "Summarise this stretch of a conversation in detail: every decision, name, number and "
    "open question, in short sentences.",
    2: "Summarise these summaries of a conversation at a high level: what was worked on, what "
    "was decided, with the names and numbers that matter.",
}
_KEY_FACTS = (
    "List only the key facts of these summaries of a conversation, one per line: decisions, "
    "names, numbers, dates, preferences. No commentary."
)


async def _ask(llm: LLM, settings: Settings, lines: Sequence[Line], limit: int, level: int) -> str:
    transcript = "\n".join(f"{line.role}: {line.text}" for line in lines)
    transcript = transcript[: settings.extraction_max_chars]
    prompt = [
        {
            "role": "system",
            "content": f"{_INSTRUCTIONS.get(level, _KEY_FACTS)} At most {limit * 3 // 4} words. "
            "Write only the summary.",
        },
        {"role": "user", "content": transcript},
    ]
    reply = await asyncio.wait_for(
        resolve(llm.complete(prompt, category=settings.extraction_category, temperature=0.2)),
        timeout=settings.extraction_timeout,
    )
    text = reply_text(reply).strip()
    return text[: limit * CHARS * 2]  # a model that rambles is cut, not trusted


def _row(
    chat_id: str, made: Made, ids: Sequence[str], messages: Sequence[Mapping[str, Any]]
) -> Summary:
    level, from_id, to_id = made.node.key(ids)
    return Summary(
        chat_id=chat_id,
        level=level,
        from_id=from_id,
        to_id=to_id,
        covers=made.node.covers,
        size=made.node.end - made.node.start,
        text=made.text,
        tokens=len(made.text) // CHARS + 1,
        source=made.source,
        created_at=time.time(),
    )
