"""Settings: defaults, validation naming the key, write-back keeping comments."""

from __future__ import annotations

from pathlib import Path

import pytest
import tomlkit

from smart_context.config import (
    SETTING_KEYS,
    SETTINGS_FILE,
    Settings,
    parse_settings,
    write_setting,
)
from smart_context.errors import ConfigError
from smart_context.resources import example_settings_file


def read_settings(vault: Path) -> Settings:
    """The settings as a host reads them back from the vault's file."""
    doc = tomlkit.parse((vault / SETTINGS_FILE).read_text(encoding="utf-8"))
    return parse_settings(doc.get("plugins", {}).get("smart_context", {}))


def test_defaults_match_the_contract() -> None:
    s = parse_settings({})
    # the cut fits the embedding model unless a number overrides it
    assert (s.similarity_threshold, s.embedding_search) == ("auto", True)
    assert parse_settings({"similarity_threshold": 0.35}).similarity_threshold == 0.35
    assert parse_settings({"similarity_threshold": 1}).similarity_threshold == 1.0
    # ``enabled`` is the host's decision (it loads the plugin or not): accepted, checked, not kept
    assert parse_settings({"enabled": False}) == s
    with pytest.raises(ConfigError, match="enabled"):
        parse_settings({"enabled": "no"})


def test_example_file_documents_every_key_and_is_valid() -> None:
    text = example_settings_file().read_text(encoding="utf-8")
    table = tomlkit.parse(text)["plugins"]["smart_context"]
    assert set(table) == SETTING_KEYS
    parse_settings(table)
    for key in table:  # each key has a comment line right above it
        before = text.split(f"\n{key} =")[0].rstrip().splitlines()[-1]
        assert before.startswith("#"), key


@pytest.mark.parametrize(
    ("table", "key"),
    [
        ({"similarity_threshold": 1.5}, "similarity_threshold"),
        ({"similarity_threshold": "high"}, "similarity_threshold"),
        ({"embedding_search": "yes"}, "embedding_search"),
        ({"embedder": "gpu"}, "embedder"),
        ({"embed_batch_size": 0}, "embed_batch_size"),
        ({"embed_batch_size": 2.5}, "embed_batch_size"),
        ({"similarity_treshold": 0.3}, "similarity_treshold"),
        ({"openai_base_url": ""}, "openai_base_url"),
        ({"budget_tokens": -1}, "budget_tokens"),
        ({"budget_tokens": 4000.5}, "budget_tokens"),
        ({"summarizer": "gpt"}, "summarizer"),
        ({"summary_share": 0.95}, "summary_share"),
        ({"importance_semantic_weight": 2}, "importance_semantic_weight"),
        ({"compression_key_facts": 1.0}, "compression_key_facts"),
        ({"token_model": 42}, "token_model"),
        ({"memory_tools": "yes"}, "memory_tools"),
        ({"memory_tools_auto_approve": 1}, "memory_tools_auto_approve"),
        ({"knowledge_folders": "notes"}, "knowledge_folders"),
        ({"knowledge_folders": ["../elsewhere"]}, "knowledge_folders"),
        ({"knowledge_folders": ["/etc"]}, "knowledge_folders"),
        ({"knowledge_folders": [3]}, "knowledge_folders"),
        ({"rules_dir": "../rules"}, "rules_dir"),
        ({"references_dir": "refs\x00x"}, "references_dir"),  # no file name holds a NUL
        ({"prompt_cache": "redis"}, "prompt_cache"),
        ({"cache_read_price": 1.5}, "cache_read_price"),
        ({"cache_read_price": "cheap"}, "cache_read_price"),
        ({"cut_low_mark": 0.99}, "cut_low_mark"),
        ({"recall_share": "lots"}, "recall_share"),
        ({"recall_share": True}, "recall_share"),
        ({"recalled_in": "tool"}, "recalled_in"),
        ({"knowledge_top_n": -1}, "knowledge_top_n"),
        ({"knowledge_passages": 0}, "knowledge_passages"),
        ({"knowledge_min_score": 1.5}, "knowledge_min_score"),
        ({"knowledge_share": 0.95}, "knowledge_share"),
    ],
)
def test_bad_value_names_the_key(table: dict, key: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_settings(table)
    assert key in str(info.value) and info.value.key == key


def test_knowledge_folders_are_a_list_of_vault_folders() -> None:
    assert parse_settings({}).knowledge_folders == (".",)
    assert parse_settings({"knowledge_folders": ["notes", " notes ", "a/b"]}).knowledge_folders == (
        "notes",
        "a/b",
    )
    assert parse_settings({"knowledge_folders": []}).knowledge_folders == ()


def test_write_back_keeps_comments_and_other_tables(tmp_path: Path) -> None:
    original = (
        '# my vault\n[llm]\nbase_url = "http://127.0.0.1:1/v1"  # local\n\n'
        "[plugins.smart_context]\n# filter on?\nembedding_search = true\n"
        "similarity_threshold = 0.5\n"
    )
    (tmp_path / ".vault.toml").write_text(original)
    write_setting(tmp_path, "embedding_search", False)
    text = (tmp_path / ".vault.toml").read_text()
    assert text == original.replace("embedding_search = true", "embedding_search = false")
    assert read_settings(tmp_path).embedding_search is False


def test_write_back_creates_the_file_when_missing(tmp_path: Path) -> None:
    write_setting(tmp_path, "embedding_search", False)
    assert read_settings(tmp_path).embedding_search is False


def test_write_back_refuses_invalid_values(tmp_path: Path) -> None:
    with pytest.raises(ConfigError):
        write_setting(tmp_path, "similarity_threshold", 7)
    assert not (tmp_path / ".vault.toml").exists()


def test_broken_toml_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / ".vault.toml").write_text("[plugins.smart_context\nenabled = ")
    with pytest.raises(ConfigError, match="not valid TOML"):
        write_setting(tmp_path, "embedding_search", False)
    assert (tmp_path / ".vault.toml").read_text() == "[plugins.smart_context\nenabled = "
