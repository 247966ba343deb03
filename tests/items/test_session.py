"""A chat's session entries: seeded from the vault, checked when read, changed by hand."""

from __future__ import annotations

from smart_context.items.model import Item
from smart_context.items.session import resolve, seeded, session_of, with_item, without_item

ALWAYS = Item(type="rule", name="Spelling", include="always")
AGENT = Item(type="reference", name="Kyoto", include="agent")
OFF = Item(type="rule", name="Old", include="always", enabled=False)
TOOL = Item(type="tool", name="read_file", include="always", server_name="files")
VAULT = [ALWAYS, AGENT, OFF, TOOL]


def test_a_chat_without_a_session_has_the_vaults_enabled_always_items() -> None:
    assert session_of({}, VAULT) == seeded(VAULT)
    assert [e["name"] for e in seeded(VAULT)] == ["Spelling", "read_file"]
    assert seeded(VAULT)[1]["server_name"] == "files"


def test_malformed_entries_written_elsewhere_are_left_out() -> None:
    raw = [
        {"type": "rule", "name": "Spelling", "include_mode": "always", "extra": 1},
        {"type": "rule", "name": "Spelling", "include_mode": "agent"},  # not a session mode
        {"type": "note", "name": "x", "include_mode": "manual"},
        {"type": "rule", "name": 5, "include_mode": "manual"},
        "rule",
    ]
    assert session_of({"context_items": raw}, VAULT) == [
        {"type": "rule", "name": "Spelling", "include_mode": "always"}
    ]
    assert session_of({"context_items": "all"}, VAULT) == seeded(VAULT)


def test_adding_twice_keeps_one_and_removing_and_resolving() -> None:
    entries = with_item(with_item([], AGENT), AGENT)
    assert entries == [{"type": "reference", "name": "Kyoto", "include_mode": "manual"}]
    entries = [*entries, {"type": "rule", "name": "Old", "include_mode": "always"}]
    assert resolve(entries, VAULT) == [(AGENT, "manual")]  # a disabled item is not sent
    assert without_item(entries, ("reference", "Kyoto", None)) == entries[1:]
