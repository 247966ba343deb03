"""What in a vault's ``.memory/`` needs a person's eye, and the sidecar's own leftovers.

Used by ``smart-context doctor VAULT`` (which only reads), by the chat list (which shows the
files set aside) and at start (which tidies). The files this package makes:

- ``.{name}.{random}.tmp``: an atomic write in progress (:mod:`smart_context.atomic`); left
  behind only by a crash before its rename;
- ``.{chat}.json.journal``: an in-place change of a chat file (:mod:`.chatfile`); finished or
  dropped when the chat is next locked;
- ``{chat}.json.corrupt-{time}``, ``{chat}.embeddings.json.corrupt-{time}``: a file that could
  not be read, set aside instead of overwritten;
- ``{chat}.json.recovered-{time}``: what a leftover temporary file held that its chat lacks.

Nothing else is ever removed: a name this package did not make is not its to touch.
"""

from __future__ import annotations

import json
import logging
import os
import re
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from smart_context.paths import memory_dir
from smart_context_hosts.sidecar.chatfile import DamagedChatError, parse

STALE_SECONDS = 60.0  # a temporary file older than this is no write in progress (they take ms)
_TEMPORARY = re.compile(r"^\.(?P<target>.+)\.[A-Za-z0-9_]{8}\.tmp$")  # mkstemp's 8 characters
_SET_ASIDE = re.compile(r"^(?P<target>.+)\.corrupt-[0-9TZ_-]+(?:-\d+)?$")
_RECOVERED = re.compile(r"^(?P<target>.+)\.recovered-[0-9TZ]+(?:-\d+)?$")
_JOURNAL = re.compile(r"^\.(?P<target>.+\.json)\.journal$")

log = logging.getLogger(__name__)


@dataclass
class VaultReport:
    """Files of a vault worth a look, as paths relative to the vault."""

    damaged: list[tuple[str, str]] = field(default_factory=list)  # chat file, why
    set_aside: list[str] = field(default_factory=list)
    recovered: list[str] = field(default_factory=list)
    leftovers: list[str] = field(default_factory=list)  # temporary files, journals

    @property
    def clean(self) -> bool:
        return not (self.damaged or self.set_aside or self.recovered or self.leftovers)


def check_vault(vault: Path) -> VaultReport:
    """Read the vault's files, change nothing."""
    report = VaultReport()
    folder = memory_dir(vault)
    for path in _files(vault) + _files(folder):
        name, shown = path.name, str(path.relative_to(vault))
        temporary = _TEMPORARY.match(name)
        if (temporary and _is_ours(path.with_name(temporary["target"]), vault)) or _JOURNAL.match(
            name
        ):
            report.leftovers.append(shown)
        elif _SET_ASIDE.match(name):
            report.set_aside.append(shown)
        elif _RECOVERED.match(name):
            report.recovered.append(shown)
        elif path.parent == folder and _is_chat_file(name):
            try:
                parse(path.read_bytes())
            except DamagedChatError as exc:
                report.damaged.append((shown, str(exc)))
            except OSError as exc:
                report.damaged.append((shown, f"cannot be read ({exc.strerror or exc})"))
    return report


def set_aside_chats(vault: Path) -> list[dict[str, str]]:
    """The chat files set aside as damaged: ``{"chat_id", "file"}``, the newest first."""
    found = []
    for path in _files(memory_dir(vault)):
        match = _SET_ASIDE.match(path.name)
        if match and _is_chat_file(match["target"]):
            found.append((path.stat().st_mtime, match["target"][: -len(".json")], path.name))
    return [{"chat_id": c, "file": f".memory/{f}"} for _, c, f in sorted(found, reverse=True)]


def tidy_leftovers(vault: Path, *, stale_seconds: float = STALE_SECONDS) -> list[str]:
    """Remove the temporary files a crash left, keeping what a person might need: a leftover
    of a chat file that holds messages the chat lacks is renamed ``….recovered-{time}``.
    Returns what was done, one line each. Journals are left to the chat's next lock."""
    done = []
    now = time.time()
    for path in _files(vault) + _files(memory_dir(vault)):
        match = _TEMPORARY.match(path.name)
        try:
            if match is None or now - path.stat().st_mtime < stale_seconds:
                continue
            target = path.with_name(match["target"])
            if not _is_ours(target, vault):
                continue
            if _is_chat_file(target.name) and _has_lost_messages(path, target):
                kept = free_name(target, "recovered")
                os.replace(path, kept)
                done.append(
                    f"kept {path.name} as {kept.name}: it holds messages {target.name} lacks"
                )
            else:
                path.unlink()
                done.append(f"removed {path.name}, left by an interrupted write")
        except OSError as exc:
            log.warning("Could not tidy %s: %s", path, exc)
    for line in done:
        log.warning("Leftover: %s", line)
    return done


def _is_ours(target: Path, vault: Path) -> bool:
    """Whether this package writes ``target``: the vault's settings, a JSON file of .memory/."""
    if target.parent == vault:
        return target.name == ".vault.toml"
    return target.name.endswith(".json")


def _files(folder: Path) -> list[Path]:
    try:
        return sorted(p for p in folder.iterdir() if p.is_file())
    except OSError:
        return []


def _is_chat_file(name: str) -> bool:
    return (
        name.endswith(".json")
        and not name.startswith(".")
        and not name.endswith(".embeddings.json")
    )


def _has_lost_messages(leftover: Path, target: Path) -> bool:
    """Whether ``leftover`` parses as a chat holding a message id ``target`` does not."""
    try:
        theirs = parse(leftover.read_bytes()).data["messages"]
    except (DamagedChatError, OSError):
        return False
    try:
        ours = parse(target.read_bytes()).data["messages"]
    except (DamagedChatError, OSError):
        ours = []
    known = {json.dumps(m.get("id")) for m in ours if isinstance(m, dict)}
    return any(isinstance(m, dict) and json.dumps(m.get("id")) not in known for m in theirs)


def free_name(target: Path, kind: str) -> Path:
    """``{target}.{kind}-{time}``, a name no file has yet: where a file is set aside or kept."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
    candidate = target.with_name(f"{target.name}.{kind}-{stamp}")
    counter = 1
    while candidate.exists():
        candidate = target.with_name(f"{target.name}.{kind}-{stamp}-{counter}")
        counter += 1
    return candidate
