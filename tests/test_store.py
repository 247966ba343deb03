"""The vector store: any system may keep a named collection of its own, saved to its own file."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from smart_context.errors import EmbeddingError
from smart_context.messages import History
from smart_context.paths import check_chat_id
from smart_context.store import VectorStore
from smart_context.vectors.keyed import KeyedMatrix
from tests.fakes import FakeEmbedder


async def test_a_named_collection_is_kept_in_memory_saved_and_read_back(tmp_path: Path) -> None:
    embedder = FakeEmbedder()
    store = VectorStore(tmp_path, embedder)
    path = tmp_path / ".memory" / "smart_context" / "items.embeddings.json"
    assert await store.collection("items", lambda: path, KeyedMatrix) is None

    items = KeyedMatrix(embedder.model_id, embedder.dim)
    rows = items.add(["rule:a", "rule:b"], await store.embed(["be brief", "cite sources"]))
    store.keep_open("items", path, items)
    assert rows.tolist() == [0, 1] and await store.collection("items", lambda: path, KeyedMatrix)
    store.flush()
    assert path.exists() and not items.dirty

    fresh = VectorStore(tmp_path, FakeEmbedder())
    again = await fresh.collection("items", lambda: path, KeyedMatrix)
    assert again is not None and again.keys == ["rule:a", "rule:b"]
    np.testing.assert_allclose(again.matrix, items.matrix, atol=1 / 254)


async def test_another_model_never_reads_the_collection(tmp_path: Path) -> None:
    path = tmp_path / "notes.embeddings.json"
    store = VectorStore(tmp_path, FakeEmbedder())
    notes = KeyedMatrix(store.embedder.model_id, 512)
    notes.add(["n1"], await store.embed(["a note"]))
    store.keep_open("notes", path, notes)
    store.flush()
    other = VectorStore(tmp_path, FakeEmbedder(model_id="another-model"))
    assert await other.collection("notes", lambda: path, KeyedMatrix) is None


async def test_an_empty_chat_embeds_nothing_and_writes_no_file(tmp_path: Path) -> None:
    embedder = FakeEmbedder()
    store = VectorStore(tmp_path, embedder)
    assert store.embedder.model_id and len(await store.sync_chat(check_chat_id("c1"), [])) == 0
    async with store.chat_rows(check_chat_id("c1"), History([])) as (vectors, rows):
        assert len(rows) == 0 and len(vectors) == 0
    store.flush()
    assert embedder.calls == [] and not (tmp_path / ".memory").exists()


async def test_a_chat_without_vectors_is_looked_for_again_only_after_a_while(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """A chat not embedded yet costs a request no look at the disk each time; once the store
    makes its vectors (or the while is over), they are found."""
    from smart_context import store as store_module
    from smart_context.vectors import files

    looks: list[Path] = []
    load = files.load

    def counted(path: Path, *args: Any) -> Any:
        looks.append(path)
        return load(path, *args)

    monkeypatch.setattr(files, "load", counted)
    store = VectorStore(tmp_path, FakeEmbedder())
    chat = check_chat_id("c")
    history = History([{"id": "m0", "role": "user", "content": "hello there"}])
    queries = await store.embed(["hello"])
    for _ in range(3):
        assert not (await store.known_scores(chat, history, queries)).any()
    assert len(looks) == 1
    await store.sync_chat(chat, history.messages)  # the background pass embeds the chat
    assert (await store.known_scores(chat, history, queries)).any()
    other = check_chat_id("other")
    await store.known_scores(other, history, queries)
    monkeypatch.setattr(store_module, "ABSENT_SECONDS", 0.0)
    await store.known_scores(other, history, queries)
    assert looks.count(looks[-1]) == 2  # looked for again once the while was over


async def test_synced_rows_stay_those_of_their_sync_while_the_chat_changes(tmp_path: Path) -> None:
    store = VectorStore(tmp_path, FakeEmbedder())
    chat = check_chat_id("c")
    texts = ["bread rye crumb", "boat sail wind", "oven bake loaf", "harbor dock boat"]
    messages = [{"id": f"m{i}", "role": "user", "content": t} for i, t in enumerate(texts)]
    synced = await store.sync_rows(chat, messages)
    expected = await store.embed(texts)
    np.testing.assert_allclose(synced.whole(), expected, atol=1e-6)
    np.testing.assert_allclose(synced[np.array([2, 0])], expected[[2, 0]], atol=1e-6)
    turns = synced.of(np.array([1, 3]))
    assert len(turns) == 2 and turns.dim == synced.dim
    # another sync drops the first two messages (renumbering the rows) and adds new ones
    later = [
        *messages[2:],
        *({"id": f"n{i}", "role": "user", "content": f"kiln {i}"} for i in range(40)),
    ]
    await store.sync_rows(chat, later)
    np.testing.assert_allclose(synced.whole(), expected, atol=1e-6)  # the earlier view holds
    np.testing.assert_allclose(turns[np.array([0, 1])], expected[[1, 3]], atol=1e-6)


async def test_a_request_s_message_is_stored_with_its_chat_from_the_vector_of_its_search(
    tmp_path: Path,
) -> None:
    """Embedded for the request's searches, then stored with the chat's vectors after the
    reply: the embedder (a paid API, or the local model's time) is asked for it once."""
    embedder = FakeEmbedder()
    store = VectorStore(tmp_path, embedder)
    query = await store.embed(["how do I keep the starter alive"])
    messages = [
        {"id": "m1", "role": "user", "content": "how do I keep the starter alive"},
        {"id": "m2", "role": "assistant", "content": "feed it flour and water daily"},
    ]
    stored = await store.sync_chat(check_chat_id("c1"), messages)
    assert embedder.calls == [
        ["how do I keep the starter alive"],
        ["feed it flour and water daily"],
    ]
    np.testing.assert_allclose(stored[0], query[0], atol=1 / 127)  # (stored as int8)


async def test_texts_embedded_moments_ago_only_and_only_under_their_model(
    tmp_path: Path, monkeypatch: Any
) -> None:
    import smart_context.store as store_module

    monkeypatch.setattr(store_module, "RECENT_TEXTS", 2)
    monkeypatch.setattr(store_module, "RECENT_CHARS", 20)
    embedder = FakeEmbedder()
    store = VectorStore(tmp_path, embedder)
    first = await store.embed(["alpha", "beta", "gamma"])
    again = await store.embed(["gamma", "beta", "alpha"])  # alpha: three texts ago, forgotten
    assert embedder.calls[-1] == ["alpha"]
    np.testing.assert_array_equal(again, first[::-1])
    long = "a text longer than twenty characters"
    await store.embed([long])
    await store.embed([long])
    assert embedder.calls[-2:] == [[long], [long]]
    embedder.model_id = "another-model"  # the vault now embeds with another model
    await store.embed(["alpha"])
    assert embedder.calls[-1] == ["alpha"]


async def test_a_failed_call_keeps_nothing_and_a_new_size_asks_for_all(tmp_path: Path) -> None:
    embedder = FakeEmbedder()
    store = VectorStore(tmp_path, embedder)
    embedder.fail_with = "the embedding server is down"
    with pytest.raises(EmbeddingError, match="down"):
        await store.embed(["alpha"])
    embedder.fail_with = None
    await store.embed(["alpha"])
    assert embedder.calls == [["alpha"], ["alpha"]]
    embedder.dim = 64  # same model name, vectors of another size
    out = await store.embed(["alpha", "beta"])
    assert out.shape == (2, 64) and embedder.calls[-2:] == [["beta"], ["alpha", "beta"]]


async def test_a_collection_closed_to_make_room_is_written_off_the_loop_and_read_back_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading

    from smart_context.vectors import files

    written_in: list[threading.Thread] = []
    real = files.write
    release = threading.Event()

    def slow_write(path: Path, taken: Any) -> bool:  # a large file takes a while
        written_in.append(threading.current_thread())
        release.wait(10)
        return real(path, taken)

    monkeypatch.setattr(files, "write", slow_write)
    store = VectorStore(tmp_path, FakeEmbedder(), max_open=1)
    first, second = tmp_path / "first.embeddings.json", tmp_path / "second.embeddings.json"
    one = KeyedMatrix(store.embedder.model_id, store.embedder.dim)
    one.add(["a", "b"], await store.embed(["alpha", "beta"]))
    store.keep_open("first", first, one)
    two = KeyedMatrix(store.embedder.model_id, store.embedder.dim)
    two.add(["c"], await store.embed(["gamma"]))
    store.keep_open("second", second, two)  # "first" closes: written in a thread
    for _ in range(400):  # the thread has started the write (a busy machine: up to 20 s)
        if written_in:
            break
        await asyncio.sleep(0.05)
    assert written_in and threading.main_thread() not in written_in and not first.exists()
    release.set()
    again = await store.collection("first", lambda: first, KeyedMatrix)  # waits for the write
    assert again is not None and again.keys == ["a", "b"]
    np.testing.assert_allclose(again.matrix, one.matrix, atol=1 / 254)
    store.flush()  # "second" was closed in its turn (written off the loop too)
    for _ in range(400):  # (a busy machine: up to 20 s)
        if second.exists():
            break
        await asyncio.sleep(0.05)
    fresh = await VectorStore(tmp_path, FakeEmbedder()).collection(
        "second", lambda: second, KeyedMatrix
    )
    assert fresh is not None and fresh.keys == ["c"]
