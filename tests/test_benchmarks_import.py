"""Every benchmark script still imports: a helper one of them uses can be renamed or removed in
a change that runs no benchmark (bench_look_back.py imported a function that was gone)."""

from __future__ import annotations

import importlib
import platform
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


def test_the_memory_benchmark_reads_what_each_allocator_holds() -> None:
    from benchmarks.bench_memory import allocator_parts, grown

    before = allocator_parts()
    held = [bytearray(100) for _ in range(20_000)]  # small objects: Python's own arenas
    block = bytearray(4 << 20)  # a large one: malloc's
    after = allocator_parts()
    if platform.python_implementation() == "CPython" and platform.libc_ver()[0] == "glibc":
        assert set(before) == {"arenas", "objects", "malloc"}  # as here and in CI
        assert after["objects"] - before["objects"] >= 1.5  # 20,000 small objects of 100 bytes
        assert after["arenas"] >= after["objects"] and after["malloc"] - before["malloc"] >= 4
        assert "its objects +" in grown(before, after)
    del held, block
