"""Plugin loading (entry points, ``enabled = false``, misspelt hooks) and safe hook calls."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import pytest

from smart_context.hookspecs import hookimpl
from smart_context_hosts.sidecar.config import VaultConfig
from smart_context_hosts.sidecar.plugins import (
    PluginReport,
    call_hook,
    disable_plugins,
    get_plugin_manager,
)
from tests.sidecar.conftest import manager_with, write_settings


class Sync:
    @hookimpl
    def pipeline_input(self, ctx: Any) -> str:
        ctx.append("sync")
        return "sync"


class Async:
    @hookimpl
    async def pipeline_input(self, ctx: Any) -> str:
        ctx.append("async")
        return "async"


class AsyncBroken:
    @hookimpl
    async def pipeline_input(self, ctx: Any) -> None:
        raise RuntimeError("async plugin bug")


class SyncBroken:
    @hookimpl
    def pipeline_input(self, ctx: Any) -> None:
        raise RuntimeError("sync plugin bug")


class Misspelt:
    @hookimpl
    def pipeline_inptu(self, ctx: Any) -> None:
        """A typo pluggy catches in check_pending."""


class Slow:
    def __init__(self, name: str) -> None:
        self.name = name

    @hookimpl
    async def pipeline_input(self, ctx: Any) -> str:
        ctx.append(f"start {self.name}")
        await asyncio.sleep(0.01)
        ctx.append(f"end {self.name}")
        return self.name


async def test_results_are_awaited_one_after_the_other_in_call_order() -> None:
    pm = manager_with(Slow("a"), Sync(), Slow("b"))  # pluggy calls the last registered first
    order: list[str] = []
    assert await call_hook(pm, "pipeline_input", ctx=order) == ["b", "sync", "a"]
    # plain functions run during the call; coroutines are awaited in order, never overlapping
    assert order == ["sync", "start b", "end b", "start a", "end a"]


async def test_a_raising_async_plugin_does_not_stop_the_others(
    caplog: pytest.LogCaptureFixture,
) -> None:
    pm = manager_with(Sync(), AsyncBroken(), Async())
    order: list[str] = []
    with caplog.at_level(logging.ERROR):
        results = await call_hook(pm, "pipeline_input", ctx=order)
    assert results == ["async", "sync"]
    assert "async plugin bug" in caplog.text and "pipeline_input" in caplog.text


async def test_a_raising_plain_plugin_is_logged_not_raised(
    caplog: pytest.LogCaptureFixture,
) -> None:
    pm = manager_with(Sync(), SyncBroken())
    with caplog.at_level(logging.ERROR):
        assert await call_hook(pm, "pipeline_input", ctx=[]) == []
    assert "sync plugin bug" in caplog.text


def test_check_pending_drops_a_plugin_with_a_misspelt_hook() -> None:
    pm, report = get_plugin_manager(None, load_entrypoints=False), PluginReport()
    good, bad = Sync(), Misspelt()
    pm.register(good, name="good")
    pm.register(bad, name="bad")
    from smart_context_hosts.sidecar.plugins import check_plugins

    check_plugins(pm, report)
    assert pm.is_registered(good) and not pm.is_registered(bad)
    assert "bad" in report.errors[0] and "pipeline_inptu" in report.errors[0]


def test_enabled_false_unregisters_and_blocks(vault: Path) -> None:
    write_settings(vault, "[plugins.first]\nenabled = false\n[plugins.second]\nenabled = true\n")
    pm, report = get_plugin_manager(None, load_entrypoints=False), PluginReport()
    first, second = Sync(), Async()
    pm.register(first, name="first")
    pm.register(second, name="second")
    disable_plugins(pm, VaultConfig(vault), report)
    assert not pm.is_registered(first) and pm.is_registered(second)
    assert report.disabled == ["first"]


def test_entry_points_load_the_installed_plugin(vault: Path) -> None:
    report = PluginReport()
    pm = get_plugin_manager(VaultConfig(vault), report=report)
    assert "smart_context" in report.loaded and report.errors == []
    assert pm.get_plugin("smart_context") is not None
    assert get_plugin_manager().get_plugin("smart_context") is not None
    write_settings(vault, "[plugins.smart_context]\nenabled = false\n")
    report = PluginReport()
    pm = get_plugin_manager(vault, report=report)
    assert pm.get_plugin("smart_context") is None
    assert pm.is_blocked("smart_context") and report.disabled == ["smart_context"]
