"""Rules and references read from a real vault: which files count, hostile files, name
collisions, order, and the stamp that says when to read again."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from smart_context.items.files import MAX_FILE_BYTES, folder_stamp, load_items
from tests.items.conftest import Vault

RULE = "---\ninclude: always\n---\nBe brief.\n"


def names(vault: Vault, **folders: str) -> list[str]:
    return [item.key for item in vault.load(**folders)[0]]


# --- which files count ---------------------------------------------------------------------------


def test_rules_and_references_come_from_their_folders(vault: Vault) -> None:
    vault.write("rules/brief.md", RULE)
    vault.write("references/kyoto.md", "Temples.")
    vault.write("notes/elsewhere.md", RULE)
    assert names(vault) == ["rule::brief", "reference::kyoto"]


def test_missing_folders_mean_no_items_and_no_problems(vault: Vault) -> None:
    assert vault.load() == ([], [])


def test_the_folders_can_be_named_otherwise(vault: Vault) -> None:
    vault.write("agent/rules/brief.md", RULE)
    vault.write("refs/kyoto.md", "Temples.")
    items, problems = vault.load(rules_dir="agent/rules", references_dir="refs")
    assert problems == []
    assert [(i.key, i.source) for i in items] == [
        ("rule::brief", "agent/rules/brief.md"),
        ("reference::kyoto", "refs/kyoto.md"),
    ]


def test_dot_files_and_other_extensions_are_ignored(vault: Vault) -> None:
    for name in (".draft.md", ".md", "notes.txt", "README.MD", "old.md.bak", "image.png"):
        vault.write(f"rules/{name}", RULE)
    vault.write("rules/kept.md", RULE)
    assert vault.load()[1] == []
    assert names(vault) == ["rule::kept"]


def test_subfolders_are_not_read(vault: Vault) -> None:
    vault.write("rules/archive/old.md", RULE)
    vault.write("rules/.obsidian/workspace.md", RULE)
    vault.write("rules/current.md", RULE)
    assert names(vault) == ["rule::current"]


def test_a_folder_that_is_a_file_is_reported(vault: Vault) -> None:
    vault.write("rules", "not a folder")
    items, [problem] = vault.load()
    assert items == []
    assert (problem.source, problem.skipped) == ("rules", True)
    assert problem.message.startswith("the folder cannot be read")


# --- hostile files -------------------------------------------------------------------------------


def test_a_huge_file_is_skipped_and_reported(vault: Vault) -> None:
    problem = vault.skipped("references/dump.md", b"x" * (MAX_FILE_BYTES + 1))
    assert "larger than 1 MB" in problem.message


def test_a_file_of_exactly_the_cap_loads(vault: Vault) -> None:
    item, problems = vault.only_item("references/big.md", b"word " * (MAX_FILE_BYTES // 5))
    assert problems == []
    assert len(item.text) == MAX_FILE_BYTES - 1


def test_non_utf8_bytes_skip_the_file_naming_the_byte(vault: Vault) -> None:
    problem = vault.skipped("rules/latin1.md", "---\nname: Café\n---\n".encode("latin-1"))
    assert problem.message.startswith("is not UTF-8 text (byte 0xe9 at offset 13)")


def test_nul_bytes_in_utf8_text_are_text(vault: Vault) -> None:
    item, problems = vault.only_item("rules/nul.md", b"a\x00b")
    assert problems == []
    assert item.text == "a\x00b"


def test_a_link_to_a_file_outside_the_vault_is_refused(vault: Vault, tmp_path: Path) -> None:
    secret = tmp_path / "secret.md"
    secret.write_text("---\ninclude: always\n---\nthe password is hunter2\n")
    (vault.root / "rules").mkdir()
    (vault.root / "rules" / "leak.md").symlink_to(secret)
    items, [problem] = vault.load()
    assert items == []
    assert (problem.source, problem.skipped) == ("rules/leak.md", True)
    assert problem.message == "is a link to a file outside the vault; refused"


def test_a_relative_link_climbing_out_of_the_vault_is_refused(vault: Vault, tmp_path: Path) -> None:
    (tmp_path / "outside.md").write_text("secret")
    (vault.root / "rules").mkdir()
    (vault.root / "rules" / "up.md").symlink_to(Path("..", "..", "outside.md"))
    items, [problem] = vault.load()
    assert items == [] and "outside the vault" in problem.message


def test_a_link_to_a_file_inside_the_vault_is_followed(vault: Vault) -> None:
    vault.write("notes/style.md", RULE)
    (vault.root / "rules").mkdir()
    (vault.root / "rules" / "style.md").symlink_to(Path("..", "notes", "style.md"))
    items, problems = vault.load()
    assert problems == []
    assert [(i.name, i.source, i.text) for i in items] == [("style", "rules/style.md", "Be brief.")]


def test_a_rules_folder_linking_outside_the_vault_is_not_read(vault: Vault, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "x.md").write_text(RULE)
    (vault.root / "rules").symlink_to(elsewhere)
    items, [problem] = vault.load()
    assert items == []
    assert (problem.source, problem.skipped) == ("rules", True)
    assert problem.message == "the folder is outside the vault; its files are not read"


@pytest.mark.parametrize("folder", ["..", "../elsewhere", "/etc"])
def test_a_folder_setting_pointing_outside_the_vault_is_not_read(
    vault: Vault, tmp_path: Path, folder: str
) -> None:
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "x.md").write_text(RULE)
    items, [problem] = vault.load(rules_dir=folder)
    assert items == []
    assert "outside the vault" in problem.message
    assert folder_stamp(vault.root, rules_dir=folder) == ()


def test_a_folder_name_no_file_system_takes_is_a_problem_not_a_crash(vault: Vault) -> None:
    items, [problem] = vault.load(rules_dir="ru\x00les")
    assert items == [] and problem.message == "the folder cannot be read (embedded null byte)"
    assert folder_stamp(vault.root, rules_dir="ru\x00les") == ()


def test_the_stamp_of_a_folder_linked_inside_the_vault_follows_it_and_outside_is_empty(
    vault: Vault, tmp_path: Path
) -> None:
    vault.write("notes/a.md", RULE)
    (vault.root / "rules").symlink_to(vault.root / "notes")  # a link: checked, inside
    assert [source for source, *_ in folder_stamp(vault.root)] == ["rules/a.md"]
    (vault.root / "rules").unlink()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "x.md").write_text(RULE)
    (vault.root / "rules").symlink_to(elsewhere)  # outside: as load_items, nothing
    assert folder_stamp(vault.root) == ()
    nested = vault.root / "sub"
    nested.mkdir()
    (nested / "deep").symlink_to(elsewhere)  # a link further down the folder's path
    assert folder_stamp(vault.root, rules_dir="sub/deep") == ()


def test_a_dangling_link_is_reported(vault: Vault) -> None:
    (vault.root / "rules").mkdir()
    (vault.root / "rules" / "gone.md").symlink_to(vault.root / "rules" / "nowhere.md")
    items, [problem] = vault.load()
    assert items == []
    assert problem.message == "cannot be read: it is gone, or a link to nothing"


def test_a_symlink_loop_is_reported(vault: Vault) -> None:
    rules = vault.root / "rules"
    rules.mkdir()
    (rules / "a.md").symlink_to(rules / "b.md")
    (rules / "b.md").symlink_to(rules / "a.md")
    items, problems = vault.load()
    assert items == []
    assert [p.source for p in problems] == ["rules/a.md", "rules/b.md"]
    assert all(p.skipped and p.message.startswith("cannot be read") for p in problems)


def test_a_fifo_named_like_a_note_is_reported_not_waited_for(vault: Vault) -> None:
    (vault.root / "rules").mkdir()
    os.mkfifo(vault.root / "rules" / "pipe.md")
    items, [problem] = vault.load()
    assert items == []
    assert problem.message == "is not a regular file"


def test_a_folder_named_like_a_note_is_reported(vault: Vault) -> None:
    (vault.root / "rules" / "odd.md").mkdir(parents=True)
    items, [problem] = vault.load()
    assert items == [] and problem.message == "is not a regular file"


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode")
def test_an_unreadable_file_is_reported(vault: Vault) -> None:
    path = vault.write("rules/locked.md", RULE)
    path.chmod(0)
    items, [problem] = vault.load()
    assert items == [] and problem.message.startswith("cannot be read (")


def test_a_file_name_with_a_control_character_is_skipped(vault: Vault) -> None:
    problem = vault.skipped("rules/two\nlines.md", RULE)
    assert problem.message.startswith("the file name cannot name a rule: it must not hold a line")


def test_reading_never_raises_whatever_the_files_hold(vault: Vault) -> None:
    rng = random.Random(7)
    fragments = [b"---\n", b"---\r\n", b"\xef\xbb\xbf", b"name: ", b"include: ", b"&a ", b"*a",
                 b"[", b"]", b"{", b"}", b"\n", b"\xff", b"\x00", b"priority: 1e9", b"- ", b"!!",
                 b"'", b'"', b"\t", b": ", b"enabled: ", b"yes", b"\xe3\x81\x82"]  # fmt: skip
    for i in range(300):
        data = b"".join(rng.choice(fragments) for _ in range(rng.randint(0, 40)))
        vault.write(f"{rng.choice(['rules', 'references'])}/f{i}.md", data)
    items, problems = vault.load()
    assert len(items) + sum(p.skipped for p in problems) == 300


# --- names, collisions and order -----------------------------------------------------------------


def test_a_name_taken_twice_keeps_the_first_file_and_reports_the_other(vault: Vault) -> None:
    vault.write("rules/a-style.md", "---\nname: Style\n---\nfirst")
    vault.write("rules/b-style.md", "---\nname: Style\n---\nsecond")
    items, [problem] = vault.load()
    assert [(i.name, i.text) for i in items] == [("Style", "first")]
    assert (problem.source, problem.field, problem.skipped) == ("rules/b-style.md", "name", True)
    assert problem.message == "another rule is already named 'Style' (rules/a-style.md); skipped"


def test_a_name_may_collide_with_another_files_stem(vault: Vault) -> None:
    vault.write("rules/Style.md", "stem")
    vault.write("rules/other.md", "---\nname: Style\n---\nproperty")
    items, [problem] = vault.load()
    assert [i.text for i in items] == ["stem"]
    assert problem.source == "rules/other.md"


def test_names_differing_in_case_are_different_items(vault: Vault) -> None:
    vault.write("rules/a.md", "---\nname: style\n---\nx")
    vault.write("rules/b.md", "---\nname: Style\n---\nx")
    assert names(vault) == ["rule::Style", "rule::style"]


def test_a_rule_and_a_reference_may_share_a_name(vault: Vault) -> None:
    vault.write("rules/kyoto.md", "x")
    vault.write("references/kyoto.md", "y")
    assert vault.load()[1] == []
    assert names(vault) == ["rule::kyoto", "reference::kyoto"]


def test_items_are_sorted_by_type_then_priority_then_name(vault: Vault) -> None:
    vault.write("references/b.md", "---\npriority: 2\n---\nx")
    vault.write("references/a.md", "x")
    vault.write("rules/zeta.md", "---\npriority: 1\n---\nx")
    vault.write("rules/Beta.md", "x")
    vault.write("rules/alpha.md", "x")
    vault.write("rules/gamma.md", "---\npriority: 1\n---\nx")
    assert names(vault) == [
        "rule::gamma",
        "rule::zeta",
        "rule::alpha",
        "rule::Beta",
        "reference::b",
        "reference::a",
    ]


def test_disabled_items_are_loaded_for_the_caller_to_judge(vault: Vault) -> None:
    item, _ = vault.only_item("rules/off.md", "---\nenabled: false\n---\nx")
    assert item.enabled is False


# --- the stamp -----------------------------------------------------------------------------------


def test_the_stamp_is_one_entry_per_file_read(vault: Vault) -> None:
    vault.write("rules/a.md", RULE)
    vault.write("rules/.hidden.md", RULE)
    vault.write("rules/sub/b.md", RULE)
    vault.write("references/c.md", "xy")
    stamp = folder_stamp(vault.root)
    assert [(source, size) for source, _mtime, size in stamp] == [
        ("rules/a.md", len(RULE)),
        ("references/c.md", 2),
    ]
    assert folder_stamp(vault.root) == stamp


def test_the_stamp_changes_with_every_edit_addition_removal_and_rename(vault: Vault) -> None:
    path = vault.write("rules/a.md", RULE)
    seen = {folder_stamp(vault.root)}

    def changed() -> bool:
        stamp = folder_stamp(vault.root)
        new = stamp not in seen
        seen.add(stamp)
        return new

    path.write_text(RULE + "more")
    assert changed()
    os.utime(path, ns=(1, 1))  # the same size, another time
    assert changed()
    vault.write("references/b.md", "x")
    assert changed()
    path.rename(path.with_name("renamed.md"))
    assert changed()
    (vault.root / "references" / "b.md").unlink()
    assert changed()
    assert not changed()


def test_an_edit_on_disk_shows_on_the_next_load(vault: Vault) -> None:
    path = vault.write("rules/a.md", "---\ninclude: manual\n---\nold")
    before = folder_stamp(vault.root)
    path.write_text("---\ninclude: always\n---\nnew text")
    assert folder_stamp(vault.root) != before
    [item] = vault.load()[0]
    assert (item.include, item.text) == ("always", "new text")


def test_a_file_that_cannot_be_stat_ed_is_in_the_stamp_as_minus_one(vault: Vault) -> None:
    (vault.root / "rules").mkdir()
    (vault.root / "rules" / "gone.md").symlink_to("nowhere.md")
    assert folder_stamp(vault.root) == (("rules/gone.md", -1, -1),)


def test_a_vault_that_does_not_exist_has_an_empty_stamp_and_no_items(tmp_path: Path) -> None:
    assert folder_stamp(tmp_path / "nowhere") == ()
    assert load_items(tmp_path / "nowhere") == ([], [])
