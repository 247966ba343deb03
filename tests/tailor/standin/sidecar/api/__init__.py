from sidecar.api.plugin_base import PluginBase

__all__ = ["PluginBase"]
