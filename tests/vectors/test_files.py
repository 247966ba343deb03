"""The embedding cache file: round trip, pruning, damaged and foreign files."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from smart_context.messages import History
from smart_context.vectors import files as cache
from smart_context.vectors.chat import ChatVectors
from smart_context.vectors.codec import HASH_HEX_DIGITS, content_hash
from smart_context.vectors.ops import normalize_rows
from tests.fakes import make_messages

MESSAGES = make_messages(["alpha", "beta", "gamma"])


def filled(dim: int = 8) -> ChatVectors:
    vectors = ChatVectors("model-a", dim)
    rng = np.random.default_rng(0)
    vectors.add_messages(MESSAGES, normalize_rows(rng.normal(size=(3, dim))))
    return vectors


def test_round_trip_keeps_keys_and_vectors(tmp_path: Path) -> None:
    original = filled()
    path = tmp_path / "c.embeddings.json"
    cache.save(path, original)
    loaded = cache.load(path, ChatVectors, "model-a", 8)
    assert loaded is not None
    assert loaded.keys == original.keys
    # int8 with a per-row scale, and kept in memory as the file gives it back: a restart reads
    # the very vectors the scores, the topic map and the budget used before it
    assert np.array_equal(loaded.matrix, original.matrix)
    rows, missing = loaded.locate(History(MESSAGES))
    assert missing == [] and rows.tolist() == [0, 1, 2]


def test_a_loaded_row_can_be_written_again_in_place(tmp_path: Path) -> None:
    # the file's rows are kept as read, int8: an edited message's vector overwrites its row
    path = tmp_path / "c.embeddings.json"
    cache.save(path, filled())
    loaded = cache.load(path, ChatVectors, "model-a", 8)
    assert loaded is not None
    flipped = -loaded.rows_at(np.array([1]))
    loaded.add([loaded.keys[1]], flipped)
    assert len(loaded) == 3 and np.allclose(loaded.rows_at(np.array([1])), flipped, atol=0.01)


def test_file_format_is_compact_and_keyed_by_id_and_blake3(tmp_path: Path) -> None:
    path = tmp_path / "c.embeddings.json"
    cache.save(path, filled())
    data = json.loads(path.read_text())
    assert data["model"] == "model-a" and data["dim"] == 8 and data["dtype"] == "int8"
    assert data["keys"][0] == f"m0:{content_hash('alpha')}"
    assert len(data["keys"][0].split(":")[1]) == HASH_HEX_DIGITS >= 16
    assert isinstance(data["vectors"], str)  # one hex blob, not lists of decimal floats
    assert len(data["vectors"]) == 3 * 8 * 2 and len(data["scales"]) == 3 * 4 * 2


def test_edited_and_deleted_messages_are_missed_then_pruned() -> None:
    vectors = filled()
    edited = [dict(MESSAGES[0], content="alpha, edited"), MESSAGES[1]]
    rows, missing = vectors.locate(History(edited))
    assert missing == [0] and rows[1] == 1
    assert vectors.prune(History(edited)) == 2  # the old alpha and the deleted gamma
    assert len(vectors) == 1
    assert vectors.locate(History([MESSAGES[1]]))[1] == []


def test_warm_lookup_notices_an_edit_after_a_hit() -> None:
    vectors = filled()
    vectors.locate(History(MESSAGES))  # memoises id -> content
    _, missing = vectors.locate(History([dict(MESSAGES[2], content="changed")]))
    assert missing == [0]


HEADER = '"format": "smart-context/embeddings", "version": 1, "model": "model-a", "dim": 8'
DAMAGED = [
    b"{not json",
    b"\x00\xff\xfe",
    b"[]",
    # vectors cut short, as by a crash in a writer that did not write atomically
    (
        "{"
        + HEADER
        + ', "dtype": "int8", "keys": ["a:b"], "scales": "0000803f", "vectors": "0102"}'
    ).encode(),
    (
        "{" + HEADER + ', "dtype": "int8", "keys": ["a:b"], "scales": "zz", "vectors": "00"}'
    ).encode(),
    ("{" + HEADER + ', "dtype": "float64", "keys": [], "scales": "", "vectors": ""}').encode(),
    ("{" + HEADER.replace('"dim": 8', '"dim": -1') + "}").encode(),
]


@pytest.mark.parametrize("content", DAMAGED)
def test_damaged_file_is_set_aside_and_rebuilt(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "c.embeddings.json"
    path.write_bytes(content)
    assert cache.load(path, ChatVectors, "model-a", 8) is None
    assert not path.exists()
    aside = list(tmp_path.glob("c.embeddings.json.corrupt-*"))
    assert len(aside) == 1 and aside[0].read_bytes() == content


def test_foreign_model_is_never_compared(tmp_path: Path) -> None:
    path = tmp_path / "c.embeddings.json"
    cache.save(path, filled())
    assert cache.load(path, ChatVectors, "model-b", 8) is None
    assert cache.load(path, ChatVectors, "model-a", 16) is None
    assert path.exists()  # a sound file of another model is simply replaced on the next save


def test_int8_encoding_keeps_scores_within_a_thousandth(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    original = ChatVectors("m", 384)
    many = make_messages([f"t{i}" for i in range(200)])
    embedded = normalize_rows(rng.normal(size=(200, 384)))
    original.add_messages(many, embedded)
    label = normalize_rows(rng.normal(size=(1, 384)))[0]
    assert np.abs(original.matrix @ label - embedded @ label).max() < 2e-3
    path = tmp_path / "c.embeddings.json"
    cache.save(path, original)
    loaded = cache.load(path, ChatVectors, "m", 384)
    assert loaded is not None and np.array_equal(loaded.matrix, original.matrix)
    cache.save(path, loaded)  # a second round trip changes nothing
    again = cache.load(path, ChatVectors, "m", 384)
    assert again is not None and np.array_equal(again.matrix, loaded.matrix)


def test_label_scores_are_extended_not_recomputed() -> None:
    vectors = filled()
    label = normalize_rows(np.ones((1, 8)))[0]
    first = vectors.scores("L", label)
    more = make_messages(["delta"], prefix="n")
    vectors.add_messages(more, normalize_rows(np.full((1, 8), -1.0)))
    second = vectors.scores("L", label)
    assert np.array_equal(second[:3], first) and second[3] == pytest.approx(-1.0)
    vectors.add_messages(
        [MESSAGES[0]], normalize_rows(np.full((1, 8), -1.0))
    )  # overwritten in place
    assert vectors.scores("L", label)[0] == pytest.approx(-1.0)


def test_another_vector_under_a_name_scores_every_row_anew() -> None:
    vectors = filled()
    vectors.scores("L", normalize_rows(np.ones((1, 8)))[0])
    vectors.add_messages(make_messages(["delta"], prefix="n"), normalize_rows(np.ones((1, 8))))
    other = normalize_rows(np.arange(8.0)[None, :])[0]
    # the old scores are not extended: every row is the new vector's
    assert np.array_equal(vectors.scores("L", other), vectors.cosines(other[None, :])[:, 0])


def test_add_grows_beyond_initial_capacity() -> None:
    vectors = ChatVectors("m", 4)
    many = make_messages([f"t{i}" for i in range(100)])
    vectors.add_messages(many, normalize_rows(np.ones((100, 4))))
    assert len(vectors) == 100 and vectors.matrix.shape == (100, 4)
    with pytest.raises(ValueError):
        vectors.add_messages(many[:2], np.ones((3, 4), dtype=np.float32))


def test_a_snapshot_is_the_file_as_it_was_taken_whatever_changes_after() -> None:
    # written out in a worker thread while the collection goes on: rows added, a row changed
    vectors = filled()
    taken = cache.snapshot(vectors)
    then = cache.to_json(vectors)
    handed_out = [a.copy() for a in vectors.stored]
    room = vectors._codes.shape  # the capacity an edit must not grow
    rng = np.random.default_rng(1)
    vectors.add([vectors.keys[1]], normalize_rows(rng.normal(size=(1, 8))))  # an edit
    assert vectors._codes.shape == room
    vectors.add_messages(make_messages(["delta"]), normalize_rows(rng.normal(size=(1, 8))))
    assert cache.to_json(taken) == then
    assert all(np.array_equal(a, b) for a, b in zip(taken.stored, handed_out, strict=True))
    assert cache.to_json(vectors) != then and len(vectors) == 4
    loaded = cache.from_json(cache.to_json(vectors), ChatVectors)
    assert np.array_equal(loaded.matrix, vectors.matrix)


@pytest.mark.parametrize("rows", [0, 1, 9000])
def test_the_file_is_written_in_short_pieces_with_the_bytes_of_one_json_dump(
    tmp_path: Path, rows: int
) -> None:
    # a thread writing it lets the event loop run between the pieces
    from smart_context.vectors.codec import as_hex
    from smart_context.vectors.keyed import KeyedMatrix

    vectors = KeyedMatrix('model "é"', 8)
    keys = [f'm{i}:"é\\\u2028' for i in range(rows)]
    vectors.add(keys, normalize_rows(np.random.default_rng(rows).normal(size=(rows, 8))))
    plain = {
        "format": cache.FORMAT,
        "version": cache.VERSION,
        "model": vectors.model_id,
        "dim": 8,
        "dtype": "int8",
        "keys": keys,
        **as_hex(*vectors.stored),
    }
    pieces = list(cache.file_pieces(vectors))
    assert b"".join(pieces) == json.dumps(plain, separators=(",", ":")).encode("ascii")
    assert max(map(len, pieces)) <= cache.PIECE_BYTES + 64
    path = tmp_path / "c.embeddings.json"
    cache.save(path, vectors)
    loaded = cache.load(path, KeyedMatrix, 'model "é"', 8)
    assert loaded is not None and loaded.keys == keys
    assert np.array_equal(loaded.matrix, vectors.matrix)


def test_a_file_laid_out_otherwise_is_read_whole_as_before() -> None:
    # written by hand or by another tool: members reordered, spaces, hex in capitals
    vectors = filled()
    plain = json.loads(cache.to_json(vectors))
    text = json.dumps(
        {"keys": plain["keys"], **{k: v for k, v in plain.items() if k != "keys"}}, indent=1
    )
    for variant in (text, text.replace(plain["vectors"], plain["vectors"].upper())):
        read = cache.from_json(variant.encode(), ChatVectors)
        assert read.keys == vectors.keys and np.array_equal(read.matrix, vectors.matrix)
    shifted = cache.to_json(vectors).replace('"scales":"', '"scales":"00')
    with pytest.raises(ValueError):  # the sizes do not match: read whole, and refused
        cache.from_json(shifted.encode(), ChatVectors)


def test_snapshots_reach_their_file_in_the_order_they_were_taken(tmp_path: Path) -> None:
    # two threads may write one file at once: the older snapshot, finishing last, writes nothing
    vectors = filled()
    older = cache.snapshot(vectors)
    vectors.add_messages(make_messages(["delta"]), normalize_rows(np.ones((1, 8))))
    newer = cache.snapshot(vectors)
    path = tmp_path / "c.embeddings.json"
    assert cache.write(path, newer) is True
    assert cache.write(path, older) is False
    loaded = cache.load(path, ChatVectors, "model-a", 8)
    assert loaded is not None and len(loaded) == 4
    cache.save(path, vectors)  # a later snapshot, as the flush at shutdown takes
    assert cache.write(path, newer) is False


def test_a_hostile_size_in_the_writer_s_layout_is_refused_before_any_large_read() -> None:
    text = cache.to_json(filled()).replace('"dim":8', '"dim":1000000000000')
    with pytest.raises(ValueError):  # the lengths do not add up: read whole, and refused
        cache.from_json(text.encode(), ChatVectors)
