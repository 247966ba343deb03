"""Settings from the vault's ``[plugins.smart_context]`` table, validated once at start-up.

Every key is documented in ``vault.example.toml``. A bad value raises :class:`ConfigError`
naming the key, the value and what would be accepted; unknown keys are reported too, since a
misspelt key silently ignored is the most confusing bug a settings file can have.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import tomlkit

from smart_context.atomic import write_atomic
from smart_context.errors import ConfigError

SETTINGS_FILE = ".vault.toml"
TABLE = ("plugins", "smart_context")

EMBEDDERS = ("host", "local", "openai")
EXTRACTORS = ("llm", "offline")
SUMMARIZERS = ("llm", "offline")
PROMPT_CACHES = ("auto", "none", "openai", "anthropic", "deepseek", "gemini", "local")
RECALLED_IN = ("user", "system")


@dataclass(frozen=True)
class Settings:
    """The plugin's settings; defaults as docs/contract.md §5 and ``vault.example.toml``.

    ``enabled`` is validated but not kept: whether the plugin is loaded at all is the host's
    decision, made before the plugin starts.
    """

    similarity_threshold: float | Literal["auto"] = "auto"
    embedding_search: bool = True
    embedder: str = "host"
    openai_base_url: str = "https://api.openai.com/v1"
    openai_embedding_model: str = "text-embedding-3-small"
    openai_api_key_env: str = "OPENAI_API_KEY"
    embed_batch_size: int = 64
    topic_extractor: str = "llm"
    extraction_category: str = "fast"
    extraction_max_chars: int = 12000
    extraction_timeout: float = 60.0
    # context items (docs/contract.md §8): agent selection for rules and references, then for tools
    context_top_k: int = 20
    context_top_n: int = 5
    context_include_score: float = 0.7
    context_tools_top_k: int = 20
    context_tools_top_n: int = 5
    context_tools_include_score: float = 0.7
    context_expansion_depth: int = 0
    context_expansion_threshold: float = 0.75
    context_expansion_top_n: int = 3
    rules_dir: str = "rules"
    references_dir: str = "references"
    # the token budget and long memory (docs/contract.md §9)
    budget_tokens: int = 8000
    token_model: str = ""  # the chat model, for its tokenizer, when the host does not say
    recent_messages: int = 10
    summarization_threshold: int = 30
    summarizer: str = "llm"
    summary_share: float = 0.1
    search_limit: int = 100
    importance_threshold: float = 0.0
    importance_recency_weight: float = 0.0  # recency comes from recent_messages
    importance_semantic_weight: float = 0.6
    importance_entity_weight: float = 0.15
    importance_user_weight: float = 0.1
    compression_detailed: float = 0.7
    compression_high_level: float = 0.85
    compression_key_facts: float = 0.95
    # the chat model's own memory tools (docs/contract.md §9)
    memory_tools: bool = True
    memory_tools_auto_approve: bool = True
    # the knowledge base: the vault's own notes, searched per request
    knowledge_folders: tuple[str, ...] = (".",)
    knowledge_top_n: int = 3
    knowledge_passages: int = 2
    knowledge_min_score: float = 0.3
    knowledge_share: float = 0.2
    # the prompt cache (docs/contract.md §9, "The budget is a bill")
    prompt_cache: str = "auto"  # by the chat model's family; "none": re-selected every turn
    cache_read_price: float | Literal["auto"] = "auto"
    cut_low_mark: float = 0.6  # a cut keeps this share of the most a request may hold
    # of the budget: older messages recalled for each message ("auto": by the cache's prices)
    recall_share: float | Literal["auto"] = "auto"
    recalled_in: str = "user"  # where what is chosen per message goes: "user" or "system"


def _check_bool(key: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(key, value, "expected true or false")
    return value


def _check_number(key: str, value: Any, low: float, high: float, kind: type = float) -> Any:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(key, value, f"expected a number between {low} and {high}")
    if kind is int and not isinstance(value, int):
        raise ConfigError(key, value, f"expected a whole number between {low} and {high}")
    if not low <= value <= high:
        raise ConfigError(key, value, f"must be between {low} and {high}")
    return kind(value)


def _auto_or(high: float) -> Any:
    """A check for ``"auto"`` or a number between 0 and ``high``."""

    def check(key: str, value: Any) -> float | Literal["auto"]:
        if value == "auto":
            return "auto"
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(key, value, f'expected "auto" or a number between 0.0 and {high}')
        number: float = _check_number(key, value, 0.0, high)
        return number

    return check


_check_threshold = _auto_or(1.0)


def _check_choice(key: str, value: Any, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise ConfigError(key, value, "expected one of " + ", ".join(f'"{c}"' for c in choices))
    return str(value)


def _check_text(key: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(key, value, "expected a non-empty string")
    return value.strip()


def _check_folder(key: str, value: Any) -> str:
    """A folder inside the vault, written relative to it."""
    text = _check_text(key, value)
    parts = Path(text).parts
    if Path(text).is_absolute() or ".." in parts or text.startswith("~") or "\x00" in text:
        raise ConfigError(key, value, 'expected a folder inside the vault, like "rules"')
    return text


def _check_folders(key: str, value: Any) -> tuple[str, ...]:
    """A list of folders inside the vault (``"."``: the whole vault); ``[]`` is none."""
    if not isinstance(value, (list, tuple)):
        raise ConfigError(key, value, 'expected a list of folders inside the vault, like ["."]')
    return tuple(dict.fromkeys(_check_folder(key, _plain(v)) for v in value))


def _count(high: int, low: int = 0) -> Any:
    return lambda k, v: _check_number(k, v, low, high, int)


def _share(k: str, v: Any) -> float:
    number: float = _check_number(k, v, 0.0, 1.0)
    return number


# The selection settings a chat may override (``context_settings`` on the chat,
# docs/contract.md §8).
SELECTION_CHECKS: dict[str, Any] = {
    "context_top_k": _count(500, 1),
    "context_top_n": _count(100),
    "context_include_score": _share,
    "context_tools_top_k": _count(500, 1),
    "context_tools_top_n": _count(100),
    "context_tools_include_score": _share,
    "context_expansion_depth": _count(5),
    "context_expansion_threshold": _share,
    "context_expansion_top_n": _count(50),
}

_CHECKS: dict[str, Any] = {
    **SELECTION_CHECKS,
    "rules_dir": _check_folder,
    "references_dir": _check_folder,
    "enabled": _check_bool,
    "embedding_search": _check_bool,
    "similarity_threshold": _check_threshold,
    "embed_batch_size": lambda k, v: _check_number(k, v, 1, 2048, int),
    "extraction_max_chars": lambda k, v: _check_number(k, v, 1000, 1_000_000, int),
    "extraction_timeout": lambda k, v: _check_number(k, v, 1.0, 3600.0),
    "embedder": lambda k, v: _check_choice(k, v, EMBEDDERS),
    "topic_extractor": lambda k, v: _check_choice(k, v, EXTRACTORS),
    "openai_base_url": _check_text,
    "openai_embedding_model": _check_text,
    "openai_api_key_env": _check_text,
    "extraction_category": _check_text,
    "budget_tokens": _count(10_000_000),
    "token_model": lambda k, v: v.strip() if isinstance(v, str) else _check_text(k, v),
    "recent_messages": _count(1000),
    "summarization_threshold": _count(100_000),
    "summarizer": lambda k, v: _check_choice(k, v, SUMMARIZERS),
    "summary_share": lambda k, v: _check_number(k, v, 0.0, 0.9),
    "search_limit": _count(1000),
    "importance_threshold": _share,
    "importance_recency_weight": _share,
    "importance_semantic_weight": _share,
    "importance_entity_weight": _share,
    "importance_user_weight": _share,
    "compression_detailed": lambda k, v: _check_number(k, v, 0.0, 0.99),
    "compression_high_level": lambda k, v: _check_number(k, v, 0.0, 0.99),
    "compression_key_facts": lambda k, v: _check_number(k, v, 0.0, 0.99),
    "memory_tools": _check_bool,
    "memory_tools_auto_approve": _check_bool,
    "knowledge_folders": _check_folders,
    "knowledge_top_n": _count(20),
    "knowledge_passages": _count(10, 1),
    "knowledge_min_score": _share,
    "knowledge_share": lambda k, v: _check_number(k, v, 0.0, 0.9),
    "prompt_cache": lambda k, v: _check_choice(k, v, PROMPT_CACHES),
    "cache_read_price": _check_threshold,  # "auto" or 0-1, alike
    "cut_low_mark": lambda k, v: _check_number(k, v, 0.1, 0.95),
    "recall_share": _auto_or(0.9),
    "recalled_in": lambda k, v: _check_choice(k, v, RECALLED_IN),
}

SETTING_KEYS = frozenset(_CHECKS)  # every key ``[plugins.smart_context]`` accepts


def parse_settings(table: Mapping[str, Any] | None, file: str = SETTINGS_FILE) -> Settings:
    """Validate a ``[plugins.smart_context]`` table into :class:`Settings`."""
    table = dict(table or {})
    unknown = sorted(set(table) - set(_CHECKS))
    if unknown:
        raise ConfigError(
            unknown[0], table[unknown[0]], "unknown setting (see vault.example.toml)", file
        )
    values: dict[str, Any] = {}
    for key, value in table.items():
        try:
            values[key] = _CHECKS[key](key, _plain(value))
        except ConfigError as exc:
            raise ConfigError(exc.key, exc.value, str(exc).rsplit(": ", 1)[-1], file) from None
    values.pop("enabled", None)
    return Settings(**values)


def _plain(value: Any) -> Any:
    """tomlkit items behave like builtins but are not always ``isinstance`` of them."""
    unwrap = getattr(value, "unwrap", None)
    return unwrap() if callable(unwrap) else value


def write_setting(vault: Path, key: str, value: Any) -> None:
    """Set one key of ``[plugins.smart_context]`` in ``.vault.toml``, keeping its comments and
    layout; a file that is not valid TOML is a :class:`ConfigError` and stays as it is."""
    parse_settings({key: value})  # never write a value we would refuse to read
    path = Path(vault) / SETTINGS_FILE
    try:
        doc = (
            tomlkit.parse(path.read_text(encoding="utf-8")) if path.exists() else tomlkit.document()
        )
    except Exception as exc:  # tomlkit raises several unrelated types for bad syntax  # noqa: BLE001
        raise ConfigError("(file)", str(path), f"not valid TOML: {exc}", str(path)) from None
    plugins = doc.setdefault("plugins", tomlkit.table(is_super_table=True))
    table = plugins.setdefault("smart_context", tomlkit.table())
    table[key] = value
    write_atomic(path, tomlkit.dumps(doc))


def replace(settings: Settings, **changes: Any) -> Settings:
    """A copy of ``settings`` with ``changes`` validated and applied."""
    current = dataclasses.asdict(settings)
    current.update(changes)
    return parse_settings(current)
