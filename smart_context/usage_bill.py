"""What a request was billed, in new-token units, beside what the plain client's would have been.

:func:`bill_of` reads one reply's record (``ctx.metadata["smart_context"]``,
docs/contract.md §9): its ``usage`` (``sent_tokens``, ``full_tokens``, and after the reply the
server's ``reported_prompt_tokens``, ``reported_cached_tokens``,
``reported_cache_write_tokens``) and its ``cache`` part, written at request time::

    {"kind": "openai", "read": 0.1, "write": 1.0, "cached_estimate": 17000,
     "plain_cached_estimate": 18000, "plain_tokens": 19000}

``kind`` names the upstream's cache (:mod:`smart_context.budget.cache`), ``read`` and
``write`` its prices against a new token, ``cached_estimate`` the tokens of the request the
upstream should serve from its cache, ``plain_tokens`` what the plain client would have sent
(the whole conversation) and ``plain_cached_estimate`` what it would have had cached. A record
without a ``cache`` part is billed as no cache (``kind`` "none": every token at full price).

What the server said wins over our estimate: ``sent`` is its prompt count when it gave one,
``cached`` its cached count; the plain client's figures, ours, are then scaled to the server's
units. Writes are counted as the server reported them; the plain client's are not known, so
none are counted for it. Pure: a record is data from disk, possibly
hand-edited; a figure that is not a count or a price is not read, and nothing here raises.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace
from functools import lru_cache
from typing import Any

from smart_context.budget.cache import KINDS, NO_CACHE, CacheModel
from smart_context.server_usage import cache_report, token_count

MAX_PRICE = 100.0  # a price beyond this is no price: a hand-edited record, not a provider


def bill_of(record: Any, server: Any = None) -> dict[str, Any] | None:
    """One reply's bill: ``{"kind", "sent", "cached", "cached_reported", "billed",
    "plain_billed", "saved"}`` (``saved``: ``plain_billed - billed``, negative when it cost
    more). ``server``: the reply's own copy of the server's ``usage`` (the host stores it on
    the message), read where the record lacks the reported figures. ``None`` when the record
    has no ``usage`` with counts."""
    # records are JSON objects: dict checks, not Mapping's slower ones (stats reads thousands)
    usage = record.get("usage") if isinstance(record, dict) else None
    if not isinstance(usage, dict):
        return None
    ours, full = token_count(usage.get("sent_tokens")), token_count(usage.get("full_tokens"))
    if ours is None or full is None:
        return None
    reported, cached_said, written = _reported(usage, server)
    part = record.get("cache")
    cache = part if isinstance(part, dict) else {}
    model = cache_model_of(cache)
    sent = reported or ours
    # the plain client's figures are ours: in the server's units when it counted ours
    scale = sent / ours if reported and ours else 1.0
    given = token_count(cache.get("plain_tokens"))
    plain = round((full if given is None else given) * scale)
    plain_cached = min(round((token_count(cache.get("plain_cached_estimate")) or 0) * scale), plain)
    estimate = min(round((token_count(cache.get("cached_estimate")) or 0) * scale), sent)
    cached = min(cached_said, sent) if cached_said is not None else estimate
    billed = model.billed(sent, cached, min(written, sent - cached))
    plain_billed = model.billed(plain, plain_cached)
    return {
        "kind": model.name,
        "sent": sent,
        "cached": cached,
        "cached_reported": cached_said is not None,
        "billed": round(billed, 2),
        "plain_billed": round(plain_billed, 2),
        "saved": round(plain_billed - billed, 2),
    }


def _reported(usage: dict[str, Any], server: Any) -> tuple[int | None, int | None, int]:
    """What the server said: its prompt tokens, those read from its cache (``None``: it did
    not say), and those written to it. The record's figures when the plugin took the report
    (it records every figure the server gave), else the reply's own copy of its ``usage``."""
    prompt = _positive(usage.get("reported_prompt_tokens"))
    cached = token_count(usage.get("reported_cached_tokens"))
    written = token_count(usage.get("reported_cache_write_tokens"))
    taken = "reported_prompt_tokens" in usage or "reported_cached_tokens" in usage
    if not taken and isinstance(server, dict):
        prompt = _positive(server.get("prompt_tokens"))
        said = cache_report(server)
        cached, written = said.cached_tokens, said.cache_write_tokens
    return prompt, cached, written or 0


def cache_model_of(part: Mapping[str, Any]) -> CacheModel:
    """The cache a record's ``cache`` part names, at the prices it gives; no cache without
    one."""
    kind, read, write = part.get("kind"), part.get("read"), part.get("write")
    try:
        return _model(kind, read, write)  # a chat's replies repeat one part's figures
    except TypeError:  # a price that cannot be a key (a list): no price
        return _model(kind, None, None)


@lru_cache(maxsize=256, typed=True)  # typed: True and 1 are different prices
def _model(kind: Any, read: Any, write: Any) -> CacheModel:
    if not isinstance(kind, str) or kind not in KINDS or kind == NO_CACHE.name:
        return NO_CACHE  # every token at full price, whatever a price says
    found, read, write = KINDS[kind], _price(read), _price(write)
    return replace(
        found,
        read=found.read if read is None else read,
        write=found.write if write is None else write,
    )


def saved_share(bill: Mapping[str, Any]) -> float | None:
    """``saved`` as a share of the plain client's bill (0.5: half of it), when there was one."""
    plain, saved = bill.get("plain_billed"), bill.get("saved")
    if not isinstance(plain, int | float) or not isinstance(saved, int | float) or plain <= 0:
        return None
    return float(saved) / float(plain)


def _price(value: Any) -> float | None:
    if type(value) is not int and type(value) is not float:  # a flag, text: no price
        return None
    return float(value) if math.isfinite(value) and 0 <= value <= MAX_PRICE else None


def _positive(value: Any) -> int | None:
    found = token_count(value)
    return found if found else None
