"""A chat's selection settings: the vault's defaults, the chat's overrides, presets."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from smart_context.config import Settings
from smart_context.items.select import DOCUMENT_FLOOR, TOOL_FLOOR, select
from smart_context.items.selection import (
    BadSelectionSettings,
    chat_limits,
    checked_overrides,
    document_limits,
    effective,
    preset_of,
    stored_overrides,
    tool_limits,
)


def test_a_chat_inherits_what_it_does_not_override() -> None:
    vault = Settings(context_top_n=7, context_tools_top_n=2)
    values = effective(vault, {"context_top_n": 3})
    assert document_limits(values).top_n == 3 and tool_limits(values).top_n == 2
    assert document_limits(values).include_score == 0.7
    assert preset_of(effective(Settings(), {})) == "normal"
    assert preset_of(values) == "custom"


def test_a_preset_sets_documents_and_tools_and_an_explicit_key_wins() -> None:
    out = checked_overrides({"preset": "conservative", "context_tools_top_n": 4})
    assert out["context_top_n"] == 3 and out["context_tools_top_n"] == 4
    assert out["context_include_score"] == 0.8 and out["context_tools_top_k"] == 10
    assert preset_of(effective(Settings(), checked_overrides({"preset": "aggressive"}))) == (
        "aggressive"
    )


def test_null_goes_back_to_the_vaults_value() -> None:
    current = {"context_top_n": 2, "context_top_k": 9}
    assert checked_overrides({"context_top_n": None}, current) == {"context_top_k": 9}


@pytest.mark.parametrize(
    ("changes", "says"),
    [
        ({"context_top_n": -1}, "context_top_n"),
        ({"context_top_n": 2.5}, "whole number"),
        ({"context_include_score": "high"}, "context_include_score"),
        ({"similarity_threshold": 0.4}, "not a selection setting"),
        ({"preset": "extreme"}, "preset must be one of"),
        ({"context_top_k": True}, "context_top_k"),
        ("context_top_n=3", "must be an object"),
        ({"x" * 10_000: 1}, "not a selection setting"),
    ],
)
def test_bad_changes_say_which_key(changes: Any, says: str) -> None:
    with pytest.raises(BadSelectionSettings, match=says) as info:
        checked_overrides(changes)
    assert len(str(info.value)) < 600


def test_a_hand_edited_chat_file_keeps_what_is_usable() -> None:
    raw = {"context_top_n": 2, "context_top_k": "many", "nonsense": 1, "preset": "normal"}
    assert stored_overrides(raw) == {"context_top_n": 2}
    assert stored_overrides(["context_top_n"]) == {} and stored_overrides(None) == {}


def test_the_expansion_settings_reach_both_kinds_of_selection() -> None:
    values = effective(Settings(context_expansion_depth=2), {"context_expansion_top_n": 1})
    for limits in (document_limits(values), tool_limits(values)):
        assert (limits.expansion_depth, limits.expansion_top_n) == (2, 1)
        assert limits.expansion_threshold == 0.75


def test_a_tool_needs_less_than_a_document_to_be_added() -> None:
    # a tool the model does not call costs little; a rule it reads costs tokens and attention
    documents, tools = chat_limits(Settings(), None)
    assert documents.absolute_floor == DOCUMENT_FLOOR > tools.absolute_floor == TOOL_FLOOR
    scores = np.array([[0.17, 0.05]], dtype=np.float32)
    assert select(scores, np.arange(2), 2, documents) == []
    assert [c.item for c in select(scores, np.arange(2), 2, tools)] == [0]
