"""``host.memory`` in Tailor: chats through Tailor's ``memory.load_chat`` and ``memory.save_chat``.

Tailor's memory plugin reads and writes a whole chat file; nothing makes a read-modify-write
atomic, and Tailor's own writers hold a copy across awaits (its memory plugin appends each turn;
its old Smart Context plugin loaded a chat, waited for the model, then saved the stale copy: the
lost-message race). :meth:`TailorMemory.update_chat` keeps every message appended meanwhile:

1. our own updates of one chat are serialised (an asyncio lock), so they never race each other;
2. it reads the latest copy, applies ``fn`` (a quick pure function) and writes the result with
   nothing of ours awaited in between: no coroutine can append between our read and our write
   unless the host's commands themselves yield before writing, which Tailor's memory plugin does
   not (it writes synchronously inside its ``async def``);
3. it reads the chat back: if another writer that had read before our write has written since,
   our change is gone (its copy did not have it) but its messages are there; ``fn`` is applied
   again to that newer copy and written, up to :data:`ATTEMPTS` times. Applying ``fn`` again to
   the latest copy is the merge by message id: the other writer's messages are kept as they are
   and ours are put back.

What no read-then-write store can promise without a lock shared by every writer: a writer that
holds a stale copy and writes after our last read-back undoes our change (never a message: it
had every message we saw). Smart Context's changes are topics and its selection, which the next
pass writes again.
"""

from __future__ import annotations

import asyncio
import copy
import json
import logging
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from smart_context.errors import SmartContextError
from smart_context.host import ChatData

log = logging.getLogger("smart_context")

LOAD = "memory.load_chat"
SAVE = "memory.save_chat"
ATTEMPTS = 5
RETRY_PAUSE = 0.01  # seconds, times the attempt: another writer usually finishes within one


class CommandBus(Protocol):
    """What of Tailor's ``VaultBrain`` the memory needs: running another plugin's command."""

    async def execute_command(self, command_id: str, **kwargs: Any) -> Any:
        """The command's result; raises when it does not exist or fails."""


class TailorMemory:
    """``host.memory`` over Tailor's memory plugin, reached through ``brain`` (called each time:
    Tailor may replace its plugins on a vault restart)."""

    def __init__(self, brain: Callable[[], CommandBus]) -> None:
        self._brain = brain
        self._locks: dict[str, asyncio.Lock] = {}
        self.retries = 0  # how often a write had to be redone: for tests and the log

    async def load_chat(self, chat_id: str) -> ChatData:
        """The stored chat (``{"messages": []}`` when Tailor has none yet)."""
        result = await self._run(LOAD, chat_id=chat_id)
        data = result.get("data")
        if not isinstance(data, dict):
            raise SmartContextError(f"Tailor's {LOAD} returned no chat for {chat_id!r}.")
        return data

    async def save_chat(self, chat_id: str, data: ChatData) -> None:
        """Replace the stored chat with ``data`` (prefer :meth:`update_chat`: it loses nothing)."""
        await self._run(SAVE, chat_id=chat_id, data=_own_copy(data))

    async def update_chat(self, chat_id: str, fn: Callable[[ChatData], ChatData]) -> ChatData:
        """Apply ``fn`` to the latest stored copy and store the result; messages another writer
        appends meanwhile are kept (see the module's docstring). Returns the data as stored."""
        async with self._locks.setdefault(chat_id, asyncio.Lock()):
            for attempt in range(1, ATTEMPTS + 1):
                base = await self.load_chat(chat_id)
                written = _own_copy(fn(copy.deepcopy(base)))
                if written == base:  # nothing to store: Tailor rewrites whole files
                    return base
                await self._run(SAVE, chat_id=chat_id, data=written)
                stored = await self.load_chat(chat_id)
                if change_held(base, written, stored):
                    return stored
                self.retries += 1
                if attempt == ATTEMPTS:
                    break  # no pause before giving up
                log.info("Smart Context: chat %s was written meanwhile; applying again", chat_id)
                await asyncio.sleep(RETRY_PAUSE * attempt)
        raise SmartContextError(
            f"Chat {chat_id!r} kept being rewritten by another plugin; Smart Context's change "
            f"was not stored after {ATTEMPTS} attempts."
        )

    async def _run(self, command: str, **kwargs: Any) -> dict[str, Any]:
        """Run one of Tailor's memory commands; a missing plugin or a failure is our error."""
        try:
            result = await self._brain().execute_command(command, **kwargs)
        except Exception as exc:  # Tailor raises its own types; the message is what matters
            raise SmartContextError(
                f"Tailor's {command} failed ({exc}); is Tailor's memory plugin enabled "
                "([plugins.memory] enabled = true in .vault.toml)?"
            ) from exc
        if not isinstance(result, dict) or result.get("status") != "success":
            error = result.get("error") if isinstance(result, dict) else result
            raise SmartContextError(f"Tailor's {command} failed: {error}")
        return result


def change_held(
    base: Mapping[str, Any], written: Mapping[str, Any], stored: Mapping[str, Any]
) -> bool:
    """Whether ``stored`` still carries what ``fn`` changed from ``base`` to ``written``: every
    top-level key it set or removed, and every message (by id) it added, replaced or removed.
    Anything else in ``stored`` (another writer's messages and keys) is theirs to have."""
    for key in (set(base) | set(written)) - {"messages"}:
        if base.get(key, _ABSENT) != written.get(key, _ABSENT) and stored.get(
            key, _ABSENT
        ) != written.get(key, _ABSENT):
            return False
    before, after, now = _by_id(base), _by_id(written), _by_id(stored)
    for message_id, message in after.items():
        if before.get(message_id) != message and now.get(message_id) != message:
            return False
    return all(message_id in after or message_id not in now for message_id in before)


_ABSENT = object()


def _by_id(data: Mapping[str, Any]) -> dict[str, Any]:
    """The chat's messages by id (messages without an id cannot be told apart: skipped)."""
    messages = data.get("messages")
    if not isinstance(messages, list):
        return {}
    return {str(m["id"]): m for m in messages if isinstance(m, dict) and "id" in m}


def _own_copy(data: ChatData) -> ChatData:
    """A JSON copy of ``data``: it fails before anything is written, and no caller can change
    what was handed to Tailor afterwards."""
    try:
        copied = json.loads(json.dumps(data))
    except (TypeError, ValueError) as exc:
        raise SmartContextError(f"A chat could not be stored: it is not JSON ({exc}).") from exc
    if not isinstance(copied, dict):
        raise SmartContextError("A chat could not be stored: it is not a JSON object.")
    return copied
