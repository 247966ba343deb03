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


def test_tools_go_to_the_model_as_function_definitions() -> None:
    from smart_context.items.request import Chosen, RequestContext
    from smart_context.items.tools import tool_item

    schema = {"type": "object", "properties": {"yen": {"type": "number"}}, "required": ["yen"]}
    request = RequestContext(
        (
            Chosen(tool_item("example", "yen_to_euro", "Yen to euro.", schema), "agent", 0.7),
            Chosen(tool_item("example", "odd", "x" * 5000, ["not", "a", "schema"]), "always"),
            Chosen(tool_item("example", "array", None, {"type": "array"}), "always"),
            Chosen(tool_item("example", "bad name!", "d"), "always"),
        )
    )
    by_name = {t["function"]["name"]: t for t in request.tools()}
    assert set(by_name) == {"example__yen_to_euro", "example__odd", "example__array"}
    assert all(t["type"] == "function" for t in by_name.values())
    assert by_name["example__yen_to_euro"]["function"]["parameters"] == schema
    assert by_name["example__odd"]["function"]["parameters"] == {"type": "object", "properties": {}}
    assert len(by_name["example__odd"]["function"]["description"]) <= 1024
    assert by_name["example__array"]["function"]["parameters"]["type"] == "object"
    assert "description" not in by_name["example__array"]["function"]
    assert request.system_text() == ""  # tools never reach the system message


async def test_tools_and_documents_are_selected_within_their_own_limits(tmp_path: Path) -> None:
    from smart_context.mcp.client import ToolInfo, save_tool_list

    (tmp_path / ".vault.toml").write_text(
        '[mcp.servers.kit]\ncommand = "kit-server"\ninclude = "agent"\n', encoding="utf-8"
    )
    save_tool_list(tmp_path, "kit", [ToolInfo("bread_tool", "sourdough starter")])
    write(tmp_path, "references/bread.md", "---\ninclude: agent\n---\nsourdough starter\n")
    write(tmp_path, "references/more.md", "---\ninclude: agent\n---\nsourdough starter too\n")
    store = VectorStore(tmp_path, FakeEmbedder())
    catalog = ItemCatalog(tmp_path)
    one = Limits(top_n=1, include_score=2.0)
    try:
        request = await build(catalog, given(store), "sourdough starter", one, None, one)
    finally:
        await catalog.servers.close()
    kinds = sorted(c.item.type for c in request.items if c.mode == "agent")
    assert kinds == ["reference", "tool"]  # one each: the tool did not take the document's place
    assert [t["function"]["name"] for t in request.tools()] == ["kit__bread_tool"]


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


async def test_expansion_crosses_kinds_a_reference_leads_to_its_tool(tmp_path: Path) -> None:
    """The design's own example: the message finds the authentication reference, whose text
    leads to the HTTP tool the message never mentioned."""
    from smart_context.mcp.client import ToolInfo, save_tool_list

    (tmp_path / ".vault.toml").write_text(
        '[mcp.servers.web]\ncommand = "web-server"\ninclude = "expansion"\n', encoding="utf-8"
    )
    save_tool_list(tmp_path, "web", [ToolInfo("fetch", "fetch endpoint token request http")])
    write(
        tmp_path,
        "references/auth.md",
        "---\ninclude: agent\n---\nauthenticate login: fetch endpoint token request http\n",
    )
    store = VectorStore(tmp_path, FakeEmbedder())
    catalog = ItemCatalog(tmp_path)
    limits = Limits(top_n=1, expansion_depth=1, expansion_threshold=0.3)
    try:
        request = await build(catalog, given(store), "how do I authenticate login", limits)
    finally:
        await catalog.servers.close()
    modes = {(c.item.type, c.item.name): c.mode for c in request.items}
    assert modes == {("reference", "auth"): "agent", ("tool", "fetch"): "expansion"}
    assert [t["function"]["name"] for t in request.tools()] == ["web__fetch"]


async def test_an_item_the_session_has_does_not_take_an_expansion_place(tmp_path: Path) -> None:
    write(tmp_path, "rules/auth.md", "---\ninclude: agent\n---\nlogin password token\n")
    # closest to auth, but the user added it to the chat: the one place goes to the next one
    write(tmp_path, "references/x.md", "---\ninclude: expansion\n---\nlogin password token x\n")
    write(tmp_path, "references/fetch.md", "---\ninclude: expansion\n---\ntoken endpoint http\n")
    store = VectorStore(tmp_path, FakeEmbedder())
    limits = Limits(top_n=1, expansion_depth=1, expansion_threshold=0.2, expansion_top_n=1)
    session = [{"type": "reference", "name": "x", "include_mode": "manual"}]
    request = await build(ItemCatalog(tmp_path), given(store), "login password", limits, session)
    modes = {c.item.name: c.mode for c in request.items}
    assert modes == {"x": "manual", "auth": "agent", "fetch": "expansion"}
