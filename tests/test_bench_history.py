"""The REALTALK history benchmark reads a chat as the product would get it: sessions in order,
the two speakers as user and assistant, and every evidence id its questions name."""

from __future__ import annotations

import numpy as np

from benchmarks.public.baselines import fill_with_partners
from benchmarks.public.bench_history import evidence_ids, history_of


def test_evidence_strings_with_several_ids_ranges_and_stray_spacing() -> None:
    assert evidence_ids(["D1:11; D3:18", "D2:1,D2:2", "D 2:18", "D20:6."]) == [
        "D1:11",
        "D3:18",
        "D2:1",
        "D2:2",
        "D2:18",
        "D20:6",
    ]
    assert evidence_ids(["D12:3-D12:5"]) == ["D12:3", "D12:4", "D12:5"]
    assert evidence_ids(["", "D58"]) == []


def test_a_chat_becomes_one_history_in_session_order() -> None:
    def said(who: str, dia_id: str) -> dict[str, object]:
        return {"speaker": who, "dia_id": dia_id, "clean_text": f"{who} {dia_id}"}

    data = {
        "name": {"speaker_1": "Ann", "speaker_2": "Bo"},
        "session_10": [said("Bo", "D3:1")],
        "session_2": [said("Ann", "D2:1"), said("Ann", "D2:2"), said("Bo", "D2:3")],
        "events_session_2": {},
        "qa": [
            {"question": "Who?", "evidence": ["D2:2; D3:1", "D9:9"]},
            {"question": "Lost?", "evidence": ["D9:9"]},
        ],
    }
    chat = history_of(7, data)
    assert [m["id"] for m in chat.messages] == ["D2:1", "D2:2", "D2:3", "D3:1"]
    assert [m["role"] for m in chat.messages] == ["user", "user", "assistant", "assistant"]
    assert [(q.text, sorted(q.evidence)) for q in chat.questions] == [("Who?", [1, 3])]
    assert chat.skipped == 1


def test_the_baseline_in_turns_takes_pairs_or_nothing() -> None:
    tokens = np.array([10, 10, 10, 50, 10], dtype=np.intp)
    partner = [1, 0, 3, 2, -1]
    # 2's pair (2 and 3) does not fit after 0's: skipped whole, and 4 (alone) still fits
    assert fill_with_partners([0, 2, 4], tokens, 40, partner) == {0, 1, 4}
