"""The knowledge index on real files with the fake embedder: what is embedded, when, and what
survives a restart, an edit, a deletion and a damaged vector file."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import numpy as np
import pytest

from smart_context.config import Settings
from smart_context.knowledge.index import KnowledgeIndex, knowledge_vectors_file
from smart_context.services import Services
from smart_context.store import VectorStore
from tests.fakes import FakeEmbedder, FakeHost

NOTES = {
    "notes/sourdough.md": "Feed the rye starter at 25 degrees.\n\nBake at 250 in the Dutch oven.",
    "notes/kyoto.md": "The ryokan in Kyoto serves kaiseki dinner at seven.",
    "projects/lenswatch.md": "Lenswatch polls the camera API and stores frames in Postgres.",
}


def write_notes(vault: Path, notes: dict[str, str]) -> None:
    for source, text in notes.items():
        path = vault / source
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


@pytest.fixture
def notes_vault(tmp_path: Path) -> Path:
    write_notes(tmp_path, NOTES)
    return tmp_path


def fresh(vault: Path, embedder: FakeEmbedder) -> tuple[KnowledgeIndex, VectorStore]:
    """A new process: a new index and store over the same files."""
    return KnowledgeIndex(vault, ["."], ["rules", "references"]), VectorStore(vault, embedder)


def touch_edit(path: Path, text: str) -> None:
    path.write_text(text, encoding="utf-8")
    st = path.stat()  # a new mtime even on a coarse clock
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))


async def test_indexed_once_then_a_restart_embeds_nothing(notes_vault: Path) -> None:
    embedder = FakeEmbedder()
    index, store = fresh(notes_vault, embedder)
    assert await index.index(store) == 3
    assert sorted(embedder.embedded) == sorted(
        f"{s.split('/')[-1][:-3]}\n\n{t}" for s, t in NOTES.items()
    )
    saved = json.loads(knowledge_vectors_file(notes_vault).read_text(encoding="utf-8"))
    assert len(saved["keys"]) == 3 and saved["model"] == embedder.model_id

    again = FakeEmbedder()
    index, store = fresh(notes_vault, again)
    layout = await index.current()
    matrix = await index.vectors(store, layout)
    assert again.calls == [] and await index.index(store) == 0
    assert matrix.shape == (3, again.dim) and np.allclose(
        np.linalg.norm(matrix, axis=1), 1, atol=0.01
    )


async def test_an_edited_note_is_embedded_alone_and_a_new_one_too(notes_vault: Path) -> None:
    embedder = FakeEmbedder()
    index, store = fresh(notes_vault, embedder)
    await index.index(store)
    embedder.calls.clear()
    touch_edit(notes_vault / "notes/kyoto.md", "The ryokan moved dinner to eight.")
    (notes_vault / "notes/lisbon.md").write_text("Tram 28 to Alfama.", encoding="utf-8")
    layout = await index.current()
    await index.vectors(store, layout)
    assert embedder.calls == [
        ["kyoto\n\nThe ryokan moved dinner to eight.", "lisbon\n\nTram 28 to Alfama."]
    ]
    assert [n.source for n in layout.notes] == [
        "notes/kyoto.md",
        "notes/lisbon.md",
        "notes/sourdough.md",
        "projects/lenswatch.md",
    ]
    embedder.calls.clear()
    assert await index.current() is layout  # nothing changed: the same layout, no reads
    await index.vectors(store, layout)
    assert embedder.calls == []


async def test_a_deleted_note_leaves_the_index_and_the_vector_file(notes_vault: Path) -> None:
    embedder = FakeEmbedder()
    index, store = fresh(notes_vault, embedder)
    await index.index(store)
    (notes_vault / "projects/lenswatch.md").unlink()
    layout = await index.current()
    assert "projects/lenswatch.md" not in [n.source for n in layout.notes]
    matrix = await index.vectors(store, layout)
    assert matrix.shape[0] == 2 and embedder.calls and len(embedder.calls) == 1  # no new embedding
    saved = json.loads(knowledge_vectors_file(notes_vault).read_text(encoding="utf-8"))
    assert sorted(saved["keys"]) == sorted(layout.keys)


async def test_a_damaged_vector_file_is_set_aside_logged_and_rebuilt(
    notes_vault: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = knowledge_vectors_file(notes_vault)
    path.parent.mkdir(parents=True)
    path.write_text('{"format": "smart-context/embeddings", "vers', encoding="utf-8")
    embedder = FakeEmbedder()
    index, store = fresh(notes_vault, embedder)
    with caplog.at_level(logging.WARNING):
        layout = await index.current()
        matrix = await index.vectors(store, layout)
    assert "is damaged" in caplog.text
    assert list(path.parent.glob("knowledge.embeddings.json.corrupt-*"))
    assert len(embedder.embedded) == 3 and np.abs(matrix).sum() > 0
    assert len(json.loads(path.read_text(encoding="utf-8"))["keys"]) == 3


async def test_a_note_that_cannot_be_read_is_logged_once_and_used_once_fixed(
    notes_vault: Path, caplog: pytest.LogCaptureFixture
) -> None:
    bad = notes_vault / "notes/latin1.md"
    bad.write_bytes(b"caf\xe9 cr\xe8me")
    index = KnowledgeIndex(notes_vault, ["."])
    with caplog.at_level(logging.WARNING):
        layout = await index.current()
        touch_edit(notes_vault / "notes/kyoto.md", "Dinner at eight.")
        await index.current()  # another note changed: the bad one is not read again
    assert caplog.text.count("notes/latin1.md") == 1 and "not UTF-8" in caplog.text
    assert "notes/latin1.md" not in [n.source for n in layout.notes]
    touch_edit(bad, "café crème")
    assert "notes/latin1.md" in [n.source for n in (await index.current()).notes]


async def test_many_missing_passages_wait_for_the_background_pass(notes_vault: Path) -> None:
    embedder = FakeEmbedder()
    index, store = fresh(notes_vault, embedder)
    asked: list[bool] = []
    index.on_behind = lambda: asked.append(True)
    layout = await index.current()
    matrix = await index.vectors(store, layout, inline=2)
    assert asked == [True] and embedder.calls == [] and matrix.shape == (3, 0)
    progress: list[tuple[int, int]] = []

    async def report(done: int, total: int) -> None:
        progress.append((done, total))

    assert await index.index(store, report) == 3
    assert progress == [(3, 3)]
    matrix = await index.vectors(store, layout, inline=2)
    assert matrix.shape == (3, embedder.dim) and (np.abs(matrix).sum(axis=1) > 0).all()


async def test_a_large_vault_is_looked_at_in_the_background(
    notes_vault: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("smart_context.knowledge.index.LARGE_VAULT", 2)  # 3 notes: "large"
    index = KnowledgeIndex(notes_vault, ["."])
    asked: list[str] = []
    index.on_stale = lambda: asked.append("look")
    first = await index.current()  # nothing seen yet: looked at now
    assert len(first.notes) == 3 and asked == []
    touch_edit(notes_vault / "notes/kyoto.md", "The ryokan moved to Osaka.")
    assert await index.current() is first and asked == ["look"]  # as last seen; a look asked
    seen = await index.rescan()  # what the background look does
    assert "Osaka" in " ".join(seen.chunks)
    assert await index.current() is seen  # the edit counts from here


async def test_a_small_vault_is_looked_at_on_every_request(notes_vault: Path) -> None:
    index = KnowledgeIndex(notes_vault, ["."])
    index.on_stale = lambda: pytest.fail("a small vault needs no background look")
    await index.current()
    touch_edit(notes_vault / "notes/kyoto.md", "The ryokan moved to Osaka.")
    assert "Osaka" in " ".join((await index.current()).chunks)


async def test_the_services_look_in_the_background_and_settle_waits_for_it(
    notes_vault: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("smart_context.knowledge.index.LARGE_VAULT", 2)
    services = Services(FakeHost(notes_vault), Settings(summarizer="offline"), FakeEmbedder())
    try:
        first = await services.knowledge.current()
        touch_edit(notes_vault / "notes/kyoto.md", "The ryokan moved to Osaka.")
        assert await services.knowledge.current() is first
        await services.settle()
        assert "Osaka" in " ".join(services.knowledge.latest.chunks)
    finally:
        services.memory_db.close()
