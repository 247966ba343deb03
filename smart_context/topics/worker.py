"""The offline extractor in a process of its own, so a map never holds the request path up.

Mapping a long chat is seconds of pure Python (every message's words and standing
instructions). In a thread of the serving process it takes the interpreter's lock from the
event loop: with a team's chats mapping, a request's few milliseconds of work waited up to half
a second, a lock switch at a time. In a process of its own, at a lower CPU priority, it takes
what the requests leave of the cores.

Each extractor thread (:data:`smart_context.topics.extract._EXTRACTORS`) keeps one worker
process, started on its first map and reused. A job goes down the worker's stdin as one
length-prefixed pickle (the messages, their vectors, the previous labels, whether phrases may be
embedded); the worker answers on its stdout with frames of its own:

- ``("phrases", [str, ...])``: label candidates to embed; the thread asks the serving process's
  embedder (the same space as the message vectors) and sends ``("vectors", matrix)`` or
  ``("no vectors", reason)`` back;
- ``("done", ExtractedTopics)`` or ``("failed", exception)``.

Only what the extractor reads crosses: each message's id, role and bounded text, and the
vectors. A worker that cannot start or dies mid-job (killed, out of memory) raises
:class:`WorkerGone`; the caller maps in its own thread instead, and when no worker ever
answered (none can run here) none is tried again (``log`` says why once). Frames are pickles
between this process and the child it started: nothing from outside reads or writes them.
"""

from __future__ import annotations

import contextlib
import logging
import os
import pickle
import select
import struct
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

import numpy as np

from smart_context.allocator import give_back, resident_bytes
from smart_context.background import NICENESS
from smart_context.errors import EmbeddingError, SmartContextError
from smart_context.messages import message_text
from smart_context.topics.model import ExtractedTopics
from smart_context.topics.offline.text import MAX_MESSAGE_CHARS
from smart_context.vectors.ops import Matrix

log = logging.getLogger(__name__)

_LENGTH = struct.Struct(">Q")
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])  # holds smart_context/
# the child finds this package where the parent did (a host may load it from a folder)
_CHILD_MAIN = (
    "import sys; sys.path.insert(0, {root!r}); "
    "from smart_context.topics.worker import serve; serve()"
)
PhraseVectors = Callable[[Sequence[str]], Matrix]
# what a job may leave resident before the worker starts afresh (_restart); a new worker takes
# about 0.2 s, a map that leaves this much (a long chat's) several times longer
MAX_LEFT_BEHIND = 4 * 1024 * 1024
IDLE_BEFORE_RESTART = 0.5  # seconds without a job after one that left that much
RESTARTED = "restarted"  # the argument a restarted worker is given
_LEFT_BEHIND_VARIABLE = "SMART_CONTEXT_TOPIC_WORKER_LEFT_BEHIND"


class WorkerGone(Exception):
    """The worker process could not start, or stopped before it answered."""


def slim(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, str]]:
    """What the extractor reads of each message: its id, role and bounded text."""
    return [
        {
            "id": str(m.get("id", "")),
            "role": str(m.get("role")),
            "content": message_text(m)[:MAX_MESSAGE_CHARS],
        }
        for m in messages
    ]


def write_frame(stream: IO[bytes], value: Any) -> None:
    data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_LENGTH.pack(len(data)))
    stream.write(data)
    stream.flush()


def read_frame(stream: IO[bytes]) -> Any:
    """The next frame; ``EOFError`` when the other side has gone."""
    head = stream.read(_LENGTH.size)
    if len(head) < _LENGTH.size:
        raise EOFError("the other side closed the pipe")
    size = _LENGTH.unpack(head)[0]
    data = stream.read(size)
    if len(data) < size:
        raise EOFError("the other side closed the pipe mid-frame")
    return pickle.loads(data)  # noqa: S301 (our own child's frames, on pipes only we hold)


class Failed(Exception):
    """The job failed in the worker, which is ready for the next one; ``error`` says why."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(str(error))
        self.error = error


class Worker:
    """One worker process, driven by one thread at a time."""

    def __init__(self) -> None:
        self._process: subprocess.Popen[bytes] | None = None
        self.answered = False  # whether a worker of this one ever answered: then it can run

    def _start(self) -> subprocess.Popen[bytes]:
        if self._process is not None and self._process.poll() is None:
            return self._process
        self.stop()  # one that ended by itself: its pipes are closed, it is reaped
        if not sys.executable:
            raise WorkerGone("this Python does not say where its interpreter is")
        try:
            self._process = subprocess.Popen(  # noqa: S603 (this Python, our own code)
                [sys.executable, "-c", _CHILD_MAIN.format(root=_PACKAGE_ROOT)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                # the child's own errors reach the serving process's log stream
                stderr=None,
                close_fds=True,
            )
        except OSError as exc:
            raise WorkerGone(f"could not start {sys.executable}: {exc}") from exc
        return self._process

    def extract(
        self,
        messages: Sequence[Mapping[str, Any]],
        vectors: Matrix,
        previous: Sequence[str],
        phrase_vectors: PhraseVectors | None,
    ) -> ExtractedTopics:
        """``extract_offline`` of the arguments, run in the worker; the phrases it asks for
        are embedded here by ``phrase_vectors``."""
        process = self._start()
        assert process.stdin is not None and process.stdout is not None
        job = (slim(messages), np.asarray(vectors), list(previous), phrase_vectors is not None)
        try:
            write_frame(process.stdin, job)
            while True:
                kind, value = read_frame(process.stdout)
                self.answered = True
                if kind == "phrases":
                    write_frame(process.stdin, _embedded(phrase_vectors, value))
                elif kind == "done":
                    found: ExtractedTopics = value
                    return found
                elif kind == "failed":
                    raise Failed(value)
                else:
                    raise WorkerGone(f"the worker said {kind!r}")
        except Failed as failed:  # the worker finished the job: it takes the next one
            raise failed.error from None
        except (OSError, EOFError, pickle.UnpicklingError) as exc:
            self.stop()
            raise WorkerGone(f"the worker stopped ({exc})") from exc
        except BaseException:  # the worker is mid-job (an embedder's error): it cannot go on
            self.stop()
            raise

    def stop(self) -> None:
        """End the worker (it also ends when this process closes its stdin, or exits)."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.kill()
            process.wait()
        for stream in (process.stdin, process.stdout) if process is not None else ():
            if stream is not None:
                with contextlib.suppress(OSError):  # a frame half sent to a dead worker
                    stream.close()


def _embedded(phrase_vectors: PhraseVectors | None, phrases: Sequence[str]) -> tuple[str, Any]:
    """The answer to a worker's ``("phrases", ...)``."""
    if phrase_vectors is None:
        return ("no vectors", "no phrase embedder")
    try:
        return ("vectors", np.asarray(phrase_vectors(phrases)))
    except SmartContextError as exc:  # the labels come from key words, as in this process
        return ("no vectors", str(exc))


_local = threading.local()
_unavailable: list[str] = []  # why a worker could not start: then every map stays in-thread
_lock = threading.Lock()


def extract_in_worker(
    messages: Sequence[Mapping[str, Any]],
    vectors: Matrix,
    previous: Sequence[str],
    phrase_vectors: PhraseVectors | None = None,
) -> ExtractedTopics:
    """``extract_offline`` in this thread's worker process; in this thread when no worker can
    run here, or when the worker stops mid-job (it starts again for the next map)."""
    from smart_context.topics.offline.cluster import extract_offline

    if not _unavailable:
        worker: Worker | None = getattr(_local, "worker", None)
        if worker is None:
            worker = _local.worker = Worker()
        try:
            return worker.extract(messages, vectors, previous, phrase_vectors)
        except WorkerGone as exc:
            with _lock:
                if not worker.answered and not _unavailable:  # none ever ran: do not try again
                    _unavailable.append(str(exc))
                    log.warning(
                        "Smart Context: topic maps run in the serving process (%s): a long "
                        "chat's map may slow requests while it runs",
                        exc,
                    )
                elif worker.answered:
                    log.warning("Smart Context: the topic worker stopped (%s); mapping here", exc)
    return extract_offline(messages, vectors, previous, phrase_vectors=phrase_vectors)


def serve() -> None:
    """The worker's main loop: jobs from stdin until it closes."""
    from smart_context.topics.offline.cluster import extract_offline

    # frames own the real stdout; anything printed goes to stderr
    stdout = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    stdin = sys.stdin.buffer
    # a map can wait; the requests of the process that started this one cannot (once: a
    # restarted worker is already below them)
    if RESTARTED not in sys.argv[1:]:
        with contextlib.suppress(AttributeError, OSError):  # no nice() on Windows
            os.nice(NICENESS)
    started = resident_bytes()
    while True:
        try:
            job = read_frame(stdin)
        except EOFError:
            return
        write_frame(stdout, _answer(job, extract_offline, stdin, stdout))
        # idle until the next job, holding nothing of this one: a long chat's messages and
        # vectors are tens of megabytes, which the allocator is asked to give back
        del job
        give_back()
        if _left_behind(started, resident_bytes()) and not _job_within(stdin, IDLE_BEFORE_RESTART):
            _restart(stdout)


def _job_within(stdin: IO[bytes], seconds: float) -> bool:
    """Whether the next job (or the end of the pipe) comes within ``seconds``: a worker kept
    busy by back-to-back maps (a team's chats) restarts in a pause, not after each. Nothing of
    the next job is buffered yet: the serving process sends it only after this one's answer."""
    try:
        return bool(select.select([stdin.fileno()], [], [], seconds)[0])
    except (OSError, ValueError):  # no select() on a pipe (Windows): no restart either
        return True


def _left_behind(started: int | None, now: int | None) -> bool:
    """Whether a job left more than :data:`MAX_LEFT_BEHIND` bytes resident (the limit
    ``SMART_CONTEXT_TOPIC_WORKER_LEFT_BEHIND`` overrides, for tests)."""
    if started is None or now is None:
        return False
    limit = os.environ.get(_LEFT_BEHIND_VARIABLE, "")
    return now - started > (int(limit) if limit.isdigit() else MAX_LEFT_BEHIND)


def _restart(stdout: IO[bytes]) -> None:
    """This worker again, as a fresh interpreter in the same process, pipes and priority
    (after a job that left too much resident, once no other came for a moment).

    Python frees its small-object arenas only when no object is left in them, so a long
    chat's map leaves megabytes resident that ``malloc_trim`` cannot return (measured: 36 MB
    before a 2,000-message chat's maps, 41-43 MB after). Nothing is lost: the serving process
    sends the next job only after this one's answer, so no byte of it has been read yet, and it
    waits in the pipe for the new interpreter. When the ``exec`` fails, this one goes on."""
    with contextlib.suppress(OSError):
        os.dup2(stdout.fileno(), 1)  # the frames' pipe on stdout again, as the parent started it
        os.execv(  # noqa: S606 (this Python, our own code, as Worker._start)
            sys.executable,
            [sys.executable, "-c", _CHILD_MAIN.format(root=_PACKAGE_ROOT), RESTARTED],
        )
    with contextlib.suppress(OSError):
        os.dup2(2, 1)  # not restarted: anything printed goes to stderr again


def _answer(
    job: Any, extract: Callable[..., Any], stdin: IO[bytes], stdout: IO[bytes]
) -> tuple[str, Any]:
    """What the worker answers a job: ``("done", topics)`` or ``("failed", exception)``."""
    messages, vectors, previous, wants_phrases = job

    def phrase_vectors(phrases: Sequence[str]) -> Matrix:
        write_frame(stdout, ("phrases", list(phrases)))
        kind, value = read_frame(stdin)
        if kind != "vectors":
            raise EmbeddingError(str(value))
        out: Matrix = value
        return out

    try:
        found = extract(
            messages, vectors, previous, phrase_vectors=phrase_vectors if wants_phrases else None
        )
        return ("done", found)
    # any failure: the serving process raises it in its thread
    except Exception as exc:  # noqa: BLE001
        return ("failed", _portable(exc))


def _portable(exc: Exception) -> Exception:
    """``exc``, or a ``RuntimeError`` saying it when it does not survive a pickle (an exception
    with arguments of its own)."""
    try:
        pickle.loads(pickle.dumps(exc))  # noqa: S301 (what the other side will read)
    except Exception:  # noqa: BLE001
        return RuntimeError(f"{type(exc).__name__}: {exc}")
    return exc
