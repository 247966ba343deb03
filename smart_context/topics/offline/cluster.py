"""Topic extraction without a chat model: cluster the message vectors, name clusters by phrases.

Used when no chat model is configured or its call failed. Steps:

1. Short standing instructions from the user ("be concise") become the sticky topic; small
   talk ("thanks", "Glad it worked!") and messages without a vector take no part in the
   clustering. A message with no word to name a topic by ("where should I keep it?") joins the
   topic of the message before it, after clustering, and so does small talk that follows a
   message of some topic: "That sounds good, thanks" belongs to the exchange it answers, and a
   click on that topic sends it along.
2. Chats with enough substance are clustered by Ward's method (:mod:`.ward`: one
   deterministic tree, cut at every k in 2..8), after each vector leans toward its chat
   neighbours: a short follow-up ("and in winter?") is about what came just before it. How
   far a vector leans, and over how many neighbours, is read off the chat: as far as messages
   that many places apart are still more alike than any two of the chat (a chat that stays on
   one subject for a dozen messages leans over up to 8, one that switches every few messages
   over one or two). Only the cuts at a clear gap of the tree compete (leaning makes any short
   run look like a cluster to the silhouette, but such runs merge at nearly equal heights; a
   cut that leaves most of the chat in one cluster needs a clearer gap), else those that leave
   no sliver (a cluster under 8% of the chat, and under 10 messages in a
   long one); the best silhouette wins, the more clusters on a near tie. A handful of
   messages are grouped by average-link with a similarity threshold instead, where a
   silhouette says little.
3. Each cluster is named by one of its key phrases (:mod:`smart_context.offline_text`): words
   and short noun phrases ranked by class-based TF-IDF, chat filler never among them. Given
   a phrase embedder, the candidates of all clusters are embedded in one call and the label
   is the one closest in meaning to the cluster's centroid, TF-IDF breaking near-ties
   (KeyBERT-style); a phrase close to the best single word is preferred, and a label nearly
   the same as another cluster's is passed over. A previous label that is still a candidate
   of a cluster, or whose words lead its phrases, is kept, so labels stay put across
   regenerations. In a chat with enough substance a one-message cluster is an outlier, not a
   topic, and is left out.

Everything is deterministic: the tree has no random start, and long chats measure the
silhouette on a sample drawn by a fixed-seed generator.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from smart_context.errors import EmbeddingError
from smart_context.messages import message_text
from smart_context.topics.labels import is_sticky_label, normalize_label
from smart_context.topics.model import MAX_TOPICS, MIN_TOPICS, ExtractedTopics, Topic
from smart_context.topics.offline import ward
from smart_context.topics.offline.talk import is_instruction, is_small_talk
from smart_context.topics.offline.text import (
    MAX_MESSAGE_CHARS,
    ChatTerms,
    Ranked,
    Terms,
    is_content_word,
    is_trivial,
    key_phrases,
    label_words,
    parse_all,
    words_match,
)
from smart_context.vectors.ops import Matrix, normalize_rows

__all__ = ["extract_offline", "is_instruction", "is_trivial"]

_MIN_SUBSTANCE = 12  # usable messages from which 2..8 topics are expected
_MIN_TOPIC_SIZE = 4  # k stays <= n / 4: a topic is more than one question and its answer
_MIN_TOPIC_SHARE = 0.08  # ...and a cluster under 8% of the chat is a sliver of another topic
# ...but in a long chat one short conversation (a booking: ten messages) is a topic of its own
_SLIVER_CAP = 10
_NEIGHBOUR_WEIGHT = 0.3  # how far a message's vector leans toward its next neighbour...
_NEIGHBOUR_REACH = 8  # ...and the farthest neighbour it may lean toward
_SMALL_CHAT_SIMILARITY = 0.35  # average-link merge threshold below _MIN_SUBSTANCE messages
_REPLY_BONUS = 0.3  # ...and what an answer adds to its similarity with the question before it
_SILHOUETTE_SAMPLE = 1500  # a silhouette needs all pairwise distances: cap the rows
_SILHOUETTE_SLACK = 0.01  # ...and a larger k within this of the best silhouette wins
_CLEAR_GAP = 1.5  # a cut's last merge this many times the next one down: a real gap
# ...but a cut that leaves most of the chat in one cluster needs a clearer one: one subject split
# off a varied rest makes a real gap, yet leaves the rest as one bubble that filters little
_LOPSIDED_SHARE = 0.6
_LOPSIDED_GAP = 2.0
_SEED = 20260301
_PHRASE_BUDGET = 80  # label candidates to embed for all clusters together...
_MAX_CANDIDATES = 20  # ...and for one cluster
_SIMILARITY_WEIGHT = 0.8  # closeness to the cluster centroid against c-TF-IDF, with vectors
# Labels of one chat share its theme ("Kyoto Temples", "Kyoto Ryokan": 0.6); near-identical
# ones ("Docker", "Dockerfile": 0.8) lose score for every bit of likeness above _ALIKE.
_ALIKE = 0.7
_DIVERSITY = 2.0
_PHRASE_MARGIN = 0.2  # a phrase within this fraction of the best single word's score wins...
_NAMED_PHRASE = 0.1  # ...if it holds the word or its c-TF-IDF says the cluster uses it as a name
IntArray = npt.NDArray[np.intp]
FloatArray = npt.NDArray[np.float64]
# Unit vectors of phrases in the message vectors' embedding space, one (n, dim) call.
PhraseVectors = Callable[[Sequence[str]], npt.ArrayLike]

# --- extraction ---------------------------------------------------------------------------


def extract_offline(
    messages: Sequence[Mapping[str, Any]],
    vectors: npt.ArrayLike,
    previous_labels: Sequence[str] = (),
    *,
    phrase_vectors: PhraseVectors | None = None,
) -> ExtractedTopics:
    """Topics of a chat from its messages and their ``(n, dim)`` unit vectors, same order.

    ``phrase_vectors``, when given, embeds label candidates: a sync callable returning
    ``(n, dim)`` unit rows in the same space as ``vectors``. It is called once per extraction
    (at most 80 short phrases) and lets labels be chosen by meaning as well as by word counts.
    If it raises ``EmbeddingError`` the labels come from word counts alone, with a note; rows
    of the wrong shape raise ``ValueError``, like ``vectors`` of the wrong shape.
    """
    texts = [message_text(m)[:MAX_MESSAGE_CHARS] for m in messages]
    matrix = _check_vectors(vectors, len(texts))
    sticky = {i for i, m in enumerate(messages) if is_instruction(texts[i], str(m.get("role")))}
    sticky_ids = tuple(str(messages[i].get("id", "")) for i in sorted(sticky))
    chat = parse_all(texts)
    has_vector = np.linalg.norm(matrix, axis=1) > 1e-6
    talk = {i for i, text in enumerate(texts) if i not in sticky and is_small_talk(text)}
    usable = [
        i for i in range(len(texts)) if i not in sticky | talk and chat.docs[i] and has_vector[i]
    ]
    # "where should I keep it?": no word to cluster by, yet about what came just before
    followups = [
        i
        for i in range(len(texts))
        if i not in sticky | talk and not chat.docs[i] and has_vector[i]
    ]
    notes = [f"{len(talk)} messages of small talk joined the topic before them"] if talk else []
    topics: list[Topic] = []
    if usable:
        roles = [str(m.get("role")) for m in messages]
        replies = np.array(
            [
                j > 0
                and usable[j - 1] == i - 1
                and roles[i - 1] == "user"
                and roles[i] == "assistant"
                for j, i in enumerate(usable)
            ]
        )
        points = normalize_rows(matrix[usable])
        assignment = _cluster(points, replies)
        docs = [chat.docs[i] for i in usable]
        named = _name_clusters(
            docs,
            assignment,
            ward.centroids(points, assignment),
            chat,
            previous_labels,
            phrase_vectors,
            notes,
        )
        owners = _attach(usable, assignment, followups, sorted(talk))
        ids = [str(m.get("id", "")) for m in messages]
        topics = _topics(named, owners, ids, notes)
    return ExtractedTopics(tuple(topics), sticky_ids, source="offline", notes=tuple(notes))


def _attach(
    usable: Sequence[int], assignment: IntArray, followups: Sequence[int], talk: Sequence[int]
) -> IntArray:
    """The cluster of every message (-1: none); a follow-up joins the cluster of the nearest
    clustered message before it (after it, at the start of the chat), and small talk the topic
    of the message just before it, if that has one (a greeting that opens the chat has none)."""
    n = max([*usable, *followups, *talk]) + 1
    owners = np.full(n, -1, dtype=np.intp)
    owners[list(usable)] = assignment
    for i in followups:
        before = [j for j in usable if j < i]
        owners[i] = owners[before[-1]] if before else owners[usable[0]]
    for i in talk:  # in chat order, so a run of small talk follows the exchange it closes
        if i > 0:
            owners[i] = owners[i - 1]
    return owners


def _check_vectors(vectors: npt.ArrayLike, n: int, what: str = "message", dim: int = 0) -> Matrix:
    """``vectors`` as float32 rows, one per ``what`` (and ``dim`` wide if given), NaN as 0."""
    matrix = np.asarray(vectors, dtype=np.float32)
    if n == 0:
        return np.zeros((0, 1), dtype=np.float32)
    if matrix.ndim != 2 or matrix.shape[0] != n or (dim and matrix.shape[1] != dim):
        width = f", {dim} wide like the message vectors" if dim else ""
        raise ValueError(f"expected one vector per {what} ({n} rows{width}), got {matrix.shape}")
    return np.nan_to_num(matrix)


def _smooth(points: Matrix) -> Matrix:
    """Blend each vector with its neighbours in the chat, as far as the chat stays on a subject
    (:func:`_persistence`), then renormalize."""
    if len(points) < 3:
        return points
    blended = points.astype(np.float64)
    for lag, weight in enumerate(_persistence(points), start=1):
        blended[lag:] += _NEIGHBOUR_WEIGHT * weight * points[:-lag]
        blended[:-lag] += _NEIGHBOUR_WEIGHT * weight * points[lag:]
    return normalize_rows(blended.astype(np.float32))


def _persistence(points: Matrix) -> FloatArray:
    """For lags 1, 2, ...: how much more alike messages that many places apart are than any two
    messages of the chat, as a share of that excess at lag 1; cut at the first lag with none.

    A chat whose subjects run for a dozen messages keeps an excess over a dozen lags; one that
    switches subject every few messages loses it after one or two. Measured in float64 on the
    chat's own vectors, so every CPU leans the same way.
    """
    x = points.astype(np.float64)
    n = len(x)
    total = x.sum(axis=0)
    anywhere = float(total @ total) / (n * n)  # the mean similarity of all pairs
    excess = []
    for lag in range(1, min(_NEIGHBOUR_REACH, n - 1) + 1):
        apart = float(np.einsum("nd,nd->n", x[lag:], x[:-lag]).mean()) - anywhere
        if apart <= 0:
            break
        excess.append(apart)
    return np.asarray(excess) / excess[0] if excess else np.zeros(0)


def _topics(
    labels: Sequence[str | None], owners: IntArray, ids: Sequence[str], notes: list[str]
) -> list[Topic]:
    """Topics from labelled clusters, biggest first; ``owners`` has each message's cluster."""
    sizes = np.bincount(owners[owners >= 0], minlength=len(labels))
    counts: Counter[str] = Counter()
    members: dict[str, list[int]] = {}
    for cluster, label in enumerate(labels):
        if label is None:
            notes.append(f"dropped a cluster of {sizes[cluster]} messages: no label of its own")
        elif int((owners >= 0).sum()) >= _MIN_SUBSTANCE and sizes[cluster] == 1:
            notes.append(f"dropped a one-message cluster ({label!r}): too small to be a topic")
        else:
            counts[label] += int(sizes[cluster])
            members.setdefault(label, []).extend(np.flatnonzero(owners == cluster).tolist())
    # Counter keeps first-seen order for ties, and clusters are numbered by first appearance.
    return [
        Topic(label, count, tuple(ids[i] for i in sorted(members[label])))
        for label, count in counts.most_common(MAX_TOPICS)
    ]


# --- clustering ---------------------------------------------------------------------------


def _cluster(points: Matrix, replies: npt.NDArray[np.bool_]) -> IntArray:
    """Cluster ids, one per row, numbered by first appearance in the chat.

    ``replies[j]`` says row ``j`` is the assistant's answer to the user message in row ``j-1``.
    """
    n = len(points)
    if n < _MIN_SUBSTANCE:
        return ward.renumber(_average_link(points, replies))
    points = _smooth(points)
    tree_rows = ward.spaced_rows(n)
    tree = ward.ward_tree(points[tree_rows])
    # The silhouette of every k is measured on the same rows: long chats use a fixed sample.
    rows = np.arange(n)
    if n > _SILHOUETTE_SAMPLE:
        rows = np.sort(np.random.default_rng(_SEED).choice(n, _SILHOUETTE_SAMPLE, replace=False))
    distances = 1.0 - points[rows] @ points[rows].T
    # A split that leaves a sliver (a few messages of a subject that has its own cluster)
    # scores well on silhouette yet makes a bubble nobody needs: such a k competes only when
    # the tree has a clear gap there, or no k is free of slivers.
    floor = max(_MIN_TOPIC_SIZE, min(int(np.ceil(_MIN_TOPIC_SHARE * n)), _SLIVER_CAP))
    ks = range(MIN_TOPICS, min(MAX_TOPICS, n // _MIN_TOPIC_SIZE) + 1)
    tree_cuts = ward.cuts(tree, len(tree_rows), ks)
    cuts = [ward.nearest_centroid(points, tree_rows, tree_cuts[k]) for k in ks]
    sizes = [np.bincount(c) for c in cuts]
    smallest = [int(s.min()) for s in sizes]
    gaps = _clear_gaps(tree, ks, [int(s.max()) > _LOPSIDED_SHARE * n for s in sizes])
    chosen = _clearest(
        [
            (least >= floor, gap and least >= _MIN_TOPIC_SIZE, _silhouette(distances, c[rows]))
            for least, gap, c in zip(smallest, gaps, cuts, strict=True)
        ]
    )
    return ward.renumber(cuts[chosen])


def _clear_gaps(tree: ward.Merges, ks: Sequence[int], lopsided: Sequence[bool]) -> list[bool]:
    """Per k, whether the tree has a clear gap there: the merge a cut into k clusters undoes
    stands well above the next one down (the k clusters are apart, not pieces of one cloud).

    Leaning vectors toward their neighbours makes any short run of the chat look like a cluster
    to the silhouette; in the tree such runs merge at heights close to each other, with no gap.
    ``lopsided[i]`` says the cut into ``ks[i]`` clusters leaves most of the chat in one: that
    cut needs a clearer gap. Splitting one subject (food) off a varied rest (films, work, a
    crush) makes a real gap, yet a bubble of most of the chat that a click barely filters.
    """
    heights = np.sort(tree[:, 2])[::-1].astype(np.float64)  # the top merge first
    return [
        len(heights) >= k
        and heights[k - 2] >= (_LOPSIDED_GAP if most else _CLEAR_GAP) * max(heights[k - 1], 1e-12)
        for k, most in zip(ks, lopsided, strict=True)
    ]


def _clearest(cuts: Sequence[tuple[bool, bool, float]]) -> int:
    """Which of the cuts (``(free of slivers, at a clear gap of the tree, silhouette)``, fewest
    clusters first) to keep: the clearest by silhouette, the more clusters on a near tie (the
    silhouette leans toward few clusters), among those at a clear gap if any is, else among
    those free of slivers if any is.

    A small cluster apart from the rest by a clear gap is a subject of its own (one short
    conversation in a long chat), not a sliver of another topic."""
    competing = [i for i, cut in enumerate(cuts) if cut[1]]
    competing = competing or [i for i, cut in enumerate(cuts) if cut[0]] or list(range(len(cuts)))
    best = max(cuts[i][2] for i in competing)
    return max(i for i in competing if cuts[i][2] >= best - _SILHOUETTE_SLACK)


def _average_link(points: Matrix, replies: npt.NDArray[np.bool_]) -> IntArray:
    """Merge the two groups of highest mean similarity until none reaches the threshold.

    An answer and its question get a bonus instead of the blending long chats get: with a few
    messages, blending would make everything look alike.
    """
    groups: list[list[int]] = [[i] for i in range(len(points))]
    sim = points @ points.T
    answers = np.flatnonzero(replies)
    sim[answers, answers - 1] += _REPLY_BONUS
    sim[answers - 1, answers] += _REPLY_BONUS
    while len(groups) > 1:
        score, i, j = max(
            (float(sim[np.ix_(a, b)].mean()), i, j)
            for i, a in enumerate(groups)
            for j, b in enumerate(groups)
            if i < j
        )
        if score < _SMALL_CHAT_SIMILARITY:
            break
        groups[i] += groups.pop(j)
    labels = np.zeros(len(points), dtype=np.intp)
    for gid, members in enumerate(groups):
        labels[members] = gid
    return labels


def _similarities(points: Matrix, centers: Matrix) -> Matrix:
    """``points @ centers.T`` without BLAS: for these thin products OpenBLAS starts threads
    that, on a busy machine, made clustering ten times slower than this single-threaded loop."""
    sims: Matrix = np.einsum("nd,kd->nk", points, centers, optimize=False)
    return sims


def _silhouette(distances: Matrix, labels: IntArray) -> float:
    """Mean silhouette of a clustering, from the pairwise distances of its rows."""
    k = int(labels.max()) + 1
    sizes = np.bincount(labels, minlength=k).astype(np.float32)
    # Column sums per cluster rather than `distances @ onehot`: see _similarities.
    totals = np.stack([distances[:, labels == c].sum(axis=1) for c in range(k)], axis=1)
    own = sizes[labels]
    rows = np.arange(len(labels))
    a = totals[rows, labels] / np.maximum(own - 1, 1)
    means = totals / np.maximum(sizes, 1)
    means[rows, labels] = np.inf
    means[:, sizes == 0] = np.inf  # a cluster with no rows in the sample is no neighbour
    b = means.min(axis=1)
    b = np.where(np.isfinite(b), b, a)  # no other cluster at all: the point scores 0
    s = np.where(own > 1, (b - a) / np.maximum(np.maximum(a, b), 1e-12), 0.0)
    return float(s.mean())


# --- naming -------------------------------------------------------------------------------


def _name_clusters(
    docs: list[Terms],
    assignment: IntArray,
    centroids: Matrix,
    chat: ChatTerms,
    previous: Sequence[str],
    phrase_vectors: PhraseVectors | None,
    notes: list[str],
) -> list[str | None]:
    """One unique label per cluster: a matching previous label, else its best unused phrase."""
    ranked = key_phrases(docs, assignment, min(_PHRASE_BUDGET // len(centroids), _MAX_CANDIDATES))
    sizes = np.bincount(assignment)
    order = sorted(range(len(ranked)), key=lambda c: -int(sizes[c]))
    labels: list[str | None] = [None] * len(ranked)
    for c, label in _match_previous([[t for t, _ in r] for r in ranked], order, previous):
        labels[c] = label
    options = [_options(r, chat) for r in ranked]
    scores, vectors = _relevance(options, centroids, phrase_vectors, notes)
    taken = {frozenset(label_words(lab)) for lab in labels if lab}
    chosen: list[FloatArray] = []  # vectors of the labels given so far, for diversity
    for c in order:
        rows = [i for i, o in enumerate(options[c]) if o.words not in taken]
        if labels[c] is not None or not rows:
            continue
        best = rows[
            _pick(
                [options[c][i] for i in rows],
                scores[c][rows],
                None if vectors is None else vectors[c][rows],
                chosen,
            )
        ]
        labels[c] = options[c][best].label
        taken.add(options[c][best].words)
        if vectors is not None:
            chosen.append(vectors[c][best])
    return labels


@dataclass(frozen=True)
class _Option:
    """A label candidate of one cluster: the label, its content words, normalized c-TF-IDF."""

    label: str
    words: frozenset[str]
    weight: float
    plain: bool  # adjacent content words only: "Bread Flour", not "Starter in the Fridge"


def _options(ranked: Ranked, chat: ChatTerms) -> list[_Option]:
    """Distinct label candidates of a cluster, c-TF-IDF scores scaled to the best one's."""
    top = max((score for _, score in ranked), default=0.0) or 1.0
    options: dict[str, _Option] = {}
    for term, score in ranked:
        label = normalize_label(chat.display(term))
        words = [w for w in term.split() if is_content_word(w)]
        if label and label not in options:
            plain = len(words) == term.count(" ") + 1
            options[label] = _Option(label, frozenset(words), score / top, plain)
    return list(options.values())


def _relevance(
    options: Sequence[Sequence[_Option]],
    centroids: Matrix,
    phrase_vectors: PhraseVectors | None,
    notes: list[str],
) -> tuple[list[FloatArray], list[Matrix] | None]:
    """Each cluster's candidate scores and, given phrase vectors, the candidates' vectors.

    Without vectors a candidate scores its c-TF-IDF. With them (KeyBERT-style) the score blends
    how close the phrase is to the cluster's centroid, scaled to the closest candidate's, with
    its c-TF-IDF: the centroid says what the cluster is about, the word counts what sets it
    apart. All candidates of all clusters are embedded in one call.
    """
    weights = [np.array([o.weight for o in opts], dtype=np.float64) for opts in options]
    texts = list(dict.fromkeys(o.label for opts in options for o in opts))
    if phrase_vectors is None or not texts:
        return weights, None
    try:
        raw = phrase_vectors(texts)
    except EmbeddingError as exc:  # labels by word counts beat no topics at all
        notes.append(f"labels chosen by word counts alone: could not embed them ({exc})")
        return weights, None
    matrix = normalize_rows(_check_vectors(raw, len(texts), "phrase", centroids.shape[1]))
    row = {text: i for i, text in enumerate(texts)}
    vectors = [matrix[[row[o.label] for o in opts]] for opts in options]
    scores = []
    for c, (v, w) in enumerate(zip(vectors, weights, strict=True)):
        closeness = _similarities(v, centroids[c : c + 1])[:, 0].astype(np.float64)
        closest = float(closeness.max(initial=0.0))
        closeness /= closest if closest > 0 else 1.0  # on the c-TF-IDF scale: best is 1
        scores.append(_SIMILARITY_WEIGHT * closeness + (1 - _SIMILARITY_WEIGHT) * w)
    return scores, vectors


def _pick(
    options: Sequence[_Option],
    scores: FloatArray,
    vectors: Matrix | None,
    chosen: Sequence[FloatArray],
) -> int:
    """Index of the best of one cluster's candidates (there is at least one).

    Candidates close to a label another cluster already has lose score (maximal marginal
    relevance), so two clusters do not get near-identical labels. A phrase whose score is
    close to the best single word's wins: "Sourdough Starter" says more than "Starter". One said
    in passing in one message wins only if it holds the word: "Metal Song" over "Song", not
    "Slow Shop" over "Asyncio".
    """
    final = scores.astype(np.float64)
    if vectors is not None and chosen:
        overlap = _similarities(vectors, np.stack(chosen)).max(axis=1)
        final = final - _DIVERSITY * np.maximum(overlap - _ALIKE, 0.0)
    best = int(np.argmax(final))
    word = options[best].words
    phrases = [
        i
        for i, o in enumerate(options)
        if len(o.words) > 1 and o.plain and (o.weight >= _NAMED_PHRASE or word <= o.words)
    ]
    if len(word) == 1 and phrases:
        phrase = max(phrases, key=lambda i: final[i])
        if final[phrase] >= final[best] - _PHRASE_MARGIN * abs(final[best]):
            return phrase
    return best


def _match_previous(
    ranked: Sequence[Sequence[str]], order: Sequence[int], previous: Iterable[str]
) -> list[tuple[int, str]]:
    """(cluster, previous label) pairs: the label is still one of the cluster's candidates, or
    every word of it is among the cluster's top words, one in the top three. The closest
    matches are paired first, each used once."""
    scored: list[tuple[float, int, str]] = []
    # Previous labels come from the chat file, which people may edit: clean them like new ones.
    for label in dict.fromkeys(normalize_label(p) for p in previous):
        words = [] if is_sticky_label(label) else label_words(label)
        for c in order if words else ():
            terms = [[w for w in term.split() if is_content_word(w)] for term in ranked[c]]
            top = [w for term in terms[:6] for w in term]
            ranks = [next((r for r, t in enumerate(top) if words_match(w, t)), -1) for w in words]
            same = [
                r
                for r, t in enumerate(terms)
                if len(t) == len(words) and all(any(words_match(w, x) for x in t) for w in words)
            ]
            if same or (min(ranks) >= 0 and min(ranks) < 3):
                rank = min(same + ([sum(ranks) / len(ranks)] if min(ranks) >= 0 else []))
                scored.append((rank, order.index(c), label))
    pairs: list[tuple[int, str]] = []
    for _, position, label in sorted(scored):
        c = order[position]
        if all(c != pc and label != pl for pc, pl in pairs):
            pairs.append((c, label))
    return pairs
