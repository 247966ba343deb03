"""The labelled chats of the topic-click benchmark are well formed: a wrong label there would
move a reported figure without anyone noticing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parent.parent / "benchmarks" / "data"
SETS = ["topic_chats.json", "topic_chats_heldout.json", "topic_chats_blind.json"]


@pytest.mark.parametrize("name", SETS)
def test_every_message_names_one_of_its_chats_subjects(name: str) -> None:
    chats = json.loads((DATA / name).read_text(encoding="utf-8"))
    ids = [m["id"] for chat in chats for m in chat["messages"]]
    assert len(ids) == len(set(ids))
    assert len({chat["id"] for chat in chats}) == len(chats)
    for chat in chats:
        allowed = {*chat["subjects"], "smalltalk", "instruction"}
        used = {m["subject"] for m in chat["messages"]}
        assert used <= allowed, chat["id"]
        assert set(chat["subjects"]) <= used, chat["id"]  # no subject without a message
        assert {m["role"] for m in chat["messages"]} <= {"user", "assistant"}
        assert all(m["content"].strip() for m in chat["messages"])
        # instructions are the user's, as the detector assumes
        assert all(m["role"] == "user" for m in chat["messages"] if m["subject"] == "instruction")
