"""The ``X-Smart-Context`` response header: what Smart Context did with a request, in one line.

A rebuilt request says what was sent of how much, and, when the upstream keeps a prompt cache,
what it should serve from it and the bill beside the plain client's (the request as the client
sent it)::

    sent 8,458 of 18,957 tokens; cached ~7,900 (est.); bill 1,400 vs plain 2,800 (saved 50%)

(``sent ~8,458 of ~18,957 tokens (est.)`` where the model's tokens are estimated: the estimate
is calibrated by the server's counts as replies come, so it may move between turns.) It is
written before the reply, so the cached figure is our estimate; the server's own count
reaches the stored record (``smart-context stats``, the panel). Then the topics filtering the
request. Header-safe: printable ASCII, the labels percent-encoded beyond it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from smart_context.usage_bill import bill_of, cache_model_of, saved_share

MAX_HEADER_LABELS = 4


def summary(record: Mapping[str, Any]) -> str:
    """The header of a rebuilt request, from its record (docs/contract.md §9)."""
    usage = record.get("usage")
    if not isinstance(usage, Mapping):
        usage = {}
    sent, full = usage.get("sent_tokens"), usage.get("full_tokens")
    # a model without an offline tokenizer is counted by an estimate, calibrated by the
    # server's own counts as replies come: its figures may move between turns, so they say so
    about = "~" if usage.get("counted_with") == "estimate" else ""
    text = (
        f"sent {about}{sent:,} of {about}{full:,} tokens" + (" (est.)" if about else "")
        if isinstance(sent, int) and isinstance(full, int)
        else f"mode {record.get('mode')}"
    )
    text = header_safe(text) + bill_note(record)  # ours is ASCII: its "%" stays a percent sign
    topics = [t for t in record.get("active_topics") or [] if isinstance(t, str)]
    if topics:
        shown = header_safe(", ".join(topics[:MAX_HEADER_LABELS]))
        more = len(topics) - MAX_HEADER_LABELS
        text += f"; filter: {shown}" + (f" and {more} more" if more > 0 else "")
    return text


def bill_note(record: Mapping[str, Any]) -> str:
    """``; cached ~N (est.); bill B vs plain P (saved S%)`` when the record's ``cache`` part
    names an upstream that caches; "" otherwise (then the bill is the tokens sent)."""
    part = record.get("cache")
    bill = bill_of(record)
    if not isinstance(part, Mapping) or bill is None or not cache_model_of(part).caches:
        return ""
    cached = f"{bill['cached']:,}" if bill["cached_reported"] else f"~{bill['cached']:,} (est.)"
    text = (
        f"; cached {cached}; bill {round(bill['billed']):,} "
        f"vs plain {round(bill['plain_billed']):,}"
    )
    share = saved_share(bill)
    if share is not None:
        said = "saved" if share >= 0 else "lost"
        text += f" ({said} {round(100 * abs(share))}%)"
    return text


def header_safe(text: str) -> str:
    """``text`` as a header value: printable ASCII, the rest percent-encoded (UTF-8), so no
    label can end the header or start another."""
    return quote(text, safe=" !\"#$&'()*+,-./:;<=>?@[\\]^_`{|}~")
