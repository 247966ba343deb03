"""The context record: one author, the host's shape, small when stored."""

from __future__ import annotations

import json

from smart_context.record import FILTERED, ContextRecord, included_ids


def test_a_failure_leaves_a_readable_full_record() -> None:
    record = ContextRecord.failed(12, "Smart Context failed: disk full").as_dict()
    assert record == {
        "mode": "full",
        "active_topics": [],
        "sticky_ids": [],
        "excluded_ids": [],
        "total_messages": 12,
        "error": "Smart Context failed: disk full",
    }


def test_a_record_is_json_and_carries_one_id_list() -> None:
    record = ContextRecord(
        FILTERED,
        ("Paris",),
        ("m2",),
        4,
        threshold=0.4,
        ids=("included_ids", ["m2", "m3"]),
    ).as_dict()
    assert json.loads(json.dumps(record)) == record
    assert "excluded_ids" not in record
    assert included_ids(record, ["m0", "m1", "m2", "m3"]) == ["m2", "m3"]


def test_records_never_share_an_id_list() -> None:
    first = ContextRecord.failed(1, "x").as_dict()
    first["excluded_ids"].append("m0")  # a host may change what it was given
    assert ContextRecord.failed(1, "x").as_dict()["excluded_ids"] == []


def test_a_filter_that_keeps_thousands_scores_the_latest_few_and_counts_the_rest() -> None:
    import numpy as np

    from smart_context.record import MAX_SCORES, Kept

    ids = ["s0", *(f"m{i}" for i in range(2000))]  # one sticky message older than the history
    flags = np.zeros(len(ids), dtype=bool)
    flags[0] = True
    flags[1::2] = True  # every other history message kept: 1,000 of them
    values = np.linspace(0, 1, 2000, dtype=np.float32)
    kept = Kept(ids, flags, 1, values)
    record = ContextRecord(FILTERED, ("Bread",), ("s0",), len(ids), kept=kept).as_dict()
    assert len(record["scores"]) == MAX_SCORES and record["scores_omitted"] == 1000 - MAX_SCORES
    assert list(record["scores"])[-1] == "m1998" and "s0" not in record["scores"]
    assert record["scores"]["m1998"] == round(float(values[1998]), 3)
    assert included_ids(record, ids) == [ids[i] for i in np.flatnonzero(flags).tolist()]
    # a budget that sent a few of them: their scores only, none omitted
    sent = np.zeros(len(ids), dtype=bool)
    sent[[0, 1, 1999]] = True
    narrowed = ContextRecord(FILTERED, ("Bread",), ("s0",), len(ids), kept=kept).as_dict(sent)
    assert list(narrowed["scores"]) == ["m0", "m1998"] and "scores_omitted" not in narrowed
    assert "included_ids" not in narrowed and "excluded_ids" not in narrowed  # the caller's


def test_select_takes_the_flagged_values_in_order_and_refuses_a_length_mismatch() -> None:
    import numpy as np
    import pytest

    from smart_context.messages import select

    values = ["a", "b", "c", "d", "e", "f"]
    flags = np.array([1, 0, 1, 1, 0, 1, 0, 0], dtype=bool)[:6]
    assert select(values, flags) == ["a", "c", "d", "f"]
    assert select(values, np.zeros(12, dtype=bool)[::2]) == []  # a strided view
    # few flagged (picked at their positions) or many (one pass over the flags): the same
    many = [f"m{i}" for i in range(1000)]
    for share in (0.0, 0.01, 0.2, 0.3, 0.9, 1.0):
        chosen = np.random.default_rng(3).random(1000) < share
        assert select(many, chosen) == [v for v, c in zip(many, chosen, strict=True) if c]
    assert select(["only"], np.ones(1, dtype=bool)) == ["only"]
    with pytest.raises(ValueError):
        select(values, flags[:5])


def test_a_stored_record_is_what_a_json_round_trip_gives_and_keeps_the_chats_own_ids() -> None:
    """``json_safe`` copies a record as ``json.loads(json.dumps(record, default=str))`` would,
    odd values and keys included, but shares its strings: the ids a record names are the very
    strings the chat holds, not a copy per reply."""
    import enum

    import numpy as np
    import pytest

    from smart_context.record import json_safe

    class Level(enum.IntEnum):
        HIGH = 3

    class Odd:
        def __str__(self) -> str:
            return "an odd value"

    message_id = "".join(["m", "0042"])  # a string of its own, as a parsed chat's
    record = {
        "included_ids": [message_id, "m7"],
        "reasons": {message_id: {"why": "recent"}},
        "scores": (np.float64(0.25), np.float32(0.5), np.int64(3), Level.HIGH, float("nan")),
        "odd": Odd(),
        "flags": {True: 1, None: 2, 3: 3, 2.5: 4},
        "nested": [[{"x": None, "y": False}]],
    }
    copied = json_safe(record)
    expected = json.loads(json.dumps(record, default=str))
    assert json.dumps(copied) == json.dumps(expected)
    assert copied["included_ids"][0] is message_id
    assert next(iter(copied["reasons"])) is message_id
    assert copied["included_ids"] is not record["included_ids"]  # containers are copies
    assert type(copied["scores"][3]) is int and type(copied["scores"][0]) is float
    with pytest.raises(TypeError, match="keys must be"):
        json_safe({(1, 2): "a tuple key"})
    loop: list[object] = []
    loop.append(loop)
    with pytest.raises(ValueError, match="Circular"):
        json_safe({"a": loop})
