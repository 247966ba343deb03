"""The plugin's services for one command, started inside the reference host; for the
commands that only show (``context``, ``items``, and ``topics`` without ``--save``), on a scratch
copy of the vault.

The plugin writes as it works: embedding caches, the memory database, the tools' last known
lists, a chat's new topics, and the start-up tidying of crash leftovers. A command that only
shows must leave the vault byte for byte as it was, so it runs the plugin on a copy and throws
the copy away. The copy holds what the plugin reads, and nothing else: ``.vault.toml``,
``.memory/`` (so the caches already made keep the command fast) and the Markdown files outside
dot folders (rules, references and notes are Markdown). A vault's pictures, PDFs and
attachments are never copied.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path

from smart_context.errors import SmartContextError
from smart_context.paths import MEMORY_DIR
from smart_context.services import Services
from smart_context_hosts.cli_reports import check_vault_folder

KEPT_DOT_ENTRIES = frozenset({MEMORY_DIR, ".vault.toml"})
# in .memory: lock files belong to the processes holding them; set-aside copies are for people
SKIPPED_IN_MEMORY = ("*.lock", "*.corrupt-*", "*.recovered-*")


@contextmanager
def scratch_vault(vault: Path) -> Iterator[Path]:
    """A throw-away copy of ``vault`` holding what the plugin reads; removed on exit."""
    source = Path(vault).resolve()
    with tempfile.TemporaryDirectory(
        prefix="smart-context-show-", ignore_cleanup_errors=True
    ) as folder:
        copy = Path(folder) / (source.name or "vault")
        copy.mkdir()
        for entry in os.scandir(source):
            if entry.name == MEMORY_DIR and entry.is_dir(follow_symlinks=False):
                shutil.copytree(
                    entry.path,
                    copy / MEMORY_DIR,
                    symlinks=True,
                    ignore=shutil.ignore_patterns(*SKIPPED_IN_MEMORY),
                )
            elif entry.name in KEPT_DOT_ENTRIES:
                shutil.copy2(entry.path, copy / entry.name, follow_symlinks=False)
            elif not entry.name.startswith("."):
                _copy_markdown(Path(entry.path), copy / entry.name)
        yield copy


def _copy_markdown(path: Path, target: Path) -> None:
    """Copy ``path`` if it is Markdown, or a folder's Markdown below it (links kept as links,
    so one that leaves the vault leaves the copy too, and is refused there as here)."""
    if path.is_symlink() or path.is_file():
        if path.suffix.lower() == ".md":
            shutil.copy2(path, target, follow_symlinks=False)
        return
    if path.is_dir():
        shutil.copytree(path, target, symlinks=True, ignore=_not_markdown)


def _not_markdown(folder: str, names: list[str]) -> set[str]:
    """What ``copytree`` leaves out under a folder: dot entries and files other than Markdown."""
    return {name for name in names if name.startswith(".") or _skipped_file(Path(folder, name))}


def _skipped_file(path: Path) -> bool:
    """A file (or a link) that is not Markdown; a real folder is walked, never skipped."""
    is_folder = path.is_dir() and not path.is_symlink()
    return not is_folder and path.suffix.lower() != ".md"


@asynccontextmanager
async def running_services(
    vault: Path, list_tools: bool = False, save: bool = False
) -> AsyncIterator[Services]:
    """The plugin's services, started inside the reference host for ``vault``; with
    ``list_tools`` the MCP servers are asked for their tools first (a one-shot command should
    show them as they are now, and say which server fails).

    Unless ``save``, they run on a scratch copy of the vault (:mod:`.cli_scratch`): the plugin
    writes caches, topics and its database as it works, and a command that only shows must
    leave the vault as it was."""
    from smart_context.plugin import SmartContextPlugin
    from smart_context_hosts.sidecar.runtime import Sidecar

    check_vault_folder(vault)
    with contextlib.ExitStack() as stack:
        folder = vault if save else stack.enter_context(scratch_vault(vault))
        sidecar = Sidecar(folder)
        plugin = sidecar.pm.get_plugin("smart_context")
        if not isinstance(plugin, SmartContextPlugin):
            raise SmartContextError(
                "The smart_context plugin is disabled in this vault's .vault.toml."
            )
        await sidecar.start()
        try:
            assert plugin.services is not None
            if plugin.services.config_error:
                raise SmartContextError(plugin.services.config_error)
            if list_tools:
                await plugin.services.items.servers.refresh()
            yield plugin.services
        finally:
            await sidecar.stop()
