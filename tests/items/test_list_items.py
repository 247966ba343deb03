"""``smart_context.list_items`` as the panel and the "View context" dialog read it: the session's
mode of each item in it, and each item's text when asked for."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.conftest import write_chat


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    """A vault folder (the plugin's fixtures want a path, not the items' ``Vault`` helper)."""
    root = tmp_path / "vault"
    (root / ".memory").mkdir(parents=True)
    (root / "rules").mkdir()
    (root / "rules" / "spelling.md").write_text(
        "---\ninclude: always\npriority: 1\n---\nWrite British English.\n", encoding="utf-8"
    )
    (root / "rules" / "terse.md").write_text(
        "---\ninclude: manual\ndescription: Short answers\n---\nBe brief.\n", encoding="utf-8"
    )
    write_chat(root, "trip", [])
    return root


def by_name(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    assert result["status"] == "success", result
    return {row["name"]: row for row in result["items"]}


async def test_a_row_in_the_session_says_how_it_got_there(start: Any) -> None:
    running = await start()
    rows = by_name(await running.command("list_items", chat_id="trip"))
    assert rows["spelling"]["in_session"] and rows["spelling"]["include_mode"] == "always"
    assert not rows["terse"]["in_session"] and "include_mode" not in rows["terse"]
    assert "text" not in rows["spelling"]  # the panel's refreshes stay small

    add = running.commands.handlers["smart_context.add_item"]  # `name` is also the command's
    assert (await add(chat_id="trip", type="rule", name="terse"))["status"] == "success"
    rows = by_name(await running.command("list_items", chat_id="trip"))
    assert rows["terse"]["include_mode"] == "manual"


async def test_with_text_adds_each_items_text(start: Any) -> None:
    running = await start()
    rows = by_name(await running.command("list_items", chat_id="trip", with_text=True))
    assert rows["spelling"]["text"].strip() == "Write British English."
    assert rows["terse"]["text"].strip() == "Be brief."
    assert rows["terse"]["description"] == "Short answers"


async def test_with_text_must_be_a_boolean(start: Any) -> None:
    running = await start()
    result = await running.command("list_items", chat_id="trip", with_text="yes")
    assert result["status"] == "error" and "with_text" in result["error"]
