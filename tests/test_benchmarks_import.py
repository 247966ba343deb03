"""Every benchmark script still imports: a helper one of them uses can be renamed or removed in
a change that runs no benchmark (bench_look_back.py imported a function that was gone)."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = sorted(
    ".".join(p.relative_to(ROOT).with_suffix("").parts)
    for p in (ROOT / "benchmarks").rglob("*.py")
    if p.name != "__init__.py"
)


def test_the_benchmarks_are_found() -> None:
    assert "benchmarks.bench_look_back" in SCRIPTS and "benchmarks.public.bench_history" in SCRIPTS


@pytest.mark.parametrize("module", SCRIPTS)
def test_a_benchmark_script_imports(module: str) -> None:
    importlib.import_module(module)
