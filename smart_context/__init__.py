"""Smart Context: decides what goes into an LLM's context window on every chat request.

The plugin is found by any pluggy-based sidecar through the ``sidecar`` entry point group;
``smart_context.hookspecs`` is the host contract. Importing this package does no work.
"""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
