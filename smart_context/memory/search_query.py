"""Turning any text a person typed into a safe FTS5 MATCH expression, restricted to one chat.

FTS5's query language gives meaning to ``"``, ``*``, ``:``, ``^``, ``NEAR(``, ``AND``/``OR``/``NOT``
and parentheses; passing user text through would raise syntax errors or, worse, search other
columns. So the text is never passed: only its word tokens are, each as a quoted FTS5 string.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

from smart_context.items.lexical import STOP_WORDS

MAX_TOKENS = 32
# Read of a text for its words, at most: 32 distinct words come far sooner in anything typed; a
# pasted 20 MB log of few distinct words was scanned whole, for seconds, on every request.
MAX_QUERY_CHARS = 16_384
MIN_TOKEN_CHARS = 2
_WORD = re.compile(r"[^\W_]+")
# the function words BM25 drops for items, and the question words of chat questions
QUERY_STOP_WORDS = STOP_WORDS | frozenset(
    ["about", "did", "does", "had", "were", "who", "why", "where", "should", "could", "any"]
)


def query_tokens(text: str) -> list[str]:
    """The distinct lowercase words (letters and digits) of ``text``, in order, at most 32,
    from its first 16,384 characters.

    Words under two characters and English function words ("the", "what", "does") are dropped:
    they match nearly everything and rank nothing, and in a long chat an OR over them makes
    FTS5 score most of its rows (32 ms instead of 3 at 10,000 messages).
    """
    if len(text) > MAX_QUERY_CHARS:  # and not a word cut in two at the end
        text = text[:MAX_QUERY_CHARS].rsplit(None, 1)[0]
    seen: dict[str, None] = {}
    for match in _WORD.finditer(text.lower()):
        token = match.group()
        if len(token) >= MIN_TOKEN_CHARS and token not in QUERY_STOP_WORDS:
            seen.setdefault(token, None)
            if len(seen) == MAX_TOKENS:
                break
    return list(seen)


def fts_string(token: str) -> str:
    """``token`` as an FTS5 string literal: inside double quotes, a quote is doubled."""
    return '"' + token.replace('"', '""') + '"'


def chat_key(chat_id: str) -> str:
    """One index token that stands for ``chat_id``.

    A chat id such as ``my-chat_1`` would split into several tokens (and collide with
    ``my chat 1``); a hex digest is one token. Searches still compare the chat id itself, so
    a collision of keys could only cost speed, never show another chat's messages.
    """
    return "c" + hashlib.sha256(chat_id.encode("utf-8")).hexdigest()[:24]


def match_expression(chat_id: str, text: str) -> str | None:
    """``chat_key : "c…" AND content : ("w1" OR "w2" …)``, or None if ``text`` has no words."""
    return words_expression(chat_id, query_tokens(text))


def words_expression(chat_id: str | None, tokens: Sequence[str]) -> str | None:
    """:func:`match_expression` of words already taken from a text (:func:`query_tokens`);
    ``chat_id`` ``None``: the rows of any chat holding them (the caller keeps the chat's)."""
    if not tokens:
        return None
    words = "content : (" + " OR ".join(fts_string(token) for token in tokens) + ")"
    return words if chat_id is None else f"chat_key : {fts_string(chat_key(chat_id))} AND {words}"


def word_expression(token: str) -> str:
    """The rows holding ``token`` in their text, in any chat."""
    return f"content : {fts_string(token)}"
