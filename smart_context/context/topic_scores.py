"""Which messages a topic click keeps: topic vectors and a cut that fits the embedding model.

Pure numpy, no I/O; :meth:`smart_context.store.VectorStore.topic_scores` brings the vectors.

**A topic's vector.** A label of two words is a weak query. A topic the extractor made also
knows its members (the messages it assigned to the topic), so its vector is the centroid of
their vectors, leaning toward the label's: it points where the topic's messages really are.

**What a click keeps.** Always the selected topics' own members. Beyond them, with
``similarity_threshold = "auto"``, a message that belongs to no topic (written since the last
extraction, or left out of every cluster) is kept when the selected topic is the closest of the
chat's topics *and* it is closer than halfway between the :data:`MEMBER_QUANTILE` of the
members' similarities and the chat's median other message. That cut is read off the chat's own
scores, so it means the same for every embedding model: MiniLM's cosines of related texts sit around
0.3-0.6, nomic-embed-text's around 0.5-0.8 and text-embedding-3's around 0.3-0.6 with a narrower
spread; a fixed number is right for one of them at most, while "as close as the topic's own
messages" holds for all three. A topic without members (a label typed at the command line, a
map made before members were stored) is cut where its scores stand :data:`SPREAD` standard
deviations above the chat's mean, also relative to the model. A number given as
``similarity_threshold`` replaces both cuts: the rule of docs/contract.md §6 on the topic vectors.

Clicking several topics keeps the union of what each keeps, so it never keeps less.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from smart_context.vectors.chat import ChatVectors
from smart_context.vectors.keyed import Rows
from smart_context.vectors.ops import Matrix, Scores, appended, max_pool, normalize_rows

Flags = npt.NDArray[np.bool_]
Vector = npt.NDArray[np.float32]
TopicFound = tuple[Flags | None, Scores]  # a topic's member flags and scores, whole chat

LABEL_WEIGHT = 0.5  # the label's share of a topic vector, against the members' centroid (1.0)
MEMBER_QUANTILE = 0.1  # the members' low end: the least close tenth of them
SPREAD = 1.5  # a topic without members: standard deviations above the chat's mean score


@dataclass(frozen=True)
class TopicQuery:
    """A topic as a click sees it: its label and the ids of its members."""

    label: str
    member_ids: frozenset[str] = frozenset()

    @property
    def key(self) -> str:
        """Names the topic's vector in memos: the same label with other members is another."""
        return f"{self.label}\x00{hash(self.member_ids):x}" if self.member_ids else self.label


@dataclass(frozen=True)
class TopicScores:
    """One click's outcome over a history: each message's best similarity to the selected
    topics, whether it is kept, and the cut each selected topic used. The arrays are the
    click's memo (:func:`score_topics`): read them, and copy one to change it."""

    values: Scores
    keep: Flags
    cuts: dict[str, float]


def topic_vector(label: Vector, members: Matrix) -> Vector:
    """The unit vector of a topic: its members' centroid leaning toward its label."""
    if not len(members):
        return label
    centroid = normalize_rows(members.mean(axis=0, keepdims=True))[0]
    vector: Vector = normalize_rows((centroid + LABEL_WEIGHT * label)[None, :])[0]
    return vector


def member_cut(member_scores: Scores, other_scores: Scores) -> float:
    """Halfway between the similarity most of a topic's members reach and that of the chat's
    typical other message: both read off the same model's scores."""
    low = float(np.quantile(member_scores, MEMBER_QUANTILE))
    if not len(other_scores):
        return low
    return (low + float(np.median(other_scores))) / 2


def spread_cut(scores: Scores) -> float:
    """For a topic without members: clearly closer than the chat's typical message."""
    return float(scores.mean() + SPREAD * scores.std())


def assign(scores: Matrix, members: Flags) -> tuple[npt.NDArray[np.intp], Flags]:
    """Per message: the closest topic (a row number of ``scores``) and whether it belongs to
    no topic. ``scores`` and ``members`` are ``(topics, messages)`` over the topics with members."""
    return scores.argmax(axis=0), ~_any(members)


def score_topics(
    vectors: ChatVectors,
    rows: Rows,
    topics: Sequence[TopicQuery],
    label_vectors: Matrix,
    selected: Sequence[str],
    threshold: float | None,
) -> TopicScores:
    """A click on ``selected`` over the history at ``rows`` of ``vectors``.

    ``topics`` are the chat's topics (and any selected label that is not one of them), with
    ``label_vectors`` in the same order; ``threshold`` is a fixed cut, or ``None`` for the
    automatic one. Topic vectors, members and cuts are memoised on ``vectors``: a warm click
    gathers the history's rows of a few score arrays and compares them.

    When every cut holds still (a fixed one, or the automatic one of topics with members) the
    click itself is kept too: the next request, whose history is this one with its turn added,
    scores the turn's rows only and adds them to it (each message's outcome depends on its own
    scores and the topics' alone). A topic without members cuts by the whole chat's spread,
    which moves as the chat grows: such a click is made whole each time.
    """
    chosen = [i for i, t in enumerate(topics) if t.label in selected]
    # a fixed cut needs the clicked topics only; the automatic one lets all topics compete
    needed = chosen if threshold is not None else list(range(len(topics)))
    found = _found(vectors, topics, label_vectors, needed)
    if threshold is not None:
        cuts = dict.fromkeys(chosen, threshold)
    else:
        cuts = {i: _cut(vectors, topics[i], *found[i]) for i in chosen}
    held = threshold is not None or all(found[i][0] is not None for i in chosen)
    key = "click\x00" + repr((threshold, [topics[i].key for i in chosen], [t.key for t in topics]))
    memo: tuple[Rows, Scores, Flags] | None = vectors.derived.get(key) if held else None
    start = 0
    # the history this click was made over, and perhaps a turn since
    if (
        memo is not None
        and len(memo[0]) <= len(rows)
        and np.array_equal(memo[0], rows[: len(memo[0])])
    ):
        start = len(memo[0])
    values, keep = _clicked(vectors, rows[start:], topics, found, chosen, cuts, threshold)
    if start:
        assert memo is not None
        values, keep = appended(memo[1], values), appended(memo[2], keep)
    if held:
        vectors.remember(key, (rows, values, keep))
    return TopicScores(values, keep, {topics[i].label: cuts[i] for i in chosen})


def _clicked(
    vectors: ChatVectors,
    rows: Rows,
    topics: Sequence[TopicQuery],
    found: dict[int, TopicFound],
    chosen: Sequence[int],
    cuts: dict[int, float],
    threshold: float | None,
) -> tuple[Scores, Flags]:
    """Each of ``rows``' best score for the clicked topics, and whether the click keeps it."""
    picked = {i: found[i][1][rows] for i in chosen}  # the clicked topics' scores, these rows
    values = max_pool(list(picked.values()))
    if not picked:
        values = np.zeros(len(rows), dtype=np.float32)
    if threshold is not None:
        keep = values >= threshold
        for i in chosen:
            if (flags := found[i][0]) is not None:
                keep |= flags[rows]
        return values, keep
    grouped = [i for i in found if found[i][0] is not None]
    keep = np.zeros(len(rows), dtype=bool)
    if any(found[i][0] is not None for i in chosen):
        closest, unassigned = _assignment(vectors, [topics[i] for i in grouped], found)
        closest, unassigned = closest[rows], unassigned[rows]
    for i in chosen:
        near = picked[i] >= cuts[i]
        if (flags := found[i][0]) is None:
            keep |= near
        else:
            keep |= flags[rows] | (unassigned & (closest == grouped.index(i)) & near)
    return values, keep


def _found(
    vectors: ChatVectors, topics: Sequence[TopicQuery], label_vectors: Matrix, needed: list[int]
) -> dict[int, TopicFound]:
    """:func:`_topic` of each of the ``needed`` topics, their scores over the rows added since
    the last click taken together (:meth:`~smart_context.vectors.keyed.KeyedMatrix.scores_of`)."""
    made = {i: _topic(vectors, topics[i], label_vectors[i]) for i in needed}
    scores = vectors.scores_of([(topics[i].key, made[i][1]) for i in needed])
    return {i: (made[i][0], full) for i, full in zip(needed, scores, strict=True)}


def _assignment(
    vectors: ChatVectors, grouped: Sequence[TopicQuery], found: dict[int, TopicFound]
) -> tuple[npt.NDArray[np.intp], Flags]:
    """:func:`assign` over the whole chat for the topics with members (in ``found``'s order),
    memoised until the chat grows: a warm click only gathers the history's rows of it."""
    key = "assign\x00" + "\x00".join(t.key for t in grouped)
    memo = vectors.derived.get(key)
    n = len(vectors)
    if memo is None or memo[0] != n:
        # a chat that grew: only its new rows are assigned (the scores and members of the
        # rows before are as they were; a change there drops the memo with the scores)
        before = memo if memo is not None and memo[0] < n else None
        start = before[0] if before is not None else 0
        members = [(flags, full) for flags, full in found.values() if flags is not None]
        scores = np.stack([full[start:n] for _, full in members])
        flags = np.stack([flags[start:n] for flags, _ in members])
        closest, unassigned = assign(scores, flags)
        if before is not None:
            closest = appended(before[1], closest)
            unassigned = appended(before[2], unassigned)
        memo = vectors.remember(key, (n, closest, unassigned))
    return memo[1], memo[2]


def _any(flags: Flags) -> Flags:
    """Whether any row is true, per column."""
    out: Flags = np.asarray(flags.any(axis=0), dtype=bool)
    return out


def _topic(
    vectors: ChatVectors, topic: TopicQuery, label_vector: Vector
) -> tuple[Flags | None, Vector]:
    """Which rows of the chat are the topic's members (``None``: it has none) and the topic's
    vector, memoised."""
    key = f"topic\x00{topic.key}"
    memo: tuple[Flags | None, Vector] | None = vectors.derived.get(key)
    if memo is None:
        member_rows = vectors.rows_of_ids(topic.member_ids)
        is_member = np.zeros(len(vectors), dtype=bool)
        is_member[member_rows] = True
        vector = topic_vector(label_vector, vectors.rows_at(member_rows))
        memo = vectors.remember(key, (is_member if len(member_rows) else None, vector))
    flags, vector = memo
    if flags is not None and len(flags) < len(vectors):  # rows added since: none is a member
        flags = appended(flags, np.zeros(len(vectors) - len(flags), dtype=bool))
        vectors.remember(key, (flags, vector))
    return flags, vector


def _cut(vectors: ChatVectors, topic: TopicQuery, flags: Flags | None, full: Scores) -> float:
    """The automatic cut of a topic; a topic with members keeps it until its rows change."""
    if flags is None:
        return spread_cut(full)  # the chat grows: computed afresh, O(n) in numpy
    key = f"cut\x00{topic.key}"
    cut: float | None = vectors.derived.get(key)
    if cut is None:
        known = full[: len(flags)]
        cut = vectors.remember(key, member_cut(known[flags], known[~flags]))
    return cut
