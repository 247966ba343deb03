"""A harder long-chat recall set: hand-written facts and questions in generated everyday chat.

Run: PYTHONPATH=. python benchmarks/long_chats_hard.py
(writes ``benchmarks/data/long_chats_hard.json`` and ``long_chats_hard_labels.json``)

The hand-written parts live in ``benchmarks/data/long_chats_hard/``: ``chat_*.toml`` give each
chat's people, its events (the messages that carry facts, corrections and distractors, each at a
share of the chat) and its questions, each naming the messages that answer it; ``filler_*.toml``
give the pieces the rest of the chat is composed from. Questions are paraphrased (they avoid the
answer's words), facts are restated or corrected later (the answer is the latest, and both count
where the question asks about the change), distractors repeat the answer's names and numbers,
some answers need two messages (a question and its answer, or a fact split over a turn), and
some sit in the assistant's reply.

Kinds: ``paraphrase`` (one message, other words), ``assistant`` (the assistant's reply holds
it), ``turn`` (two messages of one exchange), ``correction`` (the latest of a changed fact) and
``change`` (the old and the new value both). Chats with ``split = "tune"`` may be used to choose
settings; ``"heldout"`` ones only to report them.

Only the standard library; ``random.Random(seed)`` per chat, so the files are reproducible.
"""

from __future__ import annotations

import json
import random
import re
import string
import sys
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

SOURCE = Path(__file__).parent / "data" / "long_chats_hard"
CHATS_FILE = Path(__file__).parent / "data" / "long_chats_hard.json"
LABELS_FILE = Path(__file__).parent / "data" / "long_chats_hard_labels.json"
KINDS = ("paraphrase", "assistant", "turn", "correction", "change")
DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
MONTHS = ["March", "April", "May", "June", "September", "October", "November"]
SESSION = (2, 7)  # turns spent on one subject before the talk moves on
SHORT_SHARE = 0.1  # turns that are a short exchange ("ok thanks" / "Glad it worked.")


def load_source(source: Path = SOURCE) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The filler pieces (``common`` and ``filler`` merged over the files) and the chats."""
    pieces: dict[str, Any] = {"common": {}, "filler": {}}
    for path in sorted(source.glob("filler_*.toml")):
        data = tomllib.loads(path.read_text(encoding="utf-8"))
        pieces["common"].update(data.get("common", {}))
        pieces["filler"].update(data.get("filler", {}))
    chats = [
        tomllib.loads(p.read_text(encoding="utf-8")) for p in sorted(source.glob("chat_*.toml"))
    ]
    return pieces, chats


def slots_of(text: str) -> set[str]:
    """The ``{slot}`` names a piece uses."""
    return {name for _, name, _, _ in string.Formatter().parse(text) if name}


class _Slots(dict[str, str]):
    """Slot values for one message, each drawn once when first used."""

    def __init__(self, rng: random.Random, words: Mapping[str, Sequence[str]]) -> None:
        super().__init__()
        self.rng, self.words = rng, words

    def __missing__(self, key: str) -> str:
        rng = self.rng
        generic = {
            "n": lambda: str(rng.randint(2, 12)),
            "num": lambda: str(rng.randrange(15, 400)),
            "day": lambda: rng.choice(DAYS),
            "month": lambda: rng.choice(MONTHS),
            "time": lambda: f"{rng.randint(6, 22)}:{rng.choice(['00', '15', '30', '45'])}",
        }
        if key in generic:
            value = generic[key]()
        elif key in self.words:
            value = rng.choice(list(self.words[key]))
        else:
            raise KeyError(f"no words for slot {{{key}}}")
        self[key] = value
        return value


class Composer:
    """Composes the everyday turns of one chat from the filler pieces."""

    def __init__(self, pieces: dict[str, Any], chat: dict[str, Any], rng: random.Random) -> None:
        self.common = pieces["common"]
        self.subjects = {s: pieces["filler"][s] for s in chat["subjects"]}
        self.names = chat.get("names", {})
        self.rng = rng
        self.seen: set[str] = set()
        for subject, pool in self.subjects.items():
            words = {**pool.get("words", {}), **self.names}
            texts = [*pool["context"], *pool["more"], *(t for pair in pool["turns"] for t in pair)]
            for text in texts:
                missing = slots_of(text) - set(words) - {"n", "num", "day", "month", "time"}
                if missing:
                    raise ValueError(f"{chat['id']}: {subject} needs names for {missing}")

    def turns(self, count: int) -> list[tuple[str, str]]:
        """``count`` user/assistant exchanges in sessions of a few turns per subject."""
        out: list[tuple[str, str]] = []
        while len(out) < count:
            subject = self.rng.choice(list(self.subjects))
            for _ in range(self.rng.randint(*SESSION)):
                if len(out) == count:
                    break
                out.append(self.exchange(subject))
        return out

    def exchange(self, subject: str) -> tuple[str, str]:
        """One user message and the reply that answers it, not said before in this chat (a
        few tries), or now and then a short exchange ("ok thanks" / "Anytime.")."""
        rng = self.rng
        if rng.random() < SHORT_SHARE:
            user, reply = rng.choice(self.common["short"])
            return user, reply  # short exchanges repeat in real chats too
        pool = self.subjects[subject]
        for _ in range(20):
            slots = _Slots(rng, {**pool.get("words", {}), **self.names})
            asked, answer = rng.choice(pool["turns"])
            user = self._user(pool, asked.format_map(slots), slots)
            reply = self._reply(pool, answer.format_map(slots), slots)
            if user not in self.seen and reply not in self.seen:
                break
        self.seen.update((user, reply))
        return user, reply

    def _user(self, pool: Mapping[str, Any], asked: str, slots: _Slots) -> str:
        rng, common = self.rng, self.common
        parts = [asked]
        if rng.random() < 0.35:
            parts.insert(0, rng.choice(pool["context"]).format_map(slots))
        if rng.random() < 0.25:
            parts.insert(0, rng.choice(common["user_open"]))
        if rng.random() < 0.2:
            parts.append(rng.choice(common["user_close"]))
        return " ".join(parts)

    def _reply(self, pool: Mapping[str, Any], answer: str, slots: _Slots) -> str:
        rng, common = self.rng, self.common
        parts = [answer]
        if rng.random() < 0.35:
            parts.insert(0, rng.choice(common["assistant_open"]))
        if rng.random() < 0.3:
            parts.append(rng.choice(pool["more"]).format_map(slots))
        if rng.random() < 0.25:
            parts.append(rng.choice(common["assistant_close"]))
        return " ".join(parts)


def place_events(chat: dict[str, Any]) -> list[tuple[int, str, list[str]]]:
    """(first position, key, texts) per event in order of ``at``; a user message always sits at
    an even position, and an event never overlaps the one before."""
    n = chat["messages"]
    out: list[tuple[int, str, list[str]]] = []
    end = 2
    for event in sorted(chat["event"], key=lambda e: e["at"]):
        texts = list(event["turns"])
        if len(texts) % 2:
            raise ValueError(f"{chat['id']}/{event['key']}: turns must end with the reply")
        start = max(int(event["at"] * n) // 2 * 2, end + 2)  # at least one exchange between
        out.append((start, event["key"], texts))
        end = start + len(texts)
    if end > n - 20:
        raise ValueError(f"{chat['id']}: events run to {end} of {n} messages")
    return out


def make_chat(
    pieces: dict[str, Any], chat: dict[str, Any]
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The chat's messages and its labelled questions."""
    rng = random.Random(chat["seed"])  # noqa: S311 - a reproducible set, not a secret
    composer = Composer(pieces, chat, rng)
    n = chat["messages"]
    messages: list[dict[str, str]] = []
    keys: dict[str, str] = {}

    def add(role: str, text: str) -> str:
        mid = f"m{len(messages) + 1:05d}"
        messages.append({"id": mid, "role": role, "content": text})
        return mid

    events = place_events(chat)
    # the chat as exchanges: filler ones (None) and the events' own, in order
    blocks: list[tuple[str, list[str]] | None] = []
    for start, key, texts in events:
        blocks += [None] * ((start - 2 * len(blocks)) // 2)
        blocks += [(f"{key}.{i}", texts[i : i + 2]) for i in range(0, len(texts), 2)]
    blocks += [None] * ((n - 2 * len(blocks)) // 2)
    ends = {key: start + len(texts) for start, key, texts in events}
    filler = composer.turns(blocks.count(None))
    for talk in chat.get("chatter", []):
        # each exchange about the chat's own story replaces a filler one after its event
        free = [i for i in range(ends[talk["after"]] // 2, len(blocks)) if blocks[i] is None]
        blocks[rng.choice(free[: len(free) * 9 // 10])] = ("", list(talk["turns"]))
    made = iter(filler)
    for block in blocks:
        if block is None:
            user, reply = next(made)
            add("user", user)
            add("assistant", reply)
            continue
        first, pair = block
        roles = ("user", "assistant")
        mids = [add(role, text.strip()) for role, text in zip(roles, pair, strict=True)]
        if first:  # an event's exchange: "key.i" names its user message, "key.i+1" the reply
            key, index = first.rsplit(".", 1)
            keys[first] = mids[0]
            keys[f"{key}.{int(index) + 1}"] = mids[1]
    questions = []
    for number, q in enumerate(chat["question"], 1):
        if q["kind"] not in KINDS:
            raise ValueError(f"{chat['id']}: unknown kind {q['kind']!r}")
        missing = [a for a in q["answers"] if a not in keys]
        if missing:
            raise ValueError(f"{chat['id']}: {q['text']!r} names unknown messages {missing}")
        questions.append(
            {
                "chat": chat["id"],
                "id": f"{chat['id']}-q{number:02d}",
                "text": q["text"],
                "kind": q["kind"],
                "split": chat["split"],
                "answers": [keys[a] for a in q["answers"]],
            }
        )
    return {"id": chat["id"], "messages": messages}, questions


def make_set(source: Path = SOURCE) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Every chat of ``source`` and all their questions."""
    pieces, specs = load_source(source)
    chats, labels = [], []
    for spec in specs:
        chat, questions = make_chat(pieces, spec)
        chats.append(chat)
        labels.extend(questions)
    return chats, labels


_WORD = re.compile(r"[a-z0-9]+")


def words(text: str) -> set[str]:
    """Lower-case words of four letters or more, digits kept (for the overlap checks)."""
    return {w for w in _WORD.findall(text.lower()) if len(w) >= 4 or w.isdigit()}


def stats(chats: Sequence[dict[str, Any]], labels: Sequence[dict[str, Any]]) -> str:
    sizes = ", ".join(str(len(c["messages"])) for c in chats)
    texts = [m["content"] for c in chats for m in c["messages"]]
    kinds: dict[str, int] = {}
    for q in labels:
        kinds[q["kind"]] = kinds.get(q["kind"], 0) + 1
    return (
        f"{len(chats)} chats ({sizes} messages), {len(labels)} questions {kinds}; "
        f"{len(set(texts)) / len(texts):.1%} of the messages are distinct"
    )


def main() -> int:
    chats, labels = make_set()
    CHATS_FILE.write_text(json.dumps(chats, ensure_ascii=False, indent=0) + "\n", "utf-8")
    LABELS_FILE.write_text(json.dumps(labels, ensure_ascii=False, indent=1) + "\n", "utf-8")
    print(stats(chats, labels), file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
