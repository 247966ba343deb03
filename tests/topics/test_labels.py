"""Topic labels: cleaned, cut to whole words, Title Cased, the sticky label reserved."""

from __future__ import annotations

import json
from typing import Any

import pytest

from smart_context.topics.labels import clean_label_text, is_sticky_label, normalize_label
from smart_context.topics.model import STICKY_LABEL
from smart_context.topics.reply import parse_extraction_reply

IDS = {"m0", "m2", "m4"}


def parse(reply: str, known: set[str] | None = None, total: int = 20) -> Any:
    return parse_extraction_reply(reply, IDS if known is None else known, total)


def labels(reply: str, total: int = 20) -> list[str]:
    return [t.label for t in parse(reply, total=total).topics]


@pytest.mark.parametrize("label", ["", "   ", "\n\t", "\x00\u200b", "**", "- ."])
def test_empty_labels_are_dropped(label: str) -> None:
    reply = json.dumps({"topics": [{"label": label, "count": 3}, {"label": "Kept", "count": 1}]})
    result = parse(reply)
    assert labels(reply) == ["Kept"]
    assert any("empty" in note for note in result.notes)


@pytest.mark.parametrize(
    ("label", "expected"),
    [
        ("state management in large react applications", "State Management in Large"),
        ("Supercalifragilistic Expialidocious Things", "Supercalifragilistic Expialidocious"),
        ("x" * 41, None),
        ("https://example.com/a/very/long/url/that/is/no/topic", None),
    ],
)
def test_labels_that_are_too_long(label: str, expected: str | None) -> None:
    reply = json.dumps({"topics": [{"label": label, "count": 2}, {"label": "Kept", "count": 1}]})
    result = parse(reply)
    assert [t.label for t in result.topics] == ([expected] if expected else []) + ["Kept"]
    assert all(len(t.label) <= 40 and len(t.label.split()) <= 4 for t in result.topics)
    assert any(("trimmed" if expected else "too long") in note for note in result.notes)


def test_control_characters_are_stripped_and_html_stays_plain_text() -> None:
    reply = json.dumps(
        {
            "topics": [
                {"label": "Python\x00 \u202eAsync\n\tStuff\x07", "count": 2},
                {"label": "<img src=x onerror=alert(1)>", "count": 1},
            ]
        }
    )
    assert labels(reply) == ["Python Async Stuff", "<img src=x onerror=alert(1)>"]


@pytest.mark.parametrize(
    "label", [STICKY_LABEL, "instructions & preferences", "Instructions and  Preferences"]
)
def test_the_sticky_label_is_reserved(label: str) -> None:
    reply = json.dumps({"topics": [{"label": label, "count": 2}, {"label": "Kept", "count": 1}]})
    result = parse(reply)
    assert labels(reply) == ["Kept"]
    assert any("reserved" in note for note in result.notes)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("python async", "Python Async"),
        ("LangGraph", "LangGraph"),
        ("API design", "API Design"),
        ("api design", "API Design"),
        ("javascript closures", "JavaScript Closures"),
        ("state of the art", "State of the Art"),
        ("KUBERNETES DEPLOYMENT", "Kubernetes Deployment"),
        ("iOS widgets", "iOS Widgets"),
        ("real-time sync", "Real-Time Sync"),
        ("c++ templates", "C++ Templates"),
        ("python 3.12 features", "Python 3.12 Features"),
        ("  **error handling**. ", "Error Handling"),
    ],
)
def test_title_case_keeps_acronyms_and_tech_names(raw: str, expected: str) -> None:
    assert normalize_label(raw) == expected
    assert labels(json.dumps([{"label": raw, "count": 1}])) == [expected]


def test_clean_label_text_and_the_sticky_check_used_by_the_reply_parser() -> None:
    assert clean_label_text("  **python\x00 \u202easync**. ") == "python async"
    assert is_sticky_label("instructions & preferences")
    assert not is_sticky_label("Instructions")
