"""Where the package's non-Python files are: the UI assets, the example vault and settings.

In a wheel they are inside the package (``_static``, ``_data``); in a source checkout or an
editable install they are at the top of the repository, where they are edited.
"""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent


def _first_existing(*candidates: Path) -> Path:
    for path in candidates:
        if path.exists():
            return path
    return candidates[-1]


def static_dir() -> Path:
    """The ``static/`` folder: panel and chat UI assets and templates."""
    return _first_existing(_PACKAGE / "_static", _PACKAGE.parent / "static")


def example_vault_dir() -> Path:
    """The example vault that ``smart-context serve`` copies into a working folder."""
    return _first_existing(_PACKAGE / "_data" / "example-vault", _PACKAGE.parent / "example-vault")


def example_settings_file() -> Path:
    """``vault.example.toml``: every setting, documented."""
    return _first_existing(
        _PACKAGE / "_data" / "vault.example.toml", _PACKAGE.parent / "vault.example.toml"
    )
