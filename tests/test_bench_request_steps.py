"""The request's steps benchmark times every step it names: a step renamed or no longer run on
the event loop during a request shows as missing or 0 ms, and its figures would lie."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.bench_request_steps import WHEN_RECALLING, steps_of

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("model", ["gpt-4o", "none"])
def test_every_step_is_timed_in_a_short_chat(model: str) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "benchmarks/bench_request_steps.py",
            *("--size", "300", "--turns", "3", "--model", model),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    timed = dict(re.findall(r"^  (.+?)\s+(\d+\.\d+) ms", done.stdout, re.M))
    named = steps_of(None if model == "none" else model)
    assert {label.strip() for label in timed} == {label.strip() for label in named}
    # a short chat laid out for the cache recalls nothing, so its keyword search may not run
    maybe = WHEN_RECALLING if model != "none" else set()
    ran = {k: ms for k, ms in timed.items() if k.strip() not in {m.strip() for m in maybe}}
    assert all(float(ms) > 0 for ms in ran.values()), done.stdout
