"""A chat's message vectors: rows found by message id and content, fast on a warm history.

The key of a message is ``{message_id}:{content_hash}`` (docs/contract.md §2), so an edited message
gets a new vector. Hashing 10,000 messages per request would dominate the request, so two memos
avoid it: the last few histories located (the next one is usually one of them plus a few
messages, which the history's lineage or two list comparisons in C confirm), and per message id
the text and row last seen. A request locates more than one history (the whole one for the topic
filter, the part the filter kept for the budget's search), so one memo alone would be replaced by
each in turn and every request would fall to the per-message path.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from smart_context.messages import History, Message, common_start, message_text
from smart_context.vectors.codec import cache_key
from smart_context.vectors.int8 import Codes, Scales
from smart_context.vectors.keyed import KeyedMatrix, Rows
from smart_context.vectors.ops import Matrix

_NO_ROWS: Rows = np.zeros(0, dtype=np.intp)
MEMOS = 4  # histories whose rows are kept: the whole one, the filtered one, and a spare each
Located = tuple[list[Any], list[Any], Rows, object]  # ids, contents, rows, lineage


class ChatVectors(KeyedMatrix):
    """The cached vectors of one chat's messages under one embedding model."""

    def _reset(self, keys: Sequence[str], stored: tuple[Scales, Codes] | None) -> None:
        super()._reset(keys, stored)
        # message id -> (text, row): lets a warm lookup compare strings instead of hashing
        self._seen: dict[str, tuple[str, int]] = {}
        self._located: list[Located] = []  # the last histories located, newest first
        self._id_rows: dict[str, int] | None = None  # message id -> its latest row, built on use

    def locate(self, history: History) -> tuple[Rows, list[int]]:
        """Row of each message (-1 when missing) and the indexes of the misses."""
        known, last_rows = 0, _NO_ROWS
        for last in self._located:
            shared = _shared(history, last)
            if shared > known:  # the longest start: a later history of one lineage is longer
                known, last_rows = shared, last[2]
                if shared == len(history):
                    break
        tail, missing = self._locate_each(history.messages, known)
        rows = np.concatenate((last_rows[:known], tail)) if known else tail
        if not missing and len(history) > known:
            self._remember(history, rows)
        return rows, missing

    def _remember(self, history: History, rows: Rows) -> None:
        """Keep ``history`` as the newest history located, in place of one it extends."""
        kept = [m for m in self._located if _shared(history, m) != len(m[0])]
        located = (history.ids, history.contents, rows, history.lineage)
        self._located = [located, *kept][:MEMOS]

    def _locate_each(self, messages: Sequence[Message], start: int) -> tuple[Rows, list[int]]:
        seen, row_of = self._seen, self._row_of
        rows: list[int] = []
        missing: list[int] = []
        for i in range(start, len(messages)):
            message = messages[i]
            mid = str(message.get("id"))
            text = message_text(message)
            hit = seen.get(mid)
            if hit is not None and hit[0] == text:
                rows.append(hit[1])
                continue
            row = row_of.get(cache_key(mid, text), -1)
            if row < 0:
                missing.append(i)
            else:
                seen[mid] = (text, row)
            rows.append(row)
        return np.fromiter(rows, dtype=np.intp, count=len(rows)), missing

    def add_messages(self, messages: Sequence[Mapping[str, Any]], vectors: Matrix) -> Rows:
        """Store one unit vector per message (same order); returns their rows."""
        texts = [message_text(m) for m in messages]
        mids = [str(m.get("id")) for m in messages]
        keys = [cache_key(mid, text) for mid, text in zip(mids, texts, strict=True)]
        rows = self.add(keys, vectors)
        self._seen.update(zip(mids, zip(texts, rows.tolist(), strict=True), strict=True))
        if self._id_rows is not None:
            if any(mid in self._id_rows for mid in mids):
                self.forget()  # an edited message: what was derived from its old row is stale
            self._id_rows.update(zip(mids, rows.tolist(), strict=True))
        return rows

    def rows_of_ids(self, ids: Iterable[str]) -> Rows:
        """The rows of the messages with ``ids`` (their latest content), those found, sorted."""
        if self._id_rows is None:
            self._id_rows = {key.rsplit(":", 1)[0]: row for row, key in enumerate(self.keys)}
        id_rows = self._id_rows
        found = [row for mid in ids if (row := id_rows.get(mid)) is not None]
        return np.unique(np.fromiter(found, dtype=np.intp, count=len(found)))

    def fill(self, history: History, rows: Rows, missing: list[int], vectors: Matrix) -> Rows:
        """Add the vectors of ``history``'s missing messages to rows from :meth:`locate`."""
        rows = rows.copy()
        rows[missing] = self.add_messages([history.messages[i] for i in missing], vectors)
        self._remember(history, rows)
        return rows

    def prune(self, live: History) -> int:
        """Drop the rows of deleted or edited messages; returns how many were dropped."""
        rows, _ = self.locate(live)
        used = np.zeros(len(self), dtype=bool)  # a mark per row: no sort of 10,000 rows
        used[rows[rows >= 0]] = True
        return self.keep(np.flatnonzero(used))


def _shared(history: History, located: Located) -> int:
    """How many messages ``history`` and a history located before share when one starts the
    other (the shorter's length; a request that began before the last reply was stored is the
    shorter), else 0."""
    ids, contents, _, lineage = located
    shared = common_start(history.ids, history.contents, ids, contents, history.lineage, lineage)
    return max(shared, 0)
