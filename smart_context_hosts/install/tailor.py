"""``smart-context install-tailor VAULT``: put Smart Context into a Tailor vault.

Three changes, each reversible: ``plugins/smart_context/`` is written (``plugin.json`` and a thin
``main.py``, see :mod:`.tailor_files`); a folder already there that we did not
write (Tailor's own Smart Context, say) is moved aside to
``plugins/.smart_context.replaced-<time>/``, which Tailor's loader skips as it skips every name
starting with a dot; ``[plugins.smart_context]`` in ``.vault.toml`` gets ``enabled = true``, its
other keys, comments and the rest of the file kept as they are. Everything is checked before the
first write, and a failure midway puts back what was done.
"""

from __future__ import annotations

import os
import shutil
import time
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from smart_context.atomic import write_atomic
from smart_context.errors import SmartContextError
from smart_context_hosts.install.tailor_files import (
    PLUGIN_NAME,
    is_generated,
    main_py,
    pip_target,
    plugin_json,
    python_advice,
)
from smart_context_hosts.install.tailor_toml import TomlChange, enable_plugin

VAULT_FILE = ".vault.toml"  # Tailor's vault marker and settings, read with tomllib
PLUGINS_DIR = "plugins"
STAGING = f".{PLUGIN_NAME}.installing-"  # dot: Tailor never loads a half-written folder
REPLACED = f".{PLUGIN_NAME}.replaced-"

Writer = Callable[[Path, str], None]


class InstallError(SmartContextError):
    """The vault was refused, or the install failed (the message says what, if anything,
    changed)."""


@dataclass
class InstallReport:
    """What the install did, for the summary printed to the user."""

    plugin_dir: Path
    toml: TomlChange
    replaced: Path | None = None  # where the folder that was there went
    rewrote_own: bool = False  # the folder was ours already, from an earlier install
    toml_written: bool = False
    leftovers: list[Path] = field(default_factory=list)


class Journal:
    """The changes made so far, each with how to undo it."""

    def __init__(self) -> None:
        self.done: list[tuple[str, Callable[[], None]]] = []

    def did(self, what: str, undo: Callable[[], None]) -> None:
        """Record a change that has been made."""
        self.done.append((what, undo))

    def undo_all(self) -> list[str]:
        """Undo every change, last first; the ones that could not be undone."""
        stuck = []
        for what, undo in reversed(self.done):
            try:
                undo()
            except OSError as exc:
                stuck.append(f"{what} ({exc})")
        return stuck


def check_tailor_vault(vault: Path) -> Path:
    """The vault's ``.vault.toml``; refuse a folder Tailor would not open as a vault.

    Tailor writes ``.vault.toml`` when it creates a vault and reads the vault's name and
    settings from it; its plugins live in ``plugins/``."""
    if not vault.is_dir():
        raise InstallError(f"{vault} is not a folder.")
    config = vault / VAULT_FILE
    if not config.is_file():
        raise InstallError(
            f"{vault} is not a Tailor vault: it has no {VAULT_FILE} (Tailor writes one in "
            "every vault it creates). Nothing was changed."
        )
    plugins = vault / PLUGINS_DIR
    if plugins.exists() and not plugins.is_dir():
        raise InstallError(
            f"{plugins} is not a folder, so Tailor has nowhere to load plugins from."
        )
    return config


def read_vault_toml(path: Path) -> str:
    """The file's text, refused (untouched) unless Tailor's own reader (tomllib) accepts it:
    Tailor would otherwise ignore the whole file and load no plugin at all."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InstallError(f"{path} cannot be read ({exc}). Nothing was changed.") from None
    try:
        tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InstallError(
            f"{path} is not valid TOML: {exc}. Tailor cannot read it either. Nothing was "
            "changed: fix the file and run again."
        ) from None
    return text


def install(vault: Path, force: bool = False, write: Writer = write_atomic) -> InstallReport:
    """Install into ``vault``; ``force`` comments out settings our plugin would refuse instead
    of stopping on them. ``write`` writes one file atomically (a test passes a failing one)."""
    vault = Path(vault)
    config = check_tailor_vault(vault)
    text = read_vault_toml(config)
    try:
        change = enable_plugin(text, force)
    except SmartContextError as exc:
        raise InstallError(f"{config}: {exc}") from None
    plugins = vault / PLUGINS_DIR
    report = InstallReport(plugin_dir=plugins / PLUGIN_NAME, toml=change)
    files = {"plugin.json": plugin_json(), "main.py": main_py(pip_target())}
    journal = Journal()
    try:
        _install_folder(plugins, files, report, journal, write)
        if change.text != text:
            write(config, change.text)
            report.toml_written = True
    except OSError as exc:
        raise InstallError(_failure(vault, exc, journal.undo_all())) from exc
    except BaseException:  # Ctrl-C midway: put the vault back all the same
        journal.undo_all()
        raise
    report.leftovers = _remove_leftovers(plugins)
    return report


def _failure(vault: Path, exc: OSError, stuck: list[str]) -> str:
    if not stuck:
        return f"Installing into {vault} failed ({exc}); the vault was put back as it was."
    return (
        f"Installing into {vault} failed ({exc}), and these changes could not be undone: "
        + "; ".join(stuck)
    )


def _install_folder(
    plugins: Path, files: dict[str, str], report: InstallReport, journal: Journal, write: Writer
) -> None:
    """Write our plugin folder: in place when it is ours, else staged and swapped in."""
    if not plugins.is_dir():
        plugins.mkdir()
        journal.did(f"created {plugins}", plugins.rmdir)
    target = report.plugin_dir
    if target.is_dir() and not target.is_symlink() and is_generated(target / "main.py"):
        _rewrite_in_place(target, files, journal, write)
        report.rewrote_own = True
        return
    stamp = time.strftime("%Y%m%d-%H%M%S")
    staging = _free_name(plugins, STAGING + stamp)
    staging.mkdir()
    journal.did(f"created {staging}", lambda: shutil.rmtree(staging))
    for name, content in files.items():
        write(staging / name, content)
    if target.exists() or target.is_symlink():
        aside = _free_name(plugins, REPLACED + stamp)
        os.rename(target, aside)
        journal.did(f"moved {target} to {aside}", lambda: os.rename(aside, target))
        report.replaced = aside
    os.rename(staging, target)
    journal.did(f"wrote {target}", lambda: os.rename(target, staging))


def _rewrite_in_place(target: Path, files: dict[str, str], journal: Journal, write: Writer) -> None:
    """Our own folder from an earlier install: each file replaced atomically, the old bytes
    kept until the install is through."""
    for name, content in files.items():
        path = target / name
        old = path.read_bytes() if path.is_file() else None
        write(path, content)
        journal.did(f"rewrote {path}", _restorer(path, old))


def _restorer(path: Path, old: bytes | None) -> Callable[[], None]:
    def restore() -> None:
        if old is None:
            path.unlink(missing_ok=True)
        else:
            write_atomic(path, old)

    return restore


def _free_name(folder: Path, name: str) -> Path:
    """``folder/name``, or ``name-2``, ``name-3``... if a second install ran in the same second."""
    path, n = folder / name, 1
    while path.exists() or path.is_symlink():
        n += 1
        path = folder / f"{name}-{n}"
    return path


def _remove_leftovers(plugins: Path) -> list[Path]:
    """Staging folders an interrupted install left (ours alone, never loaded by Tailor)."""
    removed = []
    for path in sorted(plugins.glob(STAGING + "*")):
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


def describe(report: InstallReport, vault: Path) -> list[str]:
    """The summary of what changed, a line each."""
    lines = [f"Wrote {report.plugin_dir} (plugin.json, main.py)."]
    if report.rewrote_own:
        lines[0] = f"Rewrote {report.plugin_dir} (our own folder from an earlier install)."
    if report.replaced is not None:
        lines.append(
            f"Moved the {PLUGIN_NAME} folder that was there to {report.replaced} (Tailor skips "
            "folders whose name starts with a dot). To go back, delete our folder and rename "
            f"that one to {PLUGIN_NAME}."
        )
    lines.extend(f"Removed {p}, left by an interrupted install." for p in report.leftovers)
    lines.extend(_toml_lines(report, vault / VAULT_FILE))
    return lines


def _toml_lines(report: InstallReport, config: Path) -> list[str]:
    change = report.toml
    table = f"[plugins.{PLUGIN_NAME}]"
    lines = [
        f"{config}: {table} enabled = true; the rest of the file as it was."
        if report.toml_written
        else f"{config}: {table} was enabled already; the file is unchanged."
    ]
    if change.kept:
        lines.append("  Kept your settings there: " + ", ".join(change.kept) + ".")
    if change.memory_enabled:
        lines.append(
            "  Also enabled [plugins.memory]: Smart Context reads and writes the chats through "
            "Tailor's memory plugin."
        )
    if change.local_embedder:
        lines.append(
            '  Set embedder = "local": the vault has no embedding model ([llm.categories] '
            "embedding), so topics and the filter use our MiniLM on this machine. Remove the "
            "line to use Tailor's once you configure one."
        )
    lines.extend(f"  Commented out {key}: {why}" for key, why in change.commented)
    return lines


def run_install(vault: Path, force: bool, tailor_dir: Path | None, out: TextIO) -> int:
    """The command: install, then say what changed and which Python needs our package.
    Refusals and failures raise :class:`InstallError` (the command line prints it, exit 2)."""
    if tailor_dir is not None and not tailor_dir.expanduser().is_dir():
        raise InstallError(  # before the vault is touched: a mistyped path changes nothing
            f"--tailor {tailor_dir}: no such folder. Name your Tailor checkout (the folder "
            "you run `pixi run dev` in), or leave --tailor out."
        )
    report = install(vault, force)
    for line in describe(report, vault):
        print(line, file=out)
    print("", file=out)
    for line in python_advice(tailor_dir):
        print(line, file=out)
    print("Then restart Tailor (or reopen the vault) to load the plugin.", file=out)
    return 0
