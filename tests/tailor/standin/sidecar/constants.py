"""The few constants of Tailor's sidecar the stand-in needs."""

PLUGIN_CLASS_NAME = "Plugin"
UI_COMMAND = "UI_COMMAND"
NOTIFY = "NOTIFY"
SCOPE_WINDOW = "window"
