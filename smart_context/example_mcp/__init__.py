"""An example MCP server for the example vault; see :mod:`smart_context.example_mcp.server`."""
