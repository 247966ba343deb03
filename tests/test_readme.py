"""The README is for users: short, its settings table true to the code, its test command the one
CI runs, and the repository free of references to the design material it was built from."""

from __future__ import annotations

import dataclasses
import re
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest

from smart_context.config import SETTING_KEYS, Settings

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
MAX_LINES = 250
ROW = re.compile(r"^\| `(?P<key>[a-z_]+)` \| `(?P<default>[^`]*)` \|", re.M)
# References to material outside the repository: the design documents ("seed 003's", "seeds/"),
# the tracker ("issue 10", "the issue notes"), the old contract ("../shared", "CONTRACT.md",
# "CONTRACT §9"). A section sign must name the contract it points at (docs/contract.md).
OUTSIDE = re.compile(
    r"\.\./shared|(?-i:CONTRACT\.md|CONTRACT\s*§)"
    r"|\bseeds?\s*#?\s*\d{3}|\bseeds?/|\bseed (?:document|doc)"
    r"|\bissues?\s*#?\d+|\bissue notes?\b|\bthe issue\b|\bnotes? #\d+",
    re.I,
)
SECTION = re.compile(r"(?<![0-9] )§\s*\d")  # "RFC 9110 §7.2" is no contract
SKIPPED_SUFFIXES = {".png", ".json", ".onnx", ".sqlite"}


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


def test_the_first_walk_is_on_the_first_screen() -> None:
    """A first-time reader meets the two commands and then the walk, before any picture."""
    lines = README.read_text(encoding="utf-8").splitlines()
    walk = lines.index("## A first walk")
    assert walk < 40, f"the walk starts on line {walk + 1}"
    assert not any(line.startswith("![") for line in lines[:walk])


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


def repository_files() -> list[Path]:
    """The files git tracks or would track (untracked but not ignored), outside .git/.venv."""
    try:
        listed = subprocess.run(
            ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.splitlines()
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    paths = [ROOT / name for name in listed if not name.startswith((".venv/", ".git/"))]
    return [p for p in paths if p.is_file() and p.suffix not in SKIPPED_SUFFIXES]


def test_nothing_points_at_material_outside_the_repository() -> None:
    found = []
    for path in repository_files():
        if path == Path(__file__):
            continue  # it names the patterns it looks for
        text = path.read_text(encoding="utf-8", errors="replace")
        own = path.relative_to(ROOT).as_posix()
        for number, line in enumerate(text.splitlines(), 1):
            bad = OUTSIDE.search(line)
            if bad is None and SECTION.search(line) and own != "docs/contract.md":
                bad = None if "contract" in line.lower() else SECTION.search(line)
            if bad is not None:
                found.append(f"{own}:{number}: {bad.group(0)!r}")
    assert found == [], "\n".join(found[:40]) + f"\n({len(found)} in all)"
