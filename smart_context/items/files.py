"""Rules and references: the Markdown files of ``rules/`` and ``references/`` (docs/contract.md §8).

A file is Markdown with optional YAML front matter, as Obsidian writes its properties::

    ---
    name: Code Style            # default: the file's stem
    description: How code in answers should look
    priority: 1                 # 0-999, shown as 001; "001" works too; default 999 (last)
    include: always             # always | manual | agent; default manual
    enabled: true               # default true
    ---
    The body: the item's text.

The front matter starts on the very first line (after an optional BOM) and ends at the next
line that is ``---``; CRLF line ends are read as LF. Reading a vault never raises: whatever is
wrong comes back as an :class:`ItemProblem` naming the file and, where it is one property, the
property, and the item still loads with a safe value for it. A file is skipped when its
properties cannot be read at all (broken YAML, a list instead of a mapping, aliases), when it is
not UTF-8, larger than ``MAX_FILE_BYTES``, or a link that leads outside the vault.

Decisions:

- Only the folder's own files count, not subfolders: the contract says ``rules/*.md``, an item
  is known by its name alone, and a subfolder (``rules/archive/``) is a plain way to put rules
  aside without editing them. Dot files and names not ending in ``.md`` are ignored.
- Two files of one folder with the same ``name``: the first by file name loads and the other is
  reported and skipped. Sessions and records name items by type and name only, so two items
  with one name would make "which rule was sent?" unanswerable. A rule and a reference may
  share a name.
- Properties other than ours (Obsidian's ``tags``, ``aliases``, ``cssclasses``, a plugin's own)
  are ignored quietly, except a near-miss of ours (``Priority``, ``inlcude``), which is
  reported: a typo would otherwise switch an item's behaviour silently.
- A bad ``include`` falls back to ``manual`` and a bad ``enabled`` to ``false``: a value that
  cannot be read never puts an item into a chat by itself.
"""

from __future__ import annotations

import functools
import os
import re
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from smart_context.items.model import Item, ItemProblem, ItemType
from smart_context.items.properties import name_error, parse_front_matter, read_properties

MAX_FILE_BYTES = 1_000_000
# Obsidian's properties block, then the body. The closing line may end the file.
_FRONT_MATTER = re.compile(r"---[ \t]*\n(?P<yaml>(?:.*?\n)??)---[ \t]*(?:\n|\Z)", re.DOTALL)

Stamp = tuple[tuple[str, int, int], ...]


def load_items(
    vault: Path, rules_dir: str = "rules", references_dir: str = "references"
) -> tuple[list[Item], list[ItemProblem]]:
    """Every rule and reference of ``vault``, sorted (:meth:`Item.sort_key`), and every problem
    found on the way. Disabled items are included: the caller decides what they mean."""
    root = vault_root(vault)
    items: list[Item] = []
    problems: list[ItemProblem] = []
    folders: tuple[tuple[ItemType, str], ...] = (("rule", rules_dir), ("reference", references_dir))
    for item_type, folder in folders:
        candidates, trouble = _candidates(root, folder)
        problems += trouble
        named: dict[str, str] = {}  # name -> the source that took it
        for source, path in candidates:
            item, trouble = _load_file(root, path, source, item_type)
            problems += trouble
            if item is None:
                continue
            if item.name in named:
                message = f"another {item_type} is already named {item.name!r} ({named[item.name]})"
                problems.append(ItemProblem(source, f"{message}; skipped", "name", skipped=True))
                continue
            named[item.name] = source
            items.append(item)
    return sorted(items, key=Item.sort_key), problems


def folder_stamp(
    vault: Path, rules_dir: str = "rules", references_dir: str = "references"
) -> Stamp:
    """``(path, mtime_ns, size)`` of every file :func:`load_items` would look at, in order.

    A caller keeps the last stamp and loads again only when it differs: one directory listing
    and one ``stat`` per file, so an edit on disk takes effect on the next request. A file that
    cannot be stat-ed shows as ``-1, -1`` (fixing it changes the stamp). Never raises.

    A folder named plainly (no ``..``, not absolute) whose path from the vault holds no link is
    listed as it is: it cannot be outside the vault, so neither the vault nor the folder is
    resolved (each a walk up the path, 20 us; the stamp is taken on every request). Any other
    folder is checked against the resolved vault, as :func:`load_items` reads it.
    """
    root: Path | None = None  # resolved when a folder needs it
    entries: list[tuple[str, int, int]] = []
    for folder in (rules_dir, references_dir):
        plain = _plain_listing(Path(vault), folder)
        if plain is None:
            root = vault_root(vault) if root is None else root
            prefix, listing, _ = _listing(root, folder)
        else:
            prefix, listing = plain
        for entry in listing:
            try:
                st = entry.stat()  # DirEntry: no Path to build, about half the time per file
            except (OSError, RuntimeError):  # RuntimeError: a symlink loop (Python 3.11)
                entries.append((prefix + entry.name, -1, -1))
            else:
                entries.append((prefix + entry.name, st.st_mtime_ns, st.st_size))
    return tuple(entries)


def split_front_matter(text: str) -> tuple[str | None, str]:
    """(the YAML between the ``---`` lines, or None when there is none; the body)."""
    match = _FRONT_MATTER.match(text)
    if match is None:
        return None, text
    return match.group("yaml"), text[match.end() :]


def _load_file(
    root: Path, path: Path, source: str, item_type: ItemType
) -> tuple[Item | None, list[ItemProblem]]:
    stem = path.name.removesuffix(".md")
    stem_error = name_error(stem)
    if stem_error:
        message = f"the file name cannot name a {item_type}: it {stem_error}; skipped"
        return None, [ItemProblem(source, message, skipped=True)]
    text, problem = read_text(root, path, source)
    if text is None:
        return None, [problem] if problem else []
    front, body = split_front_matter(text)
    problems: list[ItemProblem] = []
    raw: Mapping[Any, Any] = {}
    if front is not None:
        parsed = parse_front_matter(front)
        if isinstance(parsed, str):
            return None, [ItemProblem(source, f"{parsed}; skipped", skipped=True)]
        raw = parsed
    elif re.match(r"---[ \t]*\n", text):
        message = "starts with --- but has no closing --- line: read as a file without properties"
        problems.append(ItemProblem(source, message))
    props, trouble = read_properties(raw, stem)
    problems += [ItemProblem(source, message, key) for key, message in trouble]
    item = Item(
        type=item_type,
        name=props.name,
        description=props.description,
        priority=props.priority,
        include=props.include,
        enabled=props.enabled,
        text=body.strip(),
        source=source,
    )
    return item, problems


def vault_root(vault: Path) -> Path:
    """The vault folder resolved (links followed), the root no file read may leave."""
    try:
        return Path(vault).resolve()
    except (OSError, RuntimeError):
        return Path(os.path.abspath(vault))


def _candidates(root: Path, folder: str) -> tuple[list[tuple[str, Path]], list[ItemProblem]]:
    """(source, path) of the folder's ``*.md`` files by name, or why the folder was not read."""
    prefix, listing, problems = _listing(root, folder)
    return [(prefix + e.name, root / folder / e.name) for e in listing], problems


def _plain_listing(vault: Path, folder: str) -> tuple[str, list[os.DirEntry[str]]] | None:
    """The folder's source prefix and its ``*.md`` entries by name, when it is named plainly and
    no part of its path from ``vault`` is a link (:func:`folder_stamp`); ``None``: it needs
    the careful way (:func:`_listing`)."""
    plain = _plain(folder)
    if plain is None:
        return None
    prefix, parts = plain
    try:
        path = _linkless(vault, parts)
        if path is None:
            return None
        with os.scandir(path) as scan:
            return prefix, sorted((e for e in scan if _is_candidate(e.name)), key=_name)
    except FileNotFoundError:
        return prefix, []  # a vault without rules is a vault without rules
    except (OSError, ValueError):  # not a folder, unreadable, a NUL in the name: say why there
        return None


def plainly_inside(vault: Path, folder: str) -> bool:
    """Whether ``folder`` (a setting, relative to ``vault``) is named plainly and no part of its
    path from the vault is a link, so that it cannot lead outside the vault: then it needs no
    resolving (a walk up the path, 20 us, on every request). False when it is not, or when a
    part cannot be looked at: the careful way says why."""
    plain = _plain(folder)
    if plain is None:
        return False
    try:
        return _linkless(vault, plain[1]) is not None
    except (OSError, ValueError):
        return False


def _linkless(vault: Path, parts: tuple[str, ...]) -> str | None:
    """The path of ``parts`` under ``vault``, or ``None`` when one of them is a link (each is
    ``lstat``-ed: raises as it does)."""
    path = os.fspath(vault)
    for part in parts:
        path = os.path.join(path, part)
        if stat.S_ISLNK(os.lstat(path).st_mode):
            return None
    return path


@functools.lru_cache(maxsize=64)
def _plain(folder: str) -> tuple[str, tuple[str, ...]] | None:
    """A folder setting's source prefix and its parts, when it is named plainly (no ``..``,
    no root or drive, as Windows' ``C:rules``); the same few settings on every request, so
    worked out once each."""
    path = Path(folder)
    if path.anchor or ".." in path.parts:
        return None
    return _prefix(folder), path.parts


def _prefix(folder: str) -> str:
    """The source prefix of a folder's files: ``rules/``, or nothing for the vault itself."""
    shown = Path(os.path.normpath(folder)).as_posix()
    return "" if shown == "." else f"{shown}/"


def _name(entry: os.DirEntry[str]) -> str:
    return entry.name


def _listing(root: Path, folder: str) -> tuple[str, list[os.DirEntry[str]], list[ItemProblem]]:
    """The folder's source prefix (``rules/``), its ``*.md`` entries by name, and why it was
    not read."""
    shown = Path(os.path.normpath(folder)).as_posix()
    prefix = _prefix(folder)
    try:
        resolved = (root / folder).resolve()
        if not resolved.is_relative_to(root):
            message = "the folder is outside the vault; its files are not read"
            return prefix, [], [ItemProblem(shown, message, skipped=True)]
        with os.scandir(resolved) as scan:
            listing = sorted((e for e in scan if _is_candidate(e.name)), key=_name)
    except FileNotFoundError:
        return prefix, [], []  # a vault without rules is a vault without rules
    except (OSError, RuntimeError, ValueError) as exc:  # ValueError: a NUL in the name
        problem = ItemProblem(shown, f"the folder cannot be read ({os_reason(exc)})", skipped=True)
        return prefix, [], [problem]
    return prefix, listing, []


def _is_candidate(name: str) -> bool:
    return name.endswith(".md") and not name.startswith(".")


def read_text(root: Path, path: Path, source: str) -> tuple[str | None, ItemProblem | None]:
    """The text of the vault file ``path`` (``source`` names it in problems), LF line ends and
    no BOM, or the problem that kept it out: not UTF-8, larger than ``MAX_FILE_BYTES``, not a
    regular file, or a link out of the resolved vault ``root``. Never raises."""
    data, problem = _read_bytes(root, path, source)
    if data is None:
        return None, problem
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        message = (
            f"is not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start}); "
            "save it as UTF-8 to use it"
        )
        return None, ItemProblem(source, message, skipped=True)
    return text.removeprefix("\ufeff").replace("\r\n", "\n").replace("\r", "\n"), None


def _read_bytes(root: Path, path: Path, source: str) -> tuple[bytes | None, ItemProblem | None]:
    def refuse(message: str) -> tuple[None, ItemProblem]:
        return None, ItemProblem(source, message, skipped=True)

    try:
        target = path.resolve(strict=True)
        if not target.is_relative_to(root):
            return refuse("is a link to a file outside the vault; refused")
        # O_NONBLOCK: a FIFO named like a note must not hang the request that reads it
        fd = os.open(target, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return refuse("is not a regular file")
            with open(fd, "rb", closefd=False) as file:
                data = file.read(MAX_FILE_BYTES + 1)
        finally:
            os.close(fd)
    except FileNotFoundError:
        return refuse("cannot be read: it is gone, or a link to nothing")
    except (OSError, RuntimeError) as exc:
        return refuse(f"cannot be read ({os_reason(exc)})")
    if len(data) > MAX_FILE_BYTES:
        return refuse(f"is larger than {MAX_FILE_BYTES // 1_000_000} MB; too large to read")
    return data, None


def os_reason(exc: BaseException) -> str:
    """Why an OS call failed, in a few words (``Permission denied``)."""
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__
