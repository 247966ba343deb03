"""The words of a chat for the offline topic extractor: terms and key phrases.

A message's *terms*, lower case and in order of appearance, are its content words, phrases of
two or three adjacent content words (roughly, noun phrases: "bread flour") and a word linked
to the next by a preposition ("starter in the fridge"). Code and URLs count by what they
stand for: a fenced block by its language, the modules it imports and, in a shell block, the
commands it runs; a URL by its site name. Plurals are folded onto singulars the chat also
uses. The key phrases of a cluster of messages are its terms ranked by class-based TF-IDF
against the rest of the chat; generic chat filler ("week", "problem", "first") is never one.

Trivial messages ("thanks", "ok") have no word to name a topic by. Small talk and standing
instructions are told apart by :mod:`.talk`.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

__all__ = [
    "MAX_MESSAGE_CHARS",
    "ChatTerms",
    "Ranked",
    "Terms",
    "is_content_word",
    "is_generic",
    "is_trivial",
    "key_phrases",
    "label_words",
    "parse_all",
    "words_match",
]

IntArray = npt.NDArray[np.intp]
FloatArray = npt.NDArray[np.float64]
Terms = dict[str, None]  # an ordered set: iteration order must not depend on string hashing
Ranked = list[tuple[str, float]]  # (term, score), best first
# Of a message, what the map reads for its words, at most: the start of a pasted 20 MB log names
# it as well as the whole, which took seconds of a core (the model reads only its start too).
MAX_MESSAGE_CHARS = 16_384
_PHRASE_BOOST = 1.3  # a phrase is rarer than its words by nature; let a real phrase win
_ONCE = 0.2  # what a term of one message counts where the cluster's messages share others


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
# Chat filler: content words, yet never a topic by themselves nor at the edge of a phrase
# ("next month", "big temples"). Words that head real compounds stay out ("front end").
_GENERIC_WORDS = """
today tomorrow yesterday tonight morning afternoon evening day days week weeks weekend month
months year years hour hours minute minutes ago later earlier monday tuesday wednesday thursday
friday saturday sunday january february march april june july august september october november
december last next previous early late recent whole half single big bigger biggest small
smaller little huge tiny several extra best bad worse worst lovely wonderful terrible important
interesting useful sensible reasonable possible usual typical proper actual simple easy easier
harder difficult clear fancy super massive total stuff problem problems issue issues idea ideas
tip reason fact info information place matter choice difference everyone someone anyone people
person partner girlfriend boyfriend friend wife husband move moving spend buy pay wait leave eat
bring carry deal manage combine choose pick decide prefer love hope guess wonder suggest
recommend learn understand remember forget ask asked reply sorry totally honestly roughly
certainly simply nicely properly barely pretty literally unrelated two three four five six
seven eight nine ten twenty hundred thousand dozen ones somewhere anywhere everywhere nowhere
somehow said saying woke cause cuz coz
im ive youre youve youd youll hes shes theyre theyve theyd weve thats whats theres heres wheres
whos isnt arent wasnt werent doesnt didnt cant wont wouldnt couldnt shouldnt havent hasnt hadnt
aint gonna wanna gotta ur haha hahaha lmao omg btw tbh idk imo
"""
# (the last lines: contractions as informal chat writes them, without the apostrophe, and chat
# slang: "hes always late" named a topic "Hes" in one of REALTALK's real chats. Filler for
# names only: as stop words they would change which messages are clustered at all)
_STOP = frozenset(_STOP_WORDS.split())
_PREPOSITIONS = frozenset({"of", "in", "for", "with", "to"})
_ARTICLES = frozenset({"the", "a", "an"})
# What follows a verb rather than a noun ("serves the", "sorts all"): a content word just
# before one ends no noun phrase. Not "that" or "this": "the bread that I baked".
_DETERMINERS = _ARTICLES | {
    "my",
    "your",
    "our",
    "their",
    "his",
    "her",
    "its",
    "it",
    "them",
    "all",
    "every",
    "each",
    "both",
}
_GENERIC = frozenset(_GENERIC_WORDS.split())
_CODE_WORDS = frozenset(_CODE_NAMES.split())  # names every program has: they name no topic
_KEEP_DOTTED = frozenset({"js", "net", "io", "ai", "py"})  # "node.js" is one name, "a.b" two
_SHELL = frozenset({"bash", "sh", "shell", "console", "zsh", "powershell", "cmd", "terminal"})
# A fence's language by the name people write, not its file extension: a chat about a React
# front end is not "Jsx" (linguist's aliases, the common ones).
_LANGUAGE_NAMES = {
    "jsx": "react",
    "tsx": "react",
    "py": "python",
    "python3": "python",
    "js": "javascript",
    "mjs": "javascript",
    "ts": "typescript",
    "rb": "ruby",
    "rs": "rust",
    "golang": "go",
    "yml": "yaml",
    "kt": "kotlin",
    "cs": "c#",
    "csharp": "c#",
    "md": "markdown",
    "tf": "terraform",
    "hcl": "terraform",
}
_URL = re.compile(r"\bhttps?://([^\s/?#]+)\S*|\bwww\.([^\s/?#]+)\S*", re.IGNORECASE)
_FENCE = re.compile(r"```[ \t]*([\w+#.-]*)[^\n]*\n?(.*?)(?:```|\Z)", re.DOTALL)
_INLINE = re.compile(r"`([^`\n]+)`")
_IMPORT = re.compile(r"^\s*(?:from|import)\s+([A-Za-z_]\w*)", re.MULTILINE)
_COMMAND = re.compile(r"^\s*(?:\$\s*)?(?:sudo\s+)?([a-z][\w-]*)", re.MULTILINE)
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# A word starts with a letter of any script (café, Zürich); anything else that is not space or
# a word character is punctuation and ends a phrase.
_WORD = re.compile(r"[^\W\d_][\w+#]*(?:'[^\W\d_]+)?(?:[-.][\w+#]+)*|[^\s\w]")


def is_content_word(word: str) -> bool:
    """Whether a lower-case word can name something: not a stopword, a letter or a number."""
    return len(word) > 1 and word not in _STOP and not word.replace(".", "").isdigit()


def _code_terms(text: str, surfaces: Counter[str]) -> tuple[str, Terms]:
    """Pull code and URLs out of ``text``: (the prose left over, terms they stand for).

    Code names a topic by its language, the modules it imports and the commands it runs; its
    variable names do not, so only those count, once per message.
    """
    terms: Terms = {}

    def fence(m: re.Match[str]) -> str:
        lang, body = m.group(1).lower(), m.group(2)
        lang = _LANGUAGE_NAMES.get(lang, lang)
        found = [lang, *_IMPORT.findall(body)]
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
    return text, {t: None for t in terms if is_content_word(t)}


def _parse(text: str, surfaces: Counter[str]) -> Terms:
    """The message's terms in order of appearance: content words, phrases of two and three
    adjacent content words (no stopword or punctuation between: roughly, noun phrases), and a
    word joined to the next by a preposition ("starter in the fridge", "trip to Japan")."""
    prose, terms = _code_terms(text.replace("\u2019", "'"), surfaces)
    run: list[str] = []  # the content words just before, while no stopword came between
    link = ""  # a content word and the preposition (and article) after it: "starter in the"
    ended: list[str] = []  # phrases new to the message that the last content word ended
    linked = ""  # the prepositional phrase among them ("restaurant in san"), if any
    for token in _WORD.findall(prose):
        word = token.lower().removesuffix("'s")
        if "." in word and word.rsplit(".", 1)[1] not in _KEEP_DOTTED:
            # asyncio.run in prose is two names, not one, and starts no phrase.
            names = [part for part in word.split(".") if is_content_word(part)]
            terms.update(dict.fromkeys(names))
            surfaces.update(names)
            run, link, ended, linked = [], "", [], ""
        elif is_content_word(word):
            if linked and run and token[:1].isupper():  # "restaurant in San" + "Jose": the
                terms.pop(linked, None)  # phrase cut a name short
            terms[word] = None
            surfaces[token.removesuffix("'s")] += 1
            ended = [p for p in _phrases(run, link, word) if p not in terms]
            named = link and token[:1].isupper() and f"{link} {word}" in ended
            linked = f"{link} {word}" if named else ""
            terms.update(dict.fromkeys(ended))
            # "Japan's luggage forwarding" is about luggage forwarding, not "Japan luggage".
            run, link = ([] if token.endswith("'s") else [*run[-1:], word]), ""
        else:
            if word in _DETERMINERS:  # "nginx serves the build": a phrase ended on a verb
                for phrase in ended:
                    del terms[phrase]
            link, run, ended, linked = _link(run, link, word), [], [], ""
    return terms


def _phrases(run: Sequence[str], link: str, word: str) -> list[str]:
    """The phrases ``word`` ends: with the one or two content words before it, and with an
    open prepositional link."""
    found = []
    if run and run[-1] != word:
        found.append(f"{run[-1]} {word}")
        if len(run) == 2 and word not in run:
            found.append(f"{run[0]} {run[1]} {word}")
    return [*found, f"{link} {word}"] if link else found


def _link(run: Sequence[str], link: str, word: str) -> str:
    """The open prepositional link after stopword ``word``: "starter" "in" gives "starter in",
    "starter in" "the" gives "starter in the"; anything else closes it."""
    if run and word in _PREPOSITIONS:
        return f"{run[-1]} {word}"
    if link.count(" ") == 1 and word in _ARTICLES:
        return f"{link} {word}"
    return ""


@dataclass(frozen=True)
class ChatTerms:
    """The terms of every message of a chat, and how the chat writes them."""

    docs: list[Terms]  # per message, plurals folded onto singulars the chat also uses
    spellings: dict[str, str]  # a folded term -> the form the chat uses most, if not itself
    names: dict[str, str]  # a word -> the chat's spelling with inner capitals (FastAPI, JSON)

    def display(self, term: str) -> str:
        """``term`` as a label: the chat's most used form in Title Case, keeping the chat's
        spelling of names with inner capitals."""
        words = self.spellings.get(term, term).split()
        return " ".join(self.names.get(w) or _title(w) for w in words)


def _title(word: str) -> str:
    return "-".join(part[:1].upper() + part[1:] for part in word.split("-"))


def parse_all(texts: Sequence[str]) -> ChatTerms:
    """Terms of every message with plurals folded onto singulars the chat also uses."""
    surfaces: Counter[str] = Counter()
    docs = [_parse(t, surfaces) for t in texts]
    names: dict[str, str] = {}
    for form, _ in surfaces.most_common():
        if not form[1:].islower():
            names.setdefault(form.lower(), form)
    vocab = {t for d in docs for t in d if " " not in t}
    fold: dict[str, str] = {}
    for w in vocab:
        if w.endswith("ies") and w[:-3] + "y" in vocab:
            fold[w] = w[:-3] + "y"
        elif w.endswith("s") and not w.endswith("ss") and w[:-1] in vocab:
            fold[w] = w[:-1]
    forms: dict[str, Counter[str]] = {}
    for i, doc in enumerate(docs if fold else ()):
        folded = {" ".join(fold.get(w, w) for w in t.split()): t for t in doc}
        for term, form in folded.items():
            forms.setdefault(term, Counter())[form] += 1
        docs[i] = dict.fromkeys(folded)
    # "Winter Paths" when the chat says so, though "path" alone folds "paths" onto it.
    spellings = {t: c.most_common(1)[0][0] for t, c in forms.items() if len(c) > 1 or t not in c}
    return ChatTerms(docs, spellings, names)


def label_words(label: str) -> list[str]:
    """The content words of a label, lower case: what it is about."""
    return [w for w in re.findall(r"[a-z0-9+#.-]+", label.lower()) if is_content_word(w)]


def words_match(a: str, b: str) -> bool:
    """Same word, a plural, or one a prefix of the other ("async" and "asyncio")."""
    short, long = sorted((a.rstrip("s"), b.rstrip("s")), key=len)
    return short == long or (len(short) >= 4 and long.startswith(short))


def terms_of(text: str) -> Terms:
    """The terms of one message (see :func:`parse_all` for a whole chat)."""
    return _parse(text, Counter())


def is_trivial(text: str) -> bool:
    """True when a message has no word to name a topic by ("thanks", "ok", "great!", "")."""
    return not terms_of(text)


# --- key phrases -------------------------------------------------------------------------


def is_generic(term: str) -> bool:
    """True for a term that names no topic: chat filler ("week", "problem", "move") and
    phrases that start or end with it ("next month", "big temples")."""
    words = term.split()
    # "two-week" and "mid-December" are as generic as their last part.
    return not words or any(
        w in _GENERIC or w.rsplit("-", 1)[-1] in _GENERIC for w in (words[0], words[-1])
    )


def key_phrases(docs: Sequence[Terms], assignment: IntArray, limit: int = 12) -> list[Ranked]:
    """Per cluster, up to ``limit`` (term, c-TF-IDF score) pairs, best first.

    Half the places go to the best terms by score, a quarter to the terms most of the
    cluster's messages use whatever their score ("Postgres" in a chat that deploys Postgres
    too), a quarter to the best phrases. Generic terms and snake_case identifiers are left out.
    """
    table = _TermTable(docs, assignment)
    ranked: list[Ranked] = []
    for c in range(len(table.usage)):
        best = np.argsort(-table.score[c], kind="stable")
        common = np.argsort(-table.usage[c], kind="stable")[: limit // 4]
        phrases = best[table.is_phrase[best]][: limit // 4]
        picked = dict.fromkeys([*best[: limit - 2 * (limit // 4)], *common, *phrases])
        picked.update(dict.fromkeys(best[:limit]))  # what is left of the places, if any
        kept = [int(t) for t in picked if table.usage[c, t] > 0][:limit]
        ranked.append([(table.terms[t], float(table.score[c, t])) for t in kept])
    return ranked


class _TermTable:
    """Per cluster and term: ``usage``, the share of the cluster's messages using the term, and
    ``score``, its class-based TF-IDF.

    The score weighs usage by how rare the term is in the chat and how much of its use falls in
    this cluster and in few others: the chat's overall theme names no one cluster.
    """

    def __init__(self, docs: Sequence[Terms], assignment: IntArray) -> None:
        k = int(assignment.max()) + 1
        vocab: dict[str, int] = {}
        # Terms are numbered by first appearance, so ties go to what the chat said first.
        cells = [vocab.setdefault(t, len(vocab)) for d in docs for t in d]
        self.terms = list(vocab)
        self.is_phrase = np.array([" " in t for t in self.terms], dtype=bool)
        cluster_of_cell = np.repeat(assignment, [len(d) for d in docs])
        counts = (
            np.bincount(
                cluster_of_cell * len(vocab) + np.asarray(cells, dtype=np.intp),
                minlength=k * len(vocab),
            )
            .reshape(k, len(vocab))
            .astype(np.float64)
        )
        sizes = np.bincount(assignment, minlength=k).astype(np.float64)
        total = np.maximum(counts.sum(axis=0), 1.0)
        rarity = np.log1p(len(docs) / total)
        # Words in most clusters are the chat's theme: they lose up to half their score.
        clusters = (counts > 0).sum(axis=0)
        spread = 1.0 - 0.5 * ((clusters - 1) / max(k - 1, 1)) ** 2
        share = counts / sizes[:, None]
        self.usage = share * _weights(self.terms, vocab, counts, share)
        score = self.usage * rarity * np.sqrt(counts / total) * spread
        # A term of one message is a weak name for a cluster of several whose messages share
        # some terms: it is kept for a reader of meaning to weigh, far behind.
        shared = counts >= np.where(sizes >= 3, 2, 1)[:, None]
        keep = shared | ~(shared & (score > 0)).any(axis=1, keepdims=True)
        self.score = np.where(keep, score, _ONCE * score)


def _weights(
    terms: Sequence[str], vocab: dict[str, int], counts: FloatArray, share: FloatArray
) -> FloatArray:
    """How much each term counts as a name of each cluster, next to a plain word's 1."""
    size = np.array([t.count(" ") + 1 for t in terms])
    plain = np.array([all(map(is_content_word, t.split())) for t in terms], dtype=bool)
    # A phrase said twice is a name ("event loop"); said once, often an accident of wording,
    # and three words in a row said once mostly are ("index individual prices"). One with a
    # preposition ("hotel in Tokyo") is narrow by nature, however often said.
    weight = np.where(size > 1, np.where(counts >= 2, _PHRASE_BOOST, 0.7), 1.0)
    weight[(counts < 2) & (size == 3) & plain] = 0.0
    weight[:, ~plain] = 0.7
    weight[:, [is_generic(t) or "_" in t for t in terms]] = 0.0
    weight[:, _fragments(terms, counts.sum(axis=0))] = 0.0
    # A phrase of words the cluster uses often ("Kyoto ryokan") names it better than one of
    # words said in passing ("mountain views").
    parts = [
        (i, vocab[w]) for i, t in enumerate(terms) if size[i] > 1 for w in t.split() if w in vocab
    ]
    if parts:
        phrase, word = np.array(parts, dtype=np.intp).T
        support = np.zeros((len(terms), len(share)))
        np.add.at(support, phrase, share.T[word])
        mean = support.T / np.maximum(np.bincount(phrase, minlength=len(terms)), 1)
        weight *= np.where(size > 1, 0.8 + 0.2 * mean, 1.0)
    return weight


def _fragments(terms: Sequence[str], total: FloatArray) -> list[int]:
    """Terms never said but as the start or end of one longer phrase: "strong bread" of
    "strong bread flour", "Fushimi" of "Fushimi Inari". The longer phrase is the name."""
    index = {t: i for i, t in enumerate(terms)}
    found: set[int] = set()
    for i, term in enumerate(terms):
        words = term.split()
        if " " in term and all(map(is_content_word, words)):
            for part in (" ".join(words[:-1]), " ".join(words[1:])):
                j = index.get(part, -1)
                if j >= 0 and total[j] == total[i]:
                    found.add(j)
    return sorted(found)
