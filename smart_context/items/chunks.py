"""Text cut into chunks for embedding, and a message cut into query chunks.

- :func:`chunk`: paragraphs, then lines and sentences, merged back up to about 500 characters:
  a chunk is a few related sentences, short enough that one subject is not averaged away, and
  a Markdown heading starts the chunk of its section rather than ending the one before;
- :func:`query_chunks`: a message as sentences, each embedded on its own and max-pooled, so a
  message that asks two things finds the items for both;
- :func:`representative_chunks`: at most ``MAX_QUERY_CHUNKS`` of them, spread over the message:
  a pasted log or document costs the model no more than a long question.

All pure and deterministic; lengths are in characters. No piece is ever cut inside a word: a
word longer than the target is a chunk of its own. Which text an item has is the item's
business (:func:`smart_context.items.model.index_text`): this module knows only text.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

CHUNK_TARGET = 500
MIN_QUERY_CHUNK = 20  # shorter query sentences ("Thanks.", "Also:") join a neighbour
# A message's sentences embedded for its searches, at most: 200 KB pasted was 400 sentences and
# 20 s of the local model before the request went. The start and end, and evenly between.
MAX_QUERY_CHUNKS = 24
_WINDOW = 4 * CHUNK_TARGET  # of a long message, the characters read around each place

_HEADING = re.compile(r"#{1,6}[ \t]")
_PARAGRAPH_BREAK = re.compile(r"\n\s*\n\s*")
# After ., ! or ? (and any closing quotes or brackets), before whitespace; or at a line break,
# since lines in Markdown are list items, table rows and headings.
_SENTENCE_BREAK = re.compile(r"(?<=[.!?\u2026])[\"'\u201d\u2019)\]]*\s+|[ \t]*\n\s*")


def chunk(text: str, target: int = CHUNK_TARGET) -> list[str]:
    """``text`` in chunks of at most ``target`` characters (a single longer word excepted).

    Paragraphs (split at blank lines) longer than ``target`` are split at line breaks and
    sentence ends, and a sentence still too long at spaces; then the pieces are merged in order,
    greedily, as long as a chunk stays within ``target``. Pieces keep the break that preceded
    them (blank line, line break or space), so a chunk reads like the text it came from.
    """
    if target < 1:
        raise ValueError(f"the chunk target must be at least 1 character, got {target}")
    chunks: list[str] = []
    current = ""
    for glue, piece in _headed(_pieces(text, target), target):
        if current and len(current) + len(glue) + len(piece) <= target:
            current += glue + piece
        else:
            if current:
                chunks.append(current)
            current = piece
    if current:
        chunks.append(current)
    return chunks


def query_chunks(message: str, target: int = CHUNK_TARGET) -> list[str]:
    """``message`` as sentence chunks for query-side max pooling.

    One chunk per sentence or line (two whole sentences are never merged); a fragment under
    ``MIN_QUERY_CHUNK`` characters joins the previous chunk (or, first or when that is full, the
    next one), since "Thanks." or "Two things:" alone matches anything a little. A sentence over
    ``target`` is split at spaces rather than cut off: its end may be what the message asks.
    """
    if target < 1:
        raise ValueError(f"the chunk target must be at least 1 character, got {target}")
    chunks: list[str] = []
    pending = ""  # a short fragment waiting for the next sentence
    for sentence in _sentences(message):
        for piece in _words_within(sentence, target):
            if pending:
                joined = f"{pending} {piece}"
                if len(joined) <= target:
                    piece = joined
                else:
                    chunks.append(pending)
                pending = ""
            if len(piece) >= MIN_QUERY_CHUNK:
                chunks.append(piece)
            elif chunks and len(chunks[-1]) + 1 + len(piece) <= target:
                chunks[-1] += f" {piece}"
            else:
                pending = piece
    if pending:
        chunks.append(pending)
    return chunks


def representative_chunks(message: str, limit: int = MAX_QUERY_CHUNKS) -> list[str]:
    """At most ``limit`` of ``message``'s query chunks (:func:`query_chunks`): all of a short
    message; of a longer one the first, the last and evenly spaced between. A message too long
    to split whole in good time (over ``limit`` windows of 2,000 characters) is read only in
    ``limit`` such windows, evenly spaced from its start to its end: the time is bounded
    whatever its size."""
    if limit < 1:
        raise ValueError(f"the chunk limit must be at least 1, got {limit}")
    if len(message) <= limit * _WINDOW:
        return _spaced(query_chunks(message), limit)
    step = (len(message) - _WINDOW) / max(limit - 1, 1)
    picked = []
    for i in range(limit):
        start = round(i * step)
        # a window's edges may cut a sentence: its middle chunk is whole, or the message's own
        # first or last at either end
        pieces = query_chunks(message[start : start + _WINDOW])
        if pieces:
            at = 0 if i == 0 else len(pieces) - 1 if i == limit - 1 else len(pieces) // 2
            picked.append(pieces[at])
    return picked


def _spaced(chunks: list[str], limit: int) -> list[str]:
    if len(chunks) <= limit:
        return chunks
    if limit == 1:
        return chunks[-1:]  # what a message asks is mostly at its end
    last = len(chunks) - 1
    return [chunks[(i * last + (limit - 1) // 2) // (limit - 1)] for i in range(limit)]


def _pieces(text: str, target: int) -> Iterator[tuple[str, str]]:
    """(the break before it, piece) for each piece of at most ``target`` characters."""
    paragraph_glue = ""
    for paragraph in map(str.strip, _PARAGRAPH_BREAK.split(text)):
        if len(paragraph) <= target:
            if paragraph:
                yield paragraph_glue, paragraph
        else:
            for sentence_glue, sentence in _split_keeping_breaks(paragraph):
                glue = sentence_glue or paragraph_glue
                for words in _words_within(sentence, target):
                    yield glue, words
                    glue = " "
        paragraph_glue = "\n\n"


def _headed(pieces: Iterator[tuple[str, str]], target: int) -> Iterator[tuple[str, str]]:
    """``pieces`` with a Markdown heading joined to the piece after it when both fit: a heading
    alone at the end of a chunk says nothing, and its section's chunk loses its title."""
    held: tuple[str, str] | None = None
    for glue, piece in pieces:
        if held is not None:
            if len(held[1]) + len(glue) + len(piece) <= target:
                glue, piece = held[0], held[1] + glue + piece
            else:
                yield held
            held = None
        if _HEADING.match(piece.rsplit("\n", 1)[-1]):
            held = (glue, piece)
        else:
            yield glue, piece
    if held is not None:
        yield held


def _split_keeping_breaks(paragraph: str) -> Iterator[tuple[str, str]]:
    """A paragraph's sentences and lines, each with the break before it (``""`` for the first)."""
    start, glue = 0, ""
    for match in _SENTENCE_BREAK.finditer(paragraph):
        # the closing quotes and brackets stay with the sentence they close
        sentence = paragraph[start : match.start() + len(match.group().rstrip())].strip()
        if sentence:
            yield glue, sentence
            glue = " "
        if "\n" in match.group():
            glue = "\n"
        start = match.end()
    rest = paragraph[start:].strip()
    if rest:
        yield glue, rest


def _sentences(text: str) -> Iterator[str]:
    for paragraph in _PARAGRAPH_BREAK.split(text):
        for _glue, sentence in _split_keeping_breaks(paragraph):
            yield sentence


def _words_within(sentence: str, target: int) -> Iterator[str]:
    """``sentence`` itself if it fits, else runs of its words of at most ``target`` characters."""
    if len(sentence) <= target:
        yield sentence
        return
    current = ""
    for word in sentence.split():
        if current and len(current) + 1 + len(word) <= target:
            current += f" {word}"
        else:
            if current:
                yield current
            current = word
    if current:
        yield current
