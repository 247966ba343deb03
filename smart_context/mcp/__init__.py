"""MCP in one place: the vault's ``[mcp.servers]`` table (:mod:`.config`), the client that talks
to those servers with the official SDK (:mod:`.client`), and the server that offers the memory
commands as MCP tools (:mod:`.server`, ``smart-context mcp VAULT``)."""
