"""What the recall benchmarks share: a long chat made ready for budgets, and the product's budget
asked about it the way a request asks.

A chat is made ready as the background pass would leave it: every message embedded by the real
local model (the vectors kept in a cache directory, keyed by content, so a second run embeds
nothing, and read back as saved, so the first run gives what every later one does), and its
offline summaries written in a temporary vault. Then
:meth:`ReadyChat.fit` sends a question as the current message with the whole chat as history
through :class:`~smart_context.budget.budgeter.Budgeter` with default settings and a budget of
the caller's choosing, and returns which messages went and the room the history had (the budget
less the message), the room any baseline beside it gets too.

Used by ``bench_long_recall.py`` (our own sets) and ``public/bench_history.py`` (REALTALK).
"""

from __future__ import annotations

import tempfile
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from smart_context.budget.budgeter import Budgeter
from smart_context.budget.facts import MessageFacts
from smart_context.budget.parts import Fixed
from smart_context.budget.tokens import counter_for
from smart_context.config import Settings, replace
from smart_context.items.query import MessageQuery
from smart_context.memory.db import MemoryDB
from smart_context.memory.refresh import summarize_chat
from smart_context.messages import History
from smart_context.paths import ChatId
from smart_context.store import VectorStore
from smart_context.vectors.ops import Matrix

MODEL = "gpt-4o"  # whose tokenizer counts (exact, offline)


def default_settings(**changes: Any) -> Settings:
    """The product's defaults, counting with :data:`MODEL`'s tokenizer and summarising offline
    (there is no chat model in a benchmark); ``changes`` override any setting, checked as a
    vault's settings are (a mistyped one is an error, not a run on the defaults)."""
    return replace(Settings(), **{"token_model": MODEL, "summarizer": "offline", **changes})


@dataclass
class ReadyChat:
    """One chat ready for budgets: its messages, their vectors (in order), their token counts as
    the budget counts them (text, role and framing), and the stores it reads."""

    chat_id: ChatId
    messages: list[dict[str, Any]]
    store: VectorStore
    db: MemoryDB
    settings: Settings
    vectors: Matrix
    tokens: np.ndarray
    _budgeters: dict[int, Budgeter] = field(default_factory=dict)

    @property
    def total(self) -> int:
        """The chat's tokens, as the budget counts them."""
        return int(self.tokens.sum())

    async def queries(self, texts: Sequence[str], cache: Path) -> list[Matrix]:
        """The sentence vectors of each of ``texts``, as a request embeds its message, kept in
        ``cache`` so a second run embeds nothing."""
        sentences = [MessageQuery(t).sentences for t in texts]
        flat = [s for group in sentences for s in group]
        name, path = f"queries:{self.chat_id}", cache / f"{self.chat_id}.queries.json"
        await VectorStore(cache, self.store.embedder).text_vectors(name, path, flat)
        # read back as saved (int8), so the first run gives what every later one does
        matrix = await VectorStore(cache, self.store.embedder).text_vectors(name, path, flat)
        out, at = [], 0
        for group in sentences:
            out.append(matrix[at : at + len(group)])
            at += len(group)
        return out

    async def fit(self, text: str, limit: int, queries: Matrix) -> tuple[set[int], int]:
        """The positions the budget of ``limit`` tokens sends with ``text`` as the message, and
        the room the history had (the budget less the message)."""
        budgeter = self._budgeters.get(limit)
        if budgeter is None:
            settings = replace(self.settings, budget_tokens=limit)
            budgeter = self._budgeters[limit] = Budgeter(settings, self.db)

        async def get_store() -> VectorStore:
            return self.store

        fitted = await budgeter.fit(
            self.chat_id, self.messages, Fixed(message=text), MODEL, get_store, queries
        )
        assert fitted is not None
        room = limit - int(fitted.record["budget"]["by_section"]["message"])
        return {i for i, k in enumerate(fitted.kept) if k}, room


@asynccontextmanager
async def ready_chat(
    chat_id: str,
    messages: Sequence[Mapping[str, Any]],
    cache: Path,
    embedder: Any,
    settings: Settings,
) -> AsyncIterator[ReadyChat]:
    """``chat_id``'s ``messages`` ready for budgets (module docstring), for the ``with`` block."""
    with tempfile.TemporaryDirectory() as tmp:
        chat = ChatId(chat_id)
        listed = [dict(m) for m in messages]
        first = VectorStore(cache, embedder)
        await first.sync_chat(chat, listed)
        first.flush()
        # read back as saved (int8), as a restarted sidecar reads them: every run gives the same
        store = VectorStore(cache, embedder)
        vectors = await store.sync_chat(chat, listed)
        db = MemoryDB(Path(tmp))
        try:
            await summarize_chat(db, chat, listed, settings, None)
            facts = MessageFacts(counter_for(MODEL)).update(History(listed))
            yield ReadyChat(chat, listed, store, db, settings, vectors, facts.tokens)
        finally:
            db.close()
