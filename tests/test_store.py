"""The vector store: any system may keep a named collection of its own, saved to its own file."""

from __future__ import annotations

from pathlib import Path

import numpy as np

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
