"""The topic benchmark on Schema-Guided Dialogue builds its chats as it says: whole dialogues of
services of different domains, roles mapped, each dialogue once before any is used again."""

from __future__ import annotations

import numpy as np

from benchmarks.public.bench_topics import Dialogue, Part, build_chat, service_words


def _part() -> Part:
    def dialogue(service: str, n: int) -> Dialogue:
        turns = (("user", f"{service} question {n}"), ("assistant", f"{service} answer {n}"))
        return Dialogue(f"{service}-{n}", service, turns)

    services = ["Hotels_1", "Hotels_4", "Flights_3", "Banks_2", "Music_1"]
    pools = {s: [dialogue(s, n) for n in range(3)] for s in services}
    return Part("dev", pools, {s: service_words(s) for s in services})


def test_a_chat_has_whole_dialogues_of_services_of_different_domains() -> None:
    part = _part()
    chat = build_chat(part, np.random.default_rng(1), "sgd-dev-00", 3, (10, 12))
    assert len(chat["subjects"]) == 3
    domains = [s.split("_")[0] for s in chat["subjects"]]
    assert len(set(domains)) == 3  # never Hotels_1 beside Hotels_4
    messages = chat["messages"]
    assert len(messages) >= 10 and {m["subject"] for m in messages} == set(chat["subjects"])
    assert [m["role"] for m in messages] == ["user", "assistant"] * (len(messages) // 2)
    # each dialogue whole and in its own order: its turns 0, 1 side by side
    ids = [m["id"] for m in messages]
    assert all(ids[i + 1] == ids[i][:-1] + "1" for i in range(0, len(ids), 2))
    assert len({m["id"] for m in messages}) == len(messages)


def test_each_dialogue_is_used_once_before_any_is_used_again() -> None:
    part = _part()
    firsts = [part.next("Banks_2").id for _ in range(4)]
    assert firsts == ["Banks_2-0", "Banks_2-1", "Banks_2-2", "Banks_2-0"]
    assert service_words("RentalCars_1") == "Rental Cars"


def test_real_chats_are_read_as_the_panel_shows_their_bubbles() -> None:
    from benchmarks.public.bench_real_topics import bubbles, largest_share

    topics = [
        {"label": "Sourdough", "message_ids": ["1", "2", "3"]},
        {"label": "Instructions & Preferences", "message_ids": ["4"], "sticky": True},
        {"label": "Kyoto", "message_ids": ["5"]},
    ]
    found = bubbles(topics)
    assert found == [("Sourdough", 3), ("Kyoto", 1)]  # the sticky bubble is no subject
    assert largest_share(found, 6) == 0.5 and largest_share([], 0) == 0.0


def test_stretches_of_a_real_chat_lie_inside_it_and_start_every_step() -> None:
    from benchmarks.public.bench_real_topics import STEP, WINDOWS, windows

    assert windows(min(WINDOWS) - 1) == []  # a chat shorter than every stretch has none
    found = windows(1000)
    assert all(0 <= first < end <= 1000 and end - first in WINDOWS for first, end in found)
    assert [first for first, end in found if end - first == 300] == list(range(0, 701, STEP))
    assert len(found) == len(set(found))
