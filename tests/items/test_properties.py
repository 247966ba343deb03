"""Front matter as Obsidian writes it, each property checked, hostile YAML refused; real files."""

from __future__ import annotations

from typing import Any

import pytest

from smart_context.items.properties import MAX_DEPTH, MAX_FRONT_MATTER_CHARS
from tests.items.conftest import Vault

# --- what Obsidian writes ------------------------------------------------------------------------


def test_every_property_as_obsidian_writes_it(vault: Vault) -> None:
    item, problems = vault.only_item(
        "rules/style.md",
        "---\n"
        "name: Code Style\n"
        "description: How code in answers should look\n"
        "priority: 1\n"
        "include: always\n"
        "enabled: true\n"
        "tags:\n"
        "  - python\n"
        "aliases: []\n"
        "---\n"
        "Use type hints.\n\nKeep functions short.\n",
    )
    assert problems == []
    assert (item.type, item.name, item.description) == (
        "rule",
        "Code Style",
        "How code in answers should look",
    )
    assert (item.priority, item.priority_label, item.include, item.enabled) == (
        1,
        "001",
        "always",
        True,
    )
    assert item.text == "Use type hints.\n\nKeep functions short."
    assert item.source == "rules/style.md"


def test_a_file_without_front_matter_is_an_item_with_defaults(vault: Vault) -> None:
    item, problems = vault.only_item("references/kyoto.md", "# Kyoto\n\nStart early.\n")
    assert problems == []
    assert (item.name, item.description, item.priority, item.include, item.enabled) == (
        "kyoto",
        "",
        999,
        "manual",
        True,
    )
    assert item.text == "# Kyoto\n\nStart early."


def test_a_bom_and_crlf_line_ends_are_tolerated(vault: Vault) -> None:
    content = "\ufeff---\r\nname: Windows\r\ninclude: agent\r\n---\r\nline one\r\nline two\r\n"
    item, problems = vault.only_item("rules/win.md", content)
    assert problems == []
    assert (item.name, item.include, item.text) == ("Windows", "agent", "line one\nline two")


@pytest.mark.parametrize("mode", ["always", "manual", "agent", "expansion", " Expansion "])
def test_every_include_mode_loads_from_front_matter(vault: Vault, mode: str) -> None:
    item, problems = vault.only_item("rules/m.md", f"---\ninclude: {mode}\n---\nx")
    assert problems == []
    assert item.include == mode.strip().lower()


def test_an_empty_front_matter_block_means_defaults(vault: Vault) -> None:
    item, problems = vault.only_item("rules/empty.md", "---\n---\nbody\n")
    assert problems == []
    assert (item.name, item.text) == ("empty", "body")


def test_the_closing_line_may_end_the_file(vault: Vault) -> None:
    item, problems = vault.only_item("rules/bare.md", "---\nname: Only properties\n---")
    assert problems == []
    assert (item.name, item.text) == ("Only properties", "")


def test_dashes_later_in_the_body_are_body(vault: Vault) -> None:
    item, _ = vault.only_item("rules/hr.md", "---\nname: R\n---\nabove\n---\nbelow\n")
    assert item.text == "above\n---\nbelow"


def test_front_matter_not_on_the_first_line_is_body(vault: Vault) -> None:
    item, problems = vault.only_item("rules/late.md", "\n---\nname: Late\n---\nbody\n")
    assert problems == []
    assert item.name == "late"
    assert item.text.startswith("---\nname: Late")


def test_an_unclosed_front_matter_is_read_as_body_and_reported(vault: Vault) -> None:
    item, problems = vault.only_item("rules/open.md", "---\nname: Open\nbody without a close\n")
    assert item.name == "open" and item.include == "manual"
    assert item.text.startswith("---\nname: Open")
    assert [p.message for p in problems] == [
        "starts with --- but has no closing --- line: read as a file without properties"
    ]


# --- each property -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("written", "priority"),
    [("7", 7), ('"001"', 1), ("'042'", 42), ("0", 0), ("010", 10), ("008", 8), ("0_10", 10)],
)
def test_priority_is_a_whole_number_also_written_as_001_and_never_octal(
    vault: Vault, written: str, priority: int
) -> None:
    item, problems = vault.only_item("rules/p.md", f"---\npriority: {written}\n---\nx")
    assert problems == []
    assert item.priority == priority


@pytest.mark.parametrize("written", ["Always", "AGENT", "  manual  "])
def test_include_is_case_insensitive(vault: Vault, written: str) -> None:
    item, problems = vault.only_item("rules/i.md", f"---\ninclude: '{written}'\n---\nx")
    assert problems == []
    assert item.include == written.strip().lower()


@pytest.mark.parametrize(
    ("written", "enabled"),
    [("true", True), ("false", False), ("yes", True), ("no", False), ("'Yes'", True),
     ("'off'", False), ("1", True), ("0", False), ('"FALSE"', False)],
)  # fmt: skip
def test_enabled_accepts_booleans_and_yes_no_words(
    vault: Vault, written: str, enabled: bool
) -> None:
    item, problems = vault.only_item("rules/e.md", f"---\nenabled: {written}\n---\nx")
    assert problems == []
    assert item.enabled is enabled


def test_an_emptied_property_is_an_unset_one(vault: Vault) -> None:
    content = "---\nname:\ndescription: ''\npriority:\ninclude: ' '\nenabled:\n---\nx"
    item, problems = vault.only_item("rules/blank.md", content)
    assert problems == []
    assert (item.name, item.description, item.priority, item.include, item.enabled) == (
        "blank",
        "",
        999,
        "manual",
        True,
    )


@pytest.mark.parametrize(
    ("line", "field", "value", "says"),
    [
        ("name: 42", "name", "n", "name must be text (put it in quotes), got 42; using 'n'"),
        ("name: [a, b]", "name", "n", "name must be text"),
        ('name: "two\\nlines"', "name", "n", "must not hold a line break"),
        (f"name: '{'x' * 201}'", "name", "n", "must be at most 200 characters"),
        ("description: [a]", "description", "", "got ['a']; leaving it empty"),
        ("priority: high", "priority", 999, "from 0 to 999 (001 works too), got 'high'; using 999"),
        ("priority: 1000", "priority", 999, "got 1000"),
        ("priority: -1", "priority", 999, "got -1"),
        ("priority: 1.5", "priority", 999, "got 1.5"),
        ("priority: true", "priority", 999, "got true"),
        ("priority: '0001'", "priority", 999, "got '0001'"),
        ("include: sometimes", "include", "manual", "agent, expansion, got 'sometimes'; using"),
        ("include: [always]", "include", "manual", "include must be one of"),
        ("enabled: maybe", "enabled", False, "must be true or false, got 'maybe'; using false"),
        ("enabled: 2", "enabled", False, "got 2"),
    ],
)  # fmt: skip
def test_a_bad_value_is_reported_by_file_and_property_and_replaced_safely(
    vault: Vault, line: str, field: str, value: Any, says: str
) -> None:
    item, problems = vault.only_item("rules/n.md", f"---\n{line}\n---\nbody")
    assert getattr(item, field) == value
    assert item.text == "body"
    [problem] = problems
    assert (problem.source, problem.field, problem.skipped) == ("rules/n.md", field, False)
    assert says in problem.message


def test_a_message_names_the_property_the_rule_the_value_and_what_is_used(vault: Vault) -> None:
    content = "---\npriority: high\ninclude: sometimes\n---\nx"
    _, problems = vault.only_item("rules/n.md", content)
    assert [str(p) for p in problems] == [
        "rules/n.md: priority must be a whole number from 0 to 999 (001 works too), got 'high'; "
        "using 999",
        "rules/n.md: include must be one of always, manual, agent, expansion, got 'sometimes'; "
        "using 'manual'",
    ]


def test_a_bad_include_never_puts_an_item_in_a_chat_nor_a_bad_enabled_switches_one_on(
    vault: Vault,
) -> None:
    item, _ = vault.only_item("rules/n.md", "---\ninclude: allways\nenabled: nope\n---\nx")
    assert (item.include, item.enabled) == ("manual", False)


def test_other_properties_are_ignored_quietly(vault: Vault) -> None:
    content = (
        "---\ntags: [travel, japan]\naliases: [JR]\ncssclasses: wide\ncreated: 2024-05-01\n"
        "publish: false\n7: seven\n---\nx"
    )
    item, problems = vault.only_item("references/jr.md", content)
    assert problems == []
    assert item.name == "jr"


@pytest.mark.parametrize(
    ("key", "meant"),
    [("Priority", "priority"), ("inlcude", "include"), ("enable", "enabled"), ("Name", "name")],
)
def test_a_near_miss_of_a_property_is_reported(vault: Vault, key: str, meant: str) -> None:
    item, problems = vault.only_item("rules/typo.md", f"---\n{key}: always\n---\nx")
    assert item.include == "manual"
    [problem] = problems
    assert problem.field == meant
    assert problem.message == f"unknown property {key!r} ignored; did you mean {meant!r}?"


def test_a_bad_date_in_another_property_costs_nothing(vault: Vault) -> None:
    item, problems = vault.only_item(
        "rules/d.md", "---\ncreated: 2024-02-30\ninclude: agent\n---\nx"
    )
    assert problems == []
    assert item.include == "agent"


# --- YAML that is broken or hostile --------------------------------------------------------------


def test_broken_yaml_skips_the_file_and_names_the_line(vault: Vault) -> None:
    problem = vault.skipped("rules/broken.md", "---\nname: ok\ninclude: [always\n---\nbody")
    assert problem.message.startswith("the properties are not valid YAML on line ")
    assert problem.message.endswith("; skipped")


@pytest.mark.parametrize(
    ("front", "kind"),
    [("- a\n- b\n", "not a list"), ("just words\n", "not a single value ('just words')"),
     ("42\n", "not a single value (42)")],
)  # fmt: skip
def test_front_matter_that_is_a_list_or_a_scalar_skips_the_file(
    vault: Vault, front: str, kind: str
) -> None:
    problem = vault.skipped("rules/odd.md", f"---\n{front}---\nbody")
    assert problem.message == f"the properties must be `key: value` lines, {kind}; skipped"


def test_a_yaml_bomb_is_refused_before_it_expands(vault: Vault) -> None:
    # billion laughs: nine levels of ten aliases each would build 10^9 list items
    lines = ['a0: &a0 ["lol"]'] + [
        f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 10)
    ]
    problem = vault.skipped("rules/bomb.md", "---\n" + "\n".join(lines) + "\n---\nbody")
    assert "alias" in problem.message


def test_an_anchor_without_an_alias_is_harmless(vault: Vault) -> None:
    item, problems = vault.only_item("rules/anchor.md", "---\nname: &n Anchored\n---\nx")
    assert problems == []
    assert item.name == "Anchored"


def test_deep_nesting_is_refused_before_it_exhausts_the_stack(vault: Vault) -> None:
    depth = 5000
    problem = vault.skipped("rules/deep.md", f"---\nx: {'[' * depth}{']' * depth}\n---\nbody")
    assert f"nested more than {MAX_DEPTH} levels" in problem.message


def test_python_tags_are_refused(vault: Vault, tmp_path: Any) -> None:
    marker = tmp_path / "pwned"
    content = f"---\nx: !!python/object/apply:os.system ['touch {marker}']\n---\nbody"
    problem = vault.skipped("rules/tag.md", content)
    assert "not valid YAML" in problem.message
    assert not marker.exists()


def test_a_5000_digit_integer_is_reported_not_raised(vault: Vault) -> None:
    problem = vault.skipped("rules/digits.md", f"---\npriority: {'9' * 5000}\n---\nbody")
    assert problem.message == "the properties hold a number too long to read; skipped"


def test_overlong_front_matter_is_refused(vault: Vault) -> None:
    filler = "".join(f"k{i}: v\n" for i in range(MAX_FRONT_MATTER_CHARS // 6))
    problem = vault.skipped("rules/long.md", f"---\n{filler}---\nbody")
    assert f"longer than {MAX_FRONT_MATTER_CHARS:,} characters" in problem.message
