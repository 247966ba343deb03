"""The ``.vault.toml`` edit of ``smart-context install-tailor``: ``[plugins.smart_context]``
gets ``enabled = true`` (what Tailor's loader looks at), and so does ``[plugins.memory]`` when
it is off or unset (Tailor's memory plugin reads and writes the chats for us), with tomlkit so
that the user's comments, order and spacing stay exactly as they were.

When Tailor has no model for its ``embedding`` category and the table does not choose an
``embedder``, ``embedder = "local"`` is added: Tailor's example vault configures none, and
without vectors a topic click would do nothing.

The keys already in the table are kept: Tailor's own Smart Context read
``similarity_threshold``, ``embedding_search`` and ``extraction_category``, which are ours too
under the same names and meanings. A key our plugin would refuse at start-up (unknown, or a bad
value) stops the install, naming it; with ``force`` it is commented out instead, so nothing the
user wrote is lost.
"""

from __future__ import annotations

import tomllib
from collections.abc import MutableMapping
from dataclasses import dataclass, field
from typing import Any

import tomlkit
from tomlkit.items import Table

from smart_context.config import parse_settings
from smart_context.errors import ConfigError, SmartContextError

PLUGIN = "smart_context"
# Tailor's memory plugin: our chats are read and written through its memory.load_chat /
# memory.save_chat, so the install enables it too when the vault has it off or unset
MEMORY_PLUGIN = "memory"
# With no embedding model in Tailor ([llm.categories] embedding), "host" would leave topics and
# the filter without vectors: the install picks our local model instead, and says so.
LOCAL_EMBEDDER_COMMENT = "no embedding model in [llm.categories]: our local MiniLM"


@dataclass
class TomlChange:
    """The new file's text and what happened to the table's keys."""

    text: str
    kept: list[str] = field(default_factory=list)  # the user's keys, left as they were
    commented: list[tuple[str, str]] = field(default_factory=list)  # (key, why), with force
    memory_enabled: bool = False  # [plugins.memory] was off or unset, and is on now
    local_embedder: bool = False  # embedder = "local" was added: the vault has no embedding model


def enable_plugin(text: str, force: bool = False) -> TomlChange:
    """``text`` with ``[plugins.smart_context] enabled = true``; raises
    :class:`SmartContextError` (and changes nothing) when that cannot be done safely."""
    try:
        doc = tomlkit.parse(text)
    except tomlkit.exceptions.TOMLKitError as exc:
        raise SmartContextError(f"not valid TOML: {exc}. Nothing was changed.") from None
    table = _our_table(doc, PLUGIN)
    commented = _check_keys(table, force)
    kept = [key for key in table if key != "enabled"]
    if table.get("enabled") is not True:
        table["enabled"] = True
    local_embedder = "embedder" not in table and not _has_embedding_model(doc)
    if local_embedder:
        table["embedder"] = "local"
        if isinstance(table, Table):  # an inline table has no room for a comment
            table["embedder"].comment(LOCAL_EMBEDDER_COMMENT)
    memory = _our_table(doc, MEMORY_PLUGIN)
    memory_enabled = memory.get("enabled") is not True
    if memory_enabled:
        memory["enabled"] = True
    new_text = tomlkit.dumps(doc)
    _verify(text, new_text)
    return TomlChange(new_text, kept, commented, memory_enabled, local_embedder)


def _has_embedding_model(doc: tomlkit.TOMLDocument) -> bool:
    """Whether Tailor has a model for its ``embedding`` category (``[llm.categories]``)."""
    llm = doc.get("llm")
    categories = llm.get("categories") if isinstance(llm, MutableMapping) else None
    model = categories.get("embedding") if isinstance(categories, MutableMapping) else None
    return isinstance(model, str) and bool(model.strip())


def _our_table(doc: tomlkit.TOMLDocument, name: str) -> MutableMapping[str, Any]:
    """``[plugins.NAME]``, added (after the rest of the file) when missing."""
    plugins = doc.get("plugins")
    if plugins is None:
        plugins = tomlkit.table(is_super_table=True)
        doc["plugins"] = plugins
    if not isinstance(plugins, MutableMapping):
        raise SmartContextError(
            f"{_line('plugins', plugins)} is not a table, so Tailor reads no plugin settings "
            "from it. Nothing was changed: make it a [plugins] table and run again."
        )
    table = plugins.get(name)
    if table is None:
        table = tomlkit.table()
        plugins[name] = table
    if not isinstance(table, MutableMapping):
        raise SmartContextError(
            f"plugins.{_line(name, table)} is not a table. Nothing was changed: make it "
            f"a [plugins.{name}] table and run again."
        )
    return table


def _check_keys(table: MutableMapping[str, Any], force: bool) -> list[tuple[str, str]]:
    """Refuse (or with ``force`` comment out) keys our settings would refuse."""
    commented: list[tuple[str, str]] = []
    while True:
        try:
            parse_settings({k: v for k, v in table.items() if k != "enabled"})
            return commented
        except ConfigError as exc:
            problem = str(exc).removeprefix(f"{exc.file}: ")  # the install names the file
            if not force:
                raise SmartContextError(
                    f"{problem}. Smart Context would refuse to start with it. Nothing was changed: "
                    "fix or remove the key, or run again with --force to comment it out."
                ) from None
            if not isinstance(table, Table):
                raise SmartContextError(
                    f"{problem}. It is not in a plain table, where it could be commented out: "
                    "fix or remove it and run again. Nothing was changed."
                ) from None
            commented.append((exc.key, str(exc).rsplit(": ", 1)[-1]))
            _comment_out(table, exc.key)


def _comment_out(table: Table, key: str) -> None:
    """Replace ``key = value`` by a comment holding it, so the user can see and restore it."""
    line = f"{_line(key, table[key])}  (commented out by smart-context install-tailor)"
    del table[key]
    table.add(tomlkit.comment(line))


def _line(key: str, value: Any) -> str:
    """``key = value`` as it reads in TOML."""
    return tomlkit.dumps({key: value}).strip()


def _others(text: str) -> dict[str, Any]:
    """The file as Tailor reads it, without our table and the memory plugin's ``enabled`` (nor
    what is left empty by that)."""
    parsed = tomllib.loads(text)
    plugins = parsed.get("plugins")
    if isinstance(plugins, dict):
        plugins.pop(PLUGIN, None)
        memory = plugins.get(MEMORY_PLUGIN)
        if isinstance(memory, dict):
            memory.pop("enabled", None)
            if not memory:
                plugins.pop(MEMORY_PLUGIN)
        if not plugins:
            parsed.pop("plugins")
    return parsed


def _verify(old: str, new: str) -> None:
    """Tailor's reader must see the same file, but for our table: a last check on tomlkit."""
    plugins = tomllib.loads(new).get("plugins", {})
    enabled = [plugins.get(name) for name in (PLUGIN, MEMORY_PLUGIN)]
    if _others(old) != _others(new) or not all(
        isinstance(t, dict) and t.get("enabled") is True for t in enabled
    ):
        raise SmartContextError(
            "the edit could not be made without changing other settings. Nothing was changed: "
            f"add [plugins.{PLUGIN}] and [plugins.{MEMORY_PLUGIN}] with enabled = true by hand."
        )
