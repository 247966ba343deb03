"""Whose vault a request works on: the one vault a proxy serves, or, for a team, one vault per
person in a folder (``smart-context proxy --vaults DIR``).

A person is named by the key's owner (``--key-owners FILE``: the SHA-256 of each key, hex, and
its owner's name, so the file holds no key; then nothing else names anyone), or by a header a
trusted client sets (``--user-header``, Open WebUI's ``X-OpenWebUI-User-Id``: anyone who can
reach the proxy can claim any name with it). Each person's vault is
``DIR/{name}/``, made on their first request (with a copy of ``DIR/.vault.toml`` when there is
one), with a Smart Context of its own: nothing is shared between two people but the process
and the local model's weights. A name that is not a plain id becomes ``h-`` and a hash, never
a path.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from smart_context.errors import SmartContextError
from smart_context.plugin import SmartContextPlugin
from smart_context_hosts.proxy.identity import safe_chat_id
from smart_context_hosts.proxy.relay import Relay
from smart_context_hosts.sidecar.config import VaultConfig
from smart_context_hosts.sidecar.plugins import get_plugin_manager
from smart_context_hosts.sidecar.runtime import Sidecar

SETTINGS = ".vault.toml"
MAX_PEOPLE = 200  # vaults one process starts: each holds its own caches and background work


@dataclass(frozen=True)
class Vault:
    """One vault's host and its chat turns (``name``: the person's, or empty)."""

    name: str
    relay: Relay

    @property
    def sidecar(self) -> Sidecar:
        return self.relay.sidecar


def vault_of(name: str, sidecar: Sidecar) -> Vault:
    return Vault(name, Relay(sidecar))


class Vaults(Protocol):
    """Which vault a request works on: a :class:`Vault`, or why none (the request then passes
    untouched)."""

    async def of(self, headers: Mapping[str, str]) -> Vault | str: ...

    def running(self, headers: Mapping[str, str]) -> Vault | None:
        """The vault a request works on if it has started already (nothing is started)."""
        ...

    async def close(self) -> None: ...


class OneVault:
    """Every request works on one vault (started and stopped by its app's lifespan)."""

    def __init__(self, sidecar: Sidecar) -> None:
        self.vault = vault_of("", sidecar)

    async def of(self, headers: Mapping[str, str]) -> Vault | str:
        return self.vault

    def running(self, headers: Mapping[str, str]) -> Vault | None:
        return self.vault

    async def close(self) -> None:
        await self.vault.relay.settle()


class KeyOwnersError(SmartContextError):
    """The key owners file cannot be used; the message says why."""


def read_key_owners(path: Path) -> dict[str, str]:
    """``{"<sha256 of a key, hex>": "<owner>"}`` from a JSON file."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise KeyOwnersError(f"Cannot read the key owners file {path}: {exc}") from exc
    if not isinstance(data, dict) or not all(
        isinstance(k, str) and isinstance(v, str) and len(k) == 64 for k, v in data.items()
    ):
        raise KeyOwnersError(
            f"{path} must be a JSON object of SHA-256 hex digests of keys to owners' names, "
            'e.g. {"9f86d0...": "ana"} (python -c "import hashlib; '
            "print(hashlib.sha256(b'sk-...').hexdigest())\")"
        )
    return {k.lower(): v for k, v in data.items()}


class People:
    """A vault per person under ``root``, each started on its first request."""

    def __init__(
        self, root: Path, user_header: str | None, key_owners: Mapping[str, str] | None = None
    ) -> None:
        self.root = root
        self.user_header = user_header.lower() if user_header else None
        self.key_owners = dict(key_owners or {})
        self._vaults: dict[str, Vault] = {}
        self._starting = asyncio.Lock()  # a vault is started once (rare: one lock will do)

    def who(self, headers: Mapping[str, str]) -> str | None:
        """The person a request comes from, as a folder name; ``None`` when it does not say.
        With key owners, only a listed key names someone: a header could claim anyone."""
        if self.key_owners:
            key = headers.get("authorization", "")
            if not key.lower().startswith("bearer "):
                return None
            digest = hashlib.sha256(key[7:].strip().encode("utf-8")).hexdigest()
            owner = self.key_owners.get(digest)
            return None if owner is None else safe_chat_id(owner)
        if self.user_header:
            named = headers.get(self.user_header, "").strip()
            if named:
                return safe_chat_id(named)
        return None

    def running(self, headers: Mapping[str, str]) -> Vault | None:
        person = self.who(headers)
        return None if person is None else self._vaults.get(person)

    async def of(self, headers: Mapping[str, str]) -> Vault | str:
        person = self.who(headers)
        if person is None:
            told = (
                "a key listed in --key-owners"
                if self.key_owners
                else f"the header {self.user_header}"
            )
            return f"no user: send {told}"
        found = self._vaults.get(person)
        if found is not None:
            return found
        async with self._starting:
            if person not in self._vaults:
                if len(self._vaults) >= MAX_PEOPLE:
                    return f"this proxy already serves {MAX_PEOPLE} people"
                vault = await asyncio.to_thread(self._make, person)
                await vault.sidecar.start()  # used by no request before it has started
                self._vaults[person] = vault
        return self._vaults[person]

    def _make(self, person: str) -> Vault:
        folder = self.root / person
        (folder / ".memory").mkdir(parents=True, exist_ok=True)
        template = self.root / SETTINGS
        if template.is_file() and not (folder / SETTINGS).exists():
            shutil.copyfile(template, folder / SETTINGS)
        config = VaultConfig(folder)
        manager = get_plugin_manager(config, load_entrypoints=False)
        # its own plugin: the entry point's is one per process, and would be everyone's
        manager.register(SmartContextPlugin(), name="smart_context")
        return vault_of(person, Sidecar(folder, plugin_manager=manager))

    async def close(self) -> None:
        for vault in self._vaults.values():
            await vault.relay.settle()
            await vault.sidecar.stop()
        self._vaults.clear()
