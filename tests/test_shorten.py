"""One rule for cutting text to a line."""

from __future__ import annotations

from smart_context.shorten import shorten


def test_text_that_fits_is_only_put_on_one_line() -> None:
    assert shorten("  read\n\tthe   file ", 20) == "read the file"


def test_a_cut_is_marked_and_never_longer_than_the_limit() -> None:
    assert shorten("abcdefghij", 5) == "abcd…"
    assert len(shorten("x" * 1000, 160)) == 160
    assert shorten("read the file now", 12, at_word=True) == "read the…"
    assert shorten("unbroken" * 5, 10, at_word=True) == "unbrokenu…"  # no space: a plain cut
    assert shorten("abc", 0) == ""
