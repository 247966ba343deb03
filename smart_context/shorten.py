"""Text cut to fit a line: summaries, previews and descriptions, one rule everywhere."""

from __future__ import annotations

ELLIPSIS = "…"


def shorten(text: str, limit: int, at_word: bool = False) -> str:
    """``text`` on one line (runs of whitespace become one space), cut to at most ``limit``
    characters and marked with … when cut; ``at_word`` cuts at the last space that fits.

    >>> shorten("read  the\\nfile", 9)
    'read the…'
    >>> shorten("read the file", 10, at_word=True)
    'read the…'
    """
    line = " ".join(text.split())
    if len(line) <= limit:
        return line
    if limit <= 0:
        return ""
    cut = line[: limit - 1]
    if at_word and " " in cut:
        cut = cut.rsplit(" ", 1)[0]
    return cut + ELLIPSIS
