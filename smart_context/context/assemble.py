"""A request's context, built in one place, in the order docs/contract.md §9 fixes: system
prompt, memory, knowledge, tools, history, current message. This module is the only one that
knows that order.

:func:`plan_request` makes the request's plan (:mod:`.plan`); :func:`assemble` applies the topic
rule to the history (the sticky messages and, when topics are selected, the messages close to
them); :func:`request_items` builds the other sections from their own modules (context items,
memory, the vault's notes), lets the items chosen by search give way when the fixed parts do not
fit, fits the history into the budget, and writes the record once.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from smart_context.background import ahead, to_thread
from smart_context.budget.parts import (
    Fixed,
    budget_limit,
    fixed_costs,
    messages_cost,
)
from smart_context.budget.tokens import Counter
from smart_context.config import Settings
from smart_context.context.allocate import chosen_by_search, give_way, over_note, without
from smart_context.context.plan import (
    QUICK_FILES,
    Look,
    Looked,
    RequestPlan,
    look,
    look_now,
    look_soon,
)
from smart_context.context.prepared import Prepared, sent_flags
from smart_context.context.stable import request_cache, stable_request
from smart_context.context.topic_filter import Decision, Selection, decide
from smart_context.context.topic_scores import TopicQuery, TopicScores, score_topics
from smart_context.context.usage import fixed_tokens
from smart_context.errors import EmbeddingError, SmartContextError
from smart_context.items.query import MessageQuery
from smart_context.items.request import Chosen, RequestContext, build
from smart_context.items.select import Limits
from smart_context.items.selection import chat_limits
from smart_context.knowledge.section import KnowledgeSection, find, knowledge_section
from smart_context.memory.model_tools import memory_tool_definitions
from smart_context.memory.section import MemorySection, memory_section
from smart_context.messages import History, Message
from smart_context.paths import ChatId
from smart_context.record import FILTERED, FULL, MemoryPart, RequestRecord, shorter_ids
from smart_context.services import Services
from smart_context.vectors.int8 import Coded
from smart_context.vectors.ops import Matrix

log = logging.getLogger(__name__)

MEMORY_SHARE = 0.15  # of the budget, at most, for the memory section
MEMORY_TOKENS = 1500  # ...and without a budget
KNOWLEDGE_TOKENS = 2000  # the vault notes' room without a budget (with one: knowledge_share)


async def assemble(
    services: Services, chat_id: ChatId, history: History, topics: Sequence[str] | None = None
) -> Decision:
    """The history to send for one request and its record; embedding failures leave it whole.

    ``topics`` overrides the chat's selected topics (the command line's "what if").
    """
    view = await services.chats.view(chat_id)
    settings = services.settings
    selected = view.active_topics if topics is None else tuple(topics)
    active = selected if settings.embedding_search else ()
    scores = None
    error = services.config_error
    threshold = settings.similarity_threshold
    if active and len(history):
        try:
            scores = await _selected_click(services, chat_id, history, view.queries, active)
        except EmbeddingError as exc:
            error = embeddings_failed(exc)
        except SmartContextError as exc:
            error = f"Topic filter skipped, so the whole history is sent: {exc}"
    selection = Selection(active, threshold, settings.embedding_search, error)
    return decide(history, view.sticky, selection, scores)


async def click_ahead(services: Services, chat_id: ChatId, history: History) -> None:
    """The chat's topic click over ``history`` (the chat as a reply's pass read it), made
    between the reply and the next message, when topics are selected. A pass that lets the new
    turn join a topic changes the topic's members and so its vector, and the next request would
    score the whole chat again (at 10,000 messages, 2-3 ms of its own time): it finds the click
    made here (:func:`~smart_context.context.topic_scores.score_topics` keeps it), with only
    what was said since to add."""
    try:
        view = await services.chats.view(chat_id, fresh=False)
        if view.active_topics and services.settings.embedding_search and len(history):
            await _selected_click(services, chat_id, history, view.queries, view.active_topics)
    except SmartContextError as exc:  # the next request makes it, and says what failed
        log.info("Smart Context: the topic click of %s was not made ahead: %s", chat_id, exc)


async def _selected_click(
    services: Services,
    chat_id: ChatId,
    history: History,
    topics: Sequence[TopicQuery],
    active: Sequence[str],
) -> TopicScores:
    """The click on the ``active`` labels over ``history``, among the chat's ``topics``: the
    topics with members compete for the messages no topic has; a selected label without
    members is scored alone."""
    grouped = [q for q in topics if q.member_ids]
    known = {q.label for q in grouped}
    queries = [*grouped, *(TopicQuery(t) for t in active if t not in known)]
    threshold = services.settings.similarity_threshold
    fixed = None if threshold == "auto" else threshold
    return await _click(services, chat_id, history, queries, active, fixed)


def plan_request(
    services: Services,
    chat_id: ChatId,
    history: History,
    message: str,
    model: str | None = None,
    takes_tools: bool = True,
) -> RequestPlan:
    """The plan of one request (:mod:`smart_context.context.plan`): made once, read by every
    section. ``model``: the host's chat model when it says; ``takes_tools``: its word on it.
    Call it on the event loop: the store's reads start here."""
    limit = budget_limit(services.settings, model)
    counter = services.budget.counter(model)  # the vault's calibrated estimate, if any
    query = MessageQuery(message)
    # a chat its budget will cut: the message's embedding (a worker thread, or the network)
    # and the budget's dense search start now, so the model works while the topic rule and
    # the sections do (the caller yields once to let them begin)
    dense = None
    cuts = bool(limit) and services.budget.cuts(chat_id, counter, limit)
    if cuts:
        query.start(services.store)
        dense = ahead(services.budget.dense(chat_id, history, message, services.store, None, query))
    what = Look(
        services.memory_db, chat_id, bool(limit), services.items.look, services.knowledge.look
    )
    # read on the loop when that is quick: few files to stat (look_now)
    few_files = all(
        seen is not None and seen <= QUICK_FILES
        for seen in (services.items.files_seen(), services.knowledge.files_seen())
    )
    looked: asyncio.Future[Looked]
    if dense is not None:  # the message's embedding goes off first, then the reads
        looked = ahead(look_soon(what, few_files))
    elif (now := look_now(what) if few_files else None) is None:
        looked = ahead(to_thread(look, what))
    else:
        looked = asyncio.get_running_loop().create_future()
        looked.set_result(now)
    return RequestPlan(chat_id, history, query, counter, limit, looked, model, takes_tools, dense)


async def request_items(
    services: Services,
    plan: RequestPlan,
    decision: Decision,
    commit: bool = True,
    recalled_in: str | None = None,
) -> Prepared:
    """The request as sent: the rules and references (docs/contract.md §8) as the system message
    before the history, and the history within the token budget (docs/contract.md §9); with the
    record of both, written once. ``decision`` is the topic rule's history and record. When the
    model's upstream caches prompts, the request is laid out for its cache
    (:mod:`smart_context.context.stable`); ``commit``: that layout is kept for the chat's next
    request (a dry run keeps nothing)."""
    chat_id, message, counter, limit = plan.chat_id, plan.message, plan.counter, plan.limit
    view = await services.chats.view(chat_id, fresh=False)  # assemble asked this request
    documents, tools = chat_limits(services.settings, view.context_settings)
    looked = await plan.looked
    request = await build(
        services.items, services.store, plan.query, documents, view.session, tools, looked.items
    )
    if not plan.takes_tools:  # none is sent, so none is listed as sent with the reply
        request = replace(request, items=tuple(c for c in request.items if c.item.type != "tool"))
    memory = await memory_of(services, plan)
    memory_tools = services.settings.memory_tools
    cache = request_cache(services.settings, plan.model, services.cache_seen)
    if limit and cache.caches:
        room = int(services.settings.knowledge_share * limit)
        notes = await notes_of(services, plan, room, documents)
        offered = fixed_parts(request, "", message, plan.takes_tools, memory_tools).tools
        return await stable_request(
            services, plan, decision, request, memory, notes, offered, cache, commit, recalled_in
        )
    fixed = fixed_parts(request, memory.text, message, plan.takes_tools, memory_tools)
    # counted once: the notes' room and the budget's both start from them
    costs = fixed_costs(counter, fixed) if limit else None
    gave_way: list[dict[str, str]] = []
    if costs is not None:
        # the items the search chose give way before the last turn of the history does
        over = sum(costs.values()) + _last_turn(counter, decision.history) - limit
        dropped = give_way(chosen_by_search(request, counter), over)
        if dropped:
            gave_way = [_named(c) for k, c in enumerate(request.items) if str(k) in dropped]
            request = without(request, dropped)
            fixed = fixed_parts(request, memory.text, message, plan.takes_tools, memory_tools)
            costs = fixed_costs(counter, fixed)
    room = _notes_room(services.settings, limit, costs)
    notes = await notes_of(services, plan, room, documents)
    text = request.system_text(memory.text, notes.text)
    system = [{"role": "system", "content": text}] if text else []
    if notes.text:
        fixed = replace(fixed, knowledge=[*fixed.knowledge, *_as_system(notes.text)])
        if costs is not None:
            costs["knowledge"] = messages_cost(counter, fixed.knowledge)
    whole = decision.full or decision.source
    fitted = await services.budget.fit(
        chat_id,
        decision.history,
        fixed,
        plan.model,
        services.store,
        None,
        [m.get("id") for m in view.sticky],
        summaries=decision.record.mode != FILTERED,
        history=whole,
        costs=costs,
        positions=decision.positions if decision.full is not None else None,
        query=plan.query,
        reads=looked.reads,
        dense=plan.dense if whole is plan.history else None,  # scored over the plan's
    )
    parts = RequestRecord(
        decision.record,
        memory=MemoryPart(memory.direct_ids, memory.memory_ids, memory.left_out)
        if memory.text
        else None,
        knowledge=notes.notes if notes.notes or notes.left_out else None,
        tools=tuple(str(t["function"]["name"]) for t in fixed.tools),
    )
    offered = list(fixed.tools)
    if fitted is None:
        fixed_cost = fixed_tokens(counter, system, message, fixed.tools)
        usage = services.usage.measure(chat_id, decision, counter, fixed_cost)
        record = replace(parts, usage=usage).as_dict()
        return Prepared([*system, *decision.history], request, record, offered)
    kept = fitted.kept
    sent = None if kept.all() else sent_flags(decision, kept)
    record = replace(
        parts,
        sent_ids=None if sent is None else shorter_ids(decision.all_ids, sent),
        sent=sent,
        budget=fitted.record | {"budget": _said(fitted.record["budget"], gave_way)},
        usage=services.usage.measure(chat_id, decision, counter, fitted=fitted),
    ).as_dict()
    return Prepared([*system, *fitted.history], request, record, offered)


def fixed_parts(
    request: RequestContext,
    memory: str,
    message: str,
    model_takes_tools: bool,
    memory_tools: bool,
) -> Fixed:
    """What goes with the request besides the history and the notes: the rules, the memory
    section, the references, the tools offered (the items' and, when on, the memory tools;
    none for a model that takes no tools) and the message."""
    sections = request.sections()
    tools = [*request.tools(), *memory_tool_definitions()] if memory_tools else request.tools()
    return Fixed(
        system=_as_system(sections.get("rule")),
        memory=_as_system(memory),
        knowledge=_as_system(sections.get("reference")),
        tools=tools if model_takes_tools else [],
        message=message,
    )


def _last_turn(counter: Counter, history: Sequence[Message]) -> int:
    """What the last two messages of the history cost: the room the items chosen by search
    leave for the history when a budget is tight."""
    return messages_cost(counter, [dict(m) for m in history[-2:]])


def _named(chosen: Chosen) -> dict[str, str]:
    return {"type": chosen.item.type, "name": chosen.item.name}


def _said(budget: dict[str, Any], gave_way: list[dict[str, str]]) -> dict[str, Any]:
    """The record's ``budget`` with the items that gave way (``left_out_items``) and, when
    what must be sent did not fit, by how much it went over and why (``over``, ``note``)."""
    out = dict(budget)
    if gave_way:
        out["left_out_items"] = gave_way
    used, limit = int(out["used"]), int(out["limit"])
    if used > limit:
        out["over"] = used - limit
        out["note"] = over_note(used, limit, dict(out["by_section"]))
    return out


async def memory_of(services: Services, plan: RequestPlan) -> MemorySection:
    """The chat's memory section: live direct messages and stored memories, within a share of
    the plan's budget (none: a fixed room); a store that cannot be read costs the section's
    part, never the request (:mod:`smart_context.memory.reads`)."""
    max_tokens = int(MEMORY_SHARE * plan.limit) if plan.limit else MEMORY_TOKENS
    reads = (await plan.looked).reads
    return memory_section(reads.direct, reads.memories, max_tokens, plan.counter)


async def notes_of(
    services: Services, plan: RequestPlan, room: int, limits: Limits
) -> KnowledgeSection:
    """The vault notes for the plan's message (:mod:`smart_context.knowledge`) within ``room``
    tokens (:func:`_notes_room`) as the plan's counter counts them, searched with the message's
    sentence vectors (shared with the request's other searches). Without an embedder the notes
    are searched by their words; a failure costs the notes."""
    settings = services.settings
    empty = KnowledgeSection()
    if not settings.knowledge_folders or not settings.knowledge_top_n or not plan.query.sentences:
        return empty
    if room <= 0:
        return empty
    try:
        layout = await services.knowledge.current((await plan.looked).notes)
        if not layout.chunks:
            return empty
        index: Matrix | Coded = np.zeros((len(layout.chunks), 0), dtype=np.float32)
        queries = np.zeros((0, 0), dtype=np.float32)
        try:
            store = await services.store()
            queries = await plan.query.vectors(services.store)
            index = await services.knowledge.coded(store, layout)
        except SmartContextError as exc:
            log.warning("Smart Context: notes searched by their words only: %s", exc)
        cited = find(
            layout,
            index,
            queries,
            plan.query.sentences,
            replace(limits, top_n=settings.knowledge_top_n, expansion_depth=0),
            settings.knowledge_min_score,
            settings.knowledge_passages,
        )
    except SmartContextError as exc:
        log.warning("Smart Context: notes left out of the request: %s", exc)
        return empty

    def fits(text: str) -> bool:
        return messages_cost(plan.counter, _as_system(text)) <= room

    return knowledge_section(cited, fits)


def _notes_room(settings: Settings, limit: int, costs: Mapping[str, int] | None) -> int:
    """The tokens the notes may take: ``knowledge_share`` of the budget ``limit`` and never
    more than the rest of the request (``costs``, by section) leaves of it."""
    if not limit or costs is None:
        return KNOWLEDGE_TOKENS
    return min(int(settings.knowledge_share * limit), limit - int(sum(costs.values())))


def _as_system(text: str | None) -> list[dict[str, Any]]:
    return [{"role": "system", "content": text}] if text else []


async def _click(
    services: Services,
    chat_id: ChatId,
    history: History,
    queries: Sequence[TopicQuery],
    selected: Sequence[str],
    threshold: float | None,
) -> TopicScores:
    """Score the history against the chat's topics, holding its vectors while doing so."""
    store = await services.store()
    label_vectors = await store.phrase_vectors([q.label for q in queries])
    async with store.chat_rows(chat_id, history) as (vectors, rows):
        if label_vectors.shape[1] != vectors.dim:
            raise EmbeddingError(
                f"Topic vectors have {label_vectors.shape[1]} dimensions but message vectors "
                f"have {vectors.dim}; the embedding model changed while running."
            )
        return score_topics(vectors, rows, queries, label_vectors, selected, threshold)


def embeddings_failed(exc: EmbeddingError) -> str:
    """The record's words for a click the embedding model could not score: what it means for
    the request first (nothing is filtered), then the model's reason."""
    return f"Embeddings failed, so nothing is filtered and the whole history is sent. {exc}"


async def included(
    services: Services, chat_id: ChatId, messages: Sequence[Message]
) -> tuple[list[Any], dict[str, Any]]:
    """Ids of the messages that a request would send now, and how they were chosen: ``mode``,
    and a ``note`` in words when a click kept nothing or could not run (the record's error: a
    selection that filtered nothing must never read as a filter)."""
    decision = await assemble(services, chat_id, History(messages))
    record = decision.record
    unfiltered = record.mode == FULL and record.active_topics
    note = record.note or (record.error if unfiltered else None)
    how = {"mode": record.mode} | ({"note": note} if note else {})
    return [m.get("id") for m in decision.history], how
