"""The knowledge base on a 2,000-note vault: indexing, restart, warm query, one edited note.

Run: PYTHONPATH=. python benchmarks/bench_knowledge.py [--notes 2000] [--runs 50] [--vault DIR]

A temporary vault gets ``--notes`` Markdown notes in 20 folders, made deterministically (seed 4)
from 40 subjects: a title, then 1-8 paragraphs of sentences about the note's subject, with
names, numbers and dates, so they are between about 200 and 4,000 characters. Then, through the
real :class:`~smart_context.knowledge.index.KnowledgeIndex` and
:class:`~smart_context.store.VectorStore` with the local model (all-MiniLM-L6-v2):

1. **First indexing**: the background pass (:meth:`KnowledgeIndex.index`) reads, cuts and
   embeds every passage and saves ``.memory/smart_context/knowledge.embeddings.json``.
2. **Restart**: a new index and store read the notes again and load the saved vectors; what
   the model embedded is counted (it must be nothing).
3. **Warm query**, median and p95 of ``--runs`` messages: what a request does for the notes
   (``notes_of`` in ``context/assemble.py``): the files check (one ``stat`` per note), the
   vectors (memoized), the search (hybrid scores of every passage, selection, passages) and
   the section within 1,600 tokens counted with the o200k tokenizer. Measured without embedding
   the message, since a request embeds it once for the references, the notes and the history
   alike; the **baseline** is that one embedding of the message, measured in the same process.
4. **One edited note**: a note's text changes on disk; the next request's files check, re-read,
   BM25 postings of the new layout (in a thread), re-embedding of that note alone, pruning and
   save; then that request's query.

Timings on a shared machine are only as good as the CPU it got: the load average is printed,
and the warm query's CPU time (the process's, all threads) beside its wall time.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from smart_context.budget.parts import messages_cost
from smart_context.budget.tokens import counter_for
from smart_context.embeddings.local import LocalMiniLM, shared_local_model
from smart_context.items.chunks import query_chunks
from smart_context.items.select import Limits
from smart_context.knowledge.index import KnowledgeIndex, knowledge_vectors_file
from smart_context.knowledge.section import find, knowledge_section
from smart_context.store import VectorStore
from smart_context.vectors.ops import Matrix

SUBJECTS = [
    "sourdough starter",
    "tomato seedlings",
    "boiler service",
    "Kyoto temples",
    "Postgres vacuum",
    "React hooks",
    "bicycle gears",
    "tax return",
    "piano practice",
    "running plan",
    "camera lenses",
    "kitchen renovation",
    "wine cellar",
    "dog training",
    "Lisbon trams",
    "asyncio tasks",
    "docker compose",
    "nginx TLS",
    "budget spreadsheet",
    "reading list",
    "beekeeping",
    "climbing grades",
    "espresso grind",
    "solar panels",
    "car insurance",
    "Spanish verbs",
    "chess openings",
    "knitting patterns",
    "bird watching",
    "home network",
    "mortgage rates",
    "vegetable stock",
    "Dolomites huts",
    "Rust lifetimes",
    "tea brewing",
    "garden compost",
    "moving house",
    "wedding speech",
    "laptop backup",
    "sailing knots",
]
VERBS = ["check", "note", "remember", "compare", "plan", "fix", "order", "ask about", "measure"]
DETAILS = [
    "on Tuesday",
    "before the end of May",
    "at 21 degrees",
    "for about 40 minutes",
    "with the spare key",
    "after the second try",
    "as Maria suggested",
    "for 120 euros",
    "in the blue folder",
    "next to the shed",
    "every other week",
    "once the rain stops",
]
QUESTIONS = [
    "What did I note about the {s}? I need to {v} it again.",
    "Remind me how the {s} went last time. Anything to change?",
    "I want to {v} the {s} this weekend. What were my notes?",
]


def make_vault(root: Path, n: int) -> list[Path]:
    """``n`` notes in 20 folders, deterministic."""
    rng = random.Random(4)  # noqa: S311 - the same vault every run, not a secret
    paths = []
    for i in range(n):
        subject = SUBJECTS[i % len(SUBJECTS)]
        paragraphs = []
        for p in range(rng.randint(1, 8)):
            sentences = [
                f"{rng.choice(VERBS).capitalize()} the {subject} {rng.choice(DETAILS)}, "
                f"item {rng.randint(1, 999)} of list {p}."
                for _ in range(rng.randint(2, 6))
            ]
            paragraphs.append(" ".join(sentences))
        path = root / f"folder-{i % 20:02d}" / f"{subject.replace(' ', '-')}-{i:04d}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"# {subject.title()} {i}\n\n" + "\n\n".join(paragraphs), encoding="utf-8")
        paths.append(path)
    return paths


class Counting:
    """The local model, counting what it embeds."""

    def __init__(self, model: LocalMiniLM) -> None:
        self.model = model
        self.model_id = model.model_id
        self.embedded = 0

    async def embed(self, texts: Sequence[str]) -> Matrix:
        self.embedded += len(texts)
        return await self.model.embed(texts)


async def query(index: KnowledgeIndex, store: VectorStore, message: str, queries: Matrix) -> int:
    """The notes' part of a request for ``message`` whose sentence vectors are ``queries``;
    returns how many notes it cites."""
    layout = await index.current()
    matrix = await index.vectors(store, layout)
    cited = find(layout, matrix, queries, query_chunks(message), Limits(top_n=3), 0.3, 2)
    counter = counter_for("gpt-4o")
    section = knowledge_section(
        cited, lambda text: messages_cost(counter, [{"role": "system", "content": text}]) <= 1600
    )
    return len(section.notes)


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def prepare(vault: Path, n_notes: int) -> list[Path]:
    """The vault's notes, written first when it has none."""
    if not any(vault.glob("folder-*")):
        start = time.perf_counter()
        make_vault(vault, n_notes)
        print(f"wrote {n_notes} notes in {ms(time.perf_counter() - start)}")
    notes = sorted(vault.glob("folder-*/*.md"))
    size = sum(p.stat().st_size for p in notes)
    print(f"vault: {len(notes)} notes, {size / 1e6:.1f} MB of Markdown")
    return notes


async def run(vault: Path, notes: list[Path], runs: int) -> None:
    model = shared_local_model()
    await model.embed(["warm the model up"])

    counting = Counting(model)
    index, store = KnowledgeIndex(vault, ["."]), VectorStore(vault, counting)
    start = time.perf_counter()
    embedded = await index.index(store)
    took = time.perf_counter() - start
    passages = len(index.latest.chunks)
    saved = knowledge_vectors_file(vault)
    print(
        f"first indexing: {embedded} passages embedded in {took:.1f} s "
        f"({embedded / max(took, 1e-9):.0f} passages/s); {passages} passages in all; "
        f"vector file {saved.stat().st_size / 1e6:.1f} MB"
    )

    counting = Counting(model)
    index, store = KnowledgeIndex(vault, ["."]), VectorStore(vault, counting)
    start = time.perf_counter()
    layout = await index.current()
    await index.vectors(store, layout)
    print(
        f"restart: notes read and vectors loaded in {ms(time.perf_counter() - start)}, "
        f"{counting.embedded} passages embedded"
    )

    messages = [
        QUESTIONS[i % len(QUESTIONS)].format(s=SUBJECTS[i % len(SUBJECTS)], v=VERBS[i % 9])
        for i in range(runs)
    ]
    vectors = [await store.embed(query_chunks(m)) for m in messages]
    warm, cpu, baseline, cited = [], [], [], []
    for message, queries in zip(messages, vectors, strict=True):
        start, started = time.perf_counter(), time.process_time()
        cited.append(await query(index, store, message, queries))
        warm.append(time.perf_counter() - start)
        cpu.append(time.process_time() - started)
        start = time.perf_counter()
        await store.embed(query_chunks(message))
        baseline.append(time.perf_counter() - start)
    p95 = float(np.percentile(warm, 95))
    print(
        f"warm query ({runs} messages): median {ms(statistics.median(warm))}, p95 {ms(p95)}; "
        f"{statistics.mean(cited):.1f} notes cited on average; CPU time (all threads) median "
        f"{ms(statistics.median(cpu))}, p95 {ms(float(np.percentile(cpu, 95)))}"
    )
    print(
        f"baseline, one embedding of the message: median {ms(statistics.median(baseline))}, "
        f"p95 {ms(float(np.percentile(baseline, 95)))}"
    )

    edited = notes[len(notes) // 2]
    edited.write_text(edited.read_text(encoding="utf-8") + "\n\nAdded: the new part.\n")
    st = edited.stat()
    os.utime(edited, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    counting.embedded = 0
    start = time.perf_counter()
    layout = await index.current()
    await index.vectors(store, layout)
    reindex = time.perf_counter() - start
    start = time.perf_counter()
    await query(index, store, messages[0], vectors[0])
    first = time.perf_counter() - start
    print(
        f"one edited note: re-index {ms(reindex)} ({counting.embedded} passages embedded, the "
        f"file saved), then the query {ms(first)}"
    )
    print(f"load average: {os.getloadavg()[0]:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--notes", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--vault", type=Path, help="keep the vault here (a second run reuses it)")
    args = parser.parse_args()
    if args.vault:
        args.vault.mkdir(parents=True, exist_ok=True)
        asyncio.run(run(args.vault, prepare(args.vault, args.notes), args.runs))
        return
    with tempfile.TemporaryDirectory(prefix="bench-knowledge-") as folder:
        asyncio.run(run(Path(folder), prepare(Path(folder), args.notes), args.runs))


if __name__ == "__main__":
    main()
