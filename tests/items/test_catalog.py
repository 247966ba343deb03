"""The vault's items end to end: files on disk, chunk vectors kept by content, agent selection."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from smart_context.items.catalog import ItemCatalog, items_vectors_file
from smart_context.items.select import Limits
from smart_context.resources import example_vault_dir
from smart_context.store import VectorStore
from smart_context_hosts.cli import main
from tests.fakes import FakeEmbedder


def write(vault: Path, path: str, text: str) -> None:
    (vault / path).parent.mkdir(parents=True, exist_ok=True)
    (vault / path).write_text(text, encoding="utf-8")


@pytest.fixture
def items_vault(tmp_path: Path) -> Path:
    write(tmp_path, "rules/bread.md", "---\ninclude: agent\n---\nsourdough starter flour water\n")
    write(tmp_path, "rules/code.md", "---\ninclude: agent\n---\npython asyncio task cancel\n")
    write(tmp_path, "rules/always.md", "---\ninclude: always\n---\nsourdough starter always\n")
    write(tmp_path, "references/off.md", "---\ninclude: agent\nenabled: false\n---\nsourdough\n")
    return tmp_path


async def test_agent_items_are_found_and_chunks_embedded_once(items_vault: Path) -> None:
    embedder = FakeEmbedder()
    store = VectorStore(items_vault, embedder)
    catalog = ItemCatalog(items_vault)
    limits = Limits(top_n=1)
    found = await catalog.search(store, "my sourdough starter is flat", limits)
    assert [f.item.name for f in found] == ["bread"]  # not the always one, not the disabled one
    before = len(embedder.embedded)
    await catalog.search(store, "my sourdough starter is flat", limits)
    assert len(embedder.embedded) == before  # the chunks are kept, the message embedded just now
    assert items_vectors_file(items_vault).exists()
    # an edit on disk is seen on the next search, and only the edited item is embedded again
    write(items_vault, "rules/code.md", "---\ninclude: agent\n---\nsourdough oven steam\n")
    again = await catalog.search(store, "oven steam", limits)
    assert [f.item.name for f in again] == ["code"]
    assert sum("oven steam" in t for t in embedder.embedded) == 2  # the chunk and the message
    assert not any("bread" in t for t in embedder.embedded[before:])


async def test_a_new_store_reads_the_kept_vectors_instead_of_embedding(items_vault: Path) -> None:
    first = VectorStore(items_vault, FakeEmbedder())
    await ItemCatalog(items_vault).search(first, "flour", Limits())
    first.flush()
    embedder = FakeEmbedder()
    await ItemCatalog(items_vault).search(VectorStore(items_vault, embedder), "flour", Limits())
    assert embedder.embedded == ["flour"]


async def test_nothing_to_search_embeds_nothing(tmp_path: Path) -> None:
    embedder = FakeEmbedder()
    assert await ItemCatalog(tmp_path).search(VectorStore(tmp_path, embedder), "x", Limits()) == []
    assert embedder.embedded == []


def test_items_command_on_the_example_vault_with_the_local_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    vault = tmp_path / "vault"
    shutil.copytree(example_vault_dir(), vault)
    question = "how warm should my starter be overnight, and the hydration for 500 g flour?"
    assert main(["items", str(vault), "--query", question, "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["problems"] == []
    assert {i["name"] for i in result["items"]} >= {"Sourdough Schedule", "Python Code Style"}
    assert result["selected"][0]["name"] == "Sourdough Schedule"
    assert all(i["include"] == "agent" for i in result["selected"])
    # the example vault's own MCP server, started from the package, offers its tools
    tools = [i["name"] for i in result["selected"] if i["type"] == "tool"]
    assert tools[0] == "hydration"
    assert "time_in" not in tools and "yen_to_euro" not in tools  # no filling up with the rest


async def test_items_are_indexed_ahead_so_a_request_embeds_only_its_message(
    items_vault: Path,
) -> None:
    embedder = FakeEmbedder()
    store = VectorStore(items_vault, embedder)
    catalog = ItemCatalog(items_vault)
    assert await catalog.index(store) == 4  # one chunk per item
    assert any("python asyncio" in t for t in embedder.embedded)
    before = len(embedder.embedded)
    await catalog.search(store, "flour", Limits())
    assert embedder.embedded[before:] == ["flour"]


async def test_a_vault_with_nothing_to_select_indexes_nothing(tmp_path: Path) -> None:
    write(tmp_path, "rules/always.md", "---\ninclude: always\n---\nalways sent\n")
    embedder = FakeEmbedder()
    assert await ItemCatalog(tmp_path).index(VectorStore(tmp_path, embedder)) == 0
    assert embedder.embedded == []


@pytest.fixture
def auth_vault(tmp_path: Path) -> Path:
    write(tmp_path, "rules/auth.md", "---\ninclude: agent\n---\nlogin password token endpoint\n")
    write(
        tmp_path,
        "references/fetch.md",
        "---\ninclude: expansion\n---\ntoken endpoint http\n",
    )
    write(tmp_path, "references/bread.md", "---\ninclude: agent\n---\nsourdough starter flour\n")
    return tmp_path


def expanding(depth: int = 1, threshold: float = 0.3) -> Limits:
    return Limits(top_n=1, expansion_depth=depth, expansion_threshold=threshold)


async def test_an_expansion_item_comes_only_through_the_item_that_leads_to_it(
    auth_vault: Path,
) -> None:
    store = VectorStore(auth_vault, FakeEmbedder())
    catalog = ItemCatalog(auth_vault)
    # the message names the expansion item's own words: it is still not found directly
    direct = await catalog.search(store, "token endpoint http", expanding(depth=0))
    assert "fetch" not in [f.item.name for f in direct]
    found = await catalog.search(store, "my login password fails", expanding())
    assert [(f.item.name, f.mode) for f in found] == [("auth", "agent"), ("fetch", "expansion")]
    assert found[1].via is not None and found[1].via.name == "auth"
    assert 0.3 <= found[1].score < 1
    assert await catalog.search(store, "my login password fails", expanding(depth=0)) == found[:1]
    assert (
        await catalog.search(store, "my login password fails", expanding(threshold=0.9))
        == found[:1]
    )


async def test_expansion_follows_an_edit_and_skips_disabled_items(auth_vault: Path) -> None:
    store = VectorStore(auth_vault, FakeEmbedder())
    catalog = ItemCatalog(auth_vault)
    assert len(await catalog.search(store, "login password", expanding())) == 2
    write(
        auth_vault,
        "references/fetch.md",
        "---\ninclude: expansion\nenabled: false\n---\ntoken endpoint http\n",
    )
    assert [f.item.name for f in await catalog.search(store, "login password", expanding())] == [
        "auth"
    ]
    write(auth_vault, "rules/link.md", "---\ninclude: expansion\n---\nlogin password token\n")
    again = await catalog.search(store, "login password", expanding())
    assert [(f.item.name, f.mode) for f in again] == [("auth", "agent"), ("link", "expansion")]


async def test_keyword_scores_join_the_cosine_only_when_weighted(items_vault: Path) -> None:
    store = VectorStore(items_vault, FakeEmbedder())
    catalog = ItemCatalog(items_vault)
    message = "code: python asyncio task cancel"
    [cosine] = await catalog.search(store, message, Limits(top_n=1, lexical_weight=0.0))
    [hybrid] = await catalog.search(store, message, Limits(top_n=1, lexical_weight=0.5))
    assert cosine.item.name == hybrid.item.name == "code"
    assert cosine.score == pytest.approx(1.0)  # the same words: the bag-of-words fake says 1
    assert 0.5 < hybrid.score < 1.0  # half of it is BM25, squashed below 1


async def test_a_pasted_document_is_searched_by_the_sentences_it_was_embedded_by(
    items_vault: Path,
) -> None:
    # its sentences are bounded (24, spread over it): the keyword scores must take the same rows
    store = VectorStore(items_vault, FakeEmbedder())
    pasted = " ".join(f"Line {i}: the python asyncio task cancel failed." for i in range(100))
    [found] = await ItemCatalog(items_vault).search(
        store, pasted, Limits(top_n=1, lexical_weight=0.5)
    )
    assert found.item.name == "code"
