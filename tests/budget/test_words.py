"""The budget's keyword search over a history: its words, BM25 as FTS5 scores it, the best few,
and the chat's facts growing under requests that hold older snapshots."""

from __future__ import annotations

import sqlite3
from typing import Any

import numpy as np
import pytest

from smart_context.budget.facts import MessageFacts
from smart_context.budget.tokens import counter_for
from smart_context.budget.words import Words, bm25, words
from smart_context.messages import History


def history(texts: list[str], prefix: str = "m") -> History:
    return History(
        [
            {"id": f"{prefix}{i}", "role": "user" if i % 2 == 0 else "assistant", "content": t}
            for i, t in enumerate(texts)
        ]
    )


def facts_of(texts: list[str]) -> Any:
    return MessageFacts(counter_for("gpt-4o")).update(history(texts))


FILLER = [f"nothing here {i}" for i in range(12)]


def test_words_are_lowered_stemmed_without_marks_or_function_words() -> None:
    assert words("The CATS visited; visiting cat!") == ["cat", "visit", "visit", "cat"]
    assert words("Café crème, naïve") == words("cafe creme naive")
    assert words("ЖУРНАЛ журнал 日本語") == ["журнал", "журнал", "日本語"]
    assert words("what did you do to it?") == ["did"]
    assert words("Commit a3f9ed visited in 2024") == ["commit", "a3f9ed", "visit", "2024"]
    assert words("snake_case camelCase 4417 news") == ["snake", "case", "camelcas", "4417", "news"]


def test_the_best_messages_come_first_and_a_message_without_a_word_scores_nothing() -> None:
    facts = facts_of(
        [
            "The cat sat on the mat.",
            "Cats and dogs; cats everywhere, many cats.",
            "Nothing to see here.",
            "Café crème au lait",
            *FILLER,
        ]
    )
    scores = facts.text_scores("CATS!", 10)
    assert scores[1] > scores[0] > 0 and not scores[2:].any()
    assert np.flatnonzero(facts.text_scores("cafe creme", 10)).tolist() == [3]
    assert not facts.text_scores("what is it?", 10).any()  # function words only
    assert not facts.text_scores("cat", 0).any()


def test_only_the_best_few_are_kept_and_of_equal_scores_the_earlier() -> None:
    facts = facts_of(["pepper hot", "pepper red", "pepper pepper pepper", *FILLER * 3])
    assert np.flatnonzero(facts.text_scores("pepper", 1)).tolist() == [2]
    assert np.flatnonzero(facts.text_scores("pepper", 2)).tolist() == [0, 2]


def test_a_word_half_the_messages_hold_weighs_nothing() -> None:
    texts = ["plan again"] * 10 + ["plan with sourdough"] + ["other"] * 9
    scores = facts_of(texts).text_scores("the plan for sourdough", 20)
    assert np.flatnonzero(scores).tolist() == [10]  # "plan" alone finds nothing


def test_the_scores_are_those_of_sqlite_fts5_bm25() -> None:
    """Words the stemmer leaves distinct and no function word: the same tokens for FTS5's
    unicode61 tokenizer, so the same BM25 (k1 1.2, b 0.75, FTS5's IDF)."""
    rng = np.random.default_rng(7)
    vocabulary = ["kiwi", "mango", "lemon", "melon", "grape", "guava", "peach", "plum", "lime"]
    texts = [" ".join(rng.choice(vocabulary, size=int(rng.integers(1, 9)))) for _ in range(60)]
    raw = sqlite3.connect(":memory:")
    raw.execute("CREATE VIRTUAL TABLE t USING fts5(body, tokenize = 'unicode61')")
    raw.executemany("INSERT INTO t (rowid, body) VALUES (?, ?)", enumerate(texts, 1))
    facts = facts_of(texts)
    for query in ("kiwi", "mango plum", "lime guava peach"):
        expression = " OR ".join(query.split())
        expected = dict(
            raw.execute("SELECT rowid - 1, -bm25(t) FROM t WHERE t MATCH ?", (expression,))
        )
        scores = facts.text_scores(query, 100)
        found = {int(i): float(scores[i]) for i in np.flatnonzero(scores)}
        kept = {i for i, s in expected.items() if s > 1e-3}  # a word half the rows hold: ~0
        assert set(found) == kept
        # (FTS5 adds 1e-6 a word for a word half the rows hold, which is left out here)
        assert all(found[i] == pytest.approx(expected[i], rel=1e-5, abs=1e-5) for i in kept)
    raw.close()


def test_an_older_snapshot_scores_its_own_history_while_the_chat_grows() -> None:
    kept = MessageFacts(counter_for("gpt-4o"))
    texts = ["The locker code is 4417.", *FILLER]
    before = kept.update(history(texts))
    first = before.text_scores("locker code", 5)
    after = kept.update(history([*texts, "my locker is 12", "another locker"]))
    assert np.array_equal(before.text_scores("locker code", 5), first)
    assert len(after.text_scores("locker code", 5)) == len(texts) + 2
    assert after.text_scores("locker", 5)[len(texts) :].all()


def test_an_edited_message_is_found_by_its_new_words_only() -> None:
    kept = MessageFacts(counter_for("gpt-4o"))
    kept.update(history(["meet at the harbour", "harbour lights", *FILLER]))
    edited = kept.update(history(["meet at the station", "harbour lights", *FILLER]))
    assert np.flatnonzero(edited.text_scores("harbour", 5)).tolist() == [1]
    assert np.flatnonzero(edited.text_scores("station", 5)).tolist() == [0]


def test_postings_say_how_often_a_message_says_a_word_up_to_fifteen() -> None:
    said = Words.read(["echo " * 40 + "once", "echo"], 3)
    assert list(said.postings["echo"]) == [3 << 4 | 15, 4 << 4 | 1]
    assert said.counts.tolist() == [41, 1]


HOSTILE = [
    '"',
    "*",
    "NEAR(cat dog, 2)",
    "AND OR NOT",
    "content: cat",
    "'; DROP TABLE memories; --",
    "\x00 cat \x00",
    "日本語のテキスト 猫",
    "emoji 🐈 cat",
    "Ünïcödé çåt",
    "cat " * 3000,
    "".join(chr(0x20 + (i * 7919) % 0x2FF0) for i in range(10_000)),
    "",
]


@pytest.mark.parametrize("query", HOSTILE, ids=range(len(HOSTILE)))
def test_any_text_is_a_safe_query(query: str) -> None:
    facts = facts_of(["the cat and the dog", "日本語 猫", *FILLER])
    scores = facts.text_scores(query, 10)
    assert scores.shape == (14,) and scores.dtype == np.float32 and (scores >= 0).all()


def test_a_pasted_log_is_read_for_its_start_only() -> None:
    # a 20 MB log, in the history and as the message: only its first 16 KB are read
    pasted = "worker timeout retry " * 1_000_000 + "needle"
    assert set(words(pasted)) == {"worker", "timeout", "retri"}
    assert len(words(pasted)) < 3 * 16_384 // 20
    assert words(" " * 20_000 + "needle") == []  # nothing but spaces at its start
    facts = facts_of([pasted, "a needle in the hay", "worker on call", *FILLER])
    assert np.flatnonzero(facts.text_scores("needle", 5)).tolist() == [1]
    assert np.flatnonzero(facts.text_scores(pasted, 5)).tolist() == [0, 2]


def test_a_message_searches_for_its_first_32_distinct_words() -> None:
    asked = " ".join(f"w{i}" for i in range(40))
    facts = facts_of(["w35 is late", "w3 is early", *FILLER])
    assert np.flatnonzero(facts.text_scores(asked, 5)).tolist() == [1]


def test_a_chat_keeps_postings_for_so_many_distinct_words(monkeypatch: pytest.MonkeyPatch) -> None:
    """A log says new identifiers in every message: past the cap a new word is not kept, and
    the words kept still gain the messages that say them."""
    from smart_context.budget import words as words_module

    monkeypatch.setattr(words_module, "MAX_WORDS", 3)
    kept = MessageFacts(counter_for("gpt-4o"))
    texts = ["alpha beta gamma", "delta alpha", *FILLER]
    facts = kept.update(history(texts))
    assert len(kept.words.postings) == 3  # alpha, beta, gamma: delta and the filler's are not
    assert not facts.text_scores("delta", 5).any()
    grown = kept.update(history([*texts, "gamma again", "epsilon"]))
    assert np.flatnonzero(grown.text_scores("gamma", 5)).tolist() == [0, len(texts)]
    assert grown.word_counts.tolist()[:2] == [3, 2]  # every word counts in a message's length


def test_an_empty_history_scores_nothing() -> None:
    assert bm25({}, np.zeros(0, dtype=np.int32), "cat", 5).shape == (0,)
