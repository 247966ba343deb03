"""Tool calls waiting for the user's yes or no (docs/contract.md §7, ``POST .../tool-calls/{id}``).

A call is registered *before* its ``tool_call`` event goes out, so a quick click can never
arrive ahead of it. An answer is only taken for the chat the call belongs to. A call nobody
answers is declined after :data:`APPROVAL_TIMEOUT_SECONDS` (``timeout_seconds`` on the
instance, which tests shorten), so a reply never hangs on a closed tab; stopping the sidecar
declines every open call so replies in flight can finish and be stored.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager

APPROVAL_TIMEOUT_SECONDS = 300.0


class ToolApprovals:
    """The open questions "may this tool call run?", by call id."""

    def __init__(self, timeout_seconds: float = APPROVAL_TIMEOUT_SECONDS) -> None:
        self.timeout_seconds = timeout_seconds
        self.closed = False
        self._pending: dict[str, tuple[str, asyncio.Future[bool]]] = {}

    @contextmanager
    def pending(self, chat_id: str, call_id: str) -> Iterator[asyncio.Future[bool]]:
        """Register the question for the ``with`` block; it is forgotten when the block ends."""
        future: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._pending[call_id] = (chat_id, future)
        try:
            yield future
        finally:
            if self._pending.get(call_id, (None, None))[1] is future:
                del self._pending[call_id]
            future.cancel()  # harmless when answered; ends the wait of an abandoned one

    async def wait(self, future: asyncio.Future[bool]) -> bool | None:
        """The user's answer, or ``None`` when none came within ``timeout_seconds``."""
        if self.closed:
            return False
        try:
            return await asyncio.wait_for(future, self.timeout_seconds)
        except TimeoutError:
            return None

    def answer(self, chat_id: str, call_id: str, approve: bool) -> bool:
        """Answer an open question of ``chat_id``; ``False`` when there is none by that id."""
        entry = self._pending.get(call_id)
        if entry is None or entry[0] != chat_id or entry[1].done():
            return False
        del self._pending[call_id]
        entry[1].set_result(approve)
        return True

    def is_pending(self, chat_id: str, call_id: str) -> bool:
        """Whether ``call_id`` of ``chat_id`` is waiting for an answer."""
        entry = self._pending.get(call_id)
        return entry is not None and entry[0] == chat_id and not entry[1].done()

    def decline_all(self) -> None:
        """Answer every open question, and any asked from now on, with no (the sidecar is
        stopping)."""
        self.closed = True
        for _, future in self._pending.values():
            if not future.done():
                future.set_result(False)
        self._pending.clear()
