"""Context items (docs/contract.md §8): the vault's rules and references, and MCP tools.

- :mod:`.model`: :class:`Item` and :class:`ItemProblem`;
- :mod:`.files`: rules and references read from the vault's Markdown files, and the stamp that
  says when to read them again; :mod:`.properties`: their front matter, read as hostile input;
- :mod:`.tools`: an MCP tool as an item;
- :mod:`.chunks`: what is embedded for an item, in chunks, and a message as query chunks;
- :mod:`.select`: agent selection over chunk scores; :mod:`.lexical`: BM25 keyword scores
  fused with them; :mod:`.expand`: the relationship graph of items and context expansion;
  :mod:`.catalog`: the vault's items kept current, their chunk vectors kept by content, and a
  search;
- :mod:`smart_context.mcp.config`: ``[mcp.servers.*]`` of ``.vault.toml``;
  :mod:`smart_context.mcp.client`: listing and
  calling tools with the official SDK, and the last known tool lists.
"""
