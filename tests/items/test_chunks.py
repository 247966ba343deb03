"""Text cut into chunks, and a message's query chunks."""

from __future__ import annotations

import itertools
import random

import pytest

from smart_context.items.chunks import (
    MAX_QUERY_CHUNKS,
    MIN_QUERY_CHUNK,
    chunk,
    query_chunks,
    representative_chunks,
)

WORDS = [
    *("the", "dough", "rises", "slowly", "at", "room", "temperature", "while", "starter"),
    *("Kyoto", "temples", "open", "early", "fetch", "retries", "asyncio", "event", "loop"),
    *("Postgres", "index", "a", "I", "pneumonoultramicroscopicsilicovolcanoconiosis"),
]


def random_text(rng: random.Random) -> str:
    """Paragraphs of sentences and list lines, with odd spacing, CRLF and stray breaks."""
    paragraphs = []
    for _ in range(rng.randint(0, 8)):
        sentences = []
        for _ in range(rng.randint(1, 12)):
            words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 40)))
            end = rng.choice([".", "!", "?", '."', ".)", "", ":", "…"])
            sentences.append(rng.choice(["", "- ", "## ", "# "]) + words + end)
        paragraphs.append(rng.choice([" ", "  ", "\n", " \t"]).join(sentences))
    return rng.choice(["\n\n", "\n \n", " \n\n\n\n ", "\r\n\r\n", "\t\n\n"]).join(paragraphs)


CORPUS = [random_text(random.Random(seed)) for seed in range(300)]
TARGETS = [20, 80, 500]


# --- chunk: properties ---------------------------------------------------------------------------


@pytest.mark.parametrize("target", TARGETS)
def test_no_chunk_is_over_the_target_unless_it_is_a_single_word(target: int) -> None:
    for text in CORPUS:
        for piece in chunk(text, target):
            assert len(piece) <= target or len(piece.split()) == 1, piece


@pytest.mark.parametrize("target", TARGETS)
def test_the_chunks_cover_the_text_word_for_word_in_order(target: int) -> None:
    for text in CORPUS:
        assert " ".join(chunk(text, target)).split() == text.split()


@pytest.mark.parametrize("target", TARGETS)
def test_no_chunk_is_empty_or_padded(target: int) -> None:
    for text in CORPUS:
        for piece in chunk(text, target):
            assert piece and piece == piece.strip()


def test_chunking_is_deterministic() -> None:
    assert [chunk(t) for t in CORPUS] == [chunk(t) for t in CORPUS]


def test_neighbouring_chunks_could_not_have_been_merged() -> None:
    # greedy merging: the next chunk's first piece did not fit, with its break of at most two
    # characters (a blank line), so no two neighbours would have fitted together
    for text in CORPUS:
        pieces = chunk(text, 80)
        for first, second in itertools.pairwise(pieces):
            assert len(first) + 2 + len(second) > 80


# --- chunk: examples -----------------------------------------------------------------------------


def test_short_text_is_one_chunk() -> None:
    assert chunk("Use type hints.\n\nKeep functions short.") == [
        "Use type hints.\n\nKeep functions short."
    ]


def test_empty_and_blank_text_have_no_chunks() -> None:
    assert chunk("") == []
    assert chunk(" \n\n \t\n") == []


def test_crlf_blank_lines_separate_paragraphs() -> None:
    assert chunk("first\r\n\r\nsecond", target=8) == ["first", "second"]


def test_paragraphs_are_split_before_sentences() -> None:
    first = "A" * 30 + "."
    second = "B" * 30 + "."
    assert chunk(f"{first}\n\n{second}", target=40) == [first, second]


def test_a_long_paragraph_is_split_at_sentence_ends() -> None:
    text = "The oven must be hot. Preheat it for an hour! Is the pot hot? Then load the dough."
    assert chunk(text, target=45) == [
        "The oven must be hot. Preheat it for an hour!",
        "Is the pot hot? Then load the dough.",
    ]


def test_closing_quotes_stay_with_their_sentence() -> None:
    text = 'He said "bake it hot." Then he left (as usual.) The end came.'
    assert chunk(text, target=25) == [
        'He said "bake it hot."',
        "Then he left (as usual.)",
        "The end came.",
    ]


def test_a_long_list_is_split_at_its_lines() -> None:
    lines = [f"- item number {i} of the packing list" for i in range(6)]
    chunks = chunk("\n".join(lines), target=80)
    assert chunks == ["\n".join(lines[0:2]), "\n".join(lines[2:4]), "\n".join(lines[4:6])]


def test_a_sentence_longer_than_the_target_is_split_between_words() -> None:
    sentence = " ".join(["word"] * 30) + "."
    chunks = chunk(sentence, target=50)
    assert all(len(c) <= 50 for c in chunks)
    assert " ".join(chunks) == sentence


def test_a_word_longer_than_the_target_is_never_cut() -> None:
    word = "x" * 120
    assert chunk(f"short. {word} tail", target=50) == ["short.", word, "tail"]


def test_decimal_points_and_urls_are_not_sentence_ends() -> None:
    text = "Version 3.11 is at python.org/downloads today. " * 3
    assert all(c.endswith("today.") for c in chunk(text.strip(), target=50))


def test_small_paragraphs_merge_with_a_blank_line_between() -> None:
    text = "## Kyoto\n\nStart early at Fushimi Inari.\n\n" + "x " * 300
    assert chunk(text, target=60)[0] == "## Kyoto\n\nStart early at Fushimi Inari."


def test_a_heading_starts_its_sections_chunk_rather_than_ending_the_one_before() -> None:
    text = "Intro " * 12 + "\n\n## Asyncio\n\n" + "One session. " * 5 + "\n\n# A\n## B\n\ntext"
    assert chunk(text, target=80) == [
        ("Intro " * 12).strip(),
        "## Asyncio\n\n" + ("One session. " * 5).strip(),
        "# A\n## B\n\ntext",
    ]


def test_a_heading_too_long_to_join_its_section_stays_whole() -> None:
    section = "x " * 45
    assert chunk(f"## Title\n\n{section}", target=90) == ["## Title", section.strip()]
    assert chunk("intro\n\n## Last", target=90) == ["intro\n\n## Last"]


def test_a_target_under_one_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        chunk("text", target=0)
    with pytest.raises(ValueError, match="at least 1"):
        query_chunks("text", target=0)


# --- query_chunks --------------------------------------------------------------------------------


def test_a_message_is_one_chunk_per_sentence() -> None:
    message = "How do I get from Kyoto to Nara? And what does the JR pass cost now?"
    assert query_chunks(message) == [
        "How do I get from Kyoto to Nara?",
        "And what does the JR pass cost now?",
    ]


def test_a_short_fragment_joins_the_previous_sentence() -> None:
    message = "Why is my starter smelling of nail polish? Thanks."
    assert query_chunks(message) == ["Why is my starter smelling of nail polish? Thanks."]


def test_a_short_first_fragment_joins_the_next_sentence() -> None:
    message = "Two things:\nwhy does the scraper leak memory, and how do I test it?"
    assert query_chunks(message) == [
        "Two things: why does the scraper leak memory, and how do I test it?"
    ]


def test_a_message_of_one_short_fragment_is_still_a_query() -> None:
    assert query_chunks("ok") == ["ok"]
    assert query_chunks("Hi. Ok.") == ["Hi. Ok."]


def test_an_empty_message_has_no_query_chunks() -> None:
    assert query_chunks("") == []
    assert query_chunks("  \n\n ") == []


def test_a_long_query_sentence_is_split_not_cut_off() -> None:
    sentence = " ".join(f"w{i}" for i in range(300))
    chunks = query_chunks(sentence, target=100)
    assert " ".join(chunks).split() == sentence.split()
    assert all(len(c) <= 100 for c in chunks)


@pytest.mark.parametrize("target", TARGETS)
def test_query_chunks_cover_the_message_within_the_target(target: int) -> None:
    for text in CORPUS:
        chunks = query_chunks(text, target)
        assert " ".join(chunks).split() == text.split()
        assert all(len(c) <= target or len(c.split()) == 1 for c in chunks)


@pytest.mark.parametrize("target", TARGETS)
def test_a_short_query_chunk_is_left_only_where_no_neighbour_had_room(target: int) -> None:
    for text in CORPUS:
        chunks = query_chunks(text, target)
        for i, short in enumerate(chunks):
            if len(short) >= MIN_QUERY_CHUNK or len(chunks) == 1:
                continue
            assert i == 0 or len(chunks[i - 1]) + 1 + len(short) > target
            assert i == len(chunks) - 1 or len(short) + 1 + len(chunks[i + 1]) > target


# --- representative_chunks -----------------------------------------------------------------------


def numbered(n: int) -> str:
    return " ".join(f"Line {i} of the pasted log says the worker timed out." for i in range(n))


def test_a_short_message_keeps_every_query_chunk() -> None:
    message = "Why is my starter flat? And how warm should the kitchen be?"
    assert representative_chunks(message) == query_chunks(message)


def test_a_long_message_keeps_its_first_and_last_sentences_and_evenly_between() -> None:
    chunks = query_chunks(numbered(100))
    picked = representative_chunks(numbered(100))
    assert len(picked) == MAX_QUERY_CHUNKS
    assert picked[0] == chunks[0] and picked[-1] == chunks[-1]
    places = [chunks.index(p) for p in picked]
    gaps = {b - a for a, b in itertools.pairwise(places)}
    assert places == sorted(places) and max(gaps) - min(gaps) <= 1


@pytest.mark.parametrize("n", [3_000, 300_000])  # 160 KB, 16 MB
def test_a_pasted_document_of_any_size_gives_whole_sentences_from_start_to_end(n: int) -> None:
    message = numbered(n)
    picked = representative_chunks(message)
    assert len(picked) == MAX_QUERY_CHUNKS
    assert picked[0].startswith("Line 0 ") and picked[-1].startswith(f"Line {n - 1} ")
    # whole sentences of the message, in order, from all over it
    assert all(p.startswith("Line ") and p.endswith("timed out.") for p in picked)
    lines = [int(p.split()[1]) for p in picked]
    assert lines == sorted(lines) and lines[MAX_QUERY_CHUNKS // 2] > n // 3


def test_the_chunk_limit_must_be_positive() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        representative_chunks("text", limit=0)
    assert representative_chunks(numbered(10), limit=1) == query_chunks(numbered(10))[-1:]
