"""The command line's reports that read the vault's files and load no model:
``smart-context stats VAULT [--json]`` (token usage per chat), ``smart-context memories VAULT
[--json]`` (the stored memories, the user's data, exported) and ``smart-context doctor VAULT``
(damaged files and crash leftovers). None of them writes."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TextIO

from smart_context.commands.memory import memory_row
from smart_context.errors import SmartContextError
from smart_context.memory.export import read_memories
from smart_context.paths import memory_dir
from smart_context.shorten import shorten
from smart_context.usage_stats import Totals, vault_result, vault_usage

TITLE_WIDTH = 28
CELL_WIDTH = 12
STATS_HEADER = (
    *("replies", "sent", "full history", "ratio", "reported"),
    *("cached", "billed", "plain bill", "saved"),
)
MEMORY_PREVIEW = 72


def check_vault_folder(vault: Path) -> None:
    """Refuse a folder that is not a vault before reading anything."""
    if not memory_dir(vault).is_dir():
        raise SmartContextError(f"{vault} is not a vault: it has no .memory folder.")


def show_stats(vault: Path, as_json: bool, out: TextIO, err: TextIO) -> int:
    """Print each chat's replies, tokens sent, the whole history's, the ratio, the server's
    count, the tokens cached (``~``: some are our estimate) and the bill beside the plain
    client's, with the share saved; then the total. 1 when some chat file could not be read
    (each is named)."""
    check_vault_folder(vault)
    found = vault_usage(vault)
    if as_json:
        print(json.dumps(vault_result(found), indent=2, ensure_ascii=False), file=out)
    else:
        print(_row("chat", STATS_HEADER), file=out)
        for chat in found.chats:
            print(_stats_line(_label(chat.chat_id, chat.title), chat.totals), file=out)
        print(_stats_line("total", found.total), file=out)
    for path, why in found.damaged:
        print(f"smart-context: skipped {path}: {why}", file=err)
    return 1 if found.damaged else 0


def _label(chat_id: str, title: str) -> str:
    text = f"{chat_id} {title}".strip() if title and title != chat_id else chat_id
    return shorten(" ".join(text.split()), TITLE_WIDTH)


def _row(label: str, cells: tuple[str, ...]) -> str:
    return f"{label:<{TITLE_WIDTH}} " + " ".join(f"{c:>{CELL_WIDTH}}" for c in cells)


def _stats_line(label: str, totals: Totals) -> str:
    figures = totals.as_dict()
    ratio = "-" if figures["ratio"] is None else f"{figures['ratio']:.2f}x"
    reported = f"{totals.reported_prompt_tokens:,}" if totals.reported_replies else "-"
    replies = f"{totals.replies}"
    if totals.measured != totals.replies:  # older replies were stored without figures
        replies = f"{totals.measured}/{totals.replies}"
    cells = (replies, f"{totals.sent_tokens:,}", f"{totals.full_tokens:,}", ratio, reported)
    return _row(label, cells + _bill_cells(totals))


def _bill_cells(totals: Totals) -> tuple[str, str, str, str]:
    """Cached (``~``: some of it our estimate), billed, the plain client's bill, and the share
    of it saved (negative: lost)."""
    if not totals.measured:
        return ("-", "-", "-", "-")
    guessed = "~" if totals.cached_reported_replies < totals.measured else ""
    saved = "-"
    if totals.plain_billed > 0:
        saved = f"{round(100 * (totals.plain_billed - totals.billed) / totals.plain_billed)}%"
    return (
        f"{guessed}{totals.cached_tokens:,}",
        f"{round(totals.billed):,}",
        f"{round(totals.plain_billed):,}",
        saved,
    )


def show_memories(vault: Path, as_json: bool, out: TextIO, err: TextIO) -> int:
    """Print every stored memory (``--json``: all their fields, for keeping or moving them)."""
    check_vault_folder(vault)
    memories = read_memories(vault)
    if memories is None:
        print(
            f"smart-context: {vault} has no memory database yet: no memories are stored.", file=err
        )
        memories = []
    rows = [memory_row(m) for m in memories]  # as list_memories answers
    if as_json:
        print(json.dumps({"memories": rows}, indent=2, ensure_ascii=False), file=out)
        return 0
    print(f"{'id':>5}  {'chat':<16} {'importance':>10}  {'updated':<16}  memory", file=out)
    for row in rows:
        chat = row["chat_id"] or "(every chat)"
        updated = time.strftime("%Y-%m-%d %H:%M", time.localtime(row["updated_at"]))
        text = shorten(" ".join(str(row["content"]).split()), MEMORY_PREVIEW)
        print(
            f"{row['id']:>5}  {chat:<16} {row['importance']:>10.2f}  {updated:<16}  {text}",
            file=out,
        )
    print(f"{len(rows)} memories", file=out)
    return 0


def show_doctor(vault: Path, out: TextIO) -> int:
    """Print the vault's damaged files and leftovers, changing nothing; 1 when there are any."""
    from smart_context_hosts.sidecar.vault_check import check_vault

    check_vault_folder(vault)
    report = check_vault(vault)
    sections = [
        (
            "Chat files that cannot be read (the sidecar sets each aside when the chat is opened)",
            [f"{path}: {why}" for path, why in report.damaged],
        ),
        (
            "Files set aside as damaged (their content is kept; recover what you need, then "
            "delete them)",
            report.set_aside,
        ),
        (
            "Messages saved from an interrupted write (compare with the chat, then delete)",
            report.recovered,
        ),
        (
            "Leftovers of interrupted writes (the sidecar tidies them when it starts)",
            report.leftovers,
        ),
    ]
    if report.clean:
        print(f"{vault}: no damaged files, no leftovers.", file=out)
        return 0
    for title, lines in sections:
        if lines:
            print(f"{title}:", file=out)
            for line in lines:
                print(f"  {line}", file=out)
    return 1
