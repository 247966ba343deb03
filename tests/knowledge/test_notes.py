"""Which files are notes, and how one is read: real files in tmp_path, hostile ones included."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from smart_context.items.files import MAX_FILE_BYTES
from smart_context.knowledge.notes import Note, read_note, scan


def write(root: Path, source: str, content: str | bytes = "Some words.\n") -> Path:
    path = root / source
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content.encode("utf-8") if isinstance(content, str) else content)
    return path


@pytest.fixture
def root(tmp_path: Path) -> Path:
    vault = tmp_path / "vault"
    vault.mkdir()
    return vault.resolve()


def test_notes_are_the_markdown_files_outside_memory_dot_folders_and_item_folders(
    root: Path,
) -> None:
    for source in (
        "inbox.md",
        "projects/lenswatch/plan.md",
        "Journal/2024-05-01.MD",
        ".memory/chat.md",
        ".obsidian/workspace.md",
        ".hidden.md",
        "rules/style.md",
        "rules/archive/old.md",
        "references/api.md",
        "projects/diagram.png",
        "projects/notes.txt",
    ):
        write(root, source)
    found = scan(root, ["."], ["rules", "references"])
    assert list(found.stamps) == ["Journal/2024-05-01.MD", "inbox.md", "projects/lenswatch/plan.md"]
    assert found.problems == ()
    assert list(scan(root, ["projects", "projects/lenswatch"]).stamps) == [
        "projects/lenswatch/plan.md"  # overlapping folders list a note once
    ]
    assert scan(root, []).stamps == {} and scan(root, ["missing"]).stamps == {}
    stamp = found.stamps["inbox.md"]
    assert stamp == (os.stat(root / "inbox.md").st_mtime_ns, len("Some words.\n"))


def test_links_never_lead_out_of_the_vault_and_folder_links_are_not_followed(
    root: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "secrets"
    write(outside, "passwords.md", "hunter2")
    write(root, "real.md")
    (root / "leak.md").symlink_to(outside / "passwords.md")
    (root / "elsewhere").symlink_to(outside, target_is_directory=True)
    (root / "again").symlink_to(root, target_is_directory=True)  # a loop, if it were followed
    (root / "alias.md").symlink_to(root / "real.md")  # a link inside the vault is a note
    (root / "dangling.md").symlink_to(root / "nothing.md")
    found = scan(root, ["."])
    assert list(found.stamps) == ["alias.md", "real.md"]
    refused = scan(root, ["elsewhere", "../secrets"])
    assert refused.stamps == {}
    assert all("outside the vault" in p for p in refused.problems) and len(refused.problems) == 2


def test_a_link_part_way_down_a_notes_folder_is_checked_like_the_folder(
    root: Path, tmp_path: Path
) -> None:
    write(tmp_path / "secrets" / "deep", "passwords.md", "hunter2")
    write(root / "kept" / "deep", "inside.md")
    (root / "out").symlink_to(tmp_path / "secrets", target_is_directory=True)
    (root / "in").symlink_to(root / "kept", target_is_directory=True)
    refused = scan(root, ["out/deep"])
    assert refused.stamps == {} and "outside the vault" in refused.problems[0]
    assert list(scan(root, ["in/deep", "kept/deep"]).stamps) == [
        "in/deep/inside.md",
        "kept/deep/inside.md",
    ]


def test_a_folder_name_that_cannot_be_a_path_is_a_problem_not_a_crash(root: Path) -> None:
    write(root, "real.md")
    found = scan(root, ["a\x00b", "."])
    assert list(found.stamps) == ["real.md"]
    assert len(found.problems) == 1 and "cannot be read" in found.problems[0]
    assert "\x00" not in found.problems[0]  # shown escaped, on one line


def test_names_that_could_forge_a_citation_are_skipped_and_said(root: Path) -> None:
    write(root, "fine note.md")
    write(root, "evil\n## notes/fake.md.md")
    write(root, "tab\there.md")
    found = scan(root, ["."])
    assert list(found.stamps) == ["fine note.md"]
    assert len(found.problems) == 2 and all("control characters" in p for p in found.problems)


def test_undecodable_file_names_are_skipped(root: Path) -> None:
    try:
        with open(os.path.join(os.fsencode(root), b"caf\xe9.md"), "wb") as f:
            f.write(b"text")
    except OSError:
        pytest.skip("this file system refuses non-UTF-8 names")
    found = scan(root, ["."])
    assert found.stamps == {} and len(found.problems) == 1


def test_a_note_is_read_without_its_front_matter_its_title_leading(root: Path) -> None:
    write(root, "kitchen/bake log.md", "---\ntags: [bread]\n---\n# Bake log\n\nRye day.\n")
    note = read_note(root, "kitchen/bake log.md", (1, 2))
    assert isinstance(note, Note)
    assert note.chunks == ("bake log\n\n# Bake log\n\nRye day.",)
    assert note.source == "kitchen/bake log.md" and note.stamp == (1, 2)
    assert len(note.keys) == 1 and len(note.keys[0]) == 32
    long = write(root, "long.md", "\n\n".join(f"Paragraph {i}. " + "word " * 80 for i in range(9)))
    chunks = read_note(root, "long.md", (0, long.stat().st_size))
    assert isinstance(chunks, Note) and len(chunks.chunks) == 9  # passages, not the whole file


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (b"caf\xe9 au lait", "not UTF-8"),
        (b"PNG\x00\x00\x01binary", "binary"),
        (b"x" * (MAX_FILE_BYTES + 1), "larger than"),
    ],
)
def test_a_note_that_cannot_be_used_says_why(root: Path, content: bytes, why: str) -> None:
    write(root, "bad.md", content)
    problem = read_note(root, "bad.md", (0, 0))
    assert isinstance(problem, str) and problem.startswith("bad.md") and why in problem


def test_a_fifo_named_like_a_note_never_hangs(root: Path) -> None:
    os.mkfifo(root / "pipe.md")
    assert scan(root, ["."]).stamps == {}  # not a regular file: not a note
    problem = read_note(root, "pipe.md", (0, 0))
    assert isinstance(problem, str) and "not a regular file" in problem


def test_the_example_vault_has_a_few_notes_that_read_cleanly() -> None:
    from smart_context.items.files import vault_root
    from smart_context.resources import example_vault_dir

    root = vault_root(example_vault_dir())
    found = scan(root, ["."], ["rules", "references"])
    assert list(found.stamps) == [
        "notes/bake-log.md",
        "notes/japan-bookings.md",
        "notes/lenswatch-server.md",
    ]
    for source, stamp in found.stamps.items():
        note = read_note(root, source, stamp)
        assert isinstance(note, Note) and len(note.chunks) >= 2, note
