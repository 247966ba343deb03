"""The product's tool selection, run the way a request runs it, for the tool benchmarks.

Both tool benchmarks (our own set, ``bench_tool_selection.py``, and ToolLens,
``public/bench_tools.py``) measure what the product picks, not a re-implementation of it:

- :class:`ToolVault`: a scratch vault whose ``.vault.toml`` declares each MCP server
  (``include = "agent"``) and whose ``.memory`` holds each server's last known tool list, as
  the product keeps them. No server is started: the lists are already there. Its
  :meth:`ToolVault.picks` asks :func:`smart_context.items.request.build` (the request path's
  item step: catalog, chunk vectors, query sentences, BM25 fusion, selection) with the
  product's default settings, and returns the tools it would send, best first;
- :class:`CachedEmbedder`: the product's local model with its vectors kept in a folder outside
  the repository, so a second run embeds nothing;
- :func:`measure`: recall@k and precision of picks against the tools each message needs.
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import numpy as np
import numpy.typing as npt

from smart_context.config import Settings
from smart_context.embeddings.local import shared_local_model
from smart_context.items.catalog import ItemCatalog
from smart_context.items.request import build
from smart_context.items.select import Limits
from smart_context.items.selection import chat_limits
from smart_context.items.servers import ToolServers
from smart_context.mcp.client import ToolInfo, save_tool_list
from smart_context.mcp.config import McpConfig
from smart_context.store import VectorStore
from smart_context.vectors.codec import content_hash

Matrix = npt.NDArray[np.float32]
Key = tuple[str, str]  # (server, tool)
Pick = TypeVar("Pick")  # what :func:`measure` compares: a ``Key``, or a baseline's tool id


@dataclass(frozen=True)
class Server:
    """One MCP server as the product sees it: its name and tool list."""

    name: str
    tools: tuple[ToolInfo, ...] = field(default=())


class CachedEmbedder:
    """The product's local model (the :class:`smart_context.embeddings.Embedder` protocol), each
    text's vector kept in ``folder`` (``None``: in memory only), keyed by content."""

    def __init__(self, folder: Path | None) -> None:
        self.model = shared_local_model()
        self.model_id = self.model.model_id
        self.file = folder / f"{self.model_id}.npz" if folder is not None else None
        self.rows: dict[str, Matrix] = {}
        self.embedded = 0  # texts that were not in the cache
        if self.file is not None and self.file.exists():
            saved = np.load(self.file)
            self.rows = dict(zip(saved["keys"].tolist(), saved["vectors"], strict=True))

    def embed_sync(self, texts: Sequence[str]) -> Matrix:
        """Unit rows for ``texts``; the misses in one call to the model."""
        keys = [content_hash(t) for t in texts]
        missing = list(
            dict.fromkeys(t for t, k in zip(texts, keys, strict=True) if k not in self.rows)
        )
        if missing:
            vectors = np.asarray(self.model.embed_sync(missing), dtype=np.float32)
            self.rows.update(zip(map(content_hash, missing), vectors, strict=True))
            self.embedded += len(missing)
            self.save()
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        return np.stack([self.rows[k] for k in keys])

    async def embed(self, texts: Sequence[str]) -> Matrix:
        return self.embed_sync(texts)

    def save(self) -> None:
        if self.file is None:
            return
        self.file.parent.mkdir(parents=True, exist_ok=True)
        keys = np.array(list(self.rows), dtype=str)
        temporary = self.file.with_suffix(".tmp.npz")
        np.savez(temporary, keys=keys, vectors=np.stack(list(self.rows.values())))
        temporary.replace(self.file)


class _ListedServers(ToolServers):
    """The vault's servers with their tool lists already saved: nothing is started."""

    def refresh_soon(self, config: McpConfig | None = None) -> None:
        return None


class ToolVault:
    """A scratch vault offering ``servers``' tools to agent selection (module docstring)."""

    def __init__(self, servers: Sequence[Server], embedder: CachedEmbedder) -> None:
        self._folder = tempfile.TemporaryDirectory(prefix="sc-tool-bench-")
        self.vault = Path(self._folder.name)
        lines = [f'[mcp.servers.{s.name}]\ncommand = "none"\ninclude = "agent"\n' for s in servers]
        (self.vault / ".vault.toml").write_text("\n".join(lines), encoding="utf-8")
        for server in servers:
            save_tool_list(self.vault, server.name, server.tools)
        self.catalog = ItemCatalog(self.vault, servers=_ListedServers(self.vault))
        self.store = VectorStore(self.vault, embedder)
        self.embedder = embedder
        self.limits = chat_limits(Settings(), None)

    async def _store(self) -> VectorStore:
        return self.store

    async def picks(
        self, message: str, tool_limits: Limits | None = None
    ) -> list[tuple[Key, float]]:
        """The tools the product would send with ``message``, best first, with their scores."""
        documents, tools = self.limits
        context = await build(
            self.catalog, self._store, message, documents, None, tool_limits or tools
        )
        return [
            ((c.item.server_name or "", c.item.name), c.score if c.score is not None else 0.0)
            for c in context.items
            if c.item.type == "tool" and c.mode == "agent"
        ]

    def run(self, messages: Sequence[str], tool_limits: Limits | None = None) -> list[list[Key]]:
        """:meth:`picks` for each message (their sentences embedded first, in one call)."""
        from smart_context.items.query import MessageQuery

        self.embedder.embed_sync([s for m in messages for s in MessageQuery(m).sentences])

        async def all_picks() -> list[list[Key]]:
            return [[k for k, _ in await self.picks(m, tool_limits)] for m in messages]

        return asyncio.run(all_picks())

    def close(self) -> None:
        self._folder.cleanup()


def measure(
    picks: Sequence[Sequence[Pick]],
    needed: Sequence[set[Pick]],
    kinds: Sequence[str] | None = None,
    k: int | None = 5,
) -> dict[str, float]:
    """Per message: recall@k, the share of the tools it needs among its first ``k`` picks
    (``None``: all; a message that needs three tools and gets two of them scores 2/3), and
    precision, the
    share of *all* its picks that it needs (no pick: 0); both averaged over the messages, so
    every message weighs the same. ``kinds`` (e.g. ``single``/``multi``) adds a figure per
    kind. ``picks``: mean number of picks."""
    rows: dict[str, list[tuple[float, float, int]]] = {"all": []}
    for i, (got, need) in enumerate(zip(picks, needed, strict=True)):
        hits_k = len(need & set(got[:k]))
        hits = len(need & set(got))
        row = (hits_k / len(need), hits / len(got) if got else 0.0, len(got))
        rows["all"].append(row)
        if kinds is not None:
            rows.setdefault(kinds[i], []).append(row)
    out: dict[str, float] = {}
    for kind, values in rows.items():
        prefix = "" if kind == "all" else f"{kind} "
        out[f"{prefix}recall"] = statistics.mean(v[0] for v in values) if values else 0.0
        out[f"{prefix}precision"] = statistics.mean(v[1] for v in values) if values else 0.0
    out["picks"] = statistics.mean(v[2] for v in rows["all"]) if rows["all"] else 0.0
    return out
