"""The example server's tools as plain functions: the numbers, and the errors for bad input.

``test_mcp_client`` calls the same tools through the SDK over stdio and HTTP.
"""

from __future__ import annotations

from typing import Any

import pytest
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, TextContent

from smart_context_hosts.example_mcp.server import (
    convert_units,
    hydration,
    time_in,
    word_count,
    yen_to_euro,
)


def data(result: CallToolResult) -> dict[str, Any]:
    assert result.structured_content is not None
    assert isinstance(result.content[0], TextContent)
    assert result.content[0].text == result.structured_content["text"]
    return dict(result.structured_content)


@pytest.mark.parametrize(
    ("value", "source", "target", "ingredient", "expected", "text"),
    [
        (100, "C", "F", None, 212.0, "100 C = 212 F"),
        (0, "K", "C", None, -273.15, "0 K = -273.15 C"),
        (500, "g", "cup", "flour", 4.0, "500 g of flour = 4 cup"),
        (1, "cup", "g", "water", 236.6, "1 cup of water = 236.6 g"),
        (250, "g", "cup", "wholemeal_flour", 2.0833, "250 g of wholemeal flour = 2.08 cup"),
        (10, "km", "mi", None, 6.2137, "10 km = 6.21 mi"),
        (1, "lb", "g", None, 453.5924, "1 lb = 453.59 g"),
        (3, "tbsp", "tsp", None, 9.0, "3 tbsp = 9 tsp"),
    ],
)
def test_convert_units(
    value: float, source: Any, target: Any, ingredient: Any, expected: float, text: str
) -> None:
    result = data(convert_units(value, source, target, ingredient))
    assert result == {"value": expected, "unit": target, "text": text}


@pytest.mark.parametrize(
    ("value", "source", "target", "message"),
    [
        (-300, "C", "F", "below absolute zero"),
        (100, "g", "C", "only C, F and K mix"),
        (100, "g", "cup", "needs an ingredient"),
        (1, "km", "kg", r"Cannot convert length \(km\) to mass \(kg\)"),
    ],
)
def test_convert_units_refuses_what_makes_no_sense(
    value: float, source: Any, target: Any, message: str
) -> None:
    with pytest.raises(ToolError, match=message):
        convert_units(value, source, target)


def test_hydration_counts_the_starter() -> None:
    assert data(hydration(500, 350))["hydration_pct"] == 70.0
    with_starter = data(hydration(500, 350, starter_g=100))
    assert with_starter == {
        "hydration_pct": 72.7,
        "total_flour_g": 550.0,
        "total_water_g": 400.0,
        "starter_pct": 20.0,
        "text": "Hydration 72.7% (400 g water / 550 g flour, starter included)",
    }


def test_yen_to_euro_uses_the_fixed_rate() -> None:
    assert data(yen_to_euro(50_000)) == {
        "euro": 312.5,
        "rate_yen_per_euro": 160.0,
        "text": "¥50,000 ≈ €312.50 (at 160 yen per euro)",
    }


def test_time_in_converts_a_given_moment() -> None:
    tokyo = data(time_in("Asia/Tokyo", "2025-04-03T09:00:00+02:00"))
    assert (tokyo["time"], tokyo["weekday"], tokyo["utc_offset"]) == ("16:00", "Thursday", "+09:00")
    assert tokyo["text"] == "Thursday 03 April 2025, 16:00 in Asia/Tokyo (UTC+09:00)"
    assert data(time_in("Europe/Berlin", "2025-01-01T12:00:00"))["time"] == "13:00"  # naive: UTC
    assert data(time_in("UTC"))["utc_offset"] == "+00:00"


@pytest.mark.parametrize(
    ("zone", "at", "message"),
    [
        ("Mars/Olympus_Mons", None, "Unknown time zone"),
        ("../../etc/passwd", None, "Unknown time zone"),
        ("/etc/localtime", None, "Unknown time zone"),
        ("Asia/Tokyo", "next tuesday", "is not an ISO 8601 moment"),
    ],
)
def test_time_in_refuses_unknown_zones_and_moments(zone: str, at: str | None, message: str) -> None:
    with pytest.raises(ToolError, match=message):
        time_in(zone, at)


@pytest.mark.parametrize(
    ("text", "words", "sentences"),
    [
        ("Hello world. How are you?", 5, 2),
        ("No full stop at the end", 6, 1),
        ("Version 2.5 is out!  Really.", 5, 2),
        ("今日は晴れ。明日は雨。", 1, 2),
        ("   ", 0, 0),
    ],
)
def test_word_count(text: str, words: int, sentences: int) -> None:
    result = data(word_count(text))
    assert (result["words"], result["sentences"]) == (words, sentences)
    assert result["characters"] == len(text)


def test_reading_time_rounds_up_to_a_tenth_of_a_minute() -> None:
    assert data(word_count("word " * 450))["reading_minutes"] == 2.3
