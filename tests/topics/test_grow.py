"""New messages join the chat's map after a reply; the whole map is made again only when the
chat grew by a fifth, the map lost its footing, the assignments drift or the user asks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from smart_context.topics.grow import MapState, join_new, needs_full_map, read_state
from smart_context.vectors.ops import normalize_rows
from tests.conftest import Running, read_chat, write_chat
from tests.fakes import make_messages
from tests.topics.test_extract import reply_done

TOPICS = [
    {"label": "Bread", "count": 3, "message_ids": ["m0", "m1", "m2"]},
    {"label": "Boats", "count": 2, "message_ids": ["m3", "m4"]},
]
MAPPED = (  # the turns TOPICS were made of, m0 to m4
    ("rye bread", "user"),
    ("bread crumb", "assistant"),
    ("bread oven", "user"),
    ("boat sails", "assistant"),
    ("boat hull", "user"),
)


def turns(*texts_roles: tuple[str, str]) -> list[dict[str, Any]]:
    return [{"id": f"m{i}", "role": r, "content": t} for i, (t, r) in enumerate(texts_roles)]


def vectors_for(directions: list[int], dim: int = 4) -> np.ndarray:
    rows = np.eye(dim, dtype=np.float32)[directions] + 0.05
    return normalize_rows(rows)


def test_the_stored_state_is_read_only_when_it_is_ours() -> None:
    assert read_state({"through": "m4", "size": 5, "strays": 1}) == MapState("m4", 5, 1)
    stored = {"through": "m4", "size": 5, "strays": 1, "patience": 24}
    assert read_state(stored) == MapState("m4", 5, 1, 24)
    assert read_state(MapState("m4", 5, 1, 24).as_dict()) == MapState("m4", 5, 1, 24)
    for bad in (
        None,
        [],
        {"through": 4, "size": 5},
        {"through": "m4", "size": 0},
        {"size": 5},
        {"through": "m4", "size": True},
        {"through": "m4", "size": 5, "strays": -1},
        {"through": "m4", "size": 5, "patience": 0},
        {"through": "m4", "size": 5, "patience": "6"},
        {"through": "m4", "size": 5, "patience": 10**9},
    ):
        assert read_state(bad) is None, bad


def test_when_the_whole_map_is_made_again() -> None:
    ids = [f"m{i}" for i in range(10)]
    state = MapState("m8", 9)
    assert not needs_full_map(state, TOPICS, ids)
    assert needs_full_map(None, TOPICS, ids)
    assert needs_full_map(MapState("m8", 8), TOPICS, ids)  # grown by a fifth (10 >= 9.6)
    assert needs_full_map(MapState("gone", 9), TOPICS, ids)  # an edit or deletion before it
    assert needs_full_map(state, [{"label": "Bread", "count": 3}], ids)  # no members to join


def test_new_turns_join_their_nearest_topic_the_sticky_one_or_none() -> None:
    chat = turns(
        *MAPPED,
        ("more bread?", "assistant"),
        ("Please keep answers short.", "user"),
        ("thanks!", "assistant"),
        ("stars and planets", "user"),
    )
    ids = [m["id"] for m in chat]
    vectors = vectors_for([0, 0, 0, 1, 1, 0, 2, 2, 3])
    grown = join_new(TOPICS, chat, ids, vectors, MapState("m4", 5))
    assert grown.topics[0]["message_ids"] == ["m0", "m1", "m2", "m5"]
    assert grown.topics[0]["count"] == 4 and grown.topics[1] == TOPICS[1]
    assert grown.topics[2]["sticky"] and grown.topics[2]["message_ids"] == ["m6"]
    assert grown.state == MapState("m8", 5, 1)  # "stars and planets" joined nothing
    assert not grown.drifted and TOPICS[0]["count"] == 3  # the input is not changed


def test_a_turn_about_as_close_to_two_topics_joins_neither() -> None:
    """A newcomer must be clearly nearest to one topic: on SGD's dev chats, one in four new
    messages joined a topic of another subject (benchmarks/public/bench_topics.py (f))."""
    chat = turns(
        *MAPPED,
        ("bread on a boat?", "user"),
        ("a bread roll", "user"),
    )
    ids = [m["id"] for m in chat]
    rows = np.array(
        [
            [1, 0, 1.2, 0],  # bread, the topic as wide as it is
            [1, 0, 0, 1.2],
            [1, 0, 0.6, 0.6],
            [0, 1, 1.2, 0],  # boats
            [0, 1, 0, 1.2],
            [0.62, 0.55, 0.6, 0.6],  # close enough to bread (0.86), but nearly as close to boats
            [1, 0.1, 0.5, 0.5],  # bread
        ],
        dtype=np.float32,
    )
    grown = join_new(TOPICS, chat, ids, normalize_rows(rows), MapState("m4", 5))
    assert grown.topics[0]["message_ids"] == ["m0", "m1", "m2", "m6"]
    assert grown.topics[1]["message_ids"] == ["m3", "m4"]
    assert grown.state.strays == 1  # counted toward drift: a new map may give it a place


def test_small_talk_joins_the_topic_of_the_turn_before_it() -> None:
    chat = turns(
        *MAPPED,
        ("Great, thanks!", "user"),  # after the map's last Boats turn
        ("more bread?", "assistant"),
        ("That sounds good.", "user"),  # after a Bread turn that just joined
        ("stars and planets", "user"),
        ("ok thanks", "assistant"),  # after a turn that joined nothing: none
    )
    ids = [m["id"] for m in chat]
    vectors = vectors_for([0, 0, 0, 1, 1, 2, 0, 2, 3, 2])
    grown = join_new(TOPICS, chat, ids, vectors, MapState("m4", 5))
    assert grown.topics[0]["message_ids"] == ["m0", "m1", "m2", "m6", "m7"]
    assert grown.topics[1]["message_ids"] == ["m3", "m4", "m5"]
    assert grown.state == MapState("m9", 5, 1)  # small talk is no stray


def test_many_turns_that_join_nothing_are_drift() -> None:
    chat = turns(*[(f"bread {i}", "user") for i in range(5)], *[("stars", "user")] * 6)
    ids = [m["id"] for m in chat]
    vectors = vectors_for([0, 0, 0, 1, 1, *[3] * 6])
    grown = join_new(TOPICS, chat, ids, vectors, MapState("m4", 5))
    assert grown.drifted and grown.state.strays == 6
    # a map made again because of drift waits for twice as many strays before it drifts
    patient = join_new(TOPICS, chat, ids, vectors, MapState("m4", 5).after_drift("m4", 5))
    assert not patient.drifted and patient.state == MapState("m10", 5, 6, 12)
    assert MapState("m4", 5, 3, 12).after_drift("m9", 10) == MapState("m9", 10, 0, 24)


SUBJECTS = {
    "sourdough": "sourdough starter flour levain crumb oven loaf",
    "kubernetes": "kubernetes pod deployment cluster kubectl replica node",
    "asyncio": "asyncio coroutine await event loop task gather",
}


def subject_text(subject: str, i: int) -> str:
    words = SUBJECTS[subject].split()
    first, second, third = (words[(i + k) % len(words)] for k in (0, 2, 4))
    return f"{first} and {second} with {third}"


async def test_a_reply_joins_new_messages_to_the_map_and_drift_maps_the_chat_again(
    start: Any, vault: Path
) -> None:
    texts = [subject_text(s, i) for s in SUBJECTS for i in range(14)]
    write_chat(vault, "c1", make_messages(texts))
    running: Running = await start(settings={"topic_extractor": "offline"})
    await reply_done(running)
    await running.settle()
    first = read_chat(vault, "c1")
    assert first["smart_context"]["topic_map"] == {
        "through": "m41",
        "size": 42,
        "strays": 0,
        "patience": 6,
    }
    labels = [t["label"] for t in first["topics"]]

    new = [
        {"id": "n0", "role": "user", "content": subject_text("sourdough", 3)},
        {"id": "n1", "role": "assistant", "content": subject_text("sourdough", 5)},
    ]
    await running.host.memory.append_message("c1", new[0])
    await running.host.memory.append_message("c1", new[1])
    await reply_done(running)
    await running.settle()
    second = read_chat(vault, "c1")
    assert [t["label"] for t in second["topics"]] == labels  # the map was not made again
    assert second["smart_context"]["topic_map"] == {
        "through": "n1",
        "size": 42,
        "strays": 0,
        "patience": 6,
    }
    joined = [t for t in second["topics"] if "n0" in (t.get("message_ids") or [])]
    assert len(joined) == 1 and "n1" in joined[0]["message_ids"]
    assert running.host.events[-1][0] == "smart_context.topics_updated"

    for k in range(6):  # a subject the map has no bubble for
        text = "violin bow rosin string concerto" if k % 2 else "orchestra violin cello rehearsal"
        await running.host.memory.append_message(
            "c1", {"id": f"v{k}", "role": "user" if k % 2 == 0 else "assistant", "content": text}
        )
    await reply_done(running)
    await running.settle()
    third = read_chat(vault, "c1")
    # mapped again, as a whole, and the next drift is called after twice as many strays
    assert third["smart_context"]["topic_map"] == {
        "through": "v5",
        "size": 50,
        "strays": 0,
        "patience": 12,
    }


def test_the_count_the_ui_is_told_takes_in_messages_appended_while_the_pass_ran() -> None:
    from smart_context.chats import ChatView
    from smart_context.topics.refresh import _turns_now

    read = turns(("bread", "user"), ("crumb", "assistant"))
    notice = {"id": "x", "role": "assistant", "content": "no model", "notice": True}
    grown = [*read, notice, {"id": "m2", "role": "user", "content": "rye?"}]
    assert _turns_now(ChatView(raw_messages=grown), read, 2) == 3  # the notice is no turn
    assert _turns_now(ChatView(raw_messages=list(read)), read, 2) == 2
    edited = [{"id": "m0", "role": "user", "content": "oats"}]  # not grown: counted afresh
    assert _turns_now(ChatView(raw_messages=edited), read, 2) == 1
    assert _turns_now(ChatView(raw_messages=[]), [], 0) == 0
