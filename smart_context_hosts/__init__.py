"""The hosts of Smart Context: the layer above the plugin core that runs it for people.

- :mod:`.sidecar` the reference sidecar (``smart-context serve``): a pluggy host and a web chat;
- :mod:`.tailor` the adapter that runs the plugin inside the Tailor desktop app;
- :mod:`.install` ``smart-context install-tailor``, which puts that adapter into a Tailor vault;
- :mod:`.example_mcp` the example vault's MCP server (``smart-context-example-mcp``);
- :mod:`.cli` the ``smart-context`` command line, with its file-only reports in
  :mod:`.cli_reports`.

Each is a user of :mod:`smart_context`, reaching the plugin through its hooks, commands and
services; ``smart_context`` never imports this package. Importing it does no work.
"""

from __future__ import annotations
