"""The summary tree of a chat: which stretches have a summary, which are still valid, which to
make next (hierarchical summaries). Pure: no I/O, no model.

- A **leaf** (level 1) summarises up to :data:`LEAF` consecutive messages; a node of level
  ``L + 1`` summarises up to :data:`FANOUT` consecutive nodes of level ``L`` (its children), so
  level 2 covers about 50 messages, level 3 about 250 and so on: a 10,000-message chat has a
  few nodes at its top, and a request can afford a summary of any stretch at some level.
- A node is named by its level and the ids of its first and last message, and carries
  ``covers``: a hash of the keys (``{id}:{content hash}``) of every message it covers. A node
  is **valid** while its messages are still there, in that order, unedited; an edit or a
  deletion makes every node over that message invalid, and only those.
- New nodes are made only over stretches no valid node covers, so a deletion in the middle of a
  long chat costs one leaf and its ancestors, not everything after it. A stretch at the end
  waits until it is a whole leaf (or a whole group of children) and older than the messages a
  request always sends.
"""

from __future__ import annotations

import bisect
from collections.abc import Container, Iterable, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

import blake3

LEAF = 10  # messages per leaf summary
FANOUT = 5  # children per node above the leaves
MAX_LEVEL = 6  # 10 * 5**5 = 31,250 messages under one node


@dataclass(frozen=True)
class Node:
    """A summary's place in the chat: positions ``start``..``end - 1`` at ``level``."""

    level: int
    start: int
    end: int
    covers: str
    children: tuple[Node, ...] = ()

    def key(self, ids: Sequence[str]) -> tuple[int, str, str]:
        """``(level, from_id, to_id)``: how the store names it."""
        return (self.level, ids[self.start], ids[self.end - 1])


class Marked(Protocol):
    """What :func:`plan_tree` reads of a stored summary (a
    :class:`~smart_context.memory.records.Summary`, as the store gives it)."""

    @property
    def level(self) -> int: ...
    @property
    def from_id(self) -> str: ...
    @property
    def to_id(self) -> str: ...
    @property
    def covers(self) -> str: ...


M = TypeVar("M", bound=Marked)


@dataclass(frozen=True)
class Tree(Generic[M]):
    """The valid stored nodes and the nodes to make, both as :class:`Node` (every level), and
    the stored summaries that no longer fit the chat."""

    valid: list[Node]
    missing: list[Node]
    invalid: list[M]


Check = tuple[int, int, int, str]  # a node found valid: (level, start, end, covers)


def checks(nodes: Iterable[Node]) -> set[Check]:
    """The :data:`Check` of each node, for a later :func:`plan_tree` over the same messages."""
    return {(n.level, n.start, n.end, n.covers) for n in nodes}


def covers(keys: Sequence[str], start: int, end: int) -> str:
    """The hash of the message keys at ``start``..``end - 1``."""
    text = "\x00".join(keys[start:end])
    return blake3.blake3(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def plan_tree(
    ids: Sequence[str],
    keys: Sequence[str],
    stored: Sequence[M],
    settled: int,
    checked: Container[Check] = frozenset(),
) -> Tree[M]:
    """The tree over ``ids`` (message ids in order, ``keys`` their content keys) given the
    summaries ``stored``; only the first ``settled`` messages may get new summaries.
    ``checked``: ``(level, start, end, covers)`` of nodes found valid over these same keys
    before (a chat that only grew since): their hash is not computed again."""
    position = {mid: i for i, mid in enumerate(ids)}
    by_level: dict[int, dict[int, tuple[Node, M]]] = {}
    invalid: list[M] = []
    for row in stored:
        start, last = position.get(row.from_id), position.get(row.to_id)
        if (
            start is None
            or last is None
            or last < start
            or start in by_level.get(row.level, {})
            or (
                (row.level, start, last + 1, row.covers) not in checked
                and covers(keys, start, last + 1) != row.covers
            )
        ):
            invalid.append(row)
            continue
        node = Node(row.level, start, last + 1, row.covers)
        by_level.setdefault(row.level, {})[start] = (node, row)
    valid: list[Node] = []
    missing: list[Node] = []
    units = _leaves(by_level.get(1, {}), keys, settled, valid, missing, invalid)
    for level in range(2, MAX_LEVEL + 1):
        if len(units) < 2:
            break
        units = _parents(level, units, by_level.get(level, {}), keys, valid, missing, invalid)
    return Tree(valid, missing, invalid)


def _leaves(
    known: dict[int, tuple[Node, M]],
    keys: Sequence[str],
    settled: int,
    valid: list[Node],
    missing: list[Node],
    invalid: list[M],
) -> list[Node]:
    """Level 1 over the chat: the valid stored leaves, and new ones over what they leave."""
    out: list[Node] = []
    starts: list[int] = []
    for start in sorted(known):  # a stored leaf overlapping an earlier valid one is stale
        if starts and start < known[starts[-1]][0].end:
            invalid.append(known.pop(start)[1])
        else:
            starts.append(start)
    i = 0
    while i < len(keys):
        found = known.get(i)
        if found is not None:
            valid.append(found[0])
            out.append(found[0])
            i = found[0].end
            continue
        after = bisect.bisect_right(starts, i)
        nxt = starts[after] if after < len(starts) else len(keys)
        end = min(i + LEAF, nxt)
        if nxt == len(keys) and (end - i < LEAF or end > settled):
            break  # the open end of the chat: wait for a whole, settled leaf
        if end > settled:  # fewer messages count as settled than before: leave a gap
            i = nxt
            continue
        made = Node(1, i, end, covers(keys, i, end))
        missing.append(made)
        out.append(made)
        i = end
    return out


def _parents(
    level: int,
    units: list[Node],
    known: dict[int, tuple[Node, M]],
    keys: Sequence[str],
    valid: list[Node],
    missing: list[Node],
    invalid: list[M],
) -> list[Node]:
    """Level ``level`` over ``units`` (the nodes of the level below, in order)."""
    out: list[Node] = []
    starts = sorted(known)
    j = 0
    while j < len(units):
        found = known.pop(units[j].start, None)
        if found is not None:
            stored = found[0]
            group = _children_within(units, j, stored.end)
            if group:
                node = Node(level, stored.start, stored.end, stored.covers, tuple(group))
                valid.append(node)
                out.append(node)
                j += len(group)
                continue
            invalid.append(found[1])
        after = bisect.bisect_right(starts, units[j].start)
        stop = starts[after] if after < len(starts) else None
        if units[j].level != level - 1:  # a root left lower down: it stays a root
            out.append(units[j])
            j += 1
            continue
        group = []
        k = j
        while (
            k < len(units)
            and len(group) < FANOUT
            and units[k].level == level - 1
            and (stop is None or units[k].start < stop)
        ):
            group.append(units[k])
            k += 1
        gap_fill = stop is not None and k < len(units) and units[k].start >= stop
        if len(group) == FANOUT or (gap_fill and len(group) >= 2):
            start, end = group[0].start, group[-1].end
            node = Node(level, start, end, covers(keys, start, end), tuple(group))
            missing.append(node)
            out.append(node)
        else:
            out.extend(group)  # too few to summarise again yet: they stay roots for now
        j = k
    invalid.extend(row for _, row in known.values())  # stored nodes that no longer line up
    return out


def _children_within(units: list[Node], j: int, end: int) -> list[Node]:
    """The units from ``j`` that exactly fill up to ``end``; empty if they do not line up."""
    group = []
    k = j
    while k < len(units) and units[k].end <= end:
        group.append(units[k])
        k += 1
    return group if group and group[-1].end == end else []
