"""The token budget applied to one request (docs/contract.md §9): the history that fits, with
summaries of what does not, and the record of what each part cost (the parts and their costs:
:mod:`smart_context.budget.parts`).

The pure choice is :func:`smart_context.budget.plan.plan`; this module brings what it needs:
token counts (:class:`~smart_context.budget.facts.MessageFacts`, kept per chat), the search's
relevance (cosine from the chat's vectors, BM25 over the words its facts keep), the user's
pins, and the valid stored summaries. It reads only what exists: a message not yet embedded
scores 0 by meaning, a stretch not yet summarised has no summary, and the background pass
(:mod:`smart_context.memory.refresh`) catches up after the reply.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import numpy as np

from smart_context.background import to_thread
from smart_context.budget.facts import Facts, MessageFacts, Part
from smart_context.budget.importance import (
    Weights,
    entities,
    entity_overlap,
    importance,
    relevance,
    top_hits,
)
from smart_context.budget.parts import (
    Fitted,
    Fixed,
    budget_limit,
    budget_record,
    chat_model,
    fixed_costs,
    interleave,
    summary_message,
)
from smart_context.budget.plan import (
    RECENT,
    RELEVANT,
    TURN,
    Budget,
    Inputs,
    Span,
    plan,
)
from smart_context.budget.reasons import reasons
from smart_context.budget.tokens import (
    PER_MESSAGE,
    Counter,
    Estimate,
    counter_for,
)
from smart_context.budget.turns import in_turns, turn_of
from smart_context.budget.words import Words, bm25
from smart_context.config import Settings
from smart_context.errors import SmartContextError
from smart_context.items.query import MessageQuery
from smart_context.memory.db import MemoryDB
from smart_context.memory.reads import ChatReads
from smart_context.memory.records import Summary
from smart_context.memory.tree import Check, Node, checks, plan_tree
from smart_context.messages import History, message_text
from smart_context.paths import ChatId
from smart_context.store import VectorStore
from smart_context.turns import Roles, partners
from smart_context.vectors.ops import Matrix, Scores

log = logging.getLogger(__name__)

# BM25's share of relevance. Items use 0.3 (items/lexical.py); in a chat, questions about old
# parts rarely reuse the answer's words, and 0.2 kept more answers on the hard recall set's
# tuning chats (benchmarks/bench_long_recall.py --set hard --split tune; docs/benchmarks.md)
LEXICAL_WEIGHT = 0.2
LEXICAL_HITS = 200  # messages the keyword search scores, at most (budget/words.py)
# A hit must share something with the message: a zero score is no reason to send a message
MIN_RELEVANCE = 1e-6
MAX_CHATS = 64  # chats whose facts and spans are kept in memory
MAX_COUNTED = 50_000  # summaries whose token counts are kept, per counter
# ...for this many counters at most (an estimate's key moves at each step of its calibration)
MAX_COUNTERS = 4


class Budgeter:
    """Per-process state of the budget: facts per chat and model, summary spans per chat."""

    def __init__(
        self, settings: Settings, db: MemoryDB, estimates: dict[str, Estimate] | None = None
    ) -> None:
        self.settings = settings
        self.db = db
        self.estimates = estimates  # the vault's calibrated estimates (budget/calibration.py)
        self._facts: dict[ChatId, MessageFacts] = {}  # under the counter last used
        # per chat: the facts' version, the spans, their summaries, where the last span ends,
        # and the nodes found valid over those facts (not hashed again while they only grow)
        self._spans: dict[ChatId, tuple[Any, list[Span], list[Summary], int, frozenset[Check]]] = {}
        self._summary_tokens: dict[str, dict[Summary, int]] = {}  # by counter
        self.summary_version: dict[ChatId, int] = {}  # bumped by the background pass

    def counter(self, model: str | None) -> Counter:
        """What counts tokens for ``model`` (the host's word): see :func:`chat_model`."""
        return counter_for(chat_model(self.settings, model), self.estimates)

    def facts(self, chat_id: ChatId, counter: Counter) -> MessageFacts:
        """The chat's kept facts, counting with ``counter`` (a calibration's step recounts the
        tokens, and reads nothing else again: :meth:`MessageFacts.use`)."""
        found = self._facts.get(chat_id)
        if found is None:
            if len(self._facts) > MAX_CHATS:  # a long-running sidecar visits many chats
                self._facts.clear()
                self._spans.clear()
            found = self._facts[chat_id] = MessageFacts(counter)
        return found.use(counter)

    async def read_ahead(self, chat_id: ChatId, model: str | None, history: History) -> None:
        """A long run of the chat's new messages read in a worker thread before the request
        needs its facts (:meth:`MessageFacts.read_ahead`): a chat met first does not hold the
        event loop, and every other chat's requests, while its facts are read."""
        await self.facts(chat_id, self.counter(model)).read_ahead(history)

    def cuts(self, chat_id: ChatId, counter: Counter, limit: int) -> bool:
        """Whether the chat's history, as last counted, costs more than ``limit``: then its
        budget most likely cuts it and searches it (:meth:`fit` decides, against the room the
        fixed sections leave); a chat not counted yet: unknown, so no."""
        found = self._facts.get(chat_id)
        return found is not None and int(found.use(counter).tokens.sum()) > limit

    async def fit(
        self,
        chat_id: ChatId,
        candidates: Sequence[Mapping[str, Any]],
        fixed: Fixed,
        model: str | None,
        store: Callable[[], Awaitable[VectorStore]] | None,
        queries: Matrix | None,
        sticky_ids: Sequence[Any] = (),
        summaries: bool = True,
        history: History | None = None,
        costs: Mapping[str, int] | None = None,
        positions: np.ndarray | None = None,
        query: MessageQuery | None = None,
        reads: ChatReads | None = None,
        dense: Awaitable[Scores] | None = None,
    ) -> Fitted | None:
        """The history within the budget, or ``None`` when there is no budget.

        ``history``, when given, is the whole history ``candidates`` come from, its ids already
        read (the topic rule's), and ``positions`` where each candidate sits in it (``None``:
        the candidates are the whole history). ``query``: the request's message with its
        sentence vectors, embedded once for every section (else ``queries``, or the message
        embedded here); ``reads``: the store's pins and text hits for it, read with the request's
        other reads (else read here); ``dense``: :meth:`dense` over ``history``, started by the
        caller with its plan (else scored here). The facts, the search and the pins are kept and
        read for the whole history, so a filter that keeps other messages from one request to
        the next costs no recount; the plan is made over the candidates. ``costs``, when
        given, is :func:`fixed_costs` of ``fixed`` with this model's counter."""
        limit = budget_limit(self.settings, model)
        if not limit:
            return None
        counter = self.counter(model)
        costs = dict(costs) if costs is not None else fixed_costs(counter, fixed)
        room = max(limit - sum(costs.values()), 0)
        if history is None or (positions is None and len(history) != len(candidates)):
            history, positions = History(candidates), None
        # this request's own snapshot: other requests on the chat may update the facts while
        # this one waits below
        facts = self.facts(chat_id, counter).update(history)
        part = Part(facts, positions)
        total = int(part.tokens.sum())
        if total <= room:
            kept = np.ones(len(candidates), dtype=bool)
            record = budget_record(limit, costs, total, 0, [], [], [], [], counter)
            return Fitted([dict(m) for m in candidates], kept, record)
        whole_rel, reads = await self.searched(
            chat_id, facts, history, fixed.message, store, queries, query, reads, dense
        )
        rel = part.of(whole_rel)
        marks = reads.marks
        marked = part.of(_flags(facts, marks))
        pinned = marked | part.of(_flags(facts, {str(i) for i in sticky_ids}))
        # the recent messages are searched too: how many of them go depends on the room, and
        # one the plan sends anyway is skipped there
        hits = top_hits(rel, self.settings.search_limit, floor=MIN_RELEVANCE)
        overlap = part.of(entity_overlap(entities(fixed.message), facts.mentions, facts.n))
        scores = importance(rel, overlap, marked, _weights(self.settings))
        hit_relevance = np.zeros_like(rel)
        hit_relevance[hits] = rel[hits]
        # summaries stand for stretches of the whole history, never for a filter's part of it
        whole = summaries and positions is None
        spans, rows = await self._spans_of(chat_id, facts, counter) if whole else ([], [])
        budget = Budget(
            room,
            recent=self.settings.recent_messages,
            summary_share=self.settings.summary_share,
            relevant_limit=self.settings.search_limit,
            importance_threshold=self.settings.importance_threshold,
        )
        codes = history.codes if positions is None else history.codes[positions]
        roles = history.roles if positions is None else Roles.of(codes)  # read once for all
        # a hit goes with its partner or not at all: sent alone, in_turns would drop it
        turns = partners(codes, hits, roles)
        inputs = Inputs(part.tokens, pinned, hit_relevance, scores, hits, turns)
        chosen = in_turns(plan(inputs, spans, budget), codes, part.tokens, room, roles)
        out = interleave(candidates, chosen.keep, [(spans[s], rows[s]) for s in chosen.summaries])
        why, keep = chosen.why, chosen.keep
        ids = _Names(part, np.flatnonzero(keep))  # the kept few, read in one call
        record = budget_record(
            limit,
            costs,
            chosen.message_tokens,
            chosen.summary_tokens,
            [ids[i] for i in np.flatnonzero(why == RECENT).tolist()],
            [ids[i] for i in np.flatnonzero((why == RELEVANT) | (why == TURN)).tolist()],
            [ids[i] for i in np.flatnonzero(keep & marked).tolist()],
            [rows[s] for s in chosen.summaries],
            counter,
        )
        turn = turn_of(codes, why, roles)
        record["reasons"] = reasons(why, ids, marked, hit_relevance, scores, turn)
        return Fitted(out, chosen.keep, record)

    async def searched(
        self,
        chat_id: ChatId,
        facts: Facts,
        history: History,
        message: str,
        store: Callable[[], Awaitable[VectorStore]] | None,
        queries: Matrix | None,
        query: MessageQuery | None,
        reads: ChatReads | None,
        dense: Awaitable[Scores] | None,
    ) -> tuple[np.ndarray, ChatReads]:
        """Each message's hybrid relevance to ``message`` over the whole ``history`` (its
        ``facts``: their words, :mod:`smart_context.budget.words`), and the store's reads it
        used (the pins): what :meth:`fit` and the cache-stable layout search with."""
        if reads is None:  # a caller without the request's reads (the benchmarks)
            reads = ChatReads(marks=await self._guarded(set(), self.db.marks, chat_id))
        if dense is not None:
            cosine = await dense
        else:
            cosine = await self.dense(chat_id, history, message, store, queries, query)
        lexical = facts.text_scores(message, LEXICAL_HITS)
        return relevance(cosine, lexical, LEXICAL_WEIGHT), reads

    async def spans(
        self, chat_id: ChatId, facts: Facts, counter: Counter
    ) -> tuple[list[Span], list[Summary]]:
        """The valid stored summaries over the history of ``facts``, as plan spans."""
        return await self._spans_of(chat_id, facts, counter)

    async def relevance(
        self,
        chat_id: ChatId,
        history: History,
        message: str,
        store: Callable[[], Awaitable[VectorStore]] | None,
        queries: Matrix | None,
    ) -> np.ndarray:
        """Each message's hybrid relevance to ``message``: cosine from the vectors the chat has
        (left out, with a log line, when there is no embedder) fused with BM25 over its words.
        Nothing is embedded but the message, and only when ``queries`` is not given. The words
        are the chat's kept facts' when they are of this history (what it adds read as a
        request reads it); else (another history, as the chat's file holds it while requests
        send a shorter one, or none kept) they are read in a worker thread for this call only,
        and the facts the requests use stay as they are."""
        kept = self._facts.get(chat_id)
        if kept is not None and kept.shares(history):
            await kept.read_ahead(history)  # many new messages: read in a worker thread
            lexical = kept.update(history).text_scores(message, LEXICAL_HITS)
        else:
            said = await to_thread(_words_of, history.messages)
            lexical = bm25(said.postings, said.counts, message, LEXICAL_HITS)
        dense = await self.dense(chat_id, history, message, store, queries)
        return relevance(dense, lexical, LEXICAL_WEIGHT)

    async def dense(
        self,
        chat_id: ChatId,
        history: History,
        message: str,
        store: Callable[[], Awaitable[VectorStore]] | None,
        queries: Matrix | None,
        query: MessageQuery | None = None,
    ) -> np.ndarray:
        """Each message's best cosine to the message's sentences, from the vectors the chat
        has (zeros, with a log line, without an embedder); ``query``: the request's message,
        whose vectors every search shares (else ``queries``, or the message embedded here)."""
        dense = np.zeros(len(history), dtype=np.float32)
        try:
            if store is not None:
                vectors = await store()
                if queries is None:
                    queries = await (query or MessageQuery(message)).vectors(store)
                if len(queries):
                    dense = await vectors.known_scores(chat_id, history, queries)
        except SmartContextError as exc:
            log.warning("Smart Context: the budget searches by words only: %s", exc)
        return dense

    async def summaries_changed(self, chat_id: ChatId, covered: int) -> None:
        """The background pass stored or dropped summaries of the chat's first ``covered``
        messages: its spans are planned again now, in a worker thread, so the next request
        finds them ready (a 10,000-message chat: 10 to 17 ms). Only over a last history that
        holds all of those messages: planned over a shorter one, they would leave out the
        summaries past its end for as long as no pass changes them (the request plans them
        then)."""
        self.summary_version[chat_id] = self.summary_version.get(chat_id, 0) + 1
        found = self._facts.get(chat_id)
        facts = found.last if found is not None else None
        if found is not None and facts is not None and facts.n >= covered:
            await self._spans_of(chat_id, facts, found.counter, off_loop=True)

    async def _spans_of(
        self, chat_id: ChatId, facts: Facts, counter: Counter, off_loop: bool = False
    ) -> tuple[list[Span], list[Summary]]:
        """The valid stored summaries over this history, as plan spans, memoised until the
        history or the stored summaries change."""
        # new messages leave every stored summary as it was: only a reset or a pass that
        # stored summaries changes the spans (a request on a shorter history than the memo's
        # reads them for its own)
        # the spans hold the summaries' counts: a new counter plans them again
        version = (facts.owner, facts.resets, self.summary_version.get(chat_id, 0), counter.key)
        memo = self._spans.get(chat_id)
        if memo is not None and memo[0] == version and memo[3] <= facts.n:
            return memo[1], memo[2]
        stored = await self._guarded([], self.db.summaries, chat_id)
        by_key = {(s.level, s.from_id, s.to_id): s for s in stored}
        # the nodes found valid over the same facts (owner and resets: only grown since) keep
        # their hashes (a new summary of a 10,000-message chat planned the 1,250 others' again)
        known = memo[4] if memo is not None and memo[0][:2] == version[:2] else frozenset()

        def planned() -> tuple[list[Span], list[Summary], frozenset[Check]]:
            ids, keys = facts.str_ids[: facts.n], facts.keys[: facts.n]
            valid = plan_tree(ids, keys, stored, 0, known).valid
            nodes = sorted(valid, key=_level_start)
            index = {(n.level, n.start): k for k, n in enumerate(nodes)}
            rows = [by_key[n.key(ids)] for n in nodes]
            counts = self._count_summaries(counter, rows)
            spans = [
                Span(n.start, n.end, n.level, counts[k], _children(n, index))
                for k, n in enumerate(nodes)
            ]
            return spans, rows, frozenset(checks(valid))

        # the background pass plans them off the loop: the requests of other chats go on
        spans, rows, found = await to_thread(planned) if off_loop else planned()
        ends = max((span.end for span in spans), default=0)
        self._spans[chat_id] = (version, spans, rows, ends, found)
        return spans, rows

    async def _guarded(self, default: Any, call: Callable[..., Any], *args: Any) -> Any:
        """A store call off the loop; when the store fails (locked by another process for
        longer than its timeout, damaged under us) the budget goes on without that part."""
        try:
            return await to_thread(call, *args)
        except SmartContextError as exc:
            log.warning("Smart Context: the memory store failed, the budget goes on: %s", exc)
            return default

    def _count_summaries(self, counter: Counter, rows: Sequence[Summary]) -> list[int]:
        """What each summary costs as a message (:func:`summary_message`), counted once per
        summary and counter (from the loop or the background pass's worker thread: what this
        call counts it keeps to itself). Kept by the summary itself, whose hash reuses its
        text's: the store holds the same objects from one plan to the next, where keys made of
        the messages' texts were made and hashed again for each of a long chat's 1,250."""
        if counter.key not in self._summary_tokens and len(self._summary_tokens) >= MAX_COUNTERS:
            self._summary_tokens.clear()  # the counts of counters gone by
        counted = self._summary_tokens.setdefault(counter.key, {})
        if len(counted) > MAX_COUNTED:
            counted.clear()  # counting a summary again is cheap
        known = [counted.get(row) for row in rows]
        todo = [k for k, n in enumerate(known) if n is None]
        if todo:
            # the text, the role "system" and the framing, as prompt_tokens counts them
            role = counter.count(["system"])[0]
            texts = [summary_message(rows[k])["content"] for k in todo]
            for k, n in zip(todo, counter.count(texts), strict=True):
                known[k] = counted[rows[k]] = n + role + PER_MESSAGE
        return [int(n or 0) for n in known]  # (another thread may clear the memo meanwhile)


def _level_start(node: Node) -> tuple[int, int]:
    return node.level, node.start


def _words_of(messages: Sequence[Mapping[str, Any]]) -> Words:
    """The words of ``messages`` (run it in a worker thread)."""
    return Words.read(map(message_text, messages), 0)


class _Names(dict[int, str]):
    """Candidate ids by position: those asked for first read at once (a record names the kept
    few of 60,000 candidates), any other read when asked."""

    def __init__(self, part: Part, at: np.ndarray) -> None:
        super().__init__(zip(at.tolist(), part.names(at), strict=True))
        self._part = part

    def __missing__(self, i: int) -> str:
        name = self[i] = self._part.name(i)
        return name


def _flags(facts: Facts, ids: set[str]) -> np.ndarray:
    """Which positions of the history hold one of ``ids`` (a few: a lookup each, not a scan)."""
    out = np.zeros(facts.n, dtype=bool)
    out[facts.positions(ids)] = True
    return out


def _children(node: Node, index: Mapping[tuple[int, int], int]) -> tuple[int, ...]:
    return tuple(index[(c.level, c.start)] for c in node.children if (c.level, c.start) in index)


def _weights(settings: Settings) -> Weights:
    return Weights(
        recency=settings.importance_recency_weight,
        semantic=settings.importance_semantic_weight,
        entity=settings.importance_entity_weight,
        user=settings.importance_user_weight,
    )
