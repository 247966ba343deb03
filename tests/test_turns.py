"""Turn order: what a filter or a budget keeps still alternates user and assistant."""

from __future__ import annotations

import itertools

import numpy as np

from smart_context.turns import ASSISTANT, OTHER, USER, Roles, closure, partners, role_codes, within

U, A, X = USER, ASSISTANT, OTHER  # X: a system or tool message


def codes(*roles: int) -> np.ndarray:
    return np.array(roles, dtype=np.int8)


def flags(n: int, *kept: int) -> np.ndarray:
    out = np.zeros(n, dtype=bool)
    out[list(kept)] = True
    return out


def kept(keep: np.ndarray) -> list[int]:
    return np.flatnonzero(keep).tolist()


def alternates(roles: np.ndarray, keep: np.ndarray) -> bool:
    """Two sent turns of one role in a row (other roles aside) only where the chat has no turn
    of the other role between them: the host, sending it whole, would have sent them so too."""
    at = [i for i in np.flatnonzero(keep).tolist() if roles[i] != OTHER]
    for a, b in itertools.pairwise(at):
        other = ASSISTANT if roles[a] == USER else USER
        if roles[a] == roles[b] and (roles[a + 1 : b] == other).any():
            return False
    return True


def test_roles_are_read_from_messages_and_odd_ones_are_no_turn() -> None:
    messages = [
        {"role": "user"},
        {"role": "assistant"},
        {"role": "system"},
        {},
        {"role": 3},
        {"role": ["user"]},  # a hand-edited file: unhashable, and no turn
    ]
    assert role_codes(messages).tolist() == [U, A, X, X, X, X]


def test_a_question_brings_its_answer_and_an_answer_its_question() -> None:
    chat = codes(U, A, U, A, U, A)
    assert kept(closure(chat, flags(6, 2))) == [2, 3]
    assert kept(closure(chat, flags(6, 5))) == [4, 5]
    assert kept(closure(chat, flags(6, 0, 5))) == [0, 1, 4, 5]


def test_in_a_run_the_nearest_message_across_is_the_partner() -> None:
    chat = codes(U, U, A, A, X, A, U)
    assert kept(closure(chat, flags(7, 0))) == [0, 2]
    assert kept(closure(chat, flags(7, 5))) == [1, 5]
    # a question not answered yet, and an answer before any question, have no partner
    assert kept(closure(chat, flags(7, 6))) == [6]
    assert kept(closure(codes(A, U, A), flags(3, 0))) == [0]
    assert kept(closure(chat, flags(7, 4))) == [4]  # a system or tool message has none


def test_whatever_is_kept_the_result_alternates_as_the_chat_does() -> None:
    rng = np.random.default_rng(7)
    for _ in range(300):
        n = int(rng.integers(1, 30))
        chat = rng.choice([U, A, X], size=n, p=[0.45, 0.45, 0.1]).astype(np.int8)
        keep = rng.random(n) < 0.3
        out = closure(chat, keep)
        assert (out | keep).sum() == out.sum()  # nothing kept is dropped
        assert alternates(chat, out)
        budgeted = within(chat, keep, np.full(n, 5), int(rng.integers(0, 40)), np.arange(n)[::-1])
        assert alternates(chat, budgeted)


def test_under_a_budget_a_message_whose_partner_does_not_fit_is_left_out() -> None:
    chat = codes(U, A, U, A, U, A)
    tokens = np.array([10, 50, 10, 10, 10, 10])
    order = np.array([4, 2])  # the most valuable first
    # 12 free tokens: message 4 brings 5 (10), message 2 would need 3 (10) more: left out
    assert kept(within(chat, flags(6, 2, 4), tokens, 12, order)) == [4, 5]
    # what a left-out message frees serves the next one: with 5 free, 2 cannot bring 3 (10)
    # and is left out; the 10 it gives back let 0 bring its answer (12)
    tokens[1] = 12
    assert kept(within(chat, flags(6, 0, 2), tokens, 5, np.array([2, 0]))) == [0, 1]


def test_a_partner_another_message_counts_on_is_never_left_out() -> None:
    # 0 and 1 ask, 2 answers both: 1's partner is 2; 2's own partner is 1, which is not kept
    # and does not fit, but 2 stays, since 0 counts on it
    chat = codes(U, U, A)
    tokens = np.array([10, 99, 10])
    assert kept(within(chat, flags(3, 0, 2), tokens, 0, np.array([0, 2]))) == [0, 2]


def test_kept_whole_turns_cost_nothing_more() -> None:
    chat = codes(U, A, U, A)
    keep = flags(4, 2, 3)
    assert kept(within(chat, keep, np.full(4, 10), 0, np.array([3, 2]))) == [2, 3]


def test_partners_found_in_kept_roles_are_those_found_in_the_codes() -> None:
    rng = np.random.default_rng(11)
    for _ in range(200):
        n = int(rng.integers(1, 40))
        chat = rng.choice([U, A, X], size=n, p=[0.45, 0.45, 0.1]).astype(np.int8)
        at = np.flatnonzero(rng.random(n) < 0.4)
        cut = int(rng.integers(0, n + 1))
        # roles read in two appends, then cut to a shorter history, as a chat's index does
        roles = Roles.of(chat[:cut]).extended(Roles.of(chat[cut:], cut))
        assert partners(chat, at, roles).tolist() == partners(chat, at).tolist()
        shorter = at[at < cut]
        found = partners(chat[:cut], shorter, roles.before(cut)).tolist()
        assert found == partners(chat[:cut], shorter).tolist()


def searched(codes_: np.ndarray, at: np.ndarray) -> list[int]:
    """:func:`partners` by search, one position at a time (no table)."""
    return [int(partners(codes_, np.array([i], dtype=np.intp))[0]) for i in at.tolist()]


def test_a_roles_table_gives_each_position_the_partner_a_search_finds() -> None:
    rng = np.random.default_rng(7)
    for _ in range(40):
        chat = rng.choice([U, A, X], size=int(rng.integers(0, 200)), p=[0.45, 0.45, 0.1])
        chat = chat.astype(np.int8)
        at = np.arange(len(chat), dtype=np.intp)
        assert partners(chat, at, Roles.of(chat)).tolist() == searched(chat, at)


def test_a_table_carried_through_extensions_is_completed_for_what_was_added() -> None:
    """As a chat's index grows: the table made at one length serves the next, and a question
    that had no answer gets the one that came after."""
    rng = np.random.default_rng(11)
    for _ in range(20):
        whole = rng.choice([U, A, X], size=300, p=[0.5, 0.4, 0.1]).astype(np.int8)
        roles, n = Roles.of(whole[:0]), 0
        while n < len(whole):
            step = int(rng.integers(1, 40))
            roles = roles.extended(Roles.of(whole[n : n + step], n))
            n = min(n + step, len(whole))
            if rng.random() < 0.7:  # a request that reads the table at this length
                at = np.arange(n, dtype=np.intp)
                assert partners(whole[:n], at, roles).tolist() == searched(whole[:n], at)
        cut = roles.before(150)  # a request shorter than the index: no partner past its end
        at = np.arange(150, dtype=np.intp)
        assert partners(whole[:150], at, cut).tolist() == searched(whole[:150], at)


def test_an_unanswered_question_gets_the_answer_that_comes_later() -> None:
    first = codes(U, A, U)
    roles = Roles.of(first)
    many = np.array([0, 1, 2] * 30, dtype=np.intp)  # past MANY: the table
    assert partners(first, many, roles)[:3].tolist() == [1, 0, -1]
    more = roles.extended(Roles.of(codes(X, A), 3))
    both = np.concatenate((first, codes(X, A)))
    assert partners(both, many, more)[:3].tolist() == [1, 0, 4]


def test_a_click_closed_from_the_table_keeps_what_a_search_keeps() -> None:
    rng = np.random.default_rng(5)
    for _ in range(30):
        chat = rng.choice([U, A, X], size=int(rng.integers(65, 300)), p=[0.45, 0.45, 0.1])
        chat = chat.astype(np.int8)
        keep = rng.random(len(chat)) < rng.random()
        searched_keep = closure(chat, keep)  # no roles: each partner searched
        assert closure(chat, keep, Roles.of(chat)).tolist() == searched_keep.tolist()


def test_a_history_of_other_roles_only_has_no_partner_from_the_table() -> None:
    chat = codes(*([X] * 100))
    at = np.arange(100, dtype=np.intp)
    assert partners(chat, at, Roles.of(chat)).tolist() == [-1] * 100
    assert closure(chat, np.ones(100, dtype=bool), Roles.of(chat)).all()


def test_within_keeps_what_one_message_at_a_time_keeps() -> None:
    def one_at_a_time(
        roles: np.ndarray, keep: np.ndarray, tokens: np.ndarray, free: int, order: np.ndarray
    ) -> np.ndarray:
        at = np.flatnonzero(keep)
        partner = dict(zip(at.tolist(), partners(roles, at).tolist(), strict=True))
        out = keep.copy()
        paired = np.zeros(len(roles), dtype=bool)
        for i in order.tolist():
            p = partner.get(i, -1)
            if p < 0 or not out[i] or paired[i]:
                continue
            if not out[p] and int(tokens[p]) > free:
                out[i] = False
                free += int(tokens[i])
                continue
            if not out[p]:
                out[p] = True
                free -= int(tokens[p])
            paired[[i, p]] = True
        return out

    rng = np.random.default_rng(3)
    for _ in range(400):
        n = int(rng.integers(1, 120))
        roles = rng.choice(np.array([U, U, A, A, X], dtype=np.int8), n)
        keep = rng.random(n) < rng.random()
        tokens = rng.integers(1, 50, n)
        order = rng.permutation(np.flatnonzero(keep))
        free = int(rng.integers(0, 400))
        expected = one_at_a_time(roles, keep, tokens, free, order)
        assert np.array_equal(within(roles, keep, tokens, free, order), expected)
