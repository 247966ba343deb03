"""An example MCP server for the example vault; see :mod:`.server`."""
