"""The notes a message finds and the section they make: the references' selector on note
passages (the fake embedder, and the real local model once), cut to a token allowance."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from smart_context.items.chunks import query_chunks
from smart_context.items.select import Limits
from smart_context.knowledge.index import KnowledgeIndex
from smart_context.knowledge.section import Cited, find, knowledge_section
from smart_context.store import VectorStore
from tests.fakes import FakeEmbedder

LIMITS = Limits(top_n=3)

DISTRACTORS = {
    "garden/beds.md": "The raised beds get tomatoes, basil and a drip line in May.",
    "travel/lisbon.md": "Lisbon in May: a hotel near Alfama, tram 28, pasteis de nata.",
    "work/postgres.md": "Postgres checklist: vacuum, analyse, check the replication lag.",
    "home/boiler.md": "The boiler service is due in October; the engineer is called Sam.",
    "reading/novels.md": "Novels to read this winter: three Russian classics and one thriller.",
}
STARTER = (
    "# Starter care\n\nThe rye starter lives in the fridge and is fed every Sunday, one part "
    "starter to five of flour and five of water.\n\nIf it smells of nail polish remover it is "
    "hungry: feed it twice a day at room temperature until it doubles again."
)


def write_notes(vault: Path, notes: dict[str, str]) -> None:
    for source, text in notes.items():
        path = vault / source
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


async def search(vault: Path, store: VectorStore, message: str, **limits: object) -> list[Cited]:
    index = KnowledgeIndex(vault, ["."])
    layout = await index.current()
    matrix = await index.vectors(store, layout)
    sentences = query_chunks(message) or [message]
    queries = await store.embed(sentences)
    passages = int(limits.pop("passages", 2))  # type: ignore[call-overload]
    min_score = float(limits.pop("min_score", 0.3))  # type: ignore[arg-type]
    return find(layout, matrix, queries, sentences, Limits(**limits), min_score, passages)  # type: ignore[arg-type]


async def test_the_right_note_among_distractors_and_nothing_for_small_talk(tmp_path: Path) -> None:
    write_notes(tmp_path, {**DISTRACTORS, "kitchen/starter.md": STARTER})
    store = VectorStore(tmp_path, FakeEmbedder())
    found = await search(tmp_path, store, "My rye starter smells of nail polish. Feed it how?")
    assert [c.source for c in found][:1] == ["kitchen/starter.md"]
    assert await search(tmp_path, store, "Hello there!") == []


async def test_a_long_note_gives_its_best_passages_only(tmp_path: Path) -> None:
    filler = [f"Section {i}. Notes on cupboard {i}, shelves and hinges." for i in range(12)]
    filler[7] = "Section 7. The spare house key is under the blue flowerpot by the shed."
    text = "\n\n".join(
        f"{line} " + "More about the cupboards and shelves. " * 10 for line in filler
    )
    write_notes(tmp_path, {"home/house.md": text, **DISTRACTORS})
    store = VectorStore(tmp_path, FakeEmbedder())
    message = "Where is the spare house key? Under the flowerpot?"
    found = await search(tmp_path, store, message, passages=1, min_score=0.1)
    assert found[0].source == "home/house.md" and len(found[0].passages) == 1
    assert "blue flowerpot" in found[0].passages[0][1]


async def test_by_words_alone_a_note_must_still_earn_its_place(tmp_path: Path) -> None:
    write_notes(tmp_path, {**DISTRACTORS, "kitchen/starter.md": STARTER})
    layout = await KnowledgeIndex(tmp_path, ["."]).current()
    none = np.zeros((len(layout.chunks), 0), dtype=np.float32)

    def by_words(message: str) -> list[str]:
        sentences = query_chunks(message)
        cited = find(layout, none, np.zeros((0, 0), np.float32), sentences, LIMITS, 0.3, 2)
        return [c.source for c in cited]

    assert by_words("My rye starter smells of nail polish remover. Feed it how?") == [
        "kitchen/starter.md"
    ]
    assert by_words("Hello there, how are things?") == []


def test_the_section_cites_each_note_by_path_and_fits_the_allowance() -> None:
    cited = [
        Cited("notes/a.md", 0.8, ((3, "third " * 40), (1, "first " * 40))),
        Cited("notes/b.md", 0.6, ((0, "bee " * 20),)),
        Cited("notes/c.md", 0.5, ((0, "sea " * 200),)),
    ]
    whole = knowledge_section(cited, lambda text: True)
    assert "## notes/a.md" in whole.text and whole.text.index("first") < whole.text.index("third")
    assert "[…]" in whole.text  # passages 1 and 3 are not next to each other
    assert [n["path"] for n in whole.notes] == ["notes/a.md", "notes/b.md", "notes/c.md"]
    assert whole.notes[0] == {"path": "notes/a.md", "score": 0.8, "passages": 2}

    tight = knowledge_section(cited, lambda text: len(text) <= 520)
    assert len(tight.text) <= 520
    assert tight.notes[0]["passages"] == 1 and "third" in tight.text and "first" not in tight.text
    assert [n["path"] for n in tight.notes] == ["notes/a.md", "notes/b.md"] and tight.left_out == 1
    nothing = knowledge_section(cited, lambda text: False)
    assert nothing.text == "" and nothing.notes == () and nothing.left_out == 3


async def test_the_real_local_model_finds_the_note_by_meaning(tmp_path: Path) -> None:
    from smart_context.embeddings.local import shared_local_model

    notes = {
        **DISTRACTORS,
        "kitchen/starter.md": STARTER,
        "kitchen/pasta.md": "Fresh pasta: 100 g of 00 flour per egg, rest the dough 30 minutes.",
    }
    write_notes(tmp_path, notes)
    store = VectorStore(tmp_path, shared_local_model())
    # by meaning alone: "solvent" is not in the note, "nail polish remover" is
    message = "My bread starter has a strange solvent smell, what do I do?"
    found = await search(tmp_path, store, message, lexical_weight=0.0)
    assert [c.source for c in found] == ["kitchen/starter.md"], found
    assert "nail polish" in " ".join(text for _, text in found[0].passages)
    hybrid = await search(tmp_path, store, "When is the boiler service due?")
    assert hybrid[0].source == "home/boiler.md"


@pytest.mark.parametrize("message", ["", "   "])
async def test_an_empty_message_finds_nothing(tmp_path: Path, message: str) -> None:
    write_notes(tmp_path, DISTRACTORS)
    index = KnowledgeIndex(tmp_path, ["."])
    layout = await index.current()
    empty = np.zeros((0, 0), dtype=np.float32)
    assert find(layout, empty, empty, query_chunks(message), LIMITS, 0.0, 2) == []
