"""Where a chat's files live, and the one gate every chat id passes through.

A chat id comes from the browser, the command line or another plugin; it may only ever name a
file directly inside ``.memory/``. We allow a conservative alphabet instead of trying to
blacklist ``..``, separators, drive letters and device names one by one.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import NewType

from smart_context.errors import ChatIdError

MEMORY_DIR = ".memory"
# No dots: ``notes.embeddings`` would otherwise be the chat file that is also chat ``notes``'s
# embedding cache, and ``x.lock`` or ``x.corrupt-…`` would collide with other companions.
_CHAT_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,127}")

ChatId = NewType("ChatId", str)
"""A chat id that passed :func:`check_chat_id`: the type checker keeps unchecked text out."""


def check_chat_id(chat_id: object) -> ChatId:
    """``chat_id`` as a :data:`ChatId` if it is safe to use as a file name inside ``.memory/``.

    Every chat id from outside (a host's ``ctx.metadata``, a command, a URL, the command line)
    passes here once; everything behind takes a :data:`ChatId`.
    """
    if not isinstance(chat_id, str) or not chat_id:
        raise ChatIdError("A chat id is required (a non-empty string).")
    if not _CHAT_ID.fullmatch(chat_id):
        raise ChatIdError(
            f"Chat id {chat_id[:80]!r} is not valid: use 1-128 letters, digits, '-' or '_', "
            "starting with a letter or digit."
        )
    return ChatId(chat_id)


def memory_dir(vault: Path) -> Path:
    """The vault's ``.memory`` folder."""
    return Path(vault) / MEMORY_DIR


def chat_file(vault: Path, chat_id: ChatId) -> Path:
    """``.memory/{chat_id}.json``."""
    return memory_dir(vault) / f"{chat_id}.json"


def set_aside_chat_files(vault: Path, chat_id: ChatId) -> list[Path]:
    """The copies of ``chat_id``'s file set aside as damaged (``{chat_id}.json.corrupt-{time}``),
    newest first. A chat id has no glob characters, so it is safe in the pattern."""
    aside = memory_dir(vault).glob(f"{chat_id}.json.corrupt-*")
    return sorted(aside, key=lambda path: path.name, reverse=True)


def embeddings_file(vault: Path, chat_id: ChatId) -> Path:
    """``.memory/{chat_id}.embeddings.json``."""
    return memory_dir(vault) / f"{chat_id}.embeddings.json"
