"""Topic extraction without a chat model: cluster the message vectors, name clusters by phrases.

Used when no chat model is configured or its call failed. Steps:

1. Short standing instructions from the user ("be concise") become the sticky topic; trivial
   messages ("thanks", "ok": no word to name a topic by) and messages without a vector take
   no part in clustering.
2. Chats with enough substance are clustered by spherical k-means with k in 3..8 chosen by
   silhouette, after each vector leans a little toward its chat neighbours: a short follow-up
   ("and in winter?") is about what came just before it. A handful of messages are grouped
   by average-link with a similarity threshold instead, where a silhouette says little.
3. Each cluster is named by its key phrases: unigrams and bigrams scored by class-based TF-IDF
   (the share of the cluster's messages using a term, how rare the term is in the chat, and
   how much of its use falls in this cluster). A previous label whose words lead a cluster's
   phrases is kept, so labels stay put across regenerations. In a chat with enough substance
   a one-message cluster is an outlier, not a topic, and is left out.

Everything is deterministic: k-means seeds come from a fixed-seed generator.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from smart_context.embeddings.base import Matrix, normalize_rows
from smart_context.labels import is_sticky_label, normalize_label
from smart_context.topic_types import MAX_TOPICS, MIN_TOPICS, ExtractedTopics, Topic
from smart_context.vectors import message_text

__all__ = ["extract_offline", "is_instruction", "is_trivial"]

_MIN_SUBSTANCE = 12  # usable messages from which 3..8 topics are expected
_MIN_TOPIC_SIZE = 4  # k stays <= n / 4: a topic is more than one question and its answer
_NEIGHBOUR_WEIGHT = 0.25  # how far a message's vector leans toward its chat neighbours
_SMALL_CHAT_SIMILARITY = 0.35  # average-link merge threshold below _MIN_SUBSTANCE messages
_REPLY_BONUS = 0.3  # ...and what an answer adds to its similarity with the question before it
_SILHOUETTE_SAMPLE = 1500  # a silhouette needs all pairwise distances: cap the rows
_BIGRAM_BOOST = 1.3  # a phrase is rarer than its words by nature; let a real phrase win
_SEED = 20260301
IntArray = npt.NDArray[np.intp]
Terms = dict[str, None]  # an ordered set: iteration order must not depend on string hashing

# --- words --------------------------------------------------------------------------------

_STOP_WORDS = """
a about above after again against all almost also although always am among an and another any
anything anyway are aren't around as at away back be because been before being below between
both but by can can't cannot could couldn't did didn't do does doesn't doing don't done dont
down during each either else enough especially etc even ever every everything exactly few for
from further get gets getting go goes going gone got had hasn't has have haven't having he her
here hers herself him himself his how however i i'd i'll i'm i've if in instead into is isn't it
it's its itself just least less let let's like likely made make makes making many may maybe me
might mine more most much must my myself near need needed needs never no nor not nothing now of
off often oh ok okay on once one only onto or other others otherwise our ours ourselves out over
own per perhaps please quite rather really same say says see seem seems shall she should
shouldn't since so some something sometimes soon still such sure than that that's the their
theirs them themselves then there there's these they they're thing things this those though
through thus to too toward towards under until up upon us use used uses using usually very via
want wants was wasn't way ways we we'd we'll we're we've well went were weren't what what's
whatever when where whether which while who whom whose why will with within without won't would
wouldn't yes yet you you'd you'll you're you've your yours yourself yourselves
thanks thank thx ty great cool nice awesome perfect good fine alright right yeah yep nope hi
hello hey bye lol wow sounds sense works worked help helps helped helpful know think try tried
tell told show give gives explain question questions answer answers example examples e.g i.e
lot lots bit kind sort first second new old vs versus write writes actually basically probably
definitely inside outside instead able run runs running ran take takes taking took keep keeps
kept add adds added change changes create creates set sets put puts find finds look looks come
comes happen happens happened mean means call calls called start starts feel feels wrong long
many time times better
"""
_CODE_NAMES = """
def class return import from self none true false null let const var function print elif else
while try except finally lambda yield pass raise str int float bool dict list set tuple len range
main args kwargs foo bar baz tmp result value data item items obj echo cd
"""
_STOP = frozenset(_STOP_WORDS.split())
_CODE_WORDS = frozenset(_CODE_NAMES.split())  # names every program has: they name no topic
_KEEP_DOTTED = frozenset({"js", "net", "io", "ai", "py"})  # "node.js" is one name, "a.b" two
_SHELL = frozenset({"bash", "sh", "shell", "console", "zsh", "powershell", "cmd", "terminal"})
_URL = re.compile(r"\bhttps?://([^\s/?#]+)\S*|\bwww\.([^\s/?#]+)\S*", re.IGNORECASE)
_FENCE = re.compile(r"```[ \t]*([\w+#.-]*)[^\n]*\n?(.*?)(?:```|\Z)", re.DOTALL)
_INLINE = re.compile(r"`([^`\n]+)`")
_IMPORT = re.compile(r"^\s*(?:from|import)\s+([A-Za-z_]\w*)", re.MULTILINE)
_COMMAND = re.compile(r"^\s*(?:\$\s*)?(?:sudo\s+)?([a-z][\w-]*)", re.MULTILINE)
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# A word starts with a letter of any script (café, Zürich); anything else that is not space or
# a word character is punctuation and ends a phrase.
_WORD = re.compile(r"[^\W\d_][\w+#]*(?:'[^\W\d_]+)?(?:[-.][\w+#]+)*|[^\s\w]")


def _content(word: str) -> bool:
    return len(word) > 1 and word not in _STOP and not word.replace(".", "").isdigit()


def _code_terms(text: str, surfaces: Counter[str]) -> tuple[str, Terms]:
    """Pull code and URLs out of ``text``: (the prose left over, terms they stand for).

    Code names a topic by its language, the modules it imports and the commands it runs; its
    variable names do not, so only those count, once per message.
    """
    terms: Terms = {}

    def fence(m: re.Match[str]) -> str:
        lang, body = m.group(1).lower(), m.group(2)
        found = [lang] + _IMPORT.findall(body)
        found += _COMMAND.findall(body) if lang in _SHELL else []
        terms.update((f.lower(), None) for f in found if f and f.lower() not in _CODE_WORDS)
        surfaces.update(found)
        return " . "

    def inline(m: re.Match[str]) -> str:
        found = [w for w in _IDENT.findall(m.group(1)) if len(w) > 2]
        terms.update((w.lower(), None) for w in found if w.lower() not in _CODE_WORDS)
        surfaces.update(found)
        return " . "

    def url(m: re.Match[str]) -> str:
        host = [p for p in (m.group(1) or m.group(2)).lower().split(".")[:-1] if p != "www"]
        if host:
            terms[host[-1]] = None  # docs.python.org -> "python", kubernetes.io -> "kubernetes"
        return " . "

    text = _FENCE.sub(fence, text)
    text = _URL.sub(url, _INLINE.sub(inline, text))
    return text, {t: None for t in terms if _content(t)}


def _parse(text: str, surfaces: Counter[str]) -> Terms:
    """The message's terms in order of appearance: content words and two-word phrases of
    adjacent content words."""
    prose, terms = _code_terms(text.replace("\u2019", "'"), surfaces)
    last = ""  # the previous content word, while no stopword or punctuation came between
    for token in _WORD.findall(prose):
        word = token.lower().removesuffix("'s")
        if "." in word and word.rsplit(".", 1)[1] not in _KEEP_DOTTED:
            # asyncio.run in prose is two names, not one, and starts no phrase.
            names = [part for part in word.split(".") if _content(part)]
            terms.update(dict.fromkeys(names))
            surfaces.update(names)
            last = ""
        elif _content(word):
            terms[word] = None
            surfaces[token.removesuffix("'s")] += 1
            if last and last != word:
                terms[f"{last} {word}"] = None
            last = word
        else:
            last = ""
    return terms


def _parse_all(texts: Sequence[str]) -> tuple[list[Terms], Counter[str]]:
    """Terms of every message with plurals folded onto singulars the chat also uses."""
    surfaces: Counter[str] = Counter()
    docs = [_parse(t, surfaces) for t in texts]
    vocab = {t for d in docs for t in d if " " not in t}
    fold: dict[str, str] = {}
    for w in vocab:
        if w.endswith("ies") and w[:-3] + "y" in vocab:
            fold[w] = w[:-3] + "y"
        elif w.endswith("s") and not w.endswith("ss") and w[:-1] in vocab:
            fold[w] = w[:-1]
    if fold:
        docs = [dict.fromkeys(" ".join(fold.get(w, w) for w in t.split()) for t in d)
                for d in docs]
    return docs, surfaces


def is_trivial(text: str) -> bool:
    """True when a message has no word to name a topic by ("thanks", "ok", "great!", "")."""
    return not _parse(text, Counter())


def _display(term: str, surfaces: Counter[str]) -> str:
    """Title Case, keeping the chat's spelling of names with inner capitals (FastAPI, JSON)."""
    words = []
    for word in term.split():
        names = [f for f, _ in surfaces.most_common() if f.lower() == word and not f[1:].islower()]
        title = "-".join(part[:1].upper() + part[1:] for part in word.split("-"))
        words.append(names[0] if names else title)
    return " ".join(words)


# --- instructions -------------------------------------------------------------------------

_LANGS = (
    "english|french|german|spanish|italian|portuguese|dutch|japanese|chinese|korean|russian|"
    "polish|arabic|hindi|swedish|norwegian|danish|finnish|greek|turkish|ukrainian|czech|hebrew"
)
_LEAD = re.compile(
    r"^(?:(?:ok(?:ay)?|also|and|so|hey|hi|please|pls|kindly|btw|oh|actually|one more thing|"
    r"just)\b[\s,:;.!-]*)+"
)
_REQUEST = re.compile(r"^(?:can|could|would|will) you (?:please )?")
_QUESTION = re.compile(
    r"^(?:how|what|why|when|where|which|who|whose|is|are|was|were|does|did|do (?:you|i|we)|"
    r"can (?:i|we)|could (?:i|we)|should|shall|would it|isn't|any)\b"
)
_STANDING = re.compile(
    r"\b(?:from now on|going forward|from here on|in (?:the )?future|for the rest of (?:this|the)"
    r" (?:chat|conversation|session)|every time|each time|whenever you|by default|no more|"
    r"remember (?:that|to|i|my)|(?:all|every) (?:code|examples?|answers?|responses?|replies|"
    r"snippets?))\b"
)
_ALWAYS = re.compile(
    r"^(?:always|never) (?:be|use|answer|reply|respond|write|include|add|give|show|explain|start|"
    r"end|format|talk|speak|say|apologi\w*|mention|ask|assume|put|keep|stay|make|remind|provide|"
    r"cite|check|suggest|recommend|call)\b"
)
_FORMAT = re.compile(
    r"\b(?:bullets?|bullet[- ]points?|numbered lists?|markdown|plain text|emojis?|emoticons?|"
    r"jargon|headings?|headers?|tables|disclaimers?|apologi\w*|metric|imperial|celsius|"
    r"fahrenheit|in (?:british |american |simple |plain )?(?:" + _LANGS + r")|"
    r"in (?:one|a single|two|three|\d+) (?:sentences?|paragraphs?|lines?|words?)|"
    r"(?:under|at most|max(?:imum)?|no more than|fewer than|less than) \d+ (?:words|lines))\b"
)
_TONE = re.compile(
    r"\b(?:concise|brief|briefer|short|shorter|succinct|terse|detailed|verbose|formal|informal|"
    r"casual|polite|friendly|direct|blunt|simple|simpler|technical|professional|to the point)\b"
)
_STYLE_VERB = re.compile(
    r"^(?:be|stay|keep|stop|avoid|don't|dont|do not|no|only|answer|reply|respond|"
    r"talk|speak|format|limit|stick to|switch to)\b"
)
_TASK_VERB = re.compile(r"^(?:use|write|give|show|explain|include|add|make|put|provide)\b")
_RESPONSE = re.compile(r"\b(?:your |the )?(?:answers?|responses?|replies|explanations?)\b")
_PREFERENCE = re.compile(r"^(?:i (?:prefer|would prefer|'d prefer)|call me|my name is)\b")
_WANT = re.compile(r"^i(?: want|'d like| would like) you to ")


def is_instruction(text: str, role: str = "user") -> bool:
    """True for a short standing instruction or preference from the user.

    "be concise", "always answer in French", "use Python 3.12 from now on", "don't use
    emojis" are; "thanks", questions ("how do I use asyncio?"), one-off tasks ("write a short
    poem"), long messages and anything not said by the user are not.
    """
    t = " ".join(text.replace("\u2019", "'").lower().split())
    if role != "user" or not t or len(t) > 200 or len(t.split()) > 25 or is_trivial(t):
        return False
    t = _LEAD.sub("", t)
    request = _REQUEST.match(t) or _WANT.match(t)
    if request:  # "can you keep it short?" asks for a behaviour, it is not a question
        t = t[request.end():]
    elif t.endswith("?") or _QUESTION.match(t):
        return False
    standing, fmt, tone = bool(_STANDING.search(t)), bool(_FORMAT.search(t)), bool(_TONE.search(t))
    if _PREFERENCE.match(t) or _ALWAYS.match(t):
        return True
    if _STYLE_VERB.match(t):
        return standing or fmt or tone
    if _TASK_VERB.match(t):  # "write a short poem" is a task, "write in French" a preference
        return standing or fmt or (tone and bool(_RESPONSE.search(t)))
    return (standing and (fmt or tone)) or (bool(_RESPONSE.match(t)) and (fmt or tone))


# --- extraction ---------------------------------------------------------------------------


def extract_offline(
    messages: Sequence[Mapping[str, Any]],
    vectors: npt.ArrayLike,
    previous_labels: Sequence[str] = (),
) -> ExtractedTopics:
    """Topics of a chat from its messages and their ``(n, dim)`` unit vectors, same order."""
    texts = [message_text(m) for m in messages]
    matrix = _check_vectors(vectors, len(texts))
    sticky = {i for i, m in enumerate(messages) if is_instruction(texts[i], str(m.get("role")))}
    sticky_ids = tuple(str(messages[i].get("id", "")) for i in sorted(sticky))
    docs, surfaces = _parse_all(texts)
    has_vector = np.linalg.norm(matrix, axis=1) > 1e-6
    usable = [i for i in range(len(texts)) if i not in sticky and docs[i] and has_vector[i]]
    skipped = len(texts) - len(usable) - len(sticky)
    notes = [f"{skipped} messages without topic words or vector not clustered"] if skipped else []
    topics: list[Topic] = []
    if usable:
        roles = [str(m.get("role")) for m in messages]
        replies = np.array([j > 0 and usable[j - 1] == i - 1 and roles[i - 1] == "user"
                            and roles[i] == "assistant" for j, i in enumerate(usable)])
        assignment = _cluster(normalize_rows(matrix[usable]), replies)
        named = _name_clusters([docs[i] for i in usable], assignment, previous_labels, surfaces)
        topics = _topics(named, assignment, notes)
    return ExtractedTopics(tuple(topics), sticky_ids, source="offline", notes=tuple(notes))


def _check_vectors(vectors: npt.ArrayLike, n: int) -> Matrix:
    matrix = np.asarray(vectors, dtype=np.float32)
    if n == 0:
        return np.zeros((0, 1), dtype=np.float32)
    if matrix.ndim != 2 or matrix.shape[0] != n:
        raise ValueError(f"expected one vector per message ({n} rows), got shape {matrix.shape}")
    return np.nan_to_num(matrix)


def _smooth(points: Matrix) -> Matrix:
    """Blend each vector with its neighbours in the chat, then renormalize."""
    if len(points) < 3:
        return points
    neighbours = np.zeros_like(points)
    neighbours[1:] += points[:-1]
    neighbours[:-1] += points[1:]
    return normalize_rows(points + _NEIGHBOUR_WEIGHT * neighbours)


def _topics(labels: Sequence[str | None], assignment: IntArray, notes: list[str]) -> list[Topic]:
    """Topics from labelled clusters, biggest first."""
    sizes = np.bincount(assignment)
    counts: Counter[str] = Counter()
    for cluster, label in enumerate(labels):
        if label is None:
            notes.append(f"dropped a cluster of {sizes[cluster]} messages: no label of its own")
        elif len(assignment) >= _MIN_SUBSTANCE and sizes[cluster] == 1:
            notes.append(f"dropped a one-message cluster ({label!r}): too small to be a topic")
        else:
            counts[label] += int(sizes[cluster])
    # Counter keeps first-seen order for ties, and clusters are numbered by first appearance.
    return [Topic(label, count) for label, count in counts.most_common(MAX_TOPICS)]


# --- clustering ---------------------------------------------------------------------------


def _cluster(points: Matrix, replies: npt.NDArray[np.bool_]) -> IntArray:
    """Cluster ids, one per row, numbered by first appearance in the chat.

    ``replies[j]`` says row ``j`` is the assistant's answer to the user message in row ``j-1``.
    """
    n = len(points)
    if n < _MIN_SUBSTANCE:
        return _renumber(_average_link(points, replies))
    points = _smooth(points)
    # The silhouette of every k is measured on the same rows: long chats use a fixed sample.
    rows = np.arange(n)
    if n > _SILHOUETTE_SAMPLE:
        rows = np.sort(np.random.default_rng(_SEED).choice(n, _SILHOUETTE_SAMPLE, replace=False))
    distances = 1.0 - points[rows] @ points[rows].T
    best_score, best = -np.inf, np.zeros(n, dtype=np.intp)
    for k in range(MIN_TOPICS, min(MAX_TOPICS, n // _MIN_TOPIC_SIZE) + 1):
        labels = _kmeans(points, k)
        score = _silhouette(distances, labels[rows])
        if score > best_score + 1e-9:
            best_score, best = score, labels
    return _renumber(best)


def _renumber(labels: IntArray) -> IntArray:
    _, first, inverse = np.unique(labels, return_index=True, return_inverse=True)
    rank = np.argsort(np.argsort(first))
    return rank[inverse.ravel()].astype(np.intp)


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
            for i, a in enumerate(groups) for j, b in enumerate(groups) if i < j
        )
        if score < _SMALL_CHAT_SIMILARITY:
            break
        groups[i] += groups.pop(j)
    labels = np.zeros(len(points), dtype=np.intp)
    for gid, members in enumerate(groups):
        labels[members] = gid
    return labels


def _kmeans(points: Matrix, k: int, restarts: int = 3, max_iter: int = 40) -> IntArray:
    """Spherical k-means (cosine) with k-means++ seeding; the best of ``restarts`` runs."""
    rng = np.random.default_rng(_SEED + k)
    best_fit, best = -np.inf, np.zeros(len(points), dtype=np.intp)
    for _ in range(restarts):
        centers = _seed_centers(points, k, rng)
        labels = np.full(len(points), -1, dtype=np.intp)
        for _ in range(max_iter):
            sims = _similarities(points, centers)
            new = np.argmax(sims, axis=1).astype(np.intp)
            if np.array_equal(new, labels):
                break
            labels = new
            centers = _centers(points, labels, k, sims)
        fit = float(_similarities(points, centers).max(axis=1).sum())
        if fit > best_fit:
            best_fit, best = fit, labels
    return best


def _similarities(points: Matrix, centers: Matrix) -> Matrix:
    """``points @ centers.T`` without BLAS: for these thin products OpenBLAS starts threads
    that, on a busy machine, made k-means ten times slower than this single-threaded loop."""
    sims: Matrix = np.einsum("nd,kd->nk", points, centers, optimize=False)
    return sims


def _centers(points: Matrix, labels: IntArray, k: int, sims: Matrix) -> Matrix:
    """Unit mean of each cluster; an emptied cluster restarts at the worst-explained point."""
    sums = np.zeros((k, points.shape[1]), dtype=np.float32)
    worst = iter(np.argsort(sims.max(axis=1)))
    for c in range(k):
        members = labels == c
        sums[c] = points[members].sum(axis=0) if members.any() else points[next(worst)]
    return normalize_rows(sums)


def _seed_centers(points: Matrix, k: int, rng: np.random.Generator) -> Matrix:
    chosen = [int(rng.integers(len(points)))]
    distance = 1.0 - _similarities(points, points[chosen[:1]])[:, 0]
    for _ in range(1, k):
        weights = np.maximum(distance, 0.0).astype(np.float64) ** 2
        total = float(weights.sum())
        pick = int(rng.choice(len(points), p=weights / total)) if total > 0 else len(chosen)
        chosen.append(pick)
        distance = np.minimum(distance, 1.0 - _similarities(points, points[[pick]])[:, 0])
    return points[chosen].copy()


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
    means[:, sizes == 0] = np.inf  # k-means may leave a cluster empty: it is no neighbour
    b = means.min(axis=1)
    b = np.where(np.isfinite(b), b, a)  # no other cluster at all: the point scores 0
    s = np.where(own > 1, (b - a) / np.maximum(np.maximum(a, b), 1e-12), 0.0)
    return float(s.mean())


# --- naming -------------------------------------------------------------------------------


def _name_clusters(
    docs: Sequence[Terms],
    assignment: IntArray,
    previous: Sequence[str],
    surfaces: Counter[str],
) -> list[str | None]:
    """One unique label per cluster: a matching previous label, else its best unused phrase."""
    ranked = _key_phrases(docs, assignment)
    sizes = np.bincount(assignment)
    order = sorted(range(len(ranked)), key=lambda c: -int(sizes[c]))
    labels: list[str | None] = [None] * len(ranked)
    for c, label in _match_previous(ranked, order, previous):
        labels[c] = label
    taken = {frozenset(_label_words(lab)) for lab in labels if lab}
    for c in order:
        for option in _label_options(ranked[c]) if labels[c] is None else ():
            label = normalize_label(_display(option, surfaces))
            if label and frozenset(option.split()) not in taken:
                labels[c] = label
                taken.add(frozenset(option.split()))
                break
    return labels


def _key_phrases(docs: Sequence[Terms], assignment: IntArray) -> list[list[str]]:
    """Per cluster, up to 12 terms best first by class-based TF-IDF."""
    k = int(assignment.max()) + 1
    vocab: dict[str, int] = {}
    # Terms are numbered by first appearance, so ties go to what the chat said first.
    cells = [vocab.setdefault(t, len(vocab)) for d in docs for t in d]
    if not vocab:
        return [[] for _ in range(k)]
    cluster_of_cell = np.repeat(assignment, [len(d) for d in docs])
    counts = np.bincount(cluster_of_cell * len(vocab) + np.asarray(cells, dtype=np.intp),
                         minlength=k * len(vocab)).reshape(k, len(vocab)).astype(np.float64)
    sizes = np.bincount(assignment, minlength=k).astype(np.float64)
    rarity = np.log1p(len(docs) / counts.sum(axis=0))
    is_phrase = np.array([" " in t for t in vocab])
    # A phrase said twice is a name ("event loop"); said once, often an accident of wording.
    boost = np.where(is_phrase, np.where(counts >= 2, _BIGRAM_BOOST, 0.7), 1.0)
    # How many of the cluster's messages use the term, how rare it is in the chat, and how
    # much of its use falls in this cluster: the chat's overall theme names no one cluster.
    share = counts / counts.sum(axis=0)
    score = counts / sizes[:, None] * rarity * np.sqrt(share) * boost
    # A term of one message names a cluster of several only when its messages share none.
    shared = np.where(counts >= np.where(sizes >= 3, 2, 1)[:, None], score, 0.0)
    score = np.where(shared.any(axis=1, keepdims=True), shared, score)
    terms = list(vocab)
    top = np.argsort(-score, axis=1, kind="stable")[:, :12]
    return [[terms[t] for t in top[c] if score[c, t] > 0] for c in range(k)]


def _label_options(ranked: Sequence[str]) -> list[str]:
    """Label candidates in order: a phrase close behind its top word goes first."""
    for term in ranked[1:4] if ranked and " " not in ranked[0] else ():
        if " " in term and ranked[0] in term.split():
            return [term, *[t for t in ranked if t != term]]
    return list(ranked)


def _label_words(label: str) -> list[str]:
    return [w for w in re.findall(r"[a-z0-9+#.-]+", label.lower()) if _content(w)]


def _words_match(a: str, b: str) -> bool:
    """Same word, a plural, or one a prefix of the other ("async" and "asyncio")."""
    short, long = sorted((a.rstrip("s"), b.rstrip("s")), key=len)
    return short == long or (len(short) >= 4 and long.startswith(short))


def _match_previous(
    ranked: Sequence[Sequence[str]], order: Sequence[int], previous: Iterable[str]
) -> list[tuple[int, str]]:
    """(cluster, previous label) pairs: every word of the label among the cluster's top words,
    one of them in the top three. The closest matches are paired first, each used once."""
    scored: list[tuple[float, int, str]] = []
    # Previous labels come from the chat file, which people may edit: clean them like new ones.
    for label in dict.fromkeys(normalize_label(p) for p in previous):
        words = [] if is_sticky_label(label) else _label_words(label)
        for c in order if words else ():
            top = [w for term in ranked[c][:6] for w in term.split()]
            ranks = [next((r for r, t in enumerate(top) if _words_match(w, t)), -1) for w in words]
            if min(ranks) >= 0 and min(ranks) < 3:
                scored.append((sum(ranks) / len(ranks), order.index(c), label))
    pairs: list[tuple[int, str]] = []
    for _, position, label in sorted(scored):
        c = order[position]
        if all(c != pc and label != pl for pc, pl in pairs):
            pairs.append((c, label))
    return pairs
