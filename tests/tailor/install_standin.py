"""Stand-ins for the parts of Tailor that ``smart-context install-tailor`` depends on, written
from reading Tailor's code (sidecar/api/plugin_base.py, sidecar/vault_brain.py): its plugin base
class, its plugin loader, and a vault shaped like its example vault."""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import json
import sys
import tomllib
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

# ``sidecar.api.plugin_base`` as plugins see it: an abstract register_commands, the three
# constructor arguments, a logger, notify() to the window, async on_load/on_client_connected.
PLUGIN_BASE = """
from abc import ABC, abstractmethod


class Log:
    def __init__(self):
        self.lines = []

    def _add(self, level, message):
        self.lines.append((level, str(message)))

    def error(self, message):
        self._add("error", message)

    def warning(self, message):
        self._add("warning", message)

    def info(self, message):
        self._add("info", message)

    def debug(self, message):
        self._add("debug", message)


class PluginBase(ABC):
    def __init__(self, plugin_dir, vault_path, config=None):
        self.plugin_dir = plugin_dir
        self.vault_path = vault_path
        self.config = config or {}
        self.name = plugin_dir.name
        self.logger = Log()
        self.notices = []
        self._loaded = False

    @abstractmethod
    def register_commands(self):
        pass

    async def on_load(self):
        self._loaded = True

    async def on_client_connected(self):
        pass

    def notify(self, message, severity="info"):
        self.notices.append((severity, message))
"""

SIMPLE_PLUGIN = """from sidecar.api.plugin_base import PluginBase


class Plugin(PluginBase):
    def register_commands(self):
        pass
"""

# Tailor's own Smart Context, reduced to what matters here: a folder with several files; its
# main.py fails loudly if anything ever loads it after it was moved aside.
TAILOR_SMART_CONTEXT = {
    "main.py": 'raise RuntimeError("Tailor\'s own Smart Context was loaded")\n',
    "plugin.json": json.dumps({"name": "smart-context", "version": "0.1.0", "main": "main.py"}),
    "embedding_cache.py": "CACHE = {}\n",
    "panel.html": "<div>topics</div>\n",
}

VAULT_TOML = """version = "1.0.0"
id = "vault_example_001"
name = "Example Vault"
created = "2025-12-31T01:30:00Z"

[llm.categories]
fast = "gpt-3.5-turbo"  # the quick model
embedding = "openai/text-embedding-3-large"

# Plugins the sidecar loads.
[plugins.explorer]
enabled = true

[plugins.memory]
enabled = true
"""


def write_sidecar_standin(root: Path) -> None:
    """A ``sidecar`` package with ``sidecar.api.plugin_base`` under ``root``."""
    api = root / "sidecar" / "api"
    api.mkdir(parents=True)
    (root / "sidecar" / "__init__.py").write_text("")
    (api / "__init__.py").write_text("")
    (api / "plugin_base.py").write_text(PLUGIN_BASE)


def make_vault(root: Path, toml: str = VAULT_TOML, tailor_plugin: bool = False) -> Path:
    """A vault like Tailor's example: ``.vault.toml`` and two simple plugins; with
    ``tailor_plugin`` also Tailor's own ``plugins/smart_context/``."""
    vault = root / "vault"
    for name in ("explorer", "memory"):
        (vault / "plugins" / name).mkdir(parents=True)
        (vault / "plugins" / name / "main.py").write_text(SIMPLE_PLUGIN)
    (vault / ".vault.toml").write_text(toml, encoding="utf-8")
    if tailor_plugin:
        folder = vault / "plugins" / "smart_context"
        folder.mkdir()
        for name, text in TAILOR_SMART_CONTEXT.items():
            (folder / name).write_text(text)
    return vault


def load_module(name: str, main_file: Path) -> ModuleType:
    """Execute a plugin's main.py as Tailor does: a module named after the folder, from its
    file, not registered in sys.modules."""
    spec = importlib.util.spec_from_file_location(name, main_file)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def load_plugins(vault: Path) -> dict[str, Any]:
    """Tailor's loading rules: every folder of ``plugins/`` with a main.py, except names
    starting with ``.`` or ``_``; settings.json defaults under the ``.vault.toml`` table; only
    ``enabled`` ones are loaded, instantiated and asked to register their commands."""
    config = tomllib.loads((vault / ".vault.toml").read_text(encoding="utf-8"))
    loaded: dict[str, Any] = {}
    for folder in sorted((vault / "plugins").iterdir()):
        if folder.is_file() or folder.name.startswith((".", "_")):
            continue
        if not (folder / "main.py").exists():
            continue
        settings = folder / "settings.json"
        final = json.loads(settings.read_text()) if settings.exists() else {}
        overrides = config.get("plugins", {}).get(folder.name, {})
        final.update(overrides if isinstance(overrides, dict) else {})
        if not final.get("enabled", False):
            continue
        module = load_module(folder.name, folder / "main.py")
        plugin = module.Plugin(plugin_dir=folder, vault_path=vault, config=final)
        plugin.register_commands()
        loaded[folder.name] = plugin
    return loaded


class BlockAdapter(importlib.abc.MetaPathFinder):
    """Makes ``smart_context_hosts.tailor`` unimportable, as in a Python without our package."""

    blocked = "smart_context_hosts.tailor"

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname == self.blocked or fullname.startswith(self.blocked + "."):
            raise ImportError(f"No module named {fullname!r}", name=fullname)
        return None


def forget_modules(prefixes: Sequence[str]) -> None:
    """Drop modules the test imported, so the next test imports its own stand-ins afresh."""
    for name in list(sys.modules):
        if any(name == p or name.startswith(p + ".") for p in prefixes):
            del sys.modules[name]
