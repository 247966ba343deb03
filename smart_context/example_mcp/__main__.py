"""``python -m smart_context.example_mcp [--http --port N]``."""

from smart_context.example_mcp.server import main

main()
