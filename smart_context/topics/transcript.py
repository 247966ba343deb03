"""The chat as a bounded transcript for the topic prompt: one quoted line per message.

Pure functions, no I/O; :mod:`smart_context.topics` puts the result into the prompt.

**The transcript is data.** Every message becomes one line ``[id] role: "text"``: whitespace
(newlines included) is collapsed, control and bidi characters removed, and the text JSON-quoted,
so nothing a user writes can start a line of its own or pass for another speaker. The system
prompt says the transcript is data and is never to be obeyed.

**Bounding long chats** (:func:`bound_transcript`). Each message shows at most its head: an even
share of the budget, between 300 and 2,000 characters. If the whole chat does not fit, short user
messages (the candidates for standing instructions) get up to half the budget; the rest goes to
the most recent messages in full and then to an even sample of the older ones. Each gap is marked
``(… N messages omitted …)`` and the header gives the total, so the model can estimate counts for
the whole chat. Every step is one pass over the messages (10,000 take a fraction of a second).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from json.encoder import encode_basestring
from typing import Any

from smart_context.messages import message_text

MESSAGE_HEAD_CHARS = 300  # the head of a long message is enough to tell what it is about
MESSAGE_MAX_CHARS = 2000  # even in a short chat, no single message takes more than this
SHORT_MESSAGE_CHARS = 200  # user messages up to this long may be standing instructions
MIN_TRANSCRIPT_CHARS = 400

# C0/C1 controls, zero-width and bidi controls: invisible, and able to disguise a label or a line.
_INVISIBLE = re.compile(r"[\x00-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff]")
_ROLE = re.compile(r"[^a-z_]")
_LINE_BREAKS = dict.fromkeys((*range(9, 14), *range(28, 32), 133), " ")


def bound_transcript(messages: Sequence[Mapping[str, Any]], max_chars: int = 12000) -> str:
    """The chat as one line per message, at most ``max_chars`` long (see the module docstring).

    Raises ``ValueError`` when ``max_chars`` is below ``MIN_TRANSCRIPT_CHARS``.
    """
    if max_chars < MIN_TRANSCRIPT_CHARS:
        raise ValueError(f"max_chars must be at least {MIN_TRANSCRIPT_CHARS}, not {max_chars}")
    total = len(messages)
    cap = min(MESSAGE_MAX_CHARS, max(MESSAGE_HEAD_CHARS, max_chars // max(total, 1)))
    rendered = [_render_line(message, cap) for message in messages]
    lines = [line for line, _ in rendered]
    if len(_header(total, total, 0)) + sum(len(line) + 1 for line in lines) <= max_chars:
        return _assemble(lines, range(total), total)
    gap = len(_gap_note(total)) + 1
    # Worst-case header and one gap more than there are shown lines: the result always fits.
    budget = max_chars - len(_header(total, total, total)) - 1 - gap
    costs = [len(line) + 1 + gap for line in lines]
    return _assemble(lines, _select(costs, [short for _, short in rendered], budget), total)


def inline_text(text: str) -> str:
    """``text`` on one line: whitespace collapsed, invisible characters removed."""
    if _INVISIBLE.search(text):  # rare; the search alone is cheap on the 10,000-message path
        text = _INVISIBLE.sub("", text.translate(_LINE_BREAKS))
    return " ".join(text.split())


def _render_line(message: Mapping[str, Any], cap: int) -> tuple[str, bool]:
    """One transcript line and whether the message is a short user message."""
    if not isinstance(message, Mapping):  # the chat file is user-editable
        message = {}
    raw = message_text(message)
    head = raw[: cap * 4]  # collapsing whitespace only shrinks text; bounds the regex work
    text = inline_text(head)
    role = _ROLE.sub("", str(message.get("role", "")).lower())[:16] or "unknown"
    short = role == "user" and len(head) == len(raw) and len(text) <= SHORT_MESSAGE_CHARS
    if len(text) > cap or len(head) < len(raw):
        text = text[:cap].rstrip() + "…"
    ident = inline_text(str(message.get("id", "")).replace("[", "").replace("]", ""))[:64] or "?"
    # json.dumps(text, ensure_ascii=False) without making an encoder per line (a third of it)
    return f"[{ident}] {role}: {encode_basestring(text)}", short


def _select(costs: list[int], short_user: list[bool], budget: int) -> list[int]:
    """Indices to show: short user messages, then the recent tail, then a sample of the rest."""
    shorts = [i for i, short in enumerate(short_user) if short]
    chosen = _spread(shorts, costs, budget // 2)
    left = budget - sum(costs[i] for i in chosen)
    others = [i for i, short in enumerate(short_user) if not short]
    tail: list[int] = []
    used = 0
    for i in reversed(others):
        if used + costs[i] > left // 2:
            break
        tail.append(i)
        used += costs[i]
    older = others[: len(others) - len(tail)]
    return sorted(chosen + tail + _spread(older, costs, left - used))


def _spread(indices: list[int], costs: list[int], budget: int) -> list[int]:
    """An even sample of ``indices`` (always starting from the last) whose costs fit ``budget``."""
    total = sum(costs[i] for i in indices)
    if total <= budget:
        return indices
    if budget <= 0 or not indices:
        return []
    k = max(1, budget * len(indices) // total)
    step = len(indices) / k
    picked: list[int] = []
    used = 0
    for j in range(k):
        i = indices[len(indices) - 1 - int(j * step)]
        if used + costs[i] <= budget:
            picked.append(i)
            used += costs[i]
    return picked


def _assemble(lines: list[str], shown: Sequence[int], total: int) -> str:
    """The header, the shown lines in chat order, and a note for every gap."""
    out = [_header(total, len(shown), total - len(shown))]
    previous = -1
    for i in shown:
        if i - previous > 1:
            out.append(_gap_note(i - previous - 1))
        out.append(lines[i])
        previous = i
    if total - 1 - previous > 0:
        out.append(_gap_note(total - 1 - previous))
    return "\n".join(out)


def _header(total: int, shown: int, omitted: int) -> str:
    if not omitted:
        return f"The chat has {total} messages, all shown."
    return (
        f"The chat has {total} messages; {shown} are shown and {omitted} omitted "
        "(older ones sampled evenly, recent ones in full, short user messages kept)."
    )


def _gap_note(omitted: int) -> str:
    return f"(… {omitted} messages omitted …)"
