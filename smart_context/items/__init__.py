"""Context items: rules, references and MCP tools (CONTRACT.md §8)."""
