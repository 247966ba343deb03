"""The summary tree: which stored summaries still hold, which to make, and stability under
edits and deletions."""

from __future__ import annotations

from dataclasses import dataclass

from smart_context.memory.tree import FANOUT, LEAF, covers, plan_tree


@dataclass(frozen=True)
class Stored:
    """What the plan reads of a stored summary (:class:`~smart_context.memory.tree.Marked`)."""

    level: int
    from_id: str
    to_id: str
    covers: str


def chat(n: int) -> tuple[list[str], list[str]]:
    ids = [f"m{i}" for i in range(n)]
    return ids, [f"{i}:hash{i}" for i in ids]


def stored_from(ids: list[str], tree_nodes: list) -> list[Stored]:  # type: ignore[type-arg]
    return [Stored(n.level, *n.key(ids)[1:], n.covers) for n in tree_nodes]


def test_a_new_chat_gets_whole_leaves_and_parents_over_its_settled_part() -> None:
    ids, keys = chat(123)
    tree = plan_tree(ids, keys, [], settled=113)
    leaves = [n for n in tree.missing if n.level == 1]
    assert [(n.start, n.end) for n in leaves] == [(10 * i, 10 * i + 10) for i in range(11)]
    parents = [n for n in tree.missing if n.level == 2]
    assert [(n.start, n.end) for n in parents] == [(0, 50), (50, 100)]
    assert all(len(p.children) == FANOUT for p in parents)
    assert not tree.valid and not tree.invalid


def test_stored_summaries_stay_valid_and_only_new_stretches_are_made() -> None:
    ids, keys = chat(100)
    first = plan_tree(ids, keys, [], settled=100)
    ids2, keys2 = chat(130)
    second = plan_tree(ids2, keys2, stored_from(ids, first.missing), settled=130)
    assert len(second.valid) == len(first.missing)
    assert [(n.level, n.start) for n in second.missing] == [(1, 100), (1, 110), (1, 120)]


def test_an_edit_breaks_only_the_nodes_over_it() -> None:
    ids, keys = chat(100)
    first = plan_tree(ids, keys, [], settled=100)
    keys[23] = "m23:edited"
    second = plan_tree(ids, keys, stored_from(ids, first.missing), settled=100)
    broken = {(s.level, s.from_id) for s in second.invalid}
    assert broken == {(1, "m20"), (2, "m0")}
    assert [(n.level, n.start, n.end) for n in second.missing] == [(1, 20, 30), (2, 0, 50)]


def test_nodes_checked_over_the_same_keys_are_not_hashed_again() -> None:
    """What the caller vouches for (found valid over these keys before, the chat only grown
    since) keeps its hash unchecked; anything else is checked as ever."""
    ids, keys = chat(100)
    first = plan_tree(ids, keys, [], settled=100)
    stored = stored_from(ids, first.missing)
    checked = {(n.level, n.start, n.end, n.covers) for n in first.missing if n.level == 1}
    keys[23] = "m23:edited"  # unseen by the caller: a vouched-for leaf stays, its parent goes
    second = plan_tree(ids, keys, stored, settled=100, checked=checked)
    assert {(s.level, s.from_id) for s in second.invalid} == {(2, "m0")}
    assert (1, 20, 30) in {(n.level, n.start, n.end) for n in second.valid}
    assert plan_tree(ids, keys, stored, settled=100).invalid == [
        s for s in stored if (s.level, s.from_id) in {(1, "m20"), (2, "m0")}
    ]


def test_a_deletion_in_the_middle_costs_one_leaf_not_everything_after_it() -> None:
    ids, keys = chat(100)
    first = plan_tree(ids, keys, [], settled=100)
    del ids[42], keys[42]
    second = plan_tree(ids, keys, stored_from([f"m{i}" for i in range(100)], first.missing), 99)
    assert {(s.level, s.from_id) for s in second.invalid} == {(1, "m40"), (2, "m0")}
    remade = [(n.level, n.start, n.end) for n in second.missing]
    assert remade == [(1, 40, 49), (2, 0, 49)]  # a 9-message leaf fills the gap
    assert len([n for n in second.valid if n.level == 1]) == 9


def test_the_open_end_waits_for_a_whole_leaf() -> None:
    ids, keys = chat(LEAF * 3 + 7)
    tree = plan_tree(ids, keys, [], settled=len(ids))
    assert max(n.end for n in tree.missing) == LEAF * 3


def test_stored_rows_of_unknown_or_reordered_messages_are_invalid() -> None:
    ids, keys = chat(30)
    bogus = [
        Stored(1, "gone", "m9", "x"),
        Stored(1, "m19", "m10", "x"),  # ends before it starts
        Stored(1, "m0", "m9", "wrong hash"),
        Stored(1, "m0", "m9", covers(keys, 0, 10)),
        Stored(1, "m0", "m9", covers(keys, 0, 10)),  # the same twice
    ]
    tree = plan_tree(ids, keys, bogus, settled=30)
    assert len(tree.invalid) == 4 and [n.start for n in tree.valid] == [0]
