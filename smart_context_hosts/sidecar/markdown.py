"""Message text as HTML the page may insert: Markdown parsed by markdown-it-py, then cleaned by nh3.

The chat file keeps the raw text; the API adds the HTML beside it (``content_html``, and
``partial_content_html`` for a failed reply's partial text) each time it serves a message, so
a change here shows on every stored message and the file never holds markup.

Two layers, each enough alone for what it guards:

- markdown-it-py, CommonMark with tables and strikethrough, raw HTML *off*: ``<img onerror>``
  in a message is text. A link or autolink is a link only with an ``http:``, ``https:`` or
  ``mailto:`` address, else it stays text. An image becomes a link to its address (the page's
  policy loads no image from elsewhere, and a remote image would tell its host who reads).
- nh3 (ammonia) keeps only the tags and attributes Markdown produces here, only those URL
  schemes, and gives every link ``rel="noopener noreferrer nofollow"`` and ``target="_blank"``.

Table alignment becomes a class (``align-left|center|right``): the policy refuses inline styles.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import nh3
from markdown_it import MarkdownIt
from markdown_it.common.utils import escapeHtml, unescapeAll
from markdown_it.renderer import RendererHTML
from markdown_it.rules_core import StateCore
from markdown_it.token import Token
from markdown_it.utils import EnvType, OptionsDict

LINK_SCHEMES = ("http:", "https:", "mailto:")
LINK_REL = "noopener noreferrer nofollow"
ALIGNMENTS = ("left", "center", "right")
# A message's fields with text to show, and the field its HTML goes in.
HTML_FIELDS = {"content": "content_html", "partial_content": "partial_content_html"}
# Opening a chat again renders nothing again: the HTML of recent texts is kept, up to this many
# characters of text and HTML together (10,000 short chat messages hold about 2 million).
CACHE_CHARS = 20_000_000

TAGS = {
    *("p", "br", "hr", "strong", "em", "s", "code", "pre", "blockquote"),
    *("ul", "ol", "li", "a", "h1", "h2", "h3", "h4", "h5", "h6"),
    *("table", "thead", "tbody", "tr", "th", "td"),
}
ATTRIBUTES = {"a": {"href"}, "ol": {"start"}, "pre": {"data-lang", "tabindex"}}
ALIGN_CLASSES = {f"align-{side}" for side in ALIGNMENTS}


def is_safe_link(url: str) -> bool:
    """Whether ``url`` may be a link's address: absolute ``http:``, ``https:`` or ``mailto:``."""
    return url.strip().lower().startswith(LINK_SCHEMES)


def _image_as_link(
    self: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType
) -> str:
    token = tokens[idx]
    src = str(token.attrGet("src") or "")
    alt = self.renderInlineAsText(token.children or [], options, env)
    return f'<a href="{escapeHtml(src)}">{escapeHtml(alt or src)}</a>'


def _code_block(
    self: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType
) -> str:
    token = tokens[idx]
    info = unescapeAll(token.info).strip() if token.type == "fence" else ""
    lang = f' data-lang="{escapeHtml(info.split()[0])}"' if info else ""
    code = escapeHtml(token.content.removesuffix("\n"))
    # tabindex: a wide block scrolls sideways, and the keyboard must reach it to scroll it
    return f'<pre class="code"{lang} tabindex="0"><code>{code}</code></pre>\n'


def _align_as_class(state: StateCore) -> None:
    """Table cells' ``style="text-align:…"`` becomes ``class="align-…"``."""
    for token in state.tokens:
        if token.type not in ("th_open", "td_open"):
            continue
        style = str(token.attrs.pop("style", ""))
        side = style.removeprefix("text-align:")
        if side in ALIGNMENTS:
            token.attrSet("class", f"align-{side}")


def _parser() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "breaks": True})
    md.enable(["table", "strikethrough"])
    md.validateLink = is_safe_link  # type: ignore[method-assign]
    md.add_render_rule("image", _image_as_link)
    md.add_render_rule("fence", _code_block)
    md.add_render_rule("code_block", _code_block)
    md.core.ruler.push("align_as_class", _align_as_class)
    return md


_MARKDOWN = _parser()
_CLEANER = nh3.Cleaner(
    tags=TAGS,
    attributes=ATTRIBUTES,
    allowed_classes={"pre": {"code"}, "th": ALIGN_CLASSES, "td": ALIGN_CLASSES},
    url_schemes={scheme.rstrip(":") for scheme in LINK_SCHEMES},
    link_rel=LINK_REL,
    set_tag_attribute_values={"a": {"target": "_blank"}},
    strip_comments=True,
)


class HtmlCache:
    """HTML by the text it was rendered from; the least recently used goes first once more
    than ``max_chars`` characters are held. Safe to share between threads."""

    def __init__(self, max_chars: int) -> None:
        self.max_chars = max_chars
        self._held: OrderedDict[str, str] = OrderedDict()
        self._chars = 0
        self._lock = threading.Lock()

    def get(self, text: str, render: Callable[[str], str]) -> str:
        """The HTML of ``text``, rendered by ``render`` unless it is held."""
        with self._lock:
            html = self._held.get(text)
            if html is not None:
                self._held.move_to_end(text)
                return html
        html = render(text)
        size = len(text) + len(html)
        if size > self.max_chars // 100:  # one huge text never pushes out a whole chat
            return html
        with self._lock:
            if text not in self._held:
                self._held[text] = html
                self._chars += size
            while self._chars > self.max_chars:
                old_text, old_html = self._held.popitem(last=False)
                self._chars -= len(old_text) + len(old_html)
        return html

    def __len__(self) -> int:
        return len(self._held)


_CACHE = HtmlCache(CACHE_CHARS)


def render_markdown(text: str) -> str:
    """``text`` as Markdown, rendered to HTML that holds nothing that runs or loads."""
    return _CACHE.get(text, _render)


def _render(text: str) -> str:
    return _CLEANER.clean(_MARKDOWN.render(text))


def with_html(message: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``message`` with the HTML of its text fields beside them."""
    view = dict(message)
    for field, html_field in HTML_FIELDS.items():
        text = message.get(field)
        if isinstance(text, str):
            view[html_field] = render_markdown(text)
    return view


def chat_with_html(chat: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of a chat file's content whose messages carry their HTML (:func:`with_html`)."""
    messages = chat.get("messages")
    if not isinstance(messages, list):
        return dict(chat)
    shown = [with_html(m) if isinstance(m, Mapping) else m for m in messages]
    return {**chat, "messages": shown}


def event_with_html(data: Mapping[str, Any]) -> dict[str, Any]:
    """A ``done`` or ``error`` event's data whose stored messages carry their HTML."""
    view = dict(data)
    for key in ("user_message", "assistant_message"):
        message = data.get(key)
        if isinstance(message, Mapping):
            view[key] = with_html(message)
    return view
