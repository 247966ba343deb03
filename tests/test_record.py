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
        scores={"m2": 0.1},
    ).as_dict()
    assert json.loads(json.dumps(record)) == record
    assert "excluded_ids" not in record
    assert included_ids(record, ["m0", "m1", "m2", "m3"]) == ["m2", "m3"]


def test_records_never_share_an_id_list() -> None:
    first = ContextRecord.failed(1, "x").as_dict()
    first["excluded_ids"].append("m0")  # a host may change what it was given
    assert ContextRecord.failed(1, "x").as_dict()["excluded_ids"] == []
