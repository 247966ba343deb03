"""The generated long labelled chats (benchmarks/long_chats.py): deterministic, well-formed,
labels that point at real messages, the kinds in their shares, honest paraphrases, distractors."""

from __future__ import annotations

import json
import re
from collections import Counter
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from benchmarks.long_chats import (
    FACT_ZONE,
    KIND_SHARES,
    SUBJECTS,
    content_words,
    make_chat,
    make_set,
)

DATA = Path(__file__).resolve().parent.parent / "benchmarks" / "data" / "long_chats.json"


@pytest.fixture(scope="module", params=[(1000, 3), (2000, 11)], ids=["1000", "2000"])
def chat(request: pytest.FixtureRequest) -> dict[str, Any]:
    size, seed = request.param
    return make_chat(size, seed)


def test_same_seed_same_chat_other_seed_other_chat() -> None:
    assert make_chat(600, 5) == make_chat(600, 5)
    assert make_chat(600, 5)["messages"] != make_chat(600, 6)["messages"]


def test_set_ids_name_size_and_letter() -> None:
    chats = make_set(sizes=(400, 400, 600), seed=1)
    assert [c["id"] for c in chats] == ["long-400-a", "long-400-b", "long-600-a"]
    assert [len(c["messages"]) for c in chats] == [400, 400, 600]


def test_shapes_and_unique_ids(chat: dict[str, Any]) -> None:
    assert set(chat) == {"id", "messages", "questions"}
    ids = [m["id"] for m in chat["messages"]]
    assert len(set(ids)) == len(ids)
    assert all(re.fullmatch(r"m\d{5}", i) for i in ids)
    for m in chat["messages"]:
        assert set(m) == {"id", "role", "content"} and m["role"] in {"user", "assistant"}
        assert m["content"].strip()
    qids = [q["id"] for q in chat["questions"]]
    assert len(set(qids)) == len(qids)
    for q in chat["questions"]:
        assert q["text"].strip() and q["kind"] in KIND_SHARES and q["entities"]


def test_answers_exist_and_lie_in_the_first_60_percent(chat: dict[str, Any]) -> None:
    position = {m["id"]: i for i, m in enumerate(chat["messages"])}
    limit = FACT_ZONE * len(chat["messages"])
    for q in chat["questions"]:
        assert q["answers"] and len(set(q["answers"])) == len(q["answers"])
        for a in q["answers"]:
            assert a in position and position[a] < limit, (q, a)
        if q["kind"] == "multi":  # at least two separate places
            spots = sorted(position[a] for a in q["answers"])
            assert spots[-1] - spots[0] > 2, q


def test_roles_alternate(chat: dict[str, Any]) -> None:
    roles = [m["role"] for m in chat["messages"]]
    assert roles[0] == "user"
    same = sum(a == b for a, b in pairwise(roles))
    assert same <= 0.05 * len(roles)


def test_enough_questions_in_the_expected_shares(chat: dict[str, Any]) -> None:
    questions = chat["questions"]
    assert len(questions) >= 40 * len(chat["messages"]) / 1000
    counts = Counter(q["kind"] for q in questions)
    for kind, share in KIND_SHARES.items():
        assert abs(counts[kind] / len(questions) - share) <= 0.10, (kind, counts)


def test_paraphrases_share_at_most_one_content_word(chat: dict[str, Any]) -> None:
    content = {m["id"]: m["content"] for m in chat["messages"]}
    paraphrases = [q for q in chat["questions"] if q["kind"] == "paraphrase"]
    assert paraphrases
    for q in paraphrases:
        answer_words = set().union(*(content_words(content[a]) for a in q["answers"]))
        assert len(content_words(q["text"]) & answer_words) <= 1, q


def test_lexical_questions_share_a_distinctive_word(chat: dict[str, Any]) -> None:
    content = {m["id"]: m["content"] for m in chat["messages"]}
    for q in chat["questions"]:
        if q["kind"] == "lexical":
            answer_words = set().union(*(content_words(content[a]) for a in q["answers"]))
            assert content_words(q["text"]) & answer_words, q


def test_entities_come_back_in_at_least_three_distractors(chat: dict[str, Any]) -> None:
    sample = [q for q in chat["questions"] if q["kind"] != "multi"][::3]
    assert len(sample) >= 8
    for q in sample:
        for entity in q["entities"]:
            pattern = re.compile(r"\b" + re.escape(entity) + r"\b", re.IGNORECASE)
            others = [
                m
                for m in chat["messages"]
                if m["id"] not in q["answers"] and pattern.search(m["content"])
            ]
            assert len(others) >= 3, (q, entity, len(others))


def test_messages_vary_in_subject_length_and_text(chat: dict[str, Any]) -> None:
    assert len(SUBJECTS) >= 12
    messages = chat["messages"]
    words = [len(m["content"].split()) for m in messages]
    assert sum(15 <= w <= 120 for w in words) >= 0.85 * len(words)
    assert any(w <= 3 for w in words)  # small talk
    assert any("```python" in m["content"] for m in messages)  # long code answers
    assert any("from now on" in m["content"].lower() and m["role"] == "user" for m in messages)
    distinct = len({m["content"] for m in messages})
    assert distinct >= 0.9 * len(messages)


def test_committed_data_is_what_the_generator_makes() -> None:
    if not DATA.exists():
        pytest.skip("long_chats.json is generated in-process")
    assert json.loads(DATA.read_text(encoding="utf-8")) == make_set()
