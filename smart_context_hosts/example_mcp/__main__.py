"""``python -m smart_context_hosts.example_mcp [--http --port N]``."""

from smart_context_hosts.example_mcp.server import main

main()
