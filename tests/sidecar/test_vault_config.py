"""``.vault.toml`` as the sidecar reads it: plugin tables, the [llm] table, errors that say
what to fix."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from smart_context_hosts.sidecar.config import SidecarConfigError, VaultConfig, parse_llm
from tests.sidecar.conftest import write_settings


def test_no_file_means_no_settings_and_no_model(vault: Path) -> None:
    config = VaultConfig(vault)
    assert config.plugin_settings("smart_context") == {}
    assert config.plugin_enabled("smart_context")
    assert not config.llm.configured


def test_plugin_table_is_a_plain_copy(vault: Path) -> None:
    write_settings(
        vault,
        "[plugins.smart_context]\nsimilarity_threshold = 0.5\ntags = ['a']\n"
        "[plugins.other]\nenabled = false\n",
    )
    config = VaultConfig(vault)
    table = config.plugin_settings("smart_context")
    assert table == {"similarity_threshold": 0.5, "tags": ["a"]}
    assert type(table) is dict
    table["tags"].append("changed")
    assert config.plugin_settings("smart_context")["tags"] == ["a"]
    assert not config.plugin_enabled("other")


def test_changes_on_disk_are_seen_and_a_broken_edit_keeps_the_last_good(vault: Path) -> None:
    write_settings(vault, "[plugins.smart_context]\nembedding_search = true\n")
    config = VaultConfig(vault)
    assert config.plugin_settings("smart_context")["embedding_search"] is True
    write_settings(vault, "[plugins.smart_context]\nembedding_search = false\n# longer\n")
    assert config.plugin_settings("smart_context")["embedding_search"] is False
    write_settings(vault, "[plugins.smart_context\nbroken")
    os.utime(vault / ".vault.toml", ns=(1, 1))
    assert config.plugin_settings("smart_context")["embedding_search"] is False


def test_llm_table() -> None:
    llm = parse_llm(
        {
            "base_url": "http://127.0.0.1:11434/v1/",
            "api_key_env": "KEY",
            "models": {"fast": "small", "embedding": "emb"},
            "timeout": 30,
        }
    )
    assert llm.configured and llm.base_url == "http://127.0.0.1:11434/v1"
    assert llm.models == {"fast": "small", "embedding": "emb"}
    assert llm.timeout == 30.0 and llm.max_retries == 1


@pytest.mark.parametrize(
    ("table", "words"),
    [
        ({"base_url": "localhost:11434"}, "base_url"),
        ({"base_url": "http://x", "api_key": "sk-123"}, "api_key_env"),
        ({"base_url": "http://x", "models": {"fast": ""}}, "models.fast"),
        ({"base_url": "http://x", "models": "gpt"}, "models"),
        ({"base_url": "http://x", "timeout": -1}, "timeout"),
        ({"base_url": "http://x", "api_key_env": 3}, "api_key_env"),
        ({"base_url": "http://x", "tools": "no"}, r"\[llm\] tools = 'no'"),
    ],
)
def test_bad_llm_values_name_the_key(table: dict[str, object], words: str) -> None:
    with pytest.raises(SidecarConfigError, match=words):
        parse_llm(table)


def test_invalid_toml_is_a_clear_error(vault: Path) -> None:
    write_settings(vault, "[llm\n")
    with pytest.raises(SidecarConfigError, match="not valid TOML"):
        VaultConfig(vault)
