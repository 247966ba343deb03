"""Smart Context inside the Tailor desktop app (github AGS-Lab/tailor): an adapter from Tailor's
plugin API (``PluginBase``, ``VaultBrain``'s commands and events, its memory plugin and LLM
service) to our host contract. The entry point is
:func:`smart_context_hosts.tailor.adapter.make_plugin_class`.
"""
