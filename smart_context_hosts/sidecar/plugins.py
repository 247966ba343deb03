"""Finding plugins and calling their hooks, the way any pluggy-based sidecar does.

Plugins come from the ``sidecar`` entry point group; ``[plugins.NAME] enabled = false`` in
``.vault.toml`` keeps one out. Hooks are called with keyword arguments and every awaitable
result is awaited in pluggy's call order. A plugin that fails to load, or raises from a hook,
is logged and the sidecar carries on: one broken plugin must not cost the user a message.
"""

from __future__ import annotations

import inspect
import logging
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import pluggy

import smart_context.hookspecs
from smart_context.hookspecs import PROJECT
from smart_context_hosts.sidecar.config import VaultConfig

ENTRY_POINT_GROUP = "sidecar"

log = logging.getLogger(__name__)


@dataclass
class PluginReport:
    """What happened while loading plugins, for the log and the page."""

    loaded: list[str] = field(default_factory=list)
    disabled: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def get_plugin_manager(
    vault: VaultConfig | Path | None = None,
    *,
    load_entrypoints: bool = True,
    report: PluginReport | None = None,
) -> pluggy.PluginManager:
    """A new plugin manager with our hookspecs and the installed, enabled plugins.

    ``vault`` (its folder or its read settings) decides which plugins are off; ``None`` keeps
    every installed plugin. ``load_entrypoints=False`` gives a manager with no plugins, for a
    host that registers its own. ``report``, when given, is filled with what was loaded,
    disabled, or refused and why.
    """
    config = VaultConfig(vault) if isinstance(vault, Path) else vault
    report = report if report is not None else PluginReport()
    pm = pluggy.PluginManager(PROJECT)
    pm.add_hookspecs(smart_context.hookspecs)
    if load_entrypoints:
        _load_entrypoints(pm, config, report)
    disable_plugins(pm, config, report)
    check_plugins(pm, report)
    report.loaded = [name for name, _ in pm.list_name_plugin() if name is not None]
    return pm


def _load_entrypoints(
    pm: pluggy.PluginManager, config: VaultConfig | None, report: PluginReport
) -> None:
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if config is not None and not config.plugin_enabled(ep.name):
            # Blocked before loading, so a disabled plugin is never even imported.
            pm.set_blocked(ep.name)
            report.disabled.append(ep.name)
            continue
        try:
            pm.load_setuptools_entrypoints(ENTRY_POINT_GROUP, name=ep.name)
        except Exception as exc:  # any import or validation error of third-party code
            log.exception("Plugin %r could not be loaded; continuing without it.", ep.name)
            report.errors.append(f"Plugin {ep.name!r} could not be loaded: {exc}")


def disable_plugins(
    pm: pluggy.PluginManager, config: VaultConfig | None, report: PluginReport
) -> None:
    """Unregister the registered plugins the vault turns off (``enabled = false``)."""
    if config is None:
        return
    for name, plugin in list(pm.list_name_plugin()):
        if name is not None and plugin is not None and not config.plugin_enabled(name):
            pm.unregister(plugin)
            report.disabled.append(name)


def check_plugins(pm: pluggy.PluginManager, report: PluginReport) -> None:
    """``check_pending()``; a plugin with a misspelt hook is dropped and reported."""
    while True:
        try:
            pm.check_pending()
            return
        except pluggy.PluginValidationError as exc:
            name = pm.get_name(exc.plugin) or repr(exc.plugin)
            log.error("Plugin %r was not loaded: %s", name, exc)
            report.errors.append(f"Plugin {name!r} was not loaded: {exc}")
            pm.unregister(exc.plugin)


async def call_hook(pm: pluggy.PluginManager, hook_name: str, **kwargs: Any) -> list[Any]:
    """Call ``hook_name`` with ``kwargs``, await each awaitable result in order, return results.

    An exception from a plugin is logged, never raised: the results gathered so far come back
    and the caller carries on. (pluggy skips the remaining plain-function implementations of a
    hook once one raises; coroutine implementations each fail on their own.)
    """
    hook = getattr(pm.hook, hook_name)
    try:
        results = hook(**kwargs)
    except Exception:  # third-party code: logged with its traceback, never passed on
        log.exception("A plugin failed in hook %s; continuing.", hook_name)
        return []
    resolved: list[Any] = []
    for result in results:
        if inspect.isawaitable(result):
            try:
                result = await result
            except Exception:  # third-party code: logged with its traceback, never passed on
                log.exception("A plugin failed in hook %s; continuing.", hook_name)
                continue
        resolved.append(result)
    return resolved
