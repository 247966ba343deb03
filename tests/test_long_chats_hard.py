"""The hard long-chat set (benchmarks/long_chats_hard.py): the files match their source, labels
point at real messages, questions are paraphrased, corrections come after what they correct,
distractors repeat the answers' names, the filler is varied, and bad sources are refused."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from benchmarks.long_chats_hard import (
    CHATS_FILE,
    KINDS,
    LABELS_FILE,
    SOURCE,
    make_set,
    words,
)

# words a paraphrase may share with its answer without giving it away
FUNCTION = frozenset(
    [
        *("what", "which", "when", "where", "with", "from", "that", "this", "have", "does"),
        *("will", "much", "many", "before", "first", "after", "they", "them", "your", "then"),
    ]
)


@pytest.fixture(scope="module")
def built() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    return make_set()


def messages_by_id(chat: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {m["id"]: m for m in chat["messages"]}


def test_the_files_are_what_the_source_builds(built: Any) -> None:
    chats, labels = built
    assert json.loads(CHATS_FILE.read_text("utf-8")) == chats
    assert json.loads(LABELS_FILE.read_text("utf-8")) == labels


def test_sizes_roles_and_ids(built: Any) -> None:
    chats, labels = built
    assert len(chats) >= 5 and len(labels) >= 150
    for chat in chats:
        assert 1500 <= len(chat["messages"]) <= 3000
        for i, m in enumerate(chat["messages"]):
            assert m["id"] == f"m{i + 1:05d}" and m["content"].strip()
            assert m["role"] == ("user" if i % 2 == 0 else "assistant")
    assert len({q["id"] for q in labels}) == len(labels)
    assert {q["kind"] for q in labels} == set(KINDS)
    assert {q["split"] for q in labels} == {"tune", "heldout"}


def test_answers_are_old_parts_of_their_chat(built: Any) -> None:
    chats, labels = built
    by_id = {c["id"]: c for c in chats}
    for q in labels:
        chat = by_id[q["chat"]]
        position = {m["id"]: i for i, m in enumerate(chat["messages"])}
        assert q["answers"] and all(a in position for a in q["answers"])
        # every answer lies well before the end: last-N cannot reach it at these budgets
        assert max(position[a] for a in q["answers"]) < 0.85 * len(chat["messages"])


def test_questions_are_paraphrased(built: Any) -> None:
    chats, labels = built
    by_id = {c["id"]: messages_by_id(c) for c in chats}
    shared = []
    for q in labels:
        answer_words = set().union(*(words(by_id[q["chat"]][a]["content"]) for a in q["answers"]))
        shared.append(len((words(q["text"]) - FUNCTION) & answer_words))
    assert max(shared) <= 3
    assert sum(s <= 1 for s in shared) >= 0.8 * len(shared)


def test_kinds_have_their_shape(built: Any) -> None:
    chats, labels = built
    by_id = {c["id"]: messages_by_id(c) for c in chats}
    for q in labels:
        roles = [by_id[q["chat"]][a]["role"] for a in q["answers"]]
        if q["kind"] == "assistant":
            assert roles == ["assistant"]
        elif q["kind"] == "turn":
            assert len(roles) == 2
        elif q["kind"] == "change":
            assert len(roles) >= 2 and q["answers"] == sorted(q["answers"])
    # a correction's answer comes after the first statement it corrects (the change question)
    changes = [q for q in labels if q["kind"] == "change"]
    corrections = {a for q in labels if q["kind"] == "correction" for a in q["answers"]}
    assert any(q["answers"][-1] in corrections for q in changes)


def test_distractors_repeat_the_answers_names_and_numbers(built: Any) -> None:
    chats, labels = built
    by_id = {c["id"]: c for c in chats}
    numbers_repeated = 0
    for q in labels:
        chat = by_id[q["chat"]]
        answers = set(q["answers"])
        texts = messages_by_id(chat)
        numbers = {w for a in answers for w in words(texts[a]["content"]) if w.isdigit()}
        others = [m["content"] for m in chat["messages"] if m["id"] not in answers]
        if any(any(n in words(t) for n in numbers) for t in others if numbers):
            numbers_repeated += 1
    assert numbers_repeated >= len(labels) // 2


def test_filler_is_varied_and_answers_replies(built: Any) -> None:
    chats, _ = built
    for chat in chats:
        long = [m["content"] for m in chat["messages"] if len(m["content"]) > 60]
        counts = Counter(long)
        assert len(counts) >= 0.85 * len(long)
        assert counts.most_common(1)[0][1] <= 12


def copy_source(tmp_path: Path) -> Path:
    target = tmp_path / "source"
    shutil.copytree(SOURCE, target)
    return target


def test_an_unknown_answer_key_is_refused(tmp_path: Path) -> None:
    source = copy_source(tmp_path)
    chat = source / "chat_a.toml"
    chat.write_text(chat.read_text("utf-8").replace('"rentup.0"]', '"rentup.7"]', 1), "utf-8")
    with pytest.raises(ValueError, match="unknown messages"):
        make_set(source)


def test_a_slot_the_chat_has_no_names_for_is_refused(tmp_path: Path) -> None:
    source = copy_source(tmp_path)
    chat = source / "chat_a.toml"
    text = chat.read_text("utf-8").replace('landlord = ["landlord", "property manager"]\n', "")
    chat.write_text(text, "utf-8")
    with pytest.raises(ValueError, match="needs names"):
        make_set(source)


def test_events_that_do_not_fit_are_refused(tmp_path: Path) -> None:
    source = copy_source(tmp_path)
    chat = source / "chat_a.toml"
    chat.write_text(chat.read_text("utf-8").replace("messages = 2000", "messages = 120"), "utf-8")
    with pytest.raises(ValueError, match="events run to"):
        make_set(source)


def test_the_benchmark_loads_one_split_or_both() -> None:
    from benchmarks.bench_long_recall import load_chats

    held = load_chats("hard", None, "heldout")
    tune = load_chats("hard", None, "tune")
    both = load_chats("hard", None, "all")
    assert {c["id"] for c in held} == {"hard-d", "hard-e"}
    assert all(q["split"] == "heldout" for c in held for q in c["questions"])
    assert {c["id"] for c in tune} == {"hard-a", "hard-b", "hard-c"}
    assert sum(len(c["questions"]) for c in both) == sum(
        len(c["questions"]) for c in [*held, *tune]
    )
