"""The topic map on Schema-Guided Dialogue (SGD): clicks, bubble counts and labels.

Run: ``python benchmarks/public/bench_topics.py --data PATH/TO/dstc8-schema-guided-dialogue``
(or ``SMART_CONTEXT_SGD``; a bare mirror works), ``--cache DIR`` for the embeddings (default
``/tmp/sc-cache-topics``: a second run embeds nothing).

Each single-service dialogue of SGD is about one service (restaurants, flights, a bank...), so
whole dialogues of different services, concatenated in an order shuffled with a fixed seed, make
a long chat whose subjects are known: USER turns become "user" messages, SYSTEM turns
"assistant" ones. Two kinds of chats are built, from train/ (the tune part, looked at while
changing the extractor) and from dev/ (the report part, never tuned on; test/ is never read):

- long chats of 3 to 7 services and 100 to 300 messages;
- chats of exactly 2 services, 60 to 200 messages.

A chat's services come from different domains (Hotels_1 and Hotels_4 are both "hotels": no
reader could tell them apart). Through the real plugin (the offline extractor the background
pass uses without a chat model, the local model, ``similarity_threshold = "auto"``):

(a) for each subject, the topic that best matches it (the one most of whose members are that
    subject; among several, the one with most of them) is clicked through the product's own
    command, and the kept messages are compared with the subject's: recall and precision. The
    baselines beside it rank the messages by BM25, dense cosine and their reciprocal-rank
    hybrid against the service's name and description and keep as many as the subject has (an
    oracle count, so their recall equals their precision);
(b) bubbles against subjects: mean absolute difference, share of chats within +-1;
(c) 2-subject chats: the share that get exactly 2 topics;
(d) labels: the share of topics whose label is closer (same model) to its subject's service
    name and description than to any other service of the chat; a sample beside the subjects;
(e) labels that name their subject: the share whose words (a plural's "s" aside) meet the
    words of the service's schema: its name, description, intents' and slots' names and
    descriptions (not the slots' values). "Slow Shop" for a scraper's rate limits would not.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import statistics
import sys
import tempfile
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))

from benchmarks.public.baselines import BM25, dense, rank, rrf  # noqa: E402
from benchmarks.public.snapshot import Snapshot, reported, snapshot  # noqa: E402
from benchmarks.topic_runs import click, start  # noqa: E402
from smart_context.context.topic_filter import LAST_TURN  # noqa: E402
from smart_context.embeddings.local import shared_local_model  # noqa: E402
from smart_context.messages import History  # noqa: E402
from smart_context.paths import check_chat_id  # noqa: E402
from smart_context.topics.offline.text import is_content_word  # noqa: E402
from smart_context.topics.refresh import refresh  # noqa: E402

SEED = 20261126
ROLES = {"USER": "user", "SYSTEM": "assistant"}


@dataclass(frozen=True)
class Dialogue:
    """One single-service SGD dialogue: its id, service and (role, text) turns."""

    id: str
    service: str
    turns: tuple[tuple[str, str], ...]


@dataclass
class Part:
    """One split's dialogues by service and each service's name and description."""

    split: str
    pools: dict[str, list[Dialogue]]
    about: dict[str, str]
    vocabulary: dict[str, frozenset[str]] = field(default_factory=dict)  # (e): its words
    taken: Counter[str] = field(default_factory=Counter)

    def next(self, service: str) -> Dialogue:
        """The service's next dialogue: each is used once before any is used again."""
        pool = self.pools[service]
        dialogue = pool[self.taken[service] % len(pool)]
        self.taken[service] += 1
        return dialogue


def read_part(snap: Snapshot, split: str, rng: np.random.Generator) -> Part:
    """Single-service dialogues of ``split``, each service's pool shuffled by ``rng``."""
    pools: dict[str, list[Dialogue]] = {}
    for path in snap.files(f"{split}/"):  # files a mirror lacks are left out there, and said
        if not path.rsplit("/", 1)[-1].startswith("dialogues_"):
            continue
        for d in snap.json(path):
            if len(d["services"]) == 1:
                turns = tuple((ROLES[t["speaker"]], t["utterance"]) for t in d["turns"])
                pools.setdefault(d["services"][0], []).append(
                    Dialogue(d["dialogue_id"], d["services"][0], turns)
                )
    schema = snap.json(f"{split}/schema.json")
    about = {
        s["service_name"]: f"{service_words(s['service_name'])}: {s['description']}" for s in schema
    }
    vocabulary = {s["service_name"]: schema_words(s) for s in schema}
    for service in sorted(pools):
        pools[service] = [pools[service][i] for i in rng.permutation(len(pools[service]))]
    return Part(split, dict(sorted(pools.items())), about, vocabulary)


def word_stems(text: str) -> set[str]:
    """The content words of ``text``, lower case, a plural's "s" dropped ("Flights" ~ "flight")."""
    words = re.findall(r"[a-z]+", re.sub(r"(?<=[a-z])(?=[A-Z])", " ", text).lower())
    return {w[:-1] if w.endswith("s") and len(w) > 3 else w for w in words if is_content_word(w)}


def schema_words(service: dict[str, Any]) -> frozenset[str]:
    """(e): what names a service: its name and description, its intents' and slots' names
    and descriptions (not the slots' values)."""
    texts = [service["service_name"].split("_")[0], service["description"]]
    for part in (*service["intents"], *service["slots"]):
        texts += [part["name"].replace("_", " "), part["description"]]
    return frozenset(w for text in texts for w in word_stems(text))


def service_words(service: str) -> str:
    """ "RentalCars_1" -> "Rental Cars"."""
    name = service.split("_")[0]
    return "".join(f" {c}" if c.isupper() and i else c for i, c in enumerate(name))


def build_chat(
    part: Part, rng: np.random.Generator, name: str, subjects: int, length: tuple[int, int]
) -> dict[str, Any]:
    """A chat of ``subjects`` services of different domains, whole dialogues of each in turn
    until it reaches a length drawn from ``length``, then shuffled."""
    chosen: list[str] = []
    for i in rng.permutation(len(part.pools)):
        service = list(part.pools)[i]
        if all(service.split("_")[0] != c.split("_")[0] for c in chosen):
            chosen.append(service)
        if len(chosen) == subjects:
            break
    target = int(rng.integers(length[0], length[1] + 1))
    picked: list[Dialogue] = []
    total = 0
    while total < target:
        for service in chosen:
            if total >= target and len(picked) >= len(chosen):
                break
            picked.append(part.next(service))
            total += len(picked[-1].turns)
    messages = [
        {"id": f"{d.id}-{j}", "role": role, "content": text, "subject": d.service}
        for i in rng.permutation(len(picked))
        for d in [picked[i]]
        for j, (role, text) in enumerate(d.turns)
    ]
    return {"id": name, "messages": messages, "subjects": chosen}


def build_chats(part: Part, seed: int, many: int, pairs: int) -> list[dict[str, Any]]:
    """``many`` chats of 3-7 subjects (100-300 messages) and ``pairs`` of 2 (60-200)."""
    rng = np.random.default_rng(seed)
    chats = [
        build_chat(part, rng, f"sgd-{part.split}-{i:02d}", int(rng.integers(3, 8)), (100, 300))
        for i in range(many)
    ]
    return chats + [
        build_chat(part, rng, f"sgd-{part.split}-pair-{i:02d}", 2, (60, 200)) for i in range(pairs)
    ]


@dataclass
class Figures:
    """What one part measured."""

    recall: list[float] = field(default_factory=list)
    precision: list[float] = field(default_factory=list)
    pair_recall: list[float] = field(default_factory=list)
    pair_precision: list[float] = field(default_factory=list)
    baselines: dict[str, list[float]] = field(default_factory=dict)
    bubbles: list[tuple[int, int]] = field(default_factory=list)  # (bubbles, subjects), 3-7
    pairs: list[int] = field(default_factory=list)  # bubbles of each 2-subject chat
    leading: list[tuple[int, int]] = field(default_factory=list)  # subjects with a bubble, all
    labels: list[bool] = field(default_factory=list)
    naming: list[bool] = field(default_factory=list)  # (e)
    joins: Counter[str] = field(default_factory=Counter)  # (f)
    sample: list[str] = field(default_factory=list)
    sticky: int = 0


def majority(topic: dict[str, Any], subject_of: dict[str, str]) -> tuple[str, int]:
    """The subject most of a topic's members have, and how many have it."""
    votes = Counter(subject_of[i] for i in topic.get("message_ids", []))
    return votes.most_common(1)[0] if votes else ("?", 0)


def best_topic(topics: Sequence[dict[str, Any]], subject_of: dict[str, str], subject: str) -> int:
    """Index of the topic that best matches ``subject`` (-1: none holds any of it): among the
    topics most of whose members are the subject, the one with most of them; else the topic
    holding most of the subject's messages."""
    own = [sum(subject_of[i] == subject for i in t.get("message_ids", [])) for t in topics]
    led = [i for i, t in enumerate(topics) if majority(t, subject_of)[0] == subject]
    pool = led or [i for i, n in enumerate(own) if n > 0]
    return max(pool, key=lambda i: (own[i], -i)) if pool else -1


async def measure_chat(
    services: Any, chat: dict[str, Any], about: dict[str, str], figures: Figures
) -> None:
    """Map one chat through the background pass, click each subject's topic, rank baselines."""
    cid = check_chat_id(chat["id"])
    await refresh(services.topic_pass, cid)
    await services.chats.load(cid)
    view = await services.chats.view(cid)
    topics = [t for t in view.topics if not t.get("sticky")]
    figures.sticky += sum(len(t.get("message_ids", [])) for t in view.topics if t.get("sticky"))
    subject_of = {m["id"]: m["subject"] for m in chat["messages"]}
    pair = len(chat["subjects"]) == 2
    if pair:
        figures.pairs.append(len(topics))
    else:
        figures.bubbles.append((len(topics), len(chat["subjects"])))
    led = {majority(t, subject_of)[0] for t in topics}
    figures.leading.append((len(led & set(chat["subjects"])), len(chat["subjects"])))
    last_turn = {m["id"] for m in chat["messages"][-LAST_TURN:]}  # sent whatever the click
    for subject in chat["subjects"]:
        truth = {m["id"] for m in chat["messages"] if m["subject"] == subject} - last_turn
        best = best_topic(topics, subject_of, subject)
        kept = (await click(services, cid, [topics[best]["label"]]))[0] if best >= 0 else set()
        hits = len(kept & truth)
        (figures.pair_recall if pair else figures.recall).append(hits / len(truth))
        (figures.pair_precision if pair else figures.precision).append(hits / max(1, len(kept)))
    await click(services, cid, [])
    if not pair:
        await baselines(services, cid, chat, about, figures)


async def baselines(
    services: Any, cid: Any, chat: dict[str, Any], about: dict[str, str], figures: Figures
) -> None:
    """BM25, dense and hybrid against each subject's service text, keeping the subject's count."""
    messages = chat["messages"]
    store = await services.topic_pass.store()
    vectors = await store.sync_chat(cid, History([{k: m[k] for k in m} for m in messages]))
    bm25 = BM25([m["content"] for m in messages])
    queries = [about[s] for s in chat["subjects"]]
    query_vectors = await store.phrase_vectors(queries)
    for subject, query, qv in zip(chat["subjects"], queries, query_vectors, strict=True):
        truth = np.array([m["subject"] == subject for m in messages])
        n = int(truth.sum())
        words, meaning = bm25.scores(query), dense(vectors, qv)
        for name, scores in (("BM25", words), ("dense", meaning), ("hybrid", rrf(words, meaning))):
            top = rank(scores)[:n]
            figures.baselines.setdefault(name, []).append(float(truth[top].sum()) / n)


def label_figures(
    chats: Sequence[dict[str, Any]],
    about: dict[str, str],
    vocabulary: dict[str, frozenset[str]],
    figures: Figures,
) -> None:
    """(d): is each label closer to its subject's service text than to the chat's others?
    (e): does it name its subject, sharing a word with the service's schema?"""
    model = shared_local_model()
    texts = sorted({s for c in chats for s in c["subjects"]})
    service_vectors = dict(zip(texts, model.embed_sync([about[s] for s in texts]), strict=True))
    for chat in chats:
        subject_of = {m["id"]: m["subject"] for m in chat["messages"]}
        topics = [t for t in chat["topics"] if not t.get("sticky")]
        if not topics:
            continue
        labels = np.asarray(model.embed_sync([t["label"] for t in topics]), dtype=np.float64)
        others = np.stack([service_vectors[s] for s in chat["subjects"]]).astype(np.float64)
        closeness = labels @ others.T
        for topic, row in zip(topics, closeness, strict=True):
            subject, count = majority(topic, subject_of)
            own = chat["subjects"].index(subject)
            figures.labels.append(bool(row[own] > np.delete(row, own).max(initial=-1.0)))
            figures.naming.append(bool(word_stems(topic["label"]) & vocabulary[subject]))
            if len(figures.sample) < 24:
                share = count / max(1, len(topic.get("message_ids", [])))
                figures.sample.append(f"{topic['label']!r} -> {subject} ({share:.0%} of members)")


GROWN = 0.85  # (f): the share of a chat mapped before the rest joins it (past 1.2x: a new map)


async def measure_joins(
    services: Any, data: dict[str, Any], chat: dict[str, Any], figures: Figures
) -> None:
    """(f): the chat mapped at :data:`GROWN` of its messages, then the rest joining that map as
    new turns do after each reply (topics/grow.py): is each new message put with its subject's
    topic, left out, or put with another subject's?"""
    messages = data[chat["id"]]["messages"]
    cut = int(len(messages) * GROWN)
    cid = check_chat_id(f"{chat['id']}-grown")
    data[cid] = {"messages": [dict(m) for m in messages[:cut]]}
    await refresh(services.topic_pass, cid)
    data[cid]["messages"] = [*data[cid]["messages"], *(dict(m) for m in messages[cut:])]
    await services.chats.load(cid)
    await refresh(services.topic_pass, cid)
    await services.chats.load(cid)
    subject_of = {m["id"]: m["subject"] for m in chat["messages"]}
    early = {m["id"] for m in messages[:cut]}
    topics = [t for t in (await services.chats.view(cid)).topics if not t.get("sticky")]
    state = data[cid].get("smart_context", {}).get("topic_map", {})
    if state.get("size") != cut:  # drift called: the whole map was made again
        figures.joins["chats mapped again"] += 1
        return
    owner: dict[str, str] = {}
    for topic in topics:
        members = [i for i in topic.get("message_ids", []) if i in early]
        subject = Counter(subject_of[i] for i in members).most_common(1)
        for i in topic.get("message_ids", []):
            if i not in early and subject:
                owner[i] = subject[0][0]
    mapped = set(owner.values()) | {
        Counter(subject_of[i] for i in t.get("message_ids", []) if i in early).most_common(1)[0][0]
        for t in topics
        if any(i in early for i in t.get("message_ids", []))
    }
    for m in messages[cut:]:
        subject = subject_of[m["id"]]
        had = "its subject has a topic" if subject in mapped else "a subject with no topic"
        said = owner.get(m["id"])
        how = "left out" if said is None else "with its subject" if said == subject else "elsewhere"
        figures.joins[f"{had}: {how}"] += 1


async def run_part(part: Part, chats: list[dict[str, Any]], cache: Path) -> Figures:
    """Every chat of one part through the plugin (one start, embeddings cached in ``cache``)."""
    data = {
        c["id"]: {"messages": [{k: m[k] for k in ("id", "role", "content")} for m in c["messages"]]}
        for c in chats
    }
    services = await start(cache, data, "auto")
    figures = Figures()
    try:
        for chat in chats:
            await measure_chat(services, chat, part.about, figures)
            chat["topics"] = data[chat["id"]]["topics"]
            await measure_joins(services, data, chat, figures)
            await services.chats.settle(10)
    finally:
        await services.close()
    label_figures(chats, part.about, part.vocabulary, figures)
    return figures


def mean(xs: Sequence[float]) -> float:
    return statistics.mean(xs) if xs else float("nan")


def report(name: str, part: Part, chats: list[dict[str, Any]], f: Figures) -> None:
    """Print one part's figures."""
    n = sum(len(c["messages"]) for c in chats)
    many = [c for c in chats if len(c["subjects"]) > 2]
    print(
        f"\n== {name}: SGD {part.split}/, {len(many)} chats of 3-7 subjects and "
        f"{len(chats) - len(many)} of 2, {n} messages"
    )
    print(
        f"(a) click on each subject's topic: recall {mean(f.recall):.3f}  precision "
        f"{mean(f.precision):.3f}  ({len(f.recall)} subjects; 2-subject chats: recall "
        f"{mean(f.pair_recall):.3f}  precision {mean(f.pair_precision):.3f})"
    )
    for base, values in f.baselines.items():
        print(f"    baseline {base:<7} (oracle count)  recall = precision {mean(values):.3f}")
    off = [abs(b - s) for b, s in f.bubbles]
    print(
        f"(b) bubbles vs subjects: mean |difference| {mean(off):.2f}, within +-1 in "
        f"{sum(d <= 1 for d in off) / max(1, len(off)):.0%} of chats; "
        + ", ".join(f"{b}/{s}" for b, s in f.bubbles)
    )
    print(
        f"(c) 2-subject chats with exactly 2 topics: {sum(b == 2 for b in f.pairs)}/{len(f.pairs)}"
        f" ({', '.join(map(str, f.pairs))})"
    )
    print(
        f"(d) labels closer to their subject than to the chat's other subjects: "
        f"{mean([float(x) for x in f.labels]):.3f} of {len(f.labels)}; subjects most of some "
        f"bubble is about: {sum(a for a, _ in f.leading)} of {sum(b for _, b in f.leading)}; "
        f"sticky messages: {f.sticky}"
    )
    print(
        f"(e) labels that name their subject (a word of the service's name, description, "
        f"intents or slots): {mean([float(x) for x in f.naming]):.3f} of {len(f.naming)}"
    )
    print(
        f"(f) the last {1 - GROWN:.0%} of each chat joining the map made of the rest: "
        + "; ".join(f"{k} {v}" for k, v in sorted(f.joins.items()))
    )
    for line in f.sample:
        print(f"    {line}")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--data", help="SGD checkout or bare mirror (else SMART_CONTEXT_SGD)")
    cache = Path(tempfile.gettempdir()) / "sc-cache-topics"
    parser.add_argument("--cache", type=Path, default=cache, help="embeddings kept between runs")
    parser.add_argument("--chats", type=int, default=24, help="chats of 3-7 subjects per part")
    parser.add_argument("--pairs", type=int, default=16, help="chats of 2 subjects per part")
    parser.add_argument("--part", choices=("tune", "report", "both"), default="both")
    args = parser.parse_args()
    snap = snapshot("sgd", args.data)
    if snap is None:
        return
    for name, split, seed in (("tune", "train", SEED), ("report", "dev", SEED + 1)):
        if args.part not in (name, "both"):
            continue
        part = read_part(snap, split, np.random.default_rng(seed))
        chats = build_chats(part, seed, args.chats, args.pairs)
        figures = asyncio.run(run_part(part, chats, args.cache / split))
        report(f"{name} part", part, chats, figures)


if __name__ == "__main__":
    with reported():
        main()
