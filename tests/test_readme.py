"""The README is for users: short, its settings table true to the code, its test command the one
CI runs, and the repository free of references to the design material it was built from."""

from __future__ import annotations

import dataclasses
import re
import tomllib
from pathlib import Path
from typing import Any

from smart_context.config import SETTING_KEYS, Settings

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
MAX_LINES = 250
ROW = re.compile(r"^\| `(?P<key>[a-z_]+)` \| `(?P<default>[^`]*)` \|", re.M)


def table_defaults() -> dict[str, Any]:
    """The README settings table as key -> default, each default read as TOML reads it."""
    rows = ROW.findall(README.read_text(encoding="utf-8"))
    return {key: tomllib.loads(f"value = {default}")["value"] for key, default in rows}


def code_defaults() -> dict[str, Any]:
    """Every key ``[plugins.smart_context]`` accepts, with the default the code uses."""
    defaults: dict[str, Any] = {"enabled": True}  # the host's key: validated, never kept
    for field in dataclasses.fields(Settings):
        value = field.default
        defaults[field.name] = list(value) if isinstance(value, tuple) else value
    assert set(defaults) == set(SETTING_KEYS)
    return defaults


def test_the_readme_is_short() -> None:
    lines = README.read_text(encoding="utf-8").count("\n")
    assert lines <= MAX_LINES, f"README.md has {lines} lines; move detail to docs/"


def test_the_settings_table_has_every_key_with_its_default() -> None:
    table, code = table_defaults(), code_defaults()
    assert sorted(table) == sorted(code), "the README's settings table and config.py differ"
    wrong = {key: (table[key], code[key]) for key in code if table[key] != code[key]}
    assert wrong == {}, "README default != code default"
    assert all(type(table[k]) is type(code[k]) or isinstance(code[k], float) for k in code)


def test_the_readme_test_command_is_the_one_ci_runs() -> None:
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    ran = next(line for line in ci.splitlines() if line.startswith("$PY -m venv"))
    readme = README.read_text(encoding="utf-8")
    assert ran.replace("$PY", "python3", 1) in readme.splitlines()
