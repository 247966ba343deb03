"""Topic label cleaning: one line, whole words within 4 words and 40 characters, Title Case.

Labels come from the model's reply and from the user-editable chat file, so both are cleaned
the same way: control characters and surrounding punctuation removed, whitespace collapsed, cut
to whole words within 4 words and 40 characters (a single word longer than that is junk and
dropped) and Title Cased, keeping acronyms and product names (API, LangGraph, iOS) as they are
written. HTML stays plain text, for the UI escapes it. The sticky label is reserved; it is
recognised whatever its case, its spacing, or "&" written as "and".
"""

from __future__ import annotations

import re

from smart_context.topics.model import STICKY_LABEL
from smart_context.topics.transcript import inline_text

MAX_LABEL_WORDS = 4
MAX_LABEL_CHARS = 40
_LABEL_EDGE = " \"'`*_.,;:!?-•"  # stripped from both ends of a label


def normalize_label(raw: str) -> str:
    """``raw`` as a topic label: one line, whole words within 4 words and 40 chars, Title Case.

    Returns ``""`` when nothing usable is left (empty, or a first word over 40 characters).
    """
    kept: list[str] = []
    for word in clean_label_text(raw).split()[:MAX_LABEL_WORDS]:
        if len(" ".join([*kept, word])) > MAX_LABEL_CHARS:
            break
        kept.append(word)
    last = len(kept) - 1
    return " ".join(_title_word(w, edge=i in (0, last)) for i, w in enumerate(kept))


def clean_label_text(raw: str) -> str:
    """``raw`` on one line without invisible characters or edge punctuation; not cut or cased."""
    return inline_text(raw).strip(_LABEL_EDGE)


def is_sticky_label(label: str) -> bool:
    """Whether ``label`` is the reserved sticky label, ignoring case, spacing and ``&``/"and"."""
    return _label_key(label) == _label_key(STICKY_LABEL)


def _label_key(label: str) -> str:
    return " ".join(label.casefold().replace("&", " and ").split())


# --- Title Case --------------------------------------------------------------------------------

_MINOR_WORDS = frozenset(
    {"a", "an", "and", "as", "at", "but", "by", "for", "in", "of", "on", "or", "the", "to", "vs"}
    | {"via", "with"}
)
# Names a plain capitalisation would spoil; anything the model already writes with capitals
# (LangGraph, iOS) is kept as written.
_KNOWN_NAMES = """
    AI API APIs AWS CI CD CLI CPU CSS CSV DNS GCP GPU HTML HTTP HTTPS IDE JSON JWT LLM LLMs ML ORM
    OS PDF RAG SDK SQL SSH TLS TOML UI URL UX VPN XML YAML OAuth iOS macOS GitHub GitLab GraphQL
    JavaScript TypeScript PostgreSQL MySQL SQLite MongoDB LangGraph LangChain OpenAI NumPy FastAPI
    PyTorch TensorFlow DevOps WebSocket WebSockets C++ C# Node.js
"""
_KNOWN_CASING = {name.lower(): name for name in _KNOWN_NAMES.split()}
_WORD_PARTS = re.compile(r"([-/])")
_PLAIN_WORD = re.compile(r"[^\W\d_][\w']*")


def _title_word(word: str, edge: bool) -> str:
    """One label word in Title Case; minor words stay lower case inside a label."""
    if not edge and word.lower() in _MINOR_WORDS:
        return word.lower()
    return "".join(_title_part(part) for part in _WORD_PARTS.split(word))


def _title_part(part: str) -> str:
    known = _KNOWN_CASING.get(part.lower())
    if known is not None:
        return known
    if not _PLAIN_WORD.fullmatch(part):  # "src=x", "v2.1", "<b>": leave as written
        return part
    shouted = part.isupper() and len(part) > 5  # "KUBERNETES" is shouting, "API" an acronym
    if any(c.isupper() for c in part) and not shouted:
        return part
    return part[:1].upper() + part[1:].lower()
