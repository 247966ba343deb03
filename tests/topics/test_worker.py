"""The offline extractor in a worker process: the same map as in-process, phrases embedded by
the serving process, and a map made here when the worker cannot start or dies mid-job."""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from smart_context.errors import EmbeddingError
from smart_context.topics import worker
from smart_context.topics.offline.cluster import extract_offline
from smart_context.vectors.ops import Matrix, normalize_rows
from tests.fakes import make_messages, word_vector

TEXTS = [
    "How do I proof sourdough bread overnight in the fridge?",
    "Sourdough bread proofs overnight in the fridge at 4 degrees.",
    "Always answer in French.",
    "How do I cancel an asyncio task in Python?",
    "Call task.cancel() and await the asyncio task.",
    "Which sourdough starter flour works best?",
    "Rye flour feeds a sourdough starter well.",
    "Does asyncio gather cancel the other tasks?",
    "Asyncio gather cancels nothing unless you ask it to.",
]


def embed(texts: Sequence[str]) -> Matrix:
    return normalize_rows(np.stack([word_vector(t) for t in texts]))


@pytest.fixture
def chat() -> tuple[list[dict[str, Any]], Matrix]:
    messages = make_messages(TEXTS * 2)
    return messages, embed([m["content"] for m in messages])


@pytest.fixture
def fresh(monkeypatch: pytest.MonkeyPatch) -> worker.Worker:
    """A worker of the test's own (stopped at the end), and none of the module's."""
    monkeypatch.setattr(worker, "_local", threading.local())
    monkeypatch.setattr(worker, "_unavailable", [])
    own = worker.Worker()
    yield own
    own.stop()
    module_worker = getattr(worker._local, "worker", None)  # one extract_in_worker started
    if module_worker is not None:
        module_worker.stop()


def test_the_worker_maps_as_this_process_does_and_asks_here_for_phrase_vectors(
    chat: tuple[list[dict[str, Any]], Matrix], fresh: worker.Worker
) -> None:
    messages, vectors = chat
    asked: list[tuple[int, int]] = []  # (process, phrases) of each call

    def phrases(texts: Sequence[str]) -> Matrix:
        asked.append((os.getpid(), len(texts)))
        return embed(texts)

    found = fresh.extract(messages, vectors, ["Bread"], phrases)
    here = extract_offline(messages, vectors, ["Bread"], phrase_vectors=embed)
    assert found == here and found.topics and found.sticky_ids == ("m2",)
    assert found.notes == here.notes
    assert asked and all(pid == os.getpid() for pid, _ in asked)
    # a second job reuses the same process
    pid = fresh._process.pid if fresh._process else None
    assert fresh.extract(messages, vectors, [], None) == extract_offline(messages, vectors, [])
    assert fresh._process is not None and fresh._process.pid == pid


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc: resident memory")
def test_a_job_that_leaves_memory_behind_restarts_the_worker_in_its_process_and_pipes(
    chat: tuple[list[dict[str, Any]], Matrix],
    fresh: worker.Worker,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every job leaves more than no bytes at all, so each ends in a fresh interpreter: the same
    process (pid, pipes, priority), whose next jobs answer as the first did."""
    messages, vectors = chat
    monkeypatch.setenv("SMART_CONTEXT_TOPIC_WORKER_LEFT_BEHIND", "0")
    first = fresh.extract(messages, vectors, ["Bread"], embed)
    assert fresh._process is not None
    pid = fresh._process.pid
    niceness = os.getpriority(os.PRIO_PROCESS, pid)

    def restarted() -> bool:  # a restarted worker is given the argument that says so
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            return worker.RESTARTED.encode() in cmdline.read().split(b"\0")

    deadline = time.monotonic() + 30
    while not restarted() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert restarted()
    for _ in range(2):
        assert fresh.extract(messages, vectors, ["Bread"], embed) == first
        assert fresh._process.pid == pid and fresh._process.poll() is None
        assert os.getpriority(os.PRIO_PROCESS, pid) == niceness  # lowered once, not again


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc: resident memory")
@pytest.mark.parametrize("pause", [0.0, 0.45, 0.5, 0.55, 0.7])
def test_a_job_sent_while_the_worker_restarts_is_answered(
    chat: tuple[list[dict[str, Any]], Matrix],
    fresh: worker.Worker,
    monkeypatch: pytest.MonkeyPatch,
    pause: float,
) -> None:
    """The next job sent before, as and after the pause that starts the restart ends: it waits
    in the pipe for whichever interpreter reads it, and is answered as the first."""
    messages, vectors = chat
    monkeypatch.setenv("SMART_CONTEXT_TOPIC_WORKER_LEFT_BEHIND", "0")
    first = fresh.extract(messages, vectors, ["Bread"], embed)
    time.sleep(pause)
    assert fresh.extract(messages, vectors, ["Bread"], embed) == first


def test_a_restart_that_cannot_exec_leaves_the_worker_serving_with_its_output_on_stderr(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    moves: list[tuple[int, int]] = []

    def cannot_exec(*args: Any) -> None:
        raise OSError("no such interpreter")

    monkeypatch.setattr(worker.os, "dup2", lambda old, new: moves.append((old, new)))
    monkeypatch.setattr(worker.os, "execv", cannot_exec)

    class Frames:  # the frames' pipe, as serve() holds it
        def fileno(self) -> int:
            return 7

    worker._restart(Frames())  # type: ignore[arg-type]
    # the frames' pipe put on stdout for the new interpreter, then stderr again for this one
    assert moves == [(7, 1), (2, 1)]


def test_a_worker_restarts_only_when_a_job_left_more_than_the_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    limit = worker.MAX_LEFT_BEHIND
    assert not worker._left_behind(100, 100 + limit)
    assert worker._left_behind(100, 101 + limit)
    assert not worker._left_behind(None, 10 * limit)  # no /proc: never
    monkeypatch.setenv("SMART_CONTEXT_TOPIC_WORKER_LEFT_BEHIND", "not a number")
    assert not worker._left_behind(100, 100 + limit)  # the limit stands


def test_phrases_that_cannot_be_embedded_leave_labels_from_key_words(
    chat: tuple[list[dict[str, Any]], Matrix], fresh: worker.Worker
) -> None:
    messages, vectors = chat

    def refuse(texts: Sequence[str]) -> Matrix:
        raise EmbeddingError("the model is not there")

    found = fresh.extract(messages, vectors, [], refuse)
    assert found.topics and found == extract_offline(messages, vectors, [])
    assert any("the model is not there" in note for note in found.notes)


def test_an_error_in_the_worker_is_raised_here(
    chat: tuple[list[dict[str, Any]], Matrix], fresh: worker.Worker
) -> None:
    messages, vectors = chat
    with pytest.raises(ValueError, match="vector"):
        fresh.extract(messages, vectors[:3], [], None)  # fewer vectors than messages
    assert fresh.extract(messages, vectors, [], None).topics  # and it serves the next job


def test_a_worker_killed_mid_job_is_replaced_and_the_map_is_made_here(
    chat: tuple[list[dict[str, Any]], Matrix],
    fresh: worker.Worker,
    caplog: pytest.LogCaptureFixture,
) -> None:
    messages, vectors = chat
    killed: list[int] = []

    def kill_then_embed(texts: Sequence[str]) -> Matrix:
        own = worker._local.worker
        if not killed and own._process is not None:
            killed.append(own._process.pid)
            own._process.kill()
            own._process.wait()
        return embed(texts)

    with caplog.at_level(logging.WARNING):
        first = worker.extract_in_worker(messages, vectors, [], kill_then_embed)
    assert killed and first == extract_offline(messages, vectors, [], phrase_vectors=embed)
    assert "the topic worker stopped" in caplog.text
    again = worker.extract_in_worker(messages, vectors, [], embed)
    assert again == first
    started = worker._local.worker._process
    assert started is not None and started.pid != killed[0] and not worker._unavailable


def test_a_worker_that_cannot_start_leaves_maps_in_this_process_and_says_so_once(
    chat: tuple[list[dict[str, Any]], Matrix],
    fresh: worker.Worker,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    messages, vectors = chat
    monkeypatch.setattr(worker.sys, "executable", "/nonexistent/python")
    with caplog.at_level(logging.WARNING):
        first = worker.extract_in_worker(messages, vectors, [], embed)
        second = worker.extract_in_worker(messages, vectors, [], embed)
    assert first == second == extract_offline(messages, vectors, [], phrase_vectors=embed)
    assert caplog.text.count("topic maps run in the serving process") == 1
    assert worker._unavailable


def test_a_child_that_exits_at_once_counts_as_unavailable(
    chat: tuple[list[dict[str, Any]], Matrix],
    fresh: worker.Worker,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A Python that cannot import the package (a host's odd layout) exits before answering."""
    messages, vectors = chat
    monkeypatch.setattr(worker, "_CHILD_MAIN", "raise SystemExit(3)  # {root}")
    found = worker.extract_in_worker(messages, vectors, [], embed)
    assert found == extract_offline(messages, vectors, [], phrase_vectors=embed)
    assert worker._unavailable and "stopped" in worker._unavailable[0]


def test_a_phrase_embedder_that_breaks_leaves_the_next_map_a_worker_ready_for_it(
    chat: tuple[list[dict[str, Any]], Matrix], fresh: worker.Worker
) -> None:
    """An unexpected error from the embedder is raised here; the worker it left mid-job is
    stopped, so the next map does not read its own job as the answer to that one's phrases."""
    messages, vectors = chat

    def broken(texts: Sequence[str]) -> Matrix:
        raise RuntimeError("the embedder broke")

    with pytest.raises(RuntimeError, match="the embedder broke"):
        fresh.extract(messages, vectors, [], broken)
    assert fresh._process is None
    again = fresh.extract(messages, vectors, [], embed)
    assert again == extract_offline(messages, vectors, [], phrase_vectors=embed)


class _TwoArguments(Exception):
    def __init__(self, what: str, why: str) -> None:
        super().__init__(f"{what}: {why}")


def test_an_error_that_does_not_survive_a_pickle_is_sent_as_its_words() -> None:
    """The worker answers a failure with the exception itself, or, when it cannot be rebuilt
    on the other side (arguments of its own), a RuntimeError that says it."""
    plain = ValueError("fewer vectors than messages")
    assert worker._portable(plain) is plain
    sent = worker._portable(_TwoArguments("the map", "broke"))
    assert type(sent) is RuntimeError and str(sent) == "_TwoArguments: the map: broke"
