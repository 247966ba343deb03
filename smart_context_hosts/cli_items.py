"""``smart-context items VAULT [--query TEXT] [--chat ID] [--json]``: the vault's rules,
references and MCP tools, what agent selection adds for a message, and a chat's session and
selection settings."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, TextIO

from smart_context.paths import ChatId
from smart_context.shorten import shorten
from smart_context_hosts.cli_checks import check_chat
from smart_context_hosts.cli_reports import check_vault_folder
from smart_context_hosts.cli_services import running_services

PREVIEW = 60


async def show_items(
    vault: Path, query: str | None, as_json: bool, out: TextIO, chat_id: ChatId | None = None
) -> None:
    """Print the vault's items and their problems (with ``chat_id``: whether its session holds
    each); with ``query``, what agent selection adds, within that chat's settings."""
    from smart_context.commands import items as commands

    if chat_id is not None:
        check_vault_folder(vault)
        check_chat(vault, chat_id)  # a mistyped id is refused, as by context and topics
    async with running_services(vault, list_tools=True) as services:
        result = await commands.list_items(services, chat_id)
        if query is not None:
            result["selected"] = (await commands.search_items(services, query, chat_id))["items"]
    if as_json:
        print(json.dumps(result, indent=2, ensure_ascii=False), file=out)
        return
    for row in result["items"]:
        off = "" if row["enabled"] else "  (disabled)"
        mark = "* " if row.get("in_session") else ""
        name = f"{row['server_name']}.{row['name']}" if row["server_name"] else row["name"]
        priority = "   " if row["type"] == "tool" else row["priority"]
        print(
            f"{priority} {row['type']:<9} {row['include']:<9} {mark}{name}{off}  [{row['source']}]",
            file=out,
        )
    for problem in result["problems"]:
        print(f"problem: {problem['source']}: {problem['message']}", file=out)
    if chat_id is not None:
        print(f"\n* in the session of chat {chat_id}", file=out)
        _print_settings(result, chat_id, out)
    if query is not None:
        print(f"\nagent selection for {shorten(query, PREVIEW)!r}:", file=out)
        for row in result["selected"]:
            name = f"{row['server_name']}.{row['name']}" if row["server_name"] else row["name"]
            print(f"  {row['similarity_score']:.2f}  {row['type']:<9} {name}", file=out)
        if not result["selected"]:
            print("  nothing: no agent item is close enough", file=out)


SETTINGS_SHOWN = (
    ("rules and references", "context_top_k", "context_top_n", "context_include_score"),
    ("tools", "context_tools_top_k", "context_tools_top_n", "context_tools_include_score"),
)


def _print_settings(result: dict[str, Any], chat_id: ChatId, out: TextIO) -> None:
    """The chat's selection settings, as the panel shows them: the preset, the values for
    documents and for tools, the expansion, and which the chat sets over the vault's."""
    values = result["settings"]
    print(f"selection settings of chat {chat_id}: preset {result['preset']}", file=out)
    for heading, top_k, top_n, score in SETTINGS_SHOWN:
        print(
            f"  {heading}: top K {values[top_k]}, top N {values[top_n]}, "
            f"include score {values[score]}",
            file=out,
        )
    print(
        f"  expansion: depth {values['context_expansion_depth']}, threshold "
        f"{values['context_expansion_threshold']}, top N {values['context_expansion_top_n']}",
        file=out,
    )
    vault = result["vault_settings"]
    changed = [f"{key} {values[key]} (vault: {vault[key]})" for key in result["overrides"]]
    print("  set by the chat: " + (", ".join(changed) or "none (the vault's)"), file=out)
