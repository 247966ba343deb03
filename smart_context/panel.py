"""The Smart Context panel: one self-contained HTML fragment the host shows beside the chat.

``render_panel()`` renders ``static/panel/panel.html.j2`` and inlines ``panel.css`` and the
``PANEL_SCRIPTS`` into it, because the fragment goes into other hosts' pages where relative asset
URLs do not resolve. Data reaches the script only as JSON (``|tojson`` inside a
``<script type="application/json" id="sc-initial">``); topic labels are model output derived from
user text, so the script writes them with ``textContent``/``setAttribute`` and never as markup.

The Jinja environment and the assets are loaded on first use and kept, so a host may call
``render_panel()`` for every client that connects.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import cache, lru_cache
from typing import Any

import jinja2
from markupsafe import Markup

from smart_context.resources import static_dir
from smart_context.topics.model import STICKY_LABEL

PANEL_ID = "smart-context-panel"
PANEL_TITLE = "Smart Context"
TEMPLATE_NAME = "panel.html.j2"

# Inside <style>/<script> the HTML parser only looks for the closing tag (and, in scripts, for
# "<!--", which can hide a later "</script>"). Our own assets must never contain either.
_RAW_TEXT_HAZARDS = {
    "style": re.compile(r"</style", re.IGNORECASE),
    "script": re.compile(r"</script|<!--", re.IGNORECASE),
}


@lru_cache(maxsize=1)
def _environment() -> jinja2.Environment:
    """The panel's Jinja environment: autoescaped, and a missing variable is an error."""
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(static_dir() / "panel"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        auto_reload=False,
    )


def checked_raw_text(text: str, tag: str, name: str) -> Markup:
    """``text`` as markup for the body of a ``<style>`` or ``<script>`` element.

    Raises ``ValueError`` when the text would end its element early; ``name`` says which asset.
    """
    if _RAW_TEXT_HAZARDS[tag].search(text):
        raise ValueError(f"{name} cannot be inlined: it would end its <{tag}> element early")
    return Markup(text)  # noqa: S704 (only our own packaged assets come here, never user data)


# The panel's script: these files of static/, inlined in this order into one <script>, inside
# one enclosing function through which they share their names (see static/panel/js/common.js).
# app/bridge.js is the chat page's own bridge, and the panel's fallback for hosts without one.
PANEL_SCRIPTS = (
    "panel/js/common.js",
    "app/bridge.js",
    "panel/js/transport.js",
    "panel/js/layout.js",
    "panel/js/state.js",
    "panel/js/view.js",
    "panel/js/controller.js",
    "panel/js/items.js",
    "panel/js/items-view.js",
    "panel/js/items-controller.js",
    "panel/js/memory.js",
    "panel/js/usage.js",
    "panel/js/usage-view.js",
    "panel/js/start.js",
)


@cache
def inline_asset(name: str, tag: str) -> Markup:
    """``static/<name>``, read once and checked to be safe inside a ``<tag>`` element."""
    text = (static_dir() / name).read_text(encoding="utf-8")
    return checked_raw_text(text, tag, f"static/{name}")


# The panel's styles: these files of static/, inlined in this order into one <style>.
PANEL_STYLES = ("panel/panel.css", "panel/items.css", "panel/memory.css", "panel/usage.css")


@cache
def _panel_css() -> Markup:
    """The files of ``PANEL_STYLES``, each checked, one after the other."""
    return Markup("\n").join(inline_asset(name, "style") for name in PANEL_STYLES)


@cache
def _panel_script() -> Markup:
    """The files of ``PANEL_SCRIPTS``, each checked, joined inside one enclosing function."""
    parts = [
        Markup("// ---- static/") + name + "\n" + inline_asset(name, "script")
        for name in PANEL_SCRIPTS
    ]
    return Markup('(() => {\n"use strict";\n') + Markup("\n").join(parts) + Markup("\n})();\n")


def render_panel(initial: Mapping[str, Any] | None = None) -> str:
    """The panel's HTML: markup, inline ``<style>`` and ``<script>``, safe to insert as-is.

    ``initial`` is optional data for the first paint, in the shape ``smart_context.get_topics``
    returns (``chat_id``, ``topics``, ``total_messages``, ``active_topics``, ``included_ids``,
    ``embedding_search``); ``api_base`` may prefix the HTTP fallback's ``/api/...`` URLs. The
    panel refreshes itself from the host either way.
    """
    template = _environment().get_template(TEMPLATE_NAME)
    return template.render(
        initial=dict(initial or {}),
        panel_id=PANEL_ID,
        panel_title=PANEL_TITLE,
        sticky_label=STICKY_LABEL,
        css=_panel_css(),
        js=_panel_script(),
    )
