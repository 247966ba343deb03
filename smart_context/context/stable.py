"""A request laid out for the upstream's prompt cache (:mod:`smart_context.context.layout`): the
reads it needs (the budget's counts, the search, the stored summaries, the pins), the layout,
the chat's frame kept for its next request, and the record, written once.

Used by :func:`smart_context.context.assemble.request_items` when a budget is set and the chat
model's upstream caches prompts (:func:`request_cache`); a model whose cache is unknown keeps
the per-turn choice, which is the cheapest where nothing is cached.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from smart_context.budget.cache import CacheModel, cache_model, recall_share
from smart_context.budget.cache_seen import CacheSeen
from smart_context.budget.parts import chat_model
from smart_context.config import RECALLED_IN, Settings
from smart_context.context.layout import (
    Candidates,
    Costs,
    Limits,
    Parts,
    decide,
    lay_out,
    window_limit,
)
from smart_context.context.plan import RequestPlan
from smart_context.context.prepared import Prepared, sent_flags
from smart_context.context.topic_filter import Decision
from smart_context.items.request import Chosen, RequestContext
from smart_context.knowledge.section import KnowledgeSection
from smart_context.mcp.config import function_name
from smart_context.memory.section import MemorySection
from smart_context.messages import History
from smart_context.record import FILTERED, MemoryPart, RequestRecord, shorter_ids
from smart_context.services import Services

SESSION_MODES = ("always", "manual")  # the session's items: the same on every request


def request_cache(
    settings: Settings, model: str | None, seen: CacheSeen | None = None
) -> CacheModel:
    """The prompt cache the chat model's upstream keeps, by the settings, and by what its
    replies showed (``seen``) where the ``prompt_cache`` setting leaves it to the model."""
    name = chat_model(settings, model)
    price = None if settings.cache_read_price == "auto" else settings.cache_read_price
    guessed = cache_model(name, settings.prompt_cache, price)
    if seen is None or settings.prompt_cache != "auto":
        return guessed
    return seen.adjust(name or "", guessed, price)


async def stable_request(
    services: Services,
    plan: RequestPlan,
    decision: Decision,
    request: RequestContext,
    memory: MemorySection,
    notes: KnowledgeSection,
    offered: Sequence[Mapping[str, Any]],
    cache: CacheModel,
    commit: bool,
    recalled_in: str | None = None,
) -> Prepared:
    """The request laid out for ``cache`` (module docstring). ``offered``: the tools this message
    would take if the layout cut now; ``recalled_in`` overrides the setting (the host's word)."""
    settings, chat_id, counter = services.settings, plan.chat_id, plan.counter
    looked = await plan.looked
    view = await services.chats.view(chat_id, fresh=False)
    whole = decision.full or decision.source
    positions = decision.positions if decision.full is not None else None
    if whole is None or (positions is None and len(whole) != len(decision.history)):
        whole, positions = History(decision.history), None
    facts = services.budget.facts(chat_id, counter).update(whole)
    ids = {str(i) for i in looked.reads.marks} | {str(m.get("id")) for m in view.sticky}
    pinned = np.zeros(facts.n, dtype=bool)
    pinned[facts.positions(ids)] = True
    found = Candidates(
        facts,
        positions,
        decision.history,
        whole,
        pinned if positions is None else pinned[positions],
    )
    filtered = decision.record.mode == FILTERED or positions is not None
    spans = None if filtered else await services.budget.spans(chat_id, facts, counter)
    session = tuple(c for c in request.items if c.mode in SESSION_MODES)
    chosen = tuple(c for c in request.items if c.mode not in SESSION_MODES)
    parts = _parts(session, chosen, memory, notes, offered, plan.message)
    place = recalled_in if recalled_in in RECALLED_IN else settings.recalled_in
    key = (
        chat_model(settings, plan.model),
        cache.name,
        tuple(decision.record.active_topics),
        place,
    )
    old = services.frames.get(chat_id)
    now = services.clock()
    limits = Limits(
        budget=plan.limit,
        window=window_limit(cache, chat_model(settings, plan.model), settings.budget_tokens),
        low_mark=settings.cut_low_mark,
        recall_share=recall_share(cache)
        if settings.recall_share == "auto"
        else settings.recall_share,
        summary_share=settings.summary_share,
        recalled_in=place,
        recent=settings.recent_messages,
        search=settings.search_limit,
    )
    costs = Costs(counter, services.frames.costs, services.frames.tools_json)
    cut = decide(found, spans, parts, old, key, now, cache, costs, limits)
    scores = None
    if cut.recalls:  # the search runs only for a layout that left messages out
        relevance, _ = await services.budget.searched(
            chat_id,
            facts,
            whole,
            plan.message,
            services.store,
            None,
            plan.query,
            looked.reads,
            plan.dense if whole is plan.history else None,  # scored over the plan's
        )
        scores = relevance if positions is None else relevance[positions]
    elif plan.dense is not None:
        plan.dense.cancel()
    laid = lay_out(found, cut, scores, parts, old, key, now, cache, costs, limits)
    usage = services.usage.measure(chat_id, decision, counter, fitted=laid.fitted)
    plain = int(usage["full_tokens"])
    warm = old is not None and old.key[:2] == key[:2] and not cache.cold(now - old.at)
    cache_part = laid.cache | {
        "plain_tokens": plain,
        "plain_cached_estimate": min(cache.cached(old.plain_tokens), plain)
        if warm and old is not None
        else 0,
    }
    if commit:
        services.frames.put(chat_id, replace(laid.frame, plain_tokens=plain))
    names = {str(t.get("function", {}).get("name")) for t in laid.tools}
    request = replace(
        request,
        items=tuple(
            c
            for c in request.items
            if c.item.type != "tool"
            or function_name(c.item.server_name or "", c.item.name) in names
        ),
    )
    sent = None if laid.fitted.kept.all() else sent_flags(decision, laid.fitted.kept)
    record = RequestRecord(
        decision.record,
        sent_ids=None if sent is None else shorter_ids(decision.all_ids, sent),
        sent=sent,
        memory=MemoryPart(memory.direct_ids, memory.memory_ids, memory.left_out)
        if memory.text
        else None,
        knowledge=notes.notes if notes.notes or notes.left_out else None,
        tools=tuple(str(t["function"]["name"]) for t in laid.tools),
        budget=laid.fitted.record,
        usage=usage,
    ).as_dict() | {"layout": laid.layout, "cache": cache_part}
    message = laid.message if laid.message != plan.message else None
    return Prepared(laid.messages, request, record, list(map(dict, laid.tools)), message)


def _parts(
    session: tuple[Chosen, ...],
    chosen: tuple[Chosen, ...],
    memory: MemorySection,
    notes: KnowledgeSection,
    offered: Sequence[Mapping[str, Any]],
    message: str,
) -> Parts:
    """The request's parts besides its history: the session's items, stable between cuts, and
    what was chosen for this message (agent items, memory, notes)."""
    documents = RequestContext(tuple(c for c in chosen if c.item.type != "tool"))
    references = documents.sections().get("reference", "")
    knowledge = "\n\n".join(p for p in (references, notes.text) if p)
    return Parts(
        stable=RequestContext(session).system_text(),
        chosen=documents.system_text(memory.text, notes.text),
        tools=offered,
        message=message,
        sections={"memory": memory.text, "knowledge": knowledge},
    )
