"""The keyword half of the budget's search over a chat's history: Okapi BM25 over the words of
its messages, kept with the chat's other facts (:mod:`smart_context.budget.facts`) and grown as
the chat grows. Pure Python and numpy; no I/O.

A message's words (:func:`words`) are its runs of letters and digits in any script,
lower-cased, with diacritics removed ("Café" and "cafe" are one word), without a few English
function words (:data:`smart_context.items.lexical.STOP_WORDS`), each stemmed by Snowball's
English stemmer ("visited" and "visiting" are "visit", "cats" is "cat"; PyStemmer, compiled;
a token with a digit in it, an id or a number, is kept as it is).
Each word keeps the messages that say it (:class:`Words`), so scoring a message (:func:`bm25`)
reads the postings of its own words only: time that grows with the messages holding them, not
with the chat.

The scores are those of SQLite FTS5's ``bm25()``, which this search replaced: ``k1`` 1.2,
``b`` 0.75, and a word that half the messages or more hold weighs nothing (FTS5 gives it 1e-6:
its IDF is not positive); the best :data:`~smart_context.budget.budgeter.LEXICAL_HITS` count.
FTS5 was queried in the vault's index on every request, and scores every row holding any
searched word one at a time: on REALTALK's chats grown to 10,000 messages, 1.9 to 2.7 ms a
message (median), which a bound on the rows scored cut at the cost of recall. Here the
postings of a message's words are read in one copy each, and scored together in a few numpy
calls. Of a message longer than 16 KB (a pasted log) only the words of its start count, and a
message searches for its first 32 distinct words: the work a paste of any size causes is
bounded, on the request's path and in the facts of the chat it joins.

A posting is one ``int32``: the message's position times 16 plus the times it says the word
(up to 15, where BM25 has long saturated), in ``array('i')`` grown in place, ascending. A
request reads them below its own history's length only (the facts' snapshots share them), and
copies what it reads in one call, on the event loop, where nothing grows them meanwhile.
"""

from __future__ import annotations

import math
import re
import unicodedata
from array import array
from bisect import bisect_left
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
import Stemmer

from smart_context.budget.importance import top_hits
from smart_context.items.lexical import K1, STOP_WORDS, B
from smart_context.vectors.ops import appended

Floats = npt.NDArray[np.float32]
Lengths = npt.NDArray[np.int32]

_STEM = Stemmer.Stemmer("english")
_WORD = re.compile(r"[^\W_]+")  # letters and digits of any script
# the combining marks NFKD splits off a Latin, Greek or Cyrillic letter ("é" -> "e" + U+0301)
_MARKS = dict.fromkeys(range(0x300, 0x370))
READ_CHARS = 16_384  # of a longer message (a pasted log) only the words of its start count
ASKED_WORDS = 32  # a message searches for its first distinct words, at most
# the distinct words a chat keeps postings for, at most: natural text has tens of thousands;
# a log or a dump of identifiers says new ones in every message (a word costs some 200 bytes)
MAX_WORDS = 200_000
SHIFT = 4  # a posting: position << SHIFT | times said
MOST_SAID = (1 << SHIFT) - 1
MIN_SCORE = 1e-6  # a message sharing no weighed word is no hit


def words(text: str) -> list[str]:
    """The words BM25 counts in ``text`` (module docstring), in order, repeats kept; of a text
    longer than :data:`READ_CHARS`, those of its start (a word cut there is left out)."""
    if len(text) > READ_CHARS:
        text = next(iter(text[:READ_CHARS].rsplit(None, 1)), "")
    lowered = text.lower()
    if not lowered.isascii():
        lowered = unicodedata.normalize("NFKD", lowered).translate(_MARKS)
    said = [w for w in _WORD.findall(lowered) if w not in STOP_WORDS]
    letters = [w for w in said if w.isalpha()]
    if len(letters) == len(said):
        stemmed: list[str] = _STEM.stemWords(said)
        return stemmed
    stems = iter(_STEM.stemWords(letters))  # an id or a number is kept as said: "a3f9ed", "2024"
    return [next(stems) if w.isalpha() else w for w in said]


@dataclass
class Words:
    """The words of a run of messages: each word's postings (module docstring), and how many
    words each message says."""

    postings: dict[str, array[int]] = field(default_factory=dict)
    counts: Lengths = field(default_factory=lambda: np.zeros(0, dtype=np.int32))

    @classmethod
    def read(cls, texts: Iterable[str], start: int) -> Words:
        """The words of ``texts``, the messages at ``start`` on."""
        postings: dict[str, array[int]] = {}
        counts: list[int] = []
        for position, text in enumerate(texts, start):
            found = words(text)
            counts.append(len(found))
            said: dict[str, int] = {}
            for word in found:
                said[word] = said.get(word, 0) + 1
            base = position << SHIFT
            for word, times in said.items():
                at = postings.get(word)
                if at is None:
                    if len(postings) >= MAX_WORDS:
                        continue  # (the run alone holds no more than a chat keeps)
                    at = postings[word] = array("i")
                at.append(base | min(times, MOST_SAID))
        return cls(postings, np.array(counts, dtype=np.int32))

    def extend(self, run: Words) -> None:
        """Add ``run``, the messages right after these; its postings are taken, not copied.
        The counts grow as :func:`~smart_context.vectors.ops.appended` grows an array: views
        handed out stay as they were. Past :data:`MAX_WORDS` distinct words, a new word is not
        kept (the words kept still gain their new messages)."""
        postings = self.postings
        for word, at in run.postings.items():
            mine = postings.get(word)
            if mine is not None:
                mine.extend(at)
            elif len(postings) < MAX_WORDS:
                postings[word] = at
        self.counts = appended(self.counts, run.counts)


def bm25(postings: Mapping[str, array[int]], counts: Lengths, message: str, limit: int) -> Floats:
    """Each of the first ``len(counts)`` messages' BM25 score for ``message``'s words (each
    word once, its first :data:`ASKED_WORDS`), with the best ``limit`` kept and the others 0,
    as messages that share no word; of equal scores the earlier first."""
    n = len(counts)
    out = np.zeros(n, dtype=np.float32)
    if not n or limit < 1:
        return out
    pieces: list[array[int]] = []
    idfs: list[float] = []
    for word in list(dict.fromkeys(words(message)))[:ASKED_WORDS]:
        held = postings.get(word)
        if held is None:
            continue
        df = bisect_left(held, n << SHIFT)  # this history's messages only
        weight = math.log((n - df + 0.5) / (df + 0.5))
        if df and weight > 0:  # else held by half the messages or more: next to no weight
            pieces.append(held[:df])  # one copy in C: the postings may grow later
            idfs.append(weight)
    if not pieces:
        return out
    packed = np.frombuffer(b"".join(pieces), dtype=np.int32)
    docs = packed >> SHIFT
    said = (packed & MOST_SAID).astype(np.float64)
    idf = np.repeat(np.asarray(idfs), [len(p) for p in pieces])
    length = counts[docs] / max(int(counts.sum(dtype=np.int64)) / n, 1.0)  # exact on every CPU
    scores = np.bincount(
        docs, idf * said * (K1 + 1) / (said + K1 * (1 - B + B * length)), minlength=n
    ).astype(np.float32)
    hits = top_hits(scores, limit, floor=MIN_SCORE)
    out[hits] = scores[hits]
    return out
