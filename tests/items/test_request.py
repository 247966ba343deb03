"""The request context: always items, agent items with scores, the text the model gets."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

from smart_context.items.catalog import ItemCatalog
from smart_context.items.request import build
from smart_context.items.select import Limits
from smart_context.store import VectorStore
from tests.fakes import FakeEmbedder
from tests.items.test_catalog import write


def given(store: VectorStore) -> Callable[[], Awaitable[VectorStore]]:
    async def get() -> VectorStore:
        return store

    return get


async def test_a_vault_without_agent_items_never_asks_for_the_store(tmp_path: Path) -> None:
    write(tmp_path, "rules/a.md", "---\ninclude: always\n---\nFirst rule.\n")

    async def no_store() -> VectorStore:
        raise AssertionError("the store was built for nothing")

    request = await build(ItemCatalog(tmp_path), no_store, "anything", Limits())
    assert [c.item.name for c in request.items] == ["a"]


async def test_always_items_then_agent_items_and_the_models_text(tmp_path: Path) -> None:
    write(tmp_path, "rules/b.md", "---\ninclude: always\npriority: 2\n---\nSecond rule.\n")
    write(tmp_path, "rules/a.md", "---\ninclude: always\npriority: 1\n---\nFirst rule.\n")
    write(tmp_path, "references/bread.md", "---\ninclude: agent\n---\nsourdough starter\n")
    store = VectorStore(tmp_path, FakeEmbedder())
    request = await build(ItemCatalog(tmp_path), given(store), "sourdough starter", Limits(top_n=1))
    record = request.record()
    assert [(i["name"], i["include_mode"]) for i in record["items"]] == [
        ("a", "always"),
        ("b", "always"),
        ("bread", "agent"),
    ]
    assert "similarity_score" in record["items"][2] and "error" not in record
    text = request.system_text()
    assert text.index("First rule.") < text.index("Second rule.") < text.index("sourdough")
    assert text.startswith("# Rules to follow") and "# Reference material" in text


async def test_a_failed_search_keeps_the_always_items_and_says_why(tmp_path: Path) -> None:
    write(tmp_path, "rules/a.md", "---\ninclude: always\n---\nFirst rule.\n")
    write(tmp_path, "rules/b.md", "---\ninclude: agent\n---\nbread\n")
    embedder = FakeEmbedder()
    embedder.fail_with = "the embedding endpoint is unreachable"
    store = VectorStore(tmp_path, embedder)
    request = await build(ItemCatalog(tmp_path), given(store), "bread", Limits())
    record = request.record()
    assert [i["name"] for i in record["items"]] == ["a"]
    assert "unreachable" in record["error"]


async def test_an_item_expansion_adds_is_recorded_as_expansion(tmp_path: Path) -> None:
    write(tmp_path, "rules/auth.md", "---\ninclude: agent\n---\nlogin password token\n")
    write(tmp_path, "references/fetch.md", "---\ninclude: expansion\n---\ntoken endpoint http\n")
    write(tmp_path, "references/x.md", "---\ninclude: always\n---\nlogin token always\n")
    store = VectorStore(tmp_path, FakeEmbedder())
    limits = Limits(top_n=1, expansion_depth=1, expansion_threshold=0.2)
    request = await build(ItemCatalog(tmp_path), given(store), "login password", limits)
    record = request.record()
    assert [(i["name"], i["include_mode"]) for i in record["items"]] == [
        ("x", "always"),
        ("auth", "agent"),
        ("fetch", "expansion"),
    ]
    assert "similarity_score" in record["items"][2]
    assert "token endpoint http" in request.system_text()
