"""The vault's notes as files: which Markdown files are notes, how each looks on disk now, and
its passages.

- :func:`scan` lists the notes of the ``knowledge_folders`` with one ``stat`` each: the
  ``(mtime_ns, size)`` stamps tell the index which notes changed since it last looked.
- :func:`read_note` reads one note (through the same guarded reader as rules and references:
  UTF-8 only, at most 1 MB, no FIFO, no link out of the vault) and cuts it into passages with
  the items' chunker, the note's title (its file name) leading the first one.

What is never a note: anything under a dot folder (``.memory/``, ``.obsidian/``, ``.git/``,
``.trash/``) or a dot file, the rules and references folders (they have their own selection),
a folder or file reached through a link that leaves the vault, and a name with control
characters (it is printed to the model as a citation; a line break there could forge one).
Folder links are never followed, even inside the vault: they would list a note twice or loop.
"""

from __future__ import annotations

import functools
import os
import stat
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from smart_context.items.chunks import chunk
from smart_context.items.files import os_reason, plainly_inside, read_text, split_front_matter
from smart_context.vectors.codec import content_hash

MAX_NOTES = 20_000  # a vault folder holding more Markdown than this is not a notebook
Stamp = tuple[int, int]  # (mtime_ns, size)


@dataclass(frozen=True)
class Note:
    """One note as read: its path in the vault, the stamp it was read at, its passages and
    their content hashes (the keys of their vectors)."""

    source: str
    stamp: Stamp
    chunks: tuple[str, ...]
    keys: tuple[str, ...]


@dataclass(frozen=True)
class Scan:
    """The notes on disk now (path -> stamp, in path order) and the files left out, why."""

    stamps: dict[str, Stamp]
    problems: tuple[str, ...] = ()


def scan(root: Path, folders: Iterable[str], excluded: Collection[str] = ()) -> Scan:
    """The notes under ``folders`` of the resolved vault ``root``, leaving out the folders
    ``excluded`` (vault-relative). Never raises: an unreadable folder is a problem."""
    skip = {_posix(f) for f in excluded}
    stamps: dict[str, Stamp] = {}
    problems: list[str] = []
    for folder in folders:
        start = _posix(folder)
        if start in skip or any(start.startswith(f"{s}/") for s in skip):
            continue
        if not plainly_inside(root, start):  # else it must not lead out of the vault
            try:
                top = (root / start).resolve()
            except (OSError, RuntimeError, ValueError) as exc:  # ValueError: a NUL in the name
                problems.append(f"{start!r}: cannot be read ({exc}); its notes are left out")
                continue
            if not top.is_relative_to(root):
                problems.append(f"{start}: the folder is outside the vault; its notes are left out")
                continue
        _walk(root, start, skip, stamps, problems)
    return Scan(dict(sorted(stamps.items())), tuple(problems))


def _walk(
    root: Path, start: str, skip: set[str], stamps: dict[str, Stamp], problems: list[str]
) -> None:
    """Add the notes under ``start`` (vault-relative) to ``stamps``, depth first."""
    pending = [start]
    while pending:
        folder = pending.pop()
        prefix = "" if folder == "." else f"{folder}/"
        try:
            with os.scandir(root / folder) as listing:
                entries = list(listing)
        except FileNotFoundError:
            continue  # a vault without a notes folder has no notes
        except (OSError, RuntimeError) as exc:
            problems.append(f"{folder}: cannot be read ({os_reason(exc)}); its notes are left out")
            continue
        for entry in entries:  # the hot loop of every request: cheapest tests first
            name = entry.name
            if name[0] == ".":
                continue
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
                if not is_dir and name[-3:].lower() != ".md":
                    continue
                source = prefix + name
                if source in skip:
                    continue
                if not _printable(name):
                    problems.append(f"{source!r}: a name with control characters or bad encoding")
                elif is_dir:
                    pending.append(source)
                elif (found := _stamp(root, entry)) is not None:
                    stamps[source] = found
                    if len(stamps) >= MAX_NOTES:
                        problems.append(f"more than {MAX_NOTES} notes: the rest are left out")
                        return
            except (OSError, RuntimeError) as exc:  # RuntimeError: a symlink loop
                problems.append(f"{prefix}{name}: cannot be read ({os_reason(exc)})")


def _stamp(root: Path, entry: os.DirEntry[str]) -> Stamp | None:
    """A note's stamp, or ``None`` for what is not a regular file inside the vault."""
    if entry.is_symlink() and not Path(entry.path).resolve().is_relative_to(root):
        return None
    st = entry.stat()
    if not stat.S_ISREG(st.st_mode):
        return None
    return st.st_mtime_ns, st.st_size


def read_note(root: Path, source: str, stamp: Stamp) -> Note | str:
    """The note at ``source`` cut into passages, or why it cannot be used."""
    text, problem = read_text(root, root / source, source)
    if text is None:
        return str(problem) if problem else f"{source}: cannot be read"
    if "\x00" in text:
        return f"{source}: looks like a binary file, not a Markdown note; skipped"
    _front, body = split_front_matter(text)
    title = PurePosixPath(source).name[: -len(".md")]
    chunks = tuple(chunk(f"{title}\n\n{body.strip()}" if body.strip() else title))
    return Note(source, stamp, chunks, tuple(content_hash(c) for c in chunks))


@functools.lru_cache(maxsize=64)  # the same few settings on every request
def _posix(folder: str) -> str:
    return PurePosixPath(os.path.normpath(folder).replace(os.sep, "/")).as_posix()


def _printable(name: str) -> bool:
    """A name that can be shown on one line as UTF-8 (no control characters, no undecodable
    bytes, which Python hands over as lone surrogates)."""
    if name.isascii():
        return name.isprintable()
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return name.isprintable()
