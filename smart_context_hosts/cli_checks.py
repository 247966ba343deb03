"""What the command line refuses before it shows anything: a chat the vault does not have, a
topic the chat does not have. Either would otherwise look like an answer (``0 of 0 messages``,
or a filter on a label scored alone), so each error names what does exist."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from smart_context.chats import ChatView
from smart_context.errors import SmartContextError
from smart_context.paths import ChatId, chat_file, set_aside_chat_files
from smart_context.usage_stats import chat_files

LISTED = 20  # names shown in an error; the rest are counted


def listing(names: Sequence[str]) -> str:
    """``names`` joined for an error message: the first :data:`LISTED`, then how many more."""
    shown = ", ".join(names[:LISTED])
    more = len(names) - LISTED
    return shown + (f" and {more} more" if more > 0 else "")


def check_chat(vault: Path, chat_id: ChatId) -> None:
    """Refuse ``chat_id`` unless the vault has its file; name the file it was set aside as when
    it was damaged, else the chats the vault has."""
    if chat_file(vault, chat_id).exists():
        return
    aside = set_aside_chat_files(vault, chat_id)
    if aside:
        raise SmartContextError(
            f"the file of chat {chat_id} was damaged and set aside as .memory/{aside[0].name}; "
            "recover what you need from it (smart-context doctor lists such files)."
        )
    chats = [str(chat) for chat, _path in chat_files(vault)]
    known = f"Its chats: {listing(chats)}." if chats else "It has no chats yet."
    raise SmartContextError(f"{vault} has no chat {chat_id}. {known}")


def check_loaded(vault: Path, folder: Path, chat_id: ChatId) -> None:
    """After the plugin read ``chat_id`` in ``folder``: refuse a chat whose file it had to set
    aside as damaged. ``folder`` is ``vault`` itself (the file really was set aside) or the
    scratch copy a showing command runs on (the vault's file was left as it is)."""
    if folder == vault or chat_file(folder, chat_id).exists():
        check_chat(vault, chat_id)
        return
    raise SmartContextError(
        f"the file of chat {chat_id} is damaged: .memory/{chat_id}.json cannot be read. It was "
        "left as it is; the sidecar sets it aside when it opens the chat "
        "(smart-context doctor lists damaged files)."
    )


def check_topics(view: ChatView, chat_id: ChatId, topics: Sequence[str]) -> None:
    """Refuse topic labels the chat does not have, naming those it has (its regular topics:
    the sticky one is always in context, never a filter)."""
    labels = [query.label for query in view.queries]
    unknown = [topic for topic in topics if topic not in labels]
    if not unknown:
        return
    if labels:
        known = f"Its topics: {listing([repr(label) for label in labels])}."
    else:
        known = f"It has no topics yet: smart-context topics VAULT {chat_id} --save maps it."
    names = ", ".join(map(repr, unknown))
    raise SmartContextError(f"chat {chat_id} has no topic {names}. {known}")
