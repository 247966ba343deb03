"""The budget's plan in turns: the record names the message a partner came with."""

from __future__ import annotations

import numpy as np

from smart_context.budget.plan import LEFT_OUT, RECENT, RELEVANT, TURN
from smart_context.budget.turns import turn_of
from smart_context.turns import ASSISTANT, USER


def test_a_partner_is_named_with_the_message_it_came_with_in_a_run_too() -> None:
    # u0 and u1 in a run, then one answer: the hit u0 brought a2 (its nearest answer); the
    # pair by position would have named u1, which is not sent
    codes = np.array([USER, USER, ASSISTANT, USER, ASSISTANT], dtype=np.int8)
    why = np.array([RELEVANT, LEFT_OUT, TURN, RECENT, RECENT], dtype=np.int8)
    assert turn_of(codes, why).tolist() == [-1, -1, 0, -1, -1]


def test_nothing_is_named_where_no_partner_was_brought() -> None:
    codes = np.array([USER, ASSISTANT], dtype=np.int8)
    assert turn_of(codes, np.array([RECENT, RECENT], dtype=np.int8)).tolist() == [-1, -1]
    assert turn_of(codes, np.array([LEFT_OUT, LEFT_OUT], dtype=np.int8)).tolist() == [-1, -1]
