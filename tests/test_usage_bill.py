"""A reply's bill beside the plain client's, from its record's ``usage`` and ``cache`` parts
(records built by hand, as the plugin writes them); a hostile record is billed as no cache,
never a crash."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import pytest

from smart_context.budget.cache import KINDS
from smart_context.usage_bill import bill_of, saved_share

PAGE_BILL = Path(__file__).resolve().parents[1] / "static" / "app" / "usage-bill.js"

OPENAI_PART = {
    "kind": "openai",
    "read": 0.1,
    "write": 1.0,
    "cached_estimate": 7900,
    "plain_cached_estimate": 18000,
    "plain_tokens": 18957,
}


def record(cache: Any = None, **usage: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"usage": {"sent_tokens": 8458, "full_tokens": 18957} | usage}
    if cache is not None:
        out["cache"] = cache
    return out


def test_without_a_cache_part_every_token_is_billed() -> None:
    assert bill_of(record()) == {
        "kind": "none",
        "sent": 8458,
        "cached": 0,
        "cached_reported": False,
        "billed": 8458.0,
        "plain_billed": 18957.0,
        "saved": 10499.0,
    }


def test_before_the_reply_the_cached_tokens_are_our_estimate() -> None:
    bill = bill_of(record(OPENAI_PART))
    assert bill is not None and (bill["cached"], bill["cached_reported"]) == (7900, False)
    assert bill["billed"] == pytest.approx(558 + 790)  # new tokens, and a tenth of the cached
    assert bill["plain_billed"] == pytest.approx(957 + 1800)
    assert bill["saved"] == pytest.approx(2757 - 1348)
    assert saved_share(bill) == pytest.approx(1409 / 2757)


def test_what_the_server_said_wins_and_sets_the_units() -> None:
    # the server counted 9,000 of what we counted 8,458: the plain client's figures scale too
    bill = bill_of(record(OPENAI_PART, reported_prompt_tokens=9000, reported_cached_tokens=8192))
    assert bill is not None and bill["sent"] == 9000
    assert (bill["cached"], bill["cached_reported"]) == (8192, True)
    assert bill["billed"] == pytest.approx(808 + 819.2)
    scale = 9000 / 8458
    plain, plain_cached = round(18957 * scale), round(18000 * scale)
    assert bill["plain_billed"] == pytest.approx(plain - plain_cached + 0.1 * plain_cached, 0.01)


def test_anthropics_writes_cost_more_than_a_new_token() -> None:
    part = {"kind": "anthropic", "read": 0.1, "write": 1.25, "cached_estimate": 0}
    bill = bill_of(
        record(
            part,
            reported_prompt_tokens=3000,
            reported_cached_tokens=2048,
            reported_cache_write_tokens=512,
        )
    )
    assert bill is not None and bill["billed"] == pytest.approx(440 + 204.8 + 640)


def test_a_request_that_lost_its_cache_says_so() -> None:
    part = OPENAI_PART | {"cached_estimate": 0, "plain_cached_estimate": 18900}
    bill = bill_of(record(part))
    assert bill is not None and bill["saved"] < 0
    assert bill["billed"] == 8458 and bill["plain_billed"] == pytest.approx(57 + 1890)
    share = saved_share(bill)
    assert share is not None and share < 0


def test_the_replys_own_usage_is_read_where_the_record_lacks_the_report() -> None:
    server = {"prompt_tokens": 8458, "prompt_tokens_details": {"cached_tokens": 4096}}
    bill = bill_of(record(OPENAI_PART), server)
    assert bill is not None and (bill["cached"], bill["cached_reported"]) == (4096, True)


def test_the_cached_count_never_passes_what_was_sent() -> None:
    bill = bill_of(record(OPENAI_PART, reported_cached_tokens=10**9))
    assert bill is not None and bill["cached"] == 8458 and bill["billed"] == pytest.approx(845.8)


@pytest.mark.parametrize(
    "part",
    [
        "</script><img src=x onerror=alert(1)>",
        [1, 2],
        {"kind": 5},
        {"kind": "no-such-cache", "read": 0.0},
        {"kind": "openai", "read": "0.1", "write": True, "cached_estimate": -4},
        {"kind": "openai", "read": float("nan"), "write": float("inf"), "plain_tokens": "lots"},
        {"kind": "openai", "read": -1, "write": 1e9, "plain_cached_estimate": [1]},
    ],
)
def test_a_hostile_cache_part_is_billed_at_prices_that_exist(part: Any) -> None:
    bill = bill_of(record(part, reported_cached_tokens="8000"))
    assert bill is not None and bill["cached_reported"] is False
    assert all(math.isfinite(bill[k]) for k in ("billed", "plain_billed", "saved"))
    assert 0 <= bill["billed"] <= 8458 and bill["plain_billed"] <= 18957
    json.dumps(bill, allow_nan=False)


@pytest.mark.parametrize(
    "value",
    [None, "x", [], {}, {"usage": "x"}, {"usage": {"sent_tokens": "1", "full_tokens": 2}}],
)
def test_a_record_without_counts_has_no_bill(value: Any) -> None:
    assert bill_of(value) is None


def test_the_pages_prices_are_the_cache_models() -> None:
    """View context bills in the page by the same rule (tests/browser/test_view_context_bill.py
    compares the two); its fallback prices are these."""
    found = re.search(r"const CACHE_PRICES = (\{.*?\});", PAGE_BILL.read_text(), re.S)
    assert found is not None
    prices = json.loads(found.group(1))
    assert prices == {name: [model.read, model.write] for name, model in KINDS.items()}
