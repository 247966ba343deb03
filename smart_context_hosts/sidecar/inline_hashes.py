"""The Content-Security-Policy hashes of the inline scripts and styles in an HTML fragment.

The chat page embeds each plugin's panel as HTML, and a panel may carry its own ``<style>`` and
``<script>`` (the Smart Context panel does: it must work in hosts whose asset URLs it cannot
know). The page's policy has no ``'unsafe-inline'``; instead it lists the ``'sha256-…'`` hash of
each of those elements, so exactly the code the sidecar put in the page runs, and a script that
got in any other way does not.

A browser hashes the UTF-8 text of the element as it parsed it. :mod:`html.parser` reads
``<script>`` and ``<style>`` as raw text the same way; where the two could disagree (a fragment
with ``<!--`` inside a script), the hash would not match and the browser would refuse that
element: the error is a blocked panel, never an allowed stranger.
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass
from functools import lru_cache
from html.parser import HTMLParser

# The type values that make a <script> run (HTML's "JavaScript MIME type essence match", plus
# "module"); any other type (application/json, text/template...) is data and needs no hash.
SCRIPT_TYPES = frozenset(
    {
        "",
        "module",
        "application/ecmascript",
        "application/javascript",
        "application/x-ecmascript",
        "application/x-javascript",
        "text/ecmascript",
        "text/javascript",
        "text/javascript1.0",
        "text/javascript1.1",
        "text/javascript1.2",
        "text/javascript1.3",
        "text/javascript1.4",
        "text/javascript1.5",
        "text/jscript",
        "text/livescript",
        "text/x-ecmascript",
        "text/x-javascript",
    }
)
_ASCII_WHITESPACE = "\t\n\f\r "
_CACHED_FRAGMENTS = 32  # a panel is ~60 KB; it changes with the chat the page opens


@dataclass(frozen=True)
class InlineHashes:
    """The hash sources (``'sha256-…'``) of a fragment's running scripts and its styles."""

    scripts: tuple[str, ...]
    styles: tuple[str, ...]


@lru_cache(maxsize=_CACHED_FRAGMENTS)
def inline_hashes(html: str) -> InlineHashes:
    """The hashes of the inline ``<script>`` elements that run and the ``<style>`` elements in
    ``html``, in document order."""
    collector = _InlineCollector()
    # A browser turns every CR LF and lone CR into LF before it parses, so before it hashes.
    collector.feed(html.replace("\r\n", "\n").replace("\r", "\n"))
    collector.close()
    return InlineHashes(
        tuple(map(hash_source, collector.scripts)), tuple(map(hash_source, collector.styles))
    )


def hash_source(text: str) -> str:
    """The CSP source that allows the inline element whose text is ``text``."""
    digest = hashlib.sha256(text.encode("utf-8")).digest()
    return f"'sha256-{base64.b64encode(digest).decode('ascii')}'"


def runs_inline(attrs: list[tuple[str, str | None]]) -> bool:
    """True when a ``<script>`` with these attributes runs its own text: it has no ``src`` and
    its type (or legacy ``language``) names JavaScript."""
    first: dict[str, str] = {}
    for name, value in attrs:  # a browser keeps the first of repeated attributes
        first.setdefault(name, value or "")
    if "src" in first:
        return False
    if "type" in first:
        kind = first["type"]
    else:
        kind = f"text/{first['language']}" if first.get("language") else ""
    return kind.strip(_ASCII_WHITESPACE).lower() in SCRIPT_TYPES


class _InlineCollector(HTMLParser):
    """Collects the text of each running inline ``<script>`` and each ``<style>``."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)  # script and style text stays raw either way
        self.scripts: list[str] = []
        self.styles: list[str] = []
        self._reading: tuple[list[str], list[str]] | None = None  # (where it goes, its text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "style":
            self._reading = (self.styles, [])
        elif tag == "script" and runs_inline(attrs):
            self._reading = (self.scripts, [])

    def handle_data(self, data: str) -> None:
        if self._reading is not None:
            self._reading[1].append(data)

    def handle_endtag(self, tag: str) -> None:
        if self._reading is not None and tag in ("script", "style"):
            found, text = self._reading
            found.append("".join(text))
            self._reading = None
