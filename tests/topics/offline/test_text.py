"""The words of a chat: standing instructions, trivial messages, terms of prose and code."""

from __future__ import annotations

import numpy as np
import pytest

from smart_context.topics.offline import cluster as offline_topics
from smart_context.topics.offline.cluster import extract_offline
from smart_context.topics.offline.talk import is_instruction, is_small_talk
from smart_context.topics.offline.text import (
    is_generic,
    is_trivial,
    key_phrases,
    parse_all,
    terms_of,
)
from smart_context.vectors.ops import normalize_rows
from tests.fakes import make_messages

INSTRUCTIONS = [
    "be concise",
    "always answer in French",
    "use Python 3.12 from now on",
    "keep answers short",
    "don't use emojis",
    "please reply in bullet points",
]


def test_offline_topics_still_exports_the_word_checks() -> None:
    assert offline_topics.is_instruction is is_instruction
    assert offline_topics.is_trivial is is_trivial


# --- is_instruction -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        *INSTRUCTIONS,
        "Don’t use emojis!",  # noqa: RUF001 (the typographic apostrophe phones type)
        "No emojis please",
        "can you keep your answers short from now on?",
        "I prefer short answers",
        "I prefer metric units.",
        "I prefer TypeScript.",
        "I'd prefer C++ over Rust.",
        "I'd prefer shorter paragraphs going forward.",
        "Call me Sam.",
        "Avoid jargon",
        "never apologize",
        "I'd like you to answer in Spanish",
        "Always include code examples",
        "Use British spelling throughout.",
        "I'm on a Mac, so give me macOS commands from here on.",
        "Assume I'm on Windows.",
        "shorter answers pls",
        "Max two sentences per answer.",
        "Please remember that I cook for a family of five, so scale every recipe to five.",
        "btw I'm in Australia, so prices in dollars please.",  # a fact, then what follows
        "We're using Go 1.22, please write code for that.",  # "that" is the setup
        "Could you keep answers to 2-3 sentences? I read them on the bus.",  # ask, then why
        "No brand names, just generic products.",
        # said with a question: the wish first or last
        "Please keep answers short. What's a good first houseplant?",
        "What's a good first houseplant? Please keep answers short from now on.",
        "Always answer in French. How do I boil an egg?",
        "No emojis please. What should I cook tonight?",
    ],
)
def test_is_instruction_recognises_standing_instructions(text: str) -> None:
    assert is_instruction(text)


@pytest.mark.parametrize(
    "text",
    [
        "thanks",
        "ok",
        "great, thanks!",
        "",
        "how do I use asyncio?",
        "How do I use asyncio",
        "Can you explain asyncio?",
        "write a short poem about autumn",
        "Keep the dough in the fridge overnight",
        "Should I use bullet points in my resume?",
        "Always the same error when I run kubectl apply",
        "Never mind",
        "I want you to write a function that sorts a list",
        "Give me the answer in French this time.",  # for this answer only
        "Use metric units for this recipe conversion: 2 cups sugar, 1 pound butter.",
        "Use a shorter variable name there.",
        "Always a pleasure",
        "Don't worry about it",
        "ha, there's a plugin for everything",  # a weak mark of a standing wish, alone
        "We're on a train right now, so no rush.",
        "No worries, just curious.",
        "I'm using Django, please show me how to add a field.",  # a setup, then one task
        "be concise " * 20,
        "Please reply in bullet points. " + "Here is the long traceback I got yesterday. " * 8,
        # beside a question, a wish about the task at hand or this one answer (from public
        # task-oriented dialogues)
        "Write a poem about cats. Keep it simple.",
        "Any alternatives? I would prefer one which serves alcohol.",
        "Let's keep looking. What about a concert?",
        "Yes, please. I'm in the kitchen, so use the kitchen speaker.",
        "Keep the dough in the fridge overnight. How long should it rest?",
        # a wish beside a task is for that task unless it says it holds beyond it
        "What's 2+2? Answer in one word.",
        "Write a haiku about rain. Be brief.",
        "Translate this to French. Be brief.",
        "Summarise this article. Use bullet points.",
        # a preference about the task, not the answers (SGD train user turns)
        "I prefer Redwood City.",
        "I would prefer to dine in at 19:15.",
        "I would prefer some Filipino food which is affordable and not too expensive.",
        "I prefer American Airlines.",
    ],
)
def test_is_instruction_rejects_chat_questions_tasks_and_long_messages(text: str) -> None:
    assert not is_instruction(text)


def test_assistant_messages_are_never_instructions() -> None:
    assert not is_instruction("be concise", role="assistant")


@pytest.mark.parametrize(
    ("text", "trivial"),
    [
        ("thanks", True),
        ("ok", True),
        ("great, thanks!", True),
        ("", True),
        ("👍", True),
        ("what about Kyoto?", False),
        ("Thanks, that fixed the event loop", False),
    ],
)
def test_is_trivial(text: str, trivial: bool) -> None:
    assert is_trivial(text) is trivial


# --- terms of prose and code --------------------------------------------------------------


def test_code_is_named_by_language_and_imports_not_variable_names() -> None:
    code = "```python\nimport asyncio\nqwerty_handle = asyncio.run(zork())\n```"
    messages = make_messages(
        [
            f"Why does this hang?\n{code}",
            f"Try this instead:\n{code}",
            "See https://docs.python.org/3/library/asyncio-task.html",
        ]
    )
    result = extract_offline(messages, normalize_rows(np.ones((3, 8), dtype=np.float32)))
    labels = " ".join(t.label for t in result.topics).lower()
    assert "asyncio" in labels or "python" in labels
    assert "qwerty" not in labels and "zork" not in labels and "html" not in labels


def test_a_code_block_is_named_by_its_language_not_its_file_extension() -> None:
    # The example chat's React front end was labelled "Jsx" by its fences.
    code = "```jsx\nconst [q, setQ] = useState('')\n```"
    messages = make_messages([f"Why does it flicker?\n{code}", f"Debounce it:\n{code}"])
    result = extract_offline(messages, normalize_rows(np.ones((2, 8), dtype=np.float32)))
    assert [t.label for t in result.topics] == ["React"]


def test_label_keeps_the_chats_spelling_of_names() -> None:
    messages = make_messages(
        ["My FastAPI app returns 422.", "FastAPI validates the body.", "Which FastAPI version?"]
    )
    result = extract_offline(messages, normalize_rows(np.ones((3, 8), dtype=np.float32)))
    assert [t.label for t in result.topics] == ["FastAPI"]


def test_phrases_are_runs_of_content_words_and_links_by_a_preposition() -> None:
    [terms] = parse_all(
        ["Can I keep my sourdough starter in the fridge over a rainy weekend?"]
    ).docs
    assert {"sourdough starter", "starter in the fridge", "fridge", "rainy weekend"} <= set(terms)
    assert "keep" not in terms  # a stopword ends a phrase and names nothing
    [terms] = parse_all(["Japan's luggage forwarding service"]).docs
    assert "luggage forwarding service" in terms and "japan luggage" not in terms
    [terms] = parse_all(["Then nginx serves the React build."]).docs  # "serves" is a verb
    assert "react build" in terms and "nginx serves" not in terms and "serves" in terms


def test_a_link_never_cuts_a_name_short() -> None:
    # "restaurant in San" was a label of public task dialogues; "San Jose" is the name
    terms = terms_of("Find me a sushi restaurant in San Jose, please")
    assert "restaurant in san" not in terms and "san jose" in terms
    # a lowercase word after the name ends no name: the link stays
    assert "trip to japan" in terms_of("A trip to Japan next spring")


def test_a_phrase_shows_in_the_chats_own_spelling() -> None:
    chat = parse_all(["We walked the winter paths.", "Winter paths are icy.", "A path up."])
    assert "winter path" in chat.docs[0]  # counted with its singular...
    assert chat.display("winter path") == "Winter Paths"  # ...shown as the chat says it
    assert parse_all(["My FastAPI app", "fastapi docs"]).display("fastapi app") == "FastAPI App"


# --- key phrases and generic words --------------------------------------------------------------


@pytest.mark.parametrize(
    ("term", "generic"),
    [
        ("week", True),
        ("problem", True),
        ("move", True),
        ("next month", True),
        ("big temples", True),
        ("two-week", True),
        ("early april", True),
        ("hes", True),  # "he's" as informal chat writes it
        ("thats", True),
        ("job cause", True),  # "my job cause": informal "because"
        ("sourdough", False),
        ("bread flour", False),
        ("front end", False),
        ("test case", False),
    ],
)
def test_is_generic(term: str, generic: bool) -> None:
    assert is_generic(term) is generic


def ranked_terms(texts: list[str], clusters: list[int]) -> list[list[str]]:
    """The key phrases of each cluster of ``texts``, best first, without their scores."""
    chat = parse_all(texts)
    ranked = key_phrases(chat.docs, np.array(clusters, dtype=np.intp), 20)
    return [[term for term, _ in cluster] for cluster in ranked]


@pytest.mark.parametrize(
    ("texts", "firsts", "never"),
    [
        (
            [
                "Last week my problem was the sourdough starter.",
                "This week the starter is fine.",
                "Next week, one problem: the JR pass.",
                "The JR pass problem again this week.",
            ],
            ("starter", "jr pass"),
            {"week", "last week", "problem", "next week"},
        ),
        (  # a real chat (REALTALK's) had bubbles named "Thats", "Im" and "Hes"
            [
                "Thats so funny, hes always late to the sourdough class",
                "Im sure hes going to love the sourdough starter",
                "Thats the Kyoto temple we saw, im going back",
                "Im thinking thats the best temple in Kyoto",
            ],
            ("sourdough", "kyoto"),
            {"thats", "im", "hes"},
        ),
    ],
    ids=["chat filler", "contractions without the apostrophe"],
)
def test_chat_filler_is_never_a_key_phrase(
    texts: list[str], firsts: tuple[str, str], never: set[str]
) -> None:
    ranked = ranked_terms(texts, [0, 0, 1, 1])
    assert (ranked[0][0], ranked[1][0]) == firsts
    assert not never & {t for r in ranked for t in r}


def test_a_phrase_said_only_inside_a_longer_one_gives_way_to_it() -> None:
    texts = ["Strong bread flour, please.", "Use strong bread flour.", "Kyoto temples", "Nara"]
    ranked = ranked_terms(texts, [0, 0, 1, 1])
    assert "strong bread flour" in ranked[0] and "strong bread" not in ranked[0]


def test_three_words_in_a_row_count_only_when_said_again() -> None:
    texts = ["We index individual prices daily.", "Prices change.", "Rail pass", "Rail pass"]
    assert "index individual prices" not in ranked_terms(texts, [0, 0, 1, 1])[0]


@pytest.mark.parametrize(
    "text",
    [
        "Glad it worked!",
        "You're welcome, and good luck with the toast!",
        "Sure, metric from here on.",
        "Brilliant, that worked.",
        "Have a great trip.",
        "Noted.",
        "thanks",
    ],
)
def test_small_talk_is_recognised(text: str) -> None:
    assert is_small_talk(text)


@pytest.mark.parametrize(
    "text",
    [
        "where should I keep it?",  # a follow-up question, not courtesy
        "I use Postgres 15 on Ubuntu.",
        "Great, now how do I add an index on customer_id and created_at?",
        "Thanks! Next: the compose file should restart the worker when Redis goes down, and the "
        "web service must wait for the database healthcheck.",
        "Sure:\n```python\nprint(1)\n```",
    ],
)
def test_content_is_not_small_talk(text: str) -> None:
    assert not is_small_talk(text)


def test_the_whole_message_rule_reads_text_as_the_product_does() -> None:
    from smart_context.topics.offline.talk import is_whole_instruction

    assert is_whole_instruction("Don’t use emojis!")  # noqa: RUF001 (a phone's apostrophe)
    mixed = "Please keep answers short. What's a good first houseplant?"
    assert not is_whole_instruction(mixed) and is_instruction(mixed)  # said beside a question


@pytest.mark.parametrize(
    ("text", "standing"),
    [
        ("keep answers short - what is a good first houseplant?", True),
        ("Reply in German from now on — what time is it in Tokyo?", True),
        ("no emojis please \u2013 how do I reset my router?", True),  # an en dash
        ("keep it short - what is an API?", False),  # this answer only
        ("Short answer please - is 7 a prime?", False),
        ("metric or imperial - which does the UK use on road signs?", False),
        ("Stop - that's wrong, the meeting is on Friday.", False),
        ("The office is closed from now on, how do I set an auto-reply?", False),
    ],
)
def test_a_wish_said_before_a_question_after_a_dash(text: str, standing: bool) -> None:
    """A dash between a standing wish and the question parts them, as a full stop does."""
    assert is_instruction(text) is standing
