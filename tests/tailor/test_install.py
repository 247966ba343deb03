"""``smart-context install-tailor VAULT``: run through the command line on vaults shaped like
Tailor's, and the generated main.py loaded the way Tailor loads plugins (stand-ins of Tailor's
plugin base and loader in ``install_standin``)."""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import io
import json
import os
import shlex
import stat
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import smart_context
from smart_context.errors import SmartContextError
from smart_context_hosts.cli import main
from smart_context_hosts.install.tailor import InstallError, install, run_install
from smart_context_hosts.install.tailor_files import MARKER, pip_target
from tests.tailor.install_standin import (
    TAILOR_SMART_CONTEXT,
    VAULT_TOML,
    BlockAdapter,
    forget_modules,
    load_module,
    load_plugins,
    make_vault,
    write_sidecar_standin,
)


@pytest.fixture
def standin_sidecar(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    """Tailor's ``sidecar.api.plugin_base`` importable, as in Tailor's sidecar process."""
    write_sidecar_standin(tmp_path / "tailor")
    monkeypatch.syspath_prepend(str(tmp_path / "tailor"))
    forget_modules(["sidecar"])
    yield importlib.import_module("sidecar.api.plugin_base")
    forget_modules(["sidecar"])


@pytest.fixture
def no_adapter(monkeypatch: pytest.MonkeyPatch) -> None:
    """A Python where ``smart_context_hosts.tailor`` cannot be imported."""
    for name in [n for n in sys.modules if n.startswith("smart_context_hosts.tailor")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setattr(sys, "meta_path", [BlockAdapter(), *sys.meta_path])


def run(vault: Path, *extra: str) -> int:
    return main(["install-tailor", str(vault), *extra])


def folder_contents(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def hidden_folders(vault: Path) -> list[Path]:
    return sorted(p for p in (vault / "plugins").iterdir() if p.name.startswith("."))


def test_fresh_install_writes_the_plugin_and_enables_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], standin_sidecar: ModuleType
) -> None:
    vault = make_vault(tmp_path)
    assert run(vault) == 0
    folder = vault / "plugins" / "smart_context"
    manifest = json.loads((folder / "plugin.json").read_text())
    assert manifest["name"] == "smart-context"
    assert manifest["version"] == smart_context.__version__
    assert manifest["main"] == "main.py" and manifest["description"]
    main_py = (folder / "main.py").read_text()
    assert main_py.startswith(f"{MARKER} {smart_context.__version__}")
    assert "smart-context install-tailor VAULT" in main_py.splitlines()[1]
    # the file as it was, our table added after it
    text = (vault / ".vault.toml").read_text()
    assert text == VAULT_TOML + "\n[plugins.smart_context]\nenabled = true\n"
    assert hidden_folders(vault) == []
    out = capsys.readouterr().out
    assert f"pip install {shlex.quote(pip_target())}" in out
    assert 'import smart_context_hosts; print(smart_context_hosts.__file__)"' in out
    assert "Moved" not in out
    assert set(load_plugins(vault)) == {"explorer", "memory", "smart_context"}


def test_tailors_own_plugin_is_moved_aside_intact_and_never_loaded(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    standin_sidecar: ModuleType,
    no_adapter: None,
) -> None:
    toml = VAULT_TOML + (
        "\n[plugins.smart_context]\nenabled = true\nsimilarity_threshold = 0.4\n"
        "embedding_search = true\n"
    )
    vault = make_vault(tmp_path, toml, tailor_plugin=True)
    assert run(vault) == 0
    [aside] = hidden_folders(vault)
    assert aside.name.startswith(".smart_context.replaced-")
    assert folder_contents(aside) == {
        k: v.encode() for k, v in sorted(TAILOR_SMART_CONTEXT.items())
    }
    out = capsys.readouterr().out
    assert str(aside) in out
    assert "Kept your settings there: similarity_threshold, embedding_search." in out
    # the old keys mean the same to us; Tailor's loader takes our main.py, not the moved one
    assert (vault / ".vault.toml").read_text() == toml
    plugins = load_plugins(vault)
    assert plugins["smart_context"].config == {
        "enabled": True,
        "similarity_threshold": 0.4,
        "embedding_search": True,
    }


def test_a_second_run_rewrites_our_folder_and_changes_nothing_else(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    vault = make_vault(tmp_path, tailor_plugin=True)
    assert run(vault) == 0
    folder = vault / "plugins" / "smart_context"
    first = folder_contents(folder)
    toml = (vault / ".vault.toml").read_bytes()
    asides = hidden_folders(vault)
    capsys.readouterr()
    assert run(vault) == 0
    assert folder_contents(folder) == first
    assert (vault / ".vault.toml").read_bytes() == toml
    assert hidden_folders(vault) == asides  # nothing more moved aside
    out = capsys.readouterr().out
    assert "our own folder from an earlier install" in out
    assert "the file is unchanged" in out


def test_files_get_ordinary_permissions_and_vault_toml_keeps_its_own(tmp_path: Path) -> None:
    vault = make_vault(tmp_path)
    (vault / ".vault.toml").chmod(0o640)
    assert run(vault) == 0
    assert stat.S_IMODE((vault / ".vault.toml").stat().st_mode) == 0o640
    umask = os.umask(0o022)
    os.umask(umask)
    for name in ("main.py", "plugin.json"):
        path = vault / "plugins" / "smart_context" / name
        assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~umask


def test_tailor_option_names_the_checkouts_exact_python(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    python = tmp_path / "tailor" / ".pixi" / "envs" / "default" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text("")
    assert run(make_vault(tmp_path), "--tailor", str(tmp_path / "tailor")) == 0
    out = capsys.readouterr().out
    assert f"Tailor's sidecar runs in {python}." in out
    assert f"    {python} -m pip install {shlex.quote(pip_target())}" in out
    assert (
        f'    {python} -c "import smart_context_hosts; print(smart_context_hosts.__file__)"' in out
    )


def test_a_tailor_folder_that_is_not_there_is_refused_before_the_vault_is_touched(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    vault = make_vault(tmp_path)
    before = sorted(p.relative_to(vault) for p in vault.rglob("*"))
    assert run(vault, "--tailor", str(tmp_path / "no" / "such" / "dir")) == 2
    assert "no such folder" in capsys.readouterr().err
    assert sorted(p.relative_to(vault) for p in vault.rglob("*")) == before


COMMENTED = """# My vault. Edited by hand; keep my notes.
name = "Notes"   # shown in the title bar

[plugins.smart_context]   # context, from Tailor
# switched off while I try things
enabled = false  # off for now
similarity_threshold = 0.35   # tuned on my chats

[plugins.memory]
enabled = true   # Tailor's chat storage

[llm.categories]
embedding = "nomic-embed-text"   # Tailor's embedding model

# a trailing note
"""


def test_comments_and_layout_are_kept_byte_for_byte(tmp_path: Path) -> None:
    vault = make_vault(tmp_path, COMMENTED)
    assert run(vault) == 0
    after = (vault / ".vault.toml").read_text()
    before_lines, after_lines = COMMENTED.splitlines(), after.splitlines()
    assert len(after_lines) == len(before_lines)
    changed = [(b, a) for b, a in zip(before_lines, after_lines, strict=True) if a != b]
    assert changed == [("enabled = false  # off for now", "enabled = true  # off for now")]


@pytest.mark.parametrize(
    "toml",
    [
        'name = "v"\nplugins = { smart_context = { enabled = false }, memory = {} }\n',
        'name = "v"\nplugins.smart_context.enabled = false\nplugins.memory.enabled = true\n',
        'name = "v"\nplugins.memory.enabled = true\n',
        'name = "v"\n\n[plugins]\nenabled = []\n',
    ],
    ids=["inline", "dotted", "dotted-without-ours", "legacy-list"],
)
def test_other_shapes_of_the_plugins_table(tmp_path: Path, toml: str) -> None:
    vault = make_vault(tmp_path, toml)
    assert run(vault) == 0
    before = tomllib.loads(toml)
    after = tomllib.loads((vault / ".vault.toml").read_text())
    # no embedding model in Tailor: our local one
    assert after["plugins"].pop("smart_context") == {"enabled": True, "embedder": "local"}
    assert after["plugins"]["memory"]["enabled"] is True  # our chats go through it
    before["plugins"].pop("smart_context", None)
    before["plugins"].setdefault("memory", {})["enabled"] = True
    assert after == before


def test_tailors_memory_plugin_is_enabled_when_off_and_said(tmp_path: Path) -> None:
    toml = 'name = "v"\n\n[plugins.memory]\nenabled = false  # why not\nkeep = 3\n'
    vault = make_vault(tmp_path, toml)
    out = io.StringIO()
    assert run_install(vault, False, None, out) == 0
    text = (vault / ".vault.toml").read_text()
    assert "enabled = true  # why not\nkeep = 3" in text
    assert tomllib.loads(text)["plugins"]["memory"] == {"enabled": True, "keep": 3}
    assert "Also enabled [plugins.memory]" in out.getvalue()
    out = io.StringIO()
    assert run_install(vault, False, None, out) == 0  # a second run: already on, not said again
    assert "Also enabled" not in out.getvalue()


@pytest.mark.parametrize(
    ("toml", "expected"),
    [
        ('name = "v"\n[plugins\nx = 1\n', "line 2"),
        ('name = "v"\nname = "w"\n', "line 2"),
        ('name = "v"\nplugins = ["memory"]\n', "is not a table"),
        ("[plugins]\nsmart_context = true\n", "is not a table"),
    ],
    ids=["syntax", "duplicate-key", "plugins-list", "our-key-not-table"],
)
def test_a_bad_vault_toml_is_refused_untouched(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], toml: str, expected: str
) -> None:
    vault = make_vault(tmp_path, toml, tailor_plugin=True)
    before = folder_contents(vault / "plugins" / "smart_context")
    assert run(vault) == 2
    err = capsys.readouterr().err
    assert expected in err and "Nothing was changed" in err
    assert (vault / ".vault.toml").read_text() == toml
    assert folder_contents(vault / "plugins" / "smart_context") == before
    assert hidden_folders(vault) == []


def test_a_folder_that_is_not_a_tailor_vault_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "a.md").write_text("hello")
    assert run(folder) == 2
    assert "is not a Tailor vault: it has no .vault.toml" in capsys.readouterr().err
    assert sorted(p.name for p in folder.iterdir()) == ["a.md"]
    assert run(tmp_path / "missing") == 2
    assert "is not a folder" in capsys.readouterr().err
    assert not (tmp_path / "missing").exists()


def test_a_setting_we_would_refuse_stops_the_install_unless_forced(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    toml = 'name = "v"\n\n[plugins.smart_context]\nenabled = true\nmax_topics = 8\n'
    vault = make_vault(tmp_path, toml)
    assert run(vault) == 2
    err = capsys.readouterr().err
    assert "max_topics = 8" in err and "--force" in err
    assert err.count(".vault.toml") == 1  # the file is named once, with its path
    assert (vault / ".vault.toml").read_text() == toml
    assert not (vault / "plugins" / "smart_context").exists()
    assert run(vault, "--force") == 0
    after = (vault / ".vault.toml").read_text()
    assert "# max_topics = 8  (commented out by smart-context install-tailor)" in after
    assert tomllib.loads(after)["plugins"]["smart_context"] == {
        "enabled": True,
        "embedder": "local",
    }
    assert "Commented out max_topics" in capsys.readouterr().out


def test_a_vault_without_an_embedding_model_gets_the_local_one_and_is_told(
    tmp_path: Path,
) -> None:
    toml = 'name = "v"\n\n[llm.categories]\nfast = "gpt-4o-mini"\n\n[plugins.smart_context]\n'
    vault = make_vault(tmp_path, toml)
    out = io.StringIO()
    assert run_install(vault, False, None, out) == 0
    text = (vault / ".vault.toml").read_text()
    assert 'embedder = "local" # no embedding model in [llm.categories]' in text
    assert tomllib.loads(text)["plugins"]["smart_context"]["embedder"] == "local"
    assert 'Set embedder = "local"' in out.getvalue()
    assert "[local]" in pip_target()  # and the line to install says to bring the model
    # a choice the user made, or a model Tailor has, is left alone
    for table in (
        '[plugins.smart_context]\nembedder = "host"\n',
        '[llm.categories]\nembedding = "e"\n',
    ):
        vault = make_vault(tmp_path / table[:5].strip("[."), 'name = "v"\n\n' + table)
        out = io.StringIO()
        assert run_install(vault, False, None, out) == 0
        after = tomllib.loads((vault / ".vault.toml").read_text())
        assert after["plugins"]["smart_context"].get("embedder") in (None, "host")
        assert "Set embedder" not in out.getvalue()


def test_a_failure_midway_puts_the_vault_back(tmp_path: Path) -> None:
    """The last write (.vault.toml) fails after Tailor's folder was moved aside and ours put in
    its place: both moves are undone."""
    vault = make_vault(tmp_path, tailor_plugin=True)
    from smart_context.atomic import write_atomic

    def write(path: Path, text: str) -> None:
        if path.name == ".vault.toml":
            raise OSError(28, "No space left on device")
        write_atomic(path, text)

    with pytest.raises(InstallError, match=r"No space left.*put back as it was"):
        install(vault, write=write)
    assert folder_contents(vault / "plugins" / "smart_context") == {
        k: v.encode() for k, v in sorted(TAILOR_SMART_CONTEXT.items())
    }
    assert hidden_folders(vault) == []
    assert (vault / ".vault.toml").read_text() == VAULT_TOML


def test_leftovers_of_an_interrupted_install_are_removed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], standin_sidecar: ModuleType
) -> None:
    vault = make_vault(tmp_path)
    left = vault / "plugins" / ".smart_context.installing-20250101-000000"
    left.mkdir()
    (left / "main.py").write_text(f"{MARKER} 0.0.1\n")
    assert run(vault) == 0
    assert not left.exists()
    assert f"Removed {left}" in capsys.readouterr().out


def _instantiate(module: ModuleType, vault: Path) -> Any:
    folder = vault / "plugins" / "smart_context"
    return module.Plugin(plugin_dir=folder, vault_path=vault, config={"enabled": True})


def test_generated_main_falls_back_clearly_without_our_package(
    tmp_path: Path, standin_sidecar: ModuleType, no_adapter: None
) -> None:
    vault = make_vault(tmp_path)
    assert run(vault) == 0
    module = load_module("smart_context", vault / "plugins" / "smart_context" / "main.py")
    assert issubclass(module.Plugin, standin_sidecar.PluginBase)
    plugin = _instantiate(module, vault)
    plugin.register_commands()
    asyncio.run(plugin.on_load())
    [(level, message)] = plugin.logger.lines
    assert level == "error"
    assert (
        f"({sys.executable})" in message
        and "No module named 'smart_context_hosts.tailor" in message
    )
    assert f"{sys.executable} -m pip install '{pip_target()}'" in message
    asyncio.run(plugin.on_client_connected())
    asyncio.run(plugin.on_client_connected())  # a window reload: told once
    assert plugin.notices == [("error", message)]


def test_generated_main_uses_the_adapter_when_importable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, standin_sidecar: ModuleType
) -> None:
    made: list[type] = []

    def make_plugin_class(base: type) -> type:
        made.append(base)
        return type("SmartContextPlugin", (base,), {"register_commands": lambda self: None})

    package = ModuleType("smart_context_hosts.tailor")
    package.__path__ = []
    adapter = ModuleType("smart_context_hosts.tailor.adapter")
    adapter.make_plugin_class = make_plugin_class  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "smart_context_hosts.tailor", package)
    monkeypatch.setitem(sys.modules, "smart_context_hosts.tailor.adapter", adapter)
    vault = make_vault(tmp_path)
    assert run(vault) == 0
    module = load_module("smart_context", vault / "plugins" / "smart_context" / "main.py")
    assert made == [standin_sidecar.PluginBase]
    assert module.Plugin.__name__ == "SmartContextPlugin"
    assert issubclass(module.Plugin, standin_sidecar.PluginBase)
    _instantiate(module, vault).register_commands()


@pytest.mark.skipif(not os.environ.get("TAILOR_SRC"), reason="TAILOR_SRC names no Tailor checkout")
def test_generated_main_loads_against_a_real_tailor_checkout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_adapter: None
) -> None:
    """With TAILOR_SRC pointing at a Tailor checkout: its real PluginBase, our fallback. The
    ``sidecar`` package is entered without its ``__init__`` (which starts importing the whole
    sidecar: websockets, litellm, langgraph), so Tailor's dependencies are not needed here."""
    forget_modules(["sidecar"])
    package = ModuleType("sidecar")
    package.__path__ = [str(Path(os.environ["TAILOR_SRC"]) / "sidecar")]
    monkeypatch.setitem(sys.modules, "sidecar", package)
    try:
        base = importlib.import_module("sidecar.api.plugin_base").PluginBase

        vault = make_vault(tmp_path)
        assert run(vault) == 0
        module = load_module("smart_context", vault / "plugins" / "smart_context" / "main.py")
        assert issubclass(module.Plugin, base)
        assert not module.Plugin.__abstractmethods__
        if importlib.util.find_spec("loguru") is not None:  # PluginBase() logs through loguru
            _instantiate(module, vault).register_commands()
    finally:
        forget_modules(["sidecar"])


def test_install_refusals_are_smart_context_errors(tmp_path: Path) -> None:
    with pytest.raises(SmartContextError):
        install(tmp_path)
