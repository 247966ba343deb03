"""The reference sidecar: a small host that loads pluggy plugins and serves a local web chat.

It is a *user* of the Smart Context plugin, found through the ``sidecar`` entry point group like
in any other host; the plugin never imports this package. The pieces, one job per module:

- :mod:`.config` reads ``.vault.toml`` (the ``[llm]`` table and the plugin tables);
- :mod:`.memory` keeps chats in ``.memory/{chat_id}.json`` (atomic, locked writes);
- :mod:`.llm` talks to an OpenAI-compatible endpoint, or the local embedding model;
- :mod:`.events` fans ``host.emit`` out to the browsers' event streams;
- :mod:`.plugins` builds the plugin manager and calls hooks safely;
- :mod:`.host` is the services object plugins receive, plus the commands and UI collectors;
- :mod:`.pipeline` runs one user message through the phases;
- :mod:`.tools` runs the model's tool calls between its turns; :mod:`.tool_approvals` holds
  the calls waiting for the user's yes or no;
- :mod:`.runtime` ties them together; :mod:`.app` is the HTTP API;
- :mod:`.connections` drops clients too slow to ask and bounds how many connect;
  :mod:`.serve` runs it all.

Importing this package does no work and imports no web framework.
"""

from __future__ import annotations
