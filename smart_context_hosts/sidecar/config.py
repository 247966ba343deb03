"""The vault's ``.vault.toml`` as the sidecar reads it: plugin tables and the ``[llm]`` table.

``[llm]`` configures one OpenAI-compatible endpoint (OpenAI, Ollama, vLLM, LM Studio,
llama.cpp)::

    [llm]
    base_url = "http://127.0.0.1:11434/v1"   # required to use a model at all
    api_key_env = "OPENAI_API_KEY"           # the NAME of the variable, never the key
    timeout = 120                            # seconds per request (optional)
    max_retries = 1                          # retries of failed requests (optional)
    tools = true                             # false: the chat model takes no tools

    [llm.models]
    fast = "llama3.2"                        # short calls (topic extraction)
    chat = "llama3.2"                        # the replies; defaults to `fast`
    embedding = "nomic-embed-text"           # absent: the embedded offline model

With no ``base_url`` there is no chat model, and embeddings come from the local model.
Plugins may rewrite the file while the sidecar runs (the panel's toggle does), so
:class:`VaultConfig` re-reads it when it changed on disk.
"""

from __future__ import annotations

import copy
import logging
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from smart_context.errors import SmartContextError

SETTINGS_FILE = ".vault.toml"

log = logging.getLogger(__name__)


class SidecarConfigError(SmartContextError):
    """``.vault.toml`` cannot be read, or a key the sidecar needs has a bad value."""


@dataclass(frozen=True)
class LLMConfig:
    """The ``[llm]`` table: one OpenAI-compatible endpoint and its models by category."""

    base_url: str | None = None
    api_key_env: str | None = None
    models: Mapping[str, str] = field(default_factory=dict)
    timeout: float = 120.0
    max_retries: int = 1
    tools: bool = True  # whether the chat model takes the ``tools`` parameter

    @property
    def configured(self) -> bool:
        """True when there is an endpoint to send chat requests to."""
        return self.base_url is not None


def _bad(key: str, value: object, problem: str) -> SidecarConfigError:
    return SidecarConfigError(f"{SETTINGS_FILE}: [llm] {key} = {value!r} is not valid: {problem}")


def _read_models(raw: object) -> dict[str, str]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise _bad("models", raw, 'expected a table such as [llm.models] fast = "llama3.2"')
    models: dict[str, str] = {}
    for category, name in raw.items():
        if not isinstance(name, str) or not name.strip():
            raise _bad(f"models.{category}", name, "expected a model name (a non-empty string)")
        models[str(category)] = name.strip()
    return models


def _read_number(table: Mapping[str, Any], key: str, default: float, low: float) -> float:
    value = table.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < low:
        raise _bad(key, value, f"expected a number of at least {low}")
    return float(value)


def parse_llm(table: object) -> LLMConfig:
    """Validate an ``[llm]`` table (``None`` when the vault has none)."""
    if table is None:
        return LLMConfig()
    if not isinstance(table, dict):
        raise _bad("", table, "expected a table: [llm]")
    if "api_key" in table:
        # A key in a file ends up in backups and screenshots; the environment is the place.
        raise SidecarConfigError(
            f"{SETTINGS_FILE}: [llm] api_key is not supported: put the key in an environment "
            'variable and name it with api_key_env = "OPENAI_API_KEY".'
        )
    base_url = table.get("base_url")
    if base_url is not None and (
        not isinstance(base_url, str) or not base_url.startswith(("http://", "https://"))
    ):
        raise _bad(
            "base_url", base_url, 'expected an http(s) URL such as "http://127.0.0.1:11434/v1"'
        )
    key_env = table.get("api_key_env")
    if key_env is not None and (not isinstance(key_env, str) or not key_env.strip()):
        raise _bad("api_key_env", key_env, "expected the name of an environment variable")
    retries = _read_number(table, "max_retries", 1, 0)
    tools = table.get("tools", True)
    if not isinstance(tools, bool):
        raise _bad("tools", tools, "expected true or false (false: the chat model takes no tools)")
    return LLMConfig(
        base_url=base_url.rstrip("/") if isinstance(base_url, str) else None,
        api_key_env=key_env.strip() if isinstance(key_env, str) else None,
        models=_read_models(table.get("models")),
        timeout=_read_number(table, "timeout", 120.0, 1.0),
        max_retries=int(retries),
        tools=tools,
    )


def read_toml(path: Path) -> dict[str, Any]:
    """The parsed file, ``{}`` when it does not exist; a clear error when it is not TOML."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        raise SidecarConfigError(f"{path}: cannot be read ({exc}).") from exc
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SidecarConfigError(
            f"{path}: is not valid TOML ({exc}). Fix the file and restart."
        ) from exc


class VaultConfig:
    """The vault's settings file, re-read when it changes on disk."""

    def __init__(self, vault: Path) -> None:
        self.vault = Path(vault)
        self.path = self.vault / SETTINGS_FILE
        self._stamp: tuple[int, int] | None = None
        self._data: dict[str, Any] = {}
        self._data = read_toml(self.path)
        self._stamp = self._current_stamp()
        self.llm = parse_llm(self._data.get("llm"))

    def _current_stamp(self) -> tuple[int, int] | None:
        try:
            stat = self.path.stat()
        except OSError:
            return None
        return (stat.st_mtime_ns, stat.st_size)

    def data(self) -> dict[str, Any]:
        """The whole file, re-read if it changed; a file broken meanwhile keeps the last good
        copy."""
        stamp = self._current_stamp()
        if stamp != self._stamp:
            try:
                self._data = read_toml(self.path)
            except SidecarConfigError as exc:
                log.error("%s Keeping the settings read before.", exc)
            self._stamp = stamp
        return self._data

    def plugin_settings(self, name: str) -> dict[str, Any]:
        """``[plugins.NAME]`` as a plain dict (a copy: callers may change it freely)."""
        plugins = self.data().get("plugins")
        table = plugins.get(name) if isinstance(plugins, dict) else None
        return copy.deepcopy(table) if isinstance(table, dict) else {}

    def plugin_enabled(self, name: str) -> bool:
        """False only when the vault says ``[plugins.NAME] enabled = false``."""
        return self.plugin_settings(name).get("enabled", True) is not False
