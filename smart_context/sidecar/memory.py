"""Chat persistence: one JSON file per chat in ``.memory/`` (CONTRACT.md §2).

Guarantees, since several writers share a chat (the pipeline appending messages, a plugin
writing topics, maybe a second sidecar process on the same vault):

- **atomic**: a write goes to a temporary file in the same folder, is fsynced, then renamed
  over the chat file; a reader sees the old chat or the new one, never half of either;
- **serialised**: :meth:`ChatMemory.update_chat` holds an ``fcntl.flock`` on
  ``.memory/{chat_id}.lock`` from reading the latest copy to renaming the new one, so no two
  writers (threads or processes) interleave and no appended message is lost; an asyncio lock
  per chat keeps waiting coroutines from each tying up a worker thread;
- **never silently overwritten**: a chat file that is not valid JSON is renamed
  ``{chat_id}.json.corrupt-<timestamp>``, reported, and the chat starts again empty.

Blocking file work runs in worker threads so the event loop keeps streaming replies.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import logging
import os
import secrets
import string
import weakref
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from smart_context.atomic import write_atomic
from smart_context.paths import ChatId, chat_file, check_chat_id, memory_dir

ChatData = dict[str, Any]
ChatUpdate = Callable[[ChatData], ChatData]
DamageReport = Callable[[str, Path], None]
ChangeReport = Callable[[str, int], None]  # (chat_id, message_count) after its messages changed

DEFAULT_TITLE = "New chat"
_ID_ALPHABET = string.ascii_lowercase + string.digits
_ID_LENGTH = 10

log = logging.getLogger(__name__)


class DamagedChatError(ValueError):
    """The chat file is not a JSON object with a ``messages`` list."""


def now_iso() -> str:
    """The current UTC time as ISO 8601 with milliseconds, as stored on messages."""
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def new_chat_id() -> str:
    """A short random id that is url-safe and a valid file name (lowercase letters, digits)."""
    return "".join(secrets.choice(_ID_ALPHABET) for _ in range(_ID_LENGTH))


def empty_chat() -> ChatData:
    """What a chat that was never written looks like."""
    return {"messages": []}


def chat_json(data: ChatData) -> str:
    """The file text of a chat: readable UTF-8, or all-ASCII escapes when the data holds text
    that UTF-8 cannot encode (a lone surrogate from another tool), so the write never fails."""
    text = json.dumps(data, ensure_ascii=False)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(data, ensure_ascii=True)
    return text


def parse_chat(raw: bytes) -> ChatData:
    """The chat in ``raw``, or :class:`DamagedChatError` saying what is wrong with it."""
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DamagedChatError(f"not valid JSON ({exc})") from exc
    except RecursionError as exc:
        raise DamagedChatError("nested too deeply to read") from exc
    if not isinstance(data, dict):
        raise DamagedChatError(f"expected a JSON object, found {type(data).__name__}")
    if not isinstance(data.get("messages", []), list):
        raise DamagedChatError("'messages' is not a list")
    data.setdefault("messages", [])
    return data


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``path`` (created if needed) for the ``with`` block.

    Each call opens the file anew: flock locks belong to open file descriptions, so two
    threads of one process exclude each other exactly as two processes do.
    """
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the last descriptor releases the lock


class ChatMemory:
    """``host.memory``: ``load_chat``, ``save_chat``, ``update_chat`` over ``.memory/``.

    ``on_damaged(chat_id, set_aside_path)`` is called (possibly from a worker thread) when a
    damaged chat file was renamed out of the way; ``on_changed(chat_id, message_count)``, on
    the event loop, after a write changed a chat's messages (whoever wrote them).
    """

    def __init__(
        self,
        vault: Path,
        on_damaged: DamageReport | None = None,
        on_changed: ChangeReport | None = None,
    ) -> None:
        self.vault = Path(vault)
        self.on_damaged = on_damaged
        self.on_changed = on_changed
        # asyncio locks belong to one event loop; a thread running its own loop gets its own.
        self._locks: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, dict[str, asyncio.Lock]
        ] = weakref.WeakKeyDictionary()
        self._summaries: dict[str, tuple[tuple[int, int], dict[str, Any]]] = {}

    # -- the Memory protocol -------------------------------------------------------------

    async def load_chat(self, chat_id: str) -> ChatData:
        """The stored chat; ``{"messages": []}`` when it does not exist yet."""
        return await asyncio.to_thread(self._load_sync, check_chat_id(chat_id))

    async def save_chat(self, chat_id: str, data: ChatData) -> None:
        """Replace the stored chat with ``data`` (prefer :meth:`update_chat`: it loses nothing)."""
        snapshot = json.loads(json.dumps(data))  # fail before touching the file, and own a copy
        await self.update_chat(chat_id, lambda _old: snapshot)

    async def update_chat(self, chat_id: str, fn: ChatUpdate) -> ChatData:
        """Apply ``fn`` to the latest stored copy and store the result, atomically and locked.

        ``fn`` runs in a worker thread while the chat's file lock is held: keep it a quick,
        pure function of the data it is given. Returns the data as stored.
        """
        checked = check_chat_id(chat_id)
        if asyncio.iscoroutinefunction(fn):
            raise TypeError("update_chat needs a plain function fn(data) -> data, not a coroutine")
        async with self._lock_for(checked):
            # If the caller is cancelled the thread still finishes and releases the file lock,
            # so an update is either fully stored or not started.
            data, changed = await asyncio.to_thread(self._update_sync, checked, fn)
        if changed and self.on_changed is not None:
            messages = data.get("messages")
            self.on_changed(checked, len(messages) if isinstance(messages, list) else 0)
        return data

    # -- more for the sidecar ----------------------------------------------------------

    def exists(self, chat_id: str) -> bool:
        """Whether the chat has a file."""
        return chat_file(self.vault, check_chat_id(chat_id)).exists()

    async def create_chat(self, title: str | None = None) -> ChatData:
        """A new chat with a fresh id; returns its summary (``id``, ``title``, ...)."""
        while True:
            chat_id = new_chat_id()
            if not self.exists(chat_id):
                break
        stamp = now_iso()
        record: ChatData = {"messages": [], "created_at": stamp, "updated_at": stamp}
        if title:
            record["title"] = title
        await self.update_chat(chat_id, lambda old: {**record, **old})
        return {**summarize(chat_id, record, stamp), "created_at": stamp}

    async def list_chats(self) -> list[dict[str, Any]]:
        """``{"id", "title", "message_count", "updated_at"}`` per chat, most recent first."""
        return await asyncio.to_thread(self._list_sync)

    # -- internals --------------------------------------------------------------------

    def _lock_for(self, chat_id: ChatId) -> asyncio.Lock:
        per_loop = self._locks.setdefault(asyncio.get_running_loop(), {})
        return per_loop.setdefault(chat_id, asyncio.Lock())

    def _lock_path(self, chat_id: ChatId) -> Path:
        return memory_dir(self.vault) / f"{chat_id}.lock"

    def _load_sync(self, chat_id: ChatId) -> ChatData:
        try:
            return self._read(chat_id)
        except DamagedChatError:
            pass
        # Renames are atomic, so a damaged read is real damage, not a write in progress;
        # still, decide under the lock so two readers do not both set the file aside.
        with file_lock(self._ensure_dir(chat_id)):
            return self._read_locked(chat_id)

    def _update_sync(self, chat_id: ChatId, fn: ChatUpdate) -> tuple[ChatData, bool]:
        """The data as stored, and whether its messages changed."""
        with file_lock(self._ensure_dir(chat_id)):
            old = self._read_locked(chat_id)
            before = _messages_mark(old)  # taken first: ``fn`` may change ``old`` in place
            data = fn(old)
            if not isinstance(data, dict):
                raise TypeError(f"update_chat: fn returned {type(data).__name__}, not a dict")
            write_atomic(chat_file(self.vault, chat_id), chat_json(data))
            return data, _messages_mark(data) != before

    def _ensure_dir(self, chat_id: ChatId) -> Path:
        memory_dir(self.vault).mkdir(parents=True, exist_ok=True)
        return self._lock_path(chat_id)

    def _read(self, chat_id: ChatId) -> ChatData:
        """The chat on disk (an empty one if there is no file); raises DamagedChatError."""
        try:
            return parse_chat(chat_file(self.vault, chat_id).read_bytes())
        except FileNotFoundError:
            return empty_chat()

    def _read_locked(self, chat_id: ChatId) -> ChatData:
        """Read with the file lock held; a damaged file is set aside and an empty chat returned."""
        path = chat_file(self.vault, chat_id)
        try:
            return self._read(chat_id)
        except DamagedChatError as exc:
            aside = self._set_aside(path)
            log.error(
                "Chat %s: %s is damaged (%s). It was renamed to %s and the chat starts empty; "
                "the old content is still in that file.",
                chat_id,
                path.name,
                exc,
                aside.name,
            )
            if self.on_damaged is not None:
                self.on_damaged(chat_id, aside)
            return empty_chat()

    @staticmethod
    def _set_aside(path: Path) -> Path:
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
        aside = path.with_name(f"{path.name}.corrupt-{stamp}")
        counter = 1
        while aside.exists():
            aside = path.with_name(f"{path.name}.corrupt-{stamp}-{counter}")
            counter += 1
        os.replace(path, aside)
        return aside

    def _list_sync(self) -> list[dict[str, Any]]:
        folder = memory_dir(self.vault)
        if not folder.is_dir():
            return []
        chats = []
        for path in folder.glob("*.json"):
            chat_id = path.name[: -len(".json")]
            if chat_id.endswith(".embeddings") or path.name.startswith("."):
                continue
            try:
                chats.append(self._summary(check_chat_id(chat_id), path))
            except (ValueError, OSError) as exc:
                log.warning("Skipping %s in the chat list: %s", path.name, exc)
        chats.sort(key=lambda c: str(c["updated_at"]), reverse=True)
        return chats

    def _summary(self, chat_id: ChatId, path: Path) -> dict[str, Any]:
        # Listing reads every chat; remember summaries until a file changes.
        stat = path.stat()
        stamp = (stat.st_mtime_ns, stat.st_size)
        cached = self._summaries.get(chat_id)
        if cached is not None and cached[0] == stamp:
            return dict(cached[1])
        fallback = datetime.fromtimestamp(stat.st_mtime, UTC).isoformat(timespec="milliseconds")
        summary = summarize(chat_id, self._load_sync(chat_id), fallback)
        self._summaries[chat_id] = (stamp, summary)
        return dict(summary)


def _messages_mark(data: ChatData) -> tuple[int, str]:
    """What tells that a chat's messages changed: their number and the last one's id and text
    (messages are appended; a filter choice or new topics change neither)."""
    messages = data.get("messages")
    if not isinstance(messages, list) or not messages:
        return (0, "")
    last = messages[-1]
    if not isinstance(last, dict):
        return (len(messages), repr(last))
    return (len(messages), f"{last.get('id')}\x00{last.get('content')}")


def summarize(chat_id: str, data: ChatData, updated_fallback: str) -> dict[str, Any]:
    """The chat-list entry of a chat."""
    title = data.get("title")
    messages = data.get("messages", [])
    return {
        "id": chat_id,
        "title": title if isinstance(title, str) and title.strip() else DEFAULT_TITLE,
        "message_count": len(messages) if isinstance(messages, list) else 0,
        "updated_at": data.get("updated_at") or updated_fallback,
    }
