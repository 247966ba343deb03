"""Chat persistence: one JSON file per chat in ``.memory/`` (docs/contract.md §2).

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
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from smart_context.background import to_thread
from smart_context.messages import conversation
from smart_context.paths import ChatId, chat_file, check_chat_id, memory_dir
from smart_context.record import json_safe
from smart_context.usage_stats import measured
from smart_context_hosts.sidecar import chatfile, vault_check
from smart_context_hosts.sidecar.chatfile import DamagedChatError, Parsed
from smart_context_hosts.sidecar.turn_counts import TurnCounts

ChatData = dict[str, Any]
ChatUpdate = Callable[[ChatData], ChatData]
DamageReport = Callable[[str, Path], None]
ChangeReport = Callable[[str, int], None]  # (chat_id, message_count) after its messages changed

DEFAULT_TITLE = "New chat"
_ID_ALPHABET = string.ascii_lowercase + string.digits
_ID_LENGTH = 10
CACHED_CHATS = 8  # parsed chats kept in memory, the most recently used
# What the chat this process holds keeps of a stored reply's record (docs/contract.md §9):
# the figures its readers use (the usage page: each reply's ``usage`` and ``cache``, the last
# measured reply's ``budget``). The rest (its id lists, scores and reasons by id, its topics,
# memory and layout parts) is kilobytes a reply in a long chat and most of the chat's memory:
# the file keeps it, and ``load_chat`` reads it back from the reply's line.
HELD = ("usage", "cache", "budget")

log = logging.getLogger(__name__)
Stamp = tuple[int, int, int, int]


class Slim(dict[str, Any]):
    """A stored reply's record as the chat in memory holds it: its :data:`HELD` members, the
    ``budget`` on the chat's last measured reply only (:func:`_one_budget`). ``span``: where
    its message is in the chat file."""

    __slots__ = ("span",)

    def __init__(self, members: dict[str, Any], span: tuple[int, int]) -> None:
        super().__init__(members)
        self.span = span


@dataclass(frozen=True)
class _Known:
    """A chat as this process last read or wrote it, valid while its file keeps ``stamp``."""

    stamp: Stamp
    parsed: Parsed


def now_iso() -> str:
    """The current UTC time as ISO 8601 with milliseconds, as stored on messages."""
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def new_chat_id() -> str:
    """A short random id that is url-safe and a valid file name (lowercase letters, digits)."""
    return "".join(secrets.choice(_ID_ALPHABET) for _ in range(_ID_LENGTH))


def empty_chat() -> ChatData:
    """What a chat that was never written looks like."""
    return {"messages": []}


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
        # Parsed chats, so a message costs the same in a long chat as in a short one: a file
        # is parsed again only when its stamp shows another writer changed it.
        self._known: OrderedDict[str, _Known] = OrderedDict()
        self._summaries: dict[str, tuple[Stamp, dict[str, Any]]] = {}  # for the chat list
        self._turns = TurnCounts()  # each chat's count of real turns, kept as it grows
        self._known_lock = threading.Lock()  # worker threads of different chats share both

    # -- the Memory protocol -------------------------------------------------------------

    async def load_chat(self, chat_id: str) -> ChatData:
        """The stored chat; ``{"messages": []}`` when it does not exist yet."""
        return await to_thread(self._load_sync, check_chat_id(chat_id))

    async def save_chat(self, chat_id: str, data: ChatData) -> None:
        """Replace the stored chat with ``data`` (prefer :meth:`update_chat`: it loses nothing)."""
        snapshot = json.loads(json.dumps(data))  # fail before touching the file, and own a copy
        await self.update_chat(chat_id, lambda _old: snapshot)

    async def update_chat(self, chat_id: str, fn: ChatUpdate) -> ChatData:
        """Apply ``fn`` to the latest stored copy and store the result, atomically and locked.

        ``fn`` runs in a worker thread while the chat's file lock is held: keep it a quick,
        pure function of the data it is given. It may change, add or remove messages and keys
        (each message it gets is its own copy, each reply's record whole), but not change
        values nested inside a message in place: replace the message instead. Returns the data
        as stored, as :meth:`chat_snapshot` holds it (a copy; each reply's record with its
        figures only, :data:`HELD`: :meth:`load_chat` reads it whole).
        """
        checked = check_chat_id(chat_id)
        if asyncio.iscoroutinefunction(fn):
            raise TypeError("update_chat needs a plain function fn(data) -> data, not a coroutine")
        return await self._write(checked, lambda: self._update_sync(checked, fn))

    async def chat_state(self, chat_id: str) -> ChatData:
        """The chat's keys other than ``messages`` as stored now, without copying the messages:
        a stat while the file is unchanged. Read-only (the values are the cache's). Lets the
        plugin see a change another process made (its topics, the selected bubbles)."""
        return _state_of(await self.chat_snapshot(chat_id))

    async def chat_snapshot(self, chat_id: str) -> ChatData:
        """The stored chat as this process holds it: read-only and shared, not a copy
        (:meth:`load_chat` copies every message, some 7 ms for 10,000). For readers that only
        read: the plugin's background passes and commands."""
        checked = check_chat_id(chat_id)
        # A file as this process last read or wrote it needs neither a lock nor a thread (a
        # stat takes microseconds): a write under way that has not touched it yet leaves the
        # chat as it was, and one that has changed its stamp is waited for, off the loop.
        stamp = _stamp(chat_file(self.vault, checked))
        with self._known_lock:
            known = self._known.get(checked)
        if stamp is None or known is None or known.stamp != stamp:
            return await to_thread(self._snapshot_sync, checked)
        return known.parsed.data

    def _snapshot_sync(self, chat_id: ChatId) -> ChatData:
        if not chat_file(self.vault, chat_id).exists():
            return empty_chat()  # as load_chat: no lock file made for a chat that is not there
        with file_lock(self._ensure_dir(chat_id)):
            return self._current(chat_id).data

    async def update_state(self, chat_id: str, fn: ChatUpdate) -> ChatData:
        """:meth:`update_chat` for the chat's keys other than ``messages``: ``fn`` gets them
        (without ``messages``; its own copies of the top-level lists and dicts, as
        :meth:`update_chat` gives) and returns them as they are to be; the messages stay as
        they are, so the file changes in place, in time that does not grow with the chat.
        Returns the chat as stored, read-only and shared (see :meth:`chat_snapshot`)."""
        checked = check_chat_id(chat_id)
        if asyncio.iscoroutinefunction(fn):
            raise TypeError("update_state needs a plain function fn(data) -> data")

        def put(old: ChatData) -> ChatData:
            new = fn(_own_keys(old))
            if not isinstance(new, dict):
                raise TypeError(f"update_state: fn returned {type(new).__name__}, not a dict")
            return {**_state_of(new), "messages": old["messages"]}

        return await self._write(checked, lambda: self._store_sync(checked, put, appended=True))

    # -- more for the sidecar ----------------------------------------------------------

    async def append_message(
        self,
        chat_id: str,
        message: Mapping[str, Any],
        *,
        updates: Mapping[str, Any] | None = None,
        defaults: Mapping[str, Any] | None = None,
        history: bool = False,
    ) -> list[dict[str, Any]]:
        """Append ``message``, set the keys of ``updates`` and those of ``defaults`` the chat has
        no (or a blank) value for: the pipeline's write, in time that does not grow with the
        chat. Returns the messages before it as copies when ``history`` is true, else ``[]``."""
        before = await self.append_messages(
            chat_id, [message], updates=updates, defaults=defaults, history=history
        )
        assert before is not None  # nothing was expected of the chat
        return before

    async def append_messages(
        self,
        chat_id: str,
        messages: Sequence[Mapping[str, Any]],
        *,
        updates: Mapping[str, Any] | None = None,
        defaults: Mapping[str, Any] | None = None,
        history: bool = False,
        expect: Callable[[ChatData], bool] | None = None,
    ) -> list[dict[str, Any]] | None:
        """:meth:`append_message` for several messages, and only if ``expect`` (given the chat
        as stored, to read, not change) says the chat is as the caller last saw it: ``None``,
        and nothing written, when it does not."""
        checked = check_chat_id(chat_id)
        # stored copies: they share no list or dict with the caller's, only strings (which
        # cannot change): a reply's record names its messages by the ids the chat holds
        own = [json_safe(m) for m in messages]
        before: list[dict[str, Any]] = []

        def append(data: ChatData) -> ChatData:
            if expect is not None and not expect(data):
                raise _Stale  # nothing is written: the lock is let go as it was taken
            stored = data["messages"]
            if history:
                try:  # one loop in C, as in _copy
                    before.extend(map(dict.copy, stored))
                except TypeError:  # a hand-edited file with something else than a message
                    before[:] = [dict(m) for m in stored if isinstance(m, dict)]
            data = {**data, "messages": [*stored, *own], **(updates or {})}
            for key, value in (defaults or {}).items():
                if not str(data.get(key) or "").strip():
                    data[key] = value
            return data

        try:
            await self._write(checked, lambda: self._store_sync(checked, append, appended=True))
        except _Stale:
            return None
        return before

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
        return await to_thread(self._list_sync)

    async def set_aside(self) -> list[dict[str, str]]:
        """The chat files set aside as damaged, ``{"chat_id", "file"}``, newest first."""
        return await to_thread(vault_check.set_aside_chats, self.vault)

    async def tidy(self) -> list[str]:
        """At start: finish the in-place writes a crash interrupted and tidy the temporary
        files it left (see :mod:`.vault_check`). Returns what was done, one line each."""
        return await to_thread(self._tidy_sync)

    # -- internals --------------------------------------------------------------------

    async def _write(self, chat_id: ChatId, work: Callable[[], tuple[ChatData, bool]]) -> ChatData:
        async with self._lock_for(chat_id):
            # If the caller is cancelled the thread still finishes and releases the file lock,
            # so an update is either fully stored or not started.
            # under the chat's lock, which a request may wait for: never behind other
            # background work (background.to_thread)
            data, changed = await asyncio.to_thread(work)
        if changed and self.on_changed is not None:
            messages = data.get("messages")
            self.on_changed(chat_id, len(messages) if isinstance(messages, list) else 0)
        return data

    def _tidy_sync(self) -> list[str]:
        done = []
        for journal in memory_dir(self.vault).glob(".*.json.journal"):
            try:
                chat_id = check_chat_id(journal.name[1 : -len(".json.journal")])
            except ValueError:
                continue
            with file_lock(self._ensure_dir(chat_id)):
                if chatfile.recover(chat_file(self.vault, chat_id)):
                    done.append(f"finished an interrupted write of {chat_id}.json")
        return done + vault_check.tidy_leftovers(self.vault)

    def _lock_for(self, chat_id: ChatId) -> asyncio.Lock:
        per_loop = self._locks.setdefault(asyncio.get_running_loop(), {})
        return per_loop.setdefault(chat_id, asyncio.Lock())

    def _lock_path(self, chat_id: ChatId) -> Path:
        return memory_dir(self.vault) / f"{chat_id}.lock"

    def _load_sync(self, chat_id: ChatId) -> ChatData:
        if not chat_file(self.vault, chat_id).exists():
            return empty_chat()
        with file_lock(self._ensure_dir(chat_id)):
            return _copy(self._current(chat_id, whole=True).data)

    def _whole(self, chat_id: ChatId, data: ChatData) -> ChatData:
        """``data`` (the chat as the file holds it now: call with the lock held) with each
        reply's record whole again, read from its message's line (:class:`Slim`)."""
        messages = data["messages"]
        slim = [
            i
            for i, m in enumerate(messages)
            if isinstance(m, dict) and isinstance(m.get("smart_context"), Slim)
        ]
        if not slim:
            return data
        spans = [messages[i]["smart_context"].span for i in slim]
        lines = chatfile.read_spans(chat_file(self.vault, chat_id), spans)
        out = list(messages)
        for i, line in zip(slim, lines, strict=True):
            try:
                read = chatfile.parse_value(line)
            except DamagedChatError as exc:  # only a writer that ignores the lock does this
                raise OSError(f"Chat {chat_id}: a reply's line changed under the lock") from exc
            if not isinstance(read, dict) or read.get("id") != messages[i].get("id"):
                raise OSError(f"Chat {chat_id}: a reply's line changed under the lock")
            out[i] = {**messages[i], "smart_context": read.get("smart_context")}
        return {**data, "messages": out}

    def _update_sync(self, chat_id: ChatId, fn: ChatUpdate) -> tuple[ChatData, bool]:
        """The data as stored, and whether its messages changed."""
        stored, changed = self._store_sync(chat_id, lambda old: fn(_copy(old)), appended=False)
        return _copy(stored), changed

    def _store_sync(
        self, chat_id: ChatId, fn: ChatUpdate, *, appended: bool
    ) -> tuple[ChatData, bool]:
        """Store ``fn`` of the current chat (which ``fn`` must not change); the stored data as
        this process holds it (the cache's own: replies' records :class:`Slim`), and whether
        its messages changed. ``appended``: ``fn`` only adds messages at the end and sets keys,
        so the file changes in place, and it gets the chat as held; else it gets the chat whole
        (each reply's record read back)."""
        path = chat_file(self.vault, chat_id)
        with file_lock(self._ensure_dir(chat_id)):
            current = self._current(chat_id, whole=not appended)
            data = fn(current.data)
            if not isinstance(data, dict):
                raise TypeError(f"update_chat: fn returned {type(data).__name__}, not a dict")
            if not isinstance(data.get("messages"), list):
                data = {**data, "messages": []}
            layout = current.layout
            in_place = layout is not None and (
                appended or _extends(current.data["messages"], data["messages"])
            )
            kept = 0  # the messages kept as they were, in the file and in memory
            if layout is not None and in_place:
                kept = layout.count
                layout = chatfile.write_change(path, layout, data)
            else:
                layout = chatfile.write_whole(path, data)
            # appended: the messages kept are the ones held already, slim; else whole
            stored = _slimmed(data, layout, kept if appended else 0)
            self._remember(chat_id, path, Parsed(stored, layout))
            return stored, _messages_mark(data) != _messages_mark(current.data)

    def _current(self, chat_id: ChatId, *, whole: bool = False) -> Parsed:
        """The chat as stored now, with the lock held: from memory when its file is unchanged.
        A damaged file is set aside and an empty chat returned. ``whole``: each reply's record
        whole (:class:`Slim`), else as this process holds it."""
        path = chat_file(self.vault, chat_id)
        if chatfile.recover(path):
            log.warning("Chat %s: finished a write that was interrupted.", chat_id)
        stamp = _stamp(path)
        if stamp is None:
            return Parsed(empty_chat(), None)
        with self._known_lock:
            known = self._known.get(chat_id)
            if known is not None and known.stamp == stamp:
                self._known.move_to_end(chat_id)
            else:
                known = None
        if known is not None:
            held = known.parsed
            if not whole:
                return held
            return Parsed(self._whole(chat_id, held.data), held.layout, held.odd_values)
        try:  # held slim from the start: a long chat's records are never all parsed at once
            parsed = chatfile.parse(path.read_bytes(), None if whole else _slim)
        except FileNotFoundError:
            return Parsed(empty_chat(), None)
        except DamagedChatError as exc:
            self._report_damage(chat_id, path, exc)
            return Parsed(empty_chat(), None)
        held = parsed
        if not whole:
            _one_budget(parsed.data["messages"], 0)
        elif parsed.layout is not None:  # read whole for the caller, held slim
            held = Parsed(_slimmed(parsed.data, parsed.layout, 0), parsed.layout, parsed.odd_values)
        if parsed.odd_values:
            log.warning(
                "Chat %s holds %d value(s) JSON cannot carry (NaN or Infinity); they are kept in "
                "the file and shown as null.",
                chat_id,
                parsed.odd_values,
            )
        self._remember(chat_id, path, held)
        return parsed if whole else held

    def _remember(self, chat_id: ChatId, path: Path, parsed: Parsed) -> None:
        stamp = _stamp(path)
        if stamp is None:
            return
        with self._known_lock:
            self._known[chat_id] = _Known(stamp, parsed)
            self._known.move_to_end(chat_id)
            while len(self._known) > CACHED_CHATS:
                self._known.popitem(last=False)

    def _ensure_dir(self, chat_id: ChatId) -> Path:
        memory_dir(self.vault).mkdir(parents=True, exist_ok=True)
        return self._lock_path(chat_id)

    def _report_damage(self, chat_id: ChatId, path: Path, exc: DamagedChatError) -> None:
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

    @staticmethod
    def _set_aside(path: Path) -> Path:
        aside = vault_check.free_name(path, "corrupt")
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
        # Listing reads every chat: remember each summary until its file changes.
        stamp = _stamp(path)
        with self._known_lock:
            cached = self._summaries.get(chat_id)
        if cached is not None and cached[0] == stamp:
            return dict(cached[1])
        fallback = datetime.fromtimestamp(path.stat().st_mtime, UTC).isoformat(
            timespec="milliseconds"
        )
        with file_lock(self._ensure_dir(chat_id)):
            data = self._current(chat_id).data
            summary = summarize(chat_id, data, fallback, self._turns.count(chat_id, data))
            stamp = _stamp(path)  # the read may have finished a journal or set the file aside
        if stamp is not None:
            with self._known_lock:
                self._summaries[chat_id] = (stamp, summary)
        return dict(summary)


def _stamp(path: Path) -> Stamp | None:
    """What changes whenever anyone writes the file (a rename changes the inode)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


class _Stale(Exception):
    """The chat is not as an ``expect`` of :meth:`ChatMemory.append_messages` wanted."""


def _own_keys(data: ChatData) -> ChatData:
    """A chat's keys other than its messages, their lists and dicts copies the caller may
    change."""
    return {
        k: (list(v) if isinstance(v, list) else dict(v) if isinstance(v, dict) else v)
        for k, v in data.items()
        if k != "messages"
    }


def _copy(data: ChatData) -> ChatData:
    """A copy of a chat whose messages and top-level lists and dicts the caller may change."""
    out = _own_keys(data)
    messages = data.get("messages", [])
    try:  # one loop in C: a 10,000-message chat is copied on every read and write
        out["messages"] = list(map(dict.copy, messages))
    except TypeError:  # a hand-edited file with something else than a message in it
        out["messages"] = [dict(m) if isinstance(m, dict) else m for m in messages]
    return out


def _slimmed(data: ChatData, layout: chatfile.Layout, first: int) -> ChatData:
    """``data`` as this process holds it: each reply's record from message ``first`` on with
    its figures only (:class:`Slim`), which its line in the file keeps whole; the ``budget``
    on the last measured reply only (:func:`_one_budget`)."""
    messages = data["messages"]
    out: list[Any] | None = None
    for i in range(first, len(messages)):
        figures = _figures(messages[i])
        if figures is not None:  # the span only then: most messages have nothing to leave out
            if out is None:
                out = list(messages)
            out[i] = _held(messages[i], figures, layout.span(i))
    if out is None:
        return data
    _one_budget(out, first)
    return {**data, "messages": out}


def _slim(message: Any, span: tuple[int, int]) -> Any:
    """``message`` as this process holds it (:func:`_slimmed`); ``span``: where its line is.
    Keeps its ``budget``: a chat read this way ends with :func:`_one_budget`."""
    figures = _figures(message)
    return message if figures is None else _held(message, figures, span)


def _held(message: Mapping[str, Any], figures: dict[str, Any], span: tuple[int, int]) -> Any:
    return {**message, "smart_context": Slim(figures, span)}


def _one_budget(messages: list[Any], first: int) -> None:
    """Leave a held ``budget`` on the last measured reply only (the one the usage page reads;
    about half a kilobyte a reply). ``messages[first:]`` were held just now and are changed in
    place; the measured reply before them, which a snapshot may share, is replaced. Only a
    :class:`Slim` loses it: its line in the file keeps it."""
    last = next((i for i in range(len(messages) - 1, first - 1, -1) if measured(messages[i])), -1)
    for i in range(first, len(messages)):
        record = _slim_record(messages[i])
        if record is not None and i != last:
            record.pop("budget", None)
    if last < 0:  # no new measured reply: the one that holds it still does
        return
    for i in range(first - 1, -1, -1):
        if measured(messages[i]):  # the one that held it
            record = _slim_record(messages[i])
            if record is not None and "budget" in record:
                kept = {k: v for k, v in record.items() if k != "budget"}
                messages[i] = {**messages[i], "smart_context": Slim(kept, record.span)}
            return


def _slim_record(message: Any) -> Slim | None:
    record = message.get("smart_context") if isinstance(message, dict) else None
    return record if isinstance(record, Slim) else None


def held_form(message: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``message`` as a chat in memory holds it (a reply's record with its figures
    only), for a caller that keeps messages: the proxy keeps a chat's last turn."""
    figures = _figures(message)
    return dict(message) if figures is None else {**message, "smart_context": figures}


def _figures(message: Any) -> dict[str, Any] | None:
    """The :data:`HELD` members of ``message``'s record; ``None`` when there is nothing to
    leave out."""
    record = message.get("smart_context") if isinstance(message, Mapping) else None
    if not isinstance(record, dict) or isinstance(record, Slim):
        return None
    members = {k: record[k] for k in HELD if k in record}
    return None if len(members) == len(record) else members


def _state_of(data: ChatData) -> ChatData:
    """A chat's keys other than its messages."""
    return {k: v for k, v in data.items() if k != "messages"}


def _extends(old: list[Any], new: list[Any]) -> bool:
    """Whether ``new`` is ``old`` with messages appended, none changed."""
    return len(new) >= len(old) and (new if len(new) == len(old) else new[: len(old)]) == old


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


def summarize(
    chat_id: str, data: ChatData, updated_fallback: str, turns: int | None = None
) -> dict[str, Any]:
    """The chat-list entry of a chat. Its ``message_count`` counts the conversation's messages,
    as the panel's "N of M in context" does: a notice of ours ("no model is configured") or a
    failed reply is stored on the chat but is no message of it. ``turns``: that count, when
    the caller keeps it (:class:`TurnCounts`)."""
    title = data.get("title")
    count = len(conversation(data.get("messages"))) if turns is None else turns
    return {
        "id": chat_id,
        "title": title if isinstance(title, str) and title.strip() else DEFAULT_TITLE,
        "message_count": count,
        "updated_at": data.get("updated_at") or updated_fallback,
    }
