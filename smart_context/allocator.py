"""Memory the C allocator holds free, given back to the system.

A long-running server frees what a pass over a long chat allocated (a chat's parsed copy, a
batch's arrays), but glibc's ``malloc`` keeps most freed memory in its arenas, one per thread
that allocated, in pieces it cannot hand back by itself: measured, some 12 MB after a thousand
messages, as much as all the chat's live data. ``malloc_trim(0)`` returns every free page.
It walks the heap (some 30 ms a gigabyte, the interpreter's lock released), so it runs in a
thread of its own, when the background passes have all finished, at most every
:data:`MIN_GAP` seconds. Elsewhere than glibc nothing is done.
"""

from __future__ import annotations

import contextlib
import ctypes
import threading
import time

MIN_GAP = 5.0  # seconds between two trims

_lock = threading.Lock()
_last = -MIN_GAP
_running = False


def give_back() -> None:
    """Return the free memory the allocator holds to the system, now (glibc only)."""
    with contextlib.suppress(AttributeError, OSError):
        ctypes.CDLL(None).malloc_trim(0)


def give_back_soon() -> None:
    """:func:`give_back` in a thread of its own, unless one is under way or ran less than
    :data:`MIN_GAP` seconds ago."""
    global _last, _running
    with _lock:
        now = time.monotonic()
        if _running or now - _last < MIN_GAP:
            return
        _running, _last = True, now
    threading.Thread(target=_trim, name="smart-context-trim", daemon=True).start()


def _trim() -> None:
    global _running
    try:
        give_back()
    finally:
        with _lock:
            _running = False
