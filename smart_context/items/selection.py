"""A chat's selection settings: the vault's defaults, the chat's overrides, and the presets.

The vault sets ``context_*`` in ``[plugins.smart_context]`` (docs/contract.md §8); a chat may
override any of them under ``context_settings`` in its file, and a key it does not set inherits the
vault's value, now and after the vault's value changes. Rules and references are selected with
``context_top_k``/``top_n``/``include_score``, tools with the ``context_tools_`` ones: a
message that needs two tools should not lose a rule to them, or the other way round.

The presets are names for three points on one scale, applied to
documents and tools alike (an explicit key given with a preset wins):

============  =====  =====  =============
preset        top_k  top_n  include_score
============  =====  =====  =============
aggressive    30     8      0.6
normal        20     5      0.7
conservative  10     3      0.8
============  =====  =====  =============
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from smart_context.config import SELECTION_CHECKS, Settings
from smart_context.errors import ConfigError, SmartContextError
from smart_context.items.select import TOOL_FLOOR, Limits

log = logging.getLogger(__name__)

SETTINGS_KEY = "context_settings"  # on the chat file
PRESET_KEY = "preset"
PRESETS: dict[str, dict[str, Any]] = {
    "aggressive": {"top_k": 30, "top_n": 8, "include_score": 0.6},
    "normal": {"top_k": 20, "top_n": 5, "include_score": 0.7},
    "conservative": {"top_k": 10, "top_n": 3, "include_score": 0.8},
}
KEYS = tuple(SELECTION_CHECKS)


class BadSelectionSettings(SmartContextError):
    """Session settings that cannot be used; the message names the key."""


def vault_defaults(settings: Settings) -> dict[str, Any]:
    """The selection settings the vault sets (or the built-in defaults); read by name on every
    request (``dataclasses.asdict`` copied every setting, lists and all, for a few keys)."""
    return {key: getattr(settings, key) for key in KEYS}


def preset_values(name: str) -> dict[str, Any]:
    """The ``context_*`` keys a preset sets, for documents and tools."""
    preset = PRESETS[name]
    out: dict[str, Any] = {}
    for field, value in preset.items():
        out[f"context_{field}"] = value
        out[f"context_tools_{field}"] = value
    return out


def preset_of(values: Mapping[str, Any]) -> str:
    """The preset ``values`` match, or ``"custom"``."""
    for name in PRESETS:
        if all(values.get(k) == v for k, v in preset_values(name).items()):
            return name
    return "custom"


def checked_overrides(changes: Any, current: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The chat's overrides after ``changes``: ``preset`` sets its keys, a key set to ``None``
    goes back to the vault's value, any other key is checked like the vault's setting.

    Raises :class:`BadSelectionSettings` naming the first bad key.
    """
    if not isinstance(changes, Mapping):
        raise BadSelectionSettings("settings must be an object of setting names and values.")
    out = dict(current or {})
    changes = dict(changes)
    preset = changes.pop(PRESET_KEY, None)
    if preset is not None:
        if preset not in PRESETS:
            raise BadSelectionSettings(
                f"preset must be one of {', '.join(PRESETS)}, not {str(preset)[:40]!r}."
            )
        out.update(preset_values(preset))
    for key, value in changes.items():
        if key not in SELECTION_CHECKS:
            raise BadSelectionSettings(
                f"{str(key)[:60]!r} is not a selection setting; the settings are "
                + ", ".join(KEYS)
                + f" and {PRESET_KEY}."
            )
        if value is None:
            out.pop(key, None)
            continue
        try:
            out[key] = SELECTION_CHECKS[key](key, value)
        except ConfigError as exc:
            problem = str(exc).rsplit(": ", 1)[-1]
            shown = repr(value)[:80]
            raise BadSelectionSettings(f"{key} = {shown} is not valid: {problem}") from None
    return out


def stored_overrides(raw: Any) -> dict[str, Any]:
    """The chat file's ``context_settings`` with anything unusable left out (and logged): a
    hand-edited file must not cost the chat its replies."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        log.warning("Ignoring context_settings: not an object")
        return {}
    out = {}
    for key, value in raw.items():
        if key == PRESET_KEY:  # never stored: a preset is written as its values
            continue
        try:
            out.update(checked_overrides({key: value}))
        except BadSelectionSettings as exc:
            log.warning("Ignoring a chat's selection setting: %s", exc)
    return out


def effective(settings: Settings, overrides: Mapping[str, Any]) -> dict[str, Any]:
    """The settings a chat's requests use: the vault's, then the chat's overrides."""
    return vault_defaults(settings) | dict(overrides)


def chat_limits(settings: Settings, stored: Any) -> tuple[Limits, Limits]:
    """The limits of a chat's requests, for documents and for tools: the vault's settings under
    the chat's ``context_settings`` as stored (``None``: none)."""
    values = effective(settings, stored_overrides(stored))
    return document_limits(values), tool_limits(values)


def document_limits(values: Mapping[str, Any]) -> Limits:
    """How many rules and references agent selection may add."""
    return _limits(values, "context_")


def tool_limits(values: Mapping[str, Any]) -> Limits:
    """How many tools agent selection may add; a tool needs less than a document to be
    added (:data:`~smart_context.items.select.TOOL_FLOOR`)."""
    return replace(_limits(values, "context_tools_"), absolute_floor=TOOL_FLOOR)


def _limits(values: Mapping[str, Any], prefix: str) -> Limits:
    return Limits(
        top_k=int(values[f"{prefix}top_k"]),
        top_n=int(values[f"{prefix}top_n"]),
        include_score=float(values[f"{prefix}include_score"]),
        # expansion follows links between items of one kind: documents, or tools
        expansion_depth=int(values["context_expansion_depth"]),
        expansion_threshold=float(values["context_expansion_threshold"]),
        expansion_top_n=int(values["context_expansion_top_n"]),
    )
