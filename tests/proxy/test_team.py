"""One proxy for many people (smart_context_hosts/proxy/vaults.py): a vault each, named by the
key's owner or a header, and nothing crossing between them."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import httpx
import openai
import pytest

from smart_context_hosts.proxy.app import ProxyOptions, create_app, note_of
from smart_context_hosts.proxy.vaults import KeyOwnersError, People, read_key_owners
from tests.openai_server import OpenAIStub
from tests.sidecar.conftest import chat_on_disk, live_server

TEMPLATE = '[plugins.smart_context]\nembedder = "local"\ntopic_extractor = "offline"\n'


async def ask(url: str, key: str, text: str, headers: dict[str, str]) -> tuple[str, str | None]:
    client = openai.AsyncOpenAI(base_url=f"{url}/v1", api_key=key, max_retries=0)
    try:
        raw = await client.chat.completions.with_raw_response.create(
            model="stub-chat",
            messages=[{"role": "user", "content": text}],
            extra_headers={"X-Smart-Context-Chat": "c1", **headers},
        )
    finally:
        await client.close()
    return raw.parse().choices[0].message.content or "", note_of(raw.headers)


async def test_each_person_named_by_a_header_gets_a_vault_of_their_own(
    tmp_path: Path, openai_server: OpenAIStub
) -> None:
    (tmp_path / ".vault.toml").write_text(TEMPLATE, encoding="utf-8")
    people = People(tmp_path, "X-OpenWebUI-User-Id")
    app = create_app(people, ProxyOptions(openai_server.base_url))
    key = openai_server.api_key
    async with live_server(app) as url:
        ana = await ask(
            url, key, "Ana's secret plan for the Kyoto trip", {"X-OpenWebUI-User-Id": "ana"}
        )
        ben = await ask(url, key, "Ben asks about sourdough", {"X-OpenWebUI-User-Id": "ben"})
        again = await ask(url, key, "And the temples?", {"X-OpenWebUI-User-Id": "ben"})
        nobody = await ask(url, key, "Who am I?", {})
        hostile = await ask(url, key, "hi", {"X-OpenWebUI-User-Id": "../../etc"})
        await app.state.proxy.settle()
    assert ana[1] and ana[1].startswith("sent") and ben[1] and ben[1].startswith("sent")
    assert (
        nobody[0] == "echo: Who am I?"
        and nobody[1] == "off; no user: send the header x-openwebui-user-id"
    )
    assert [m["content"] for m in chat_on_disk(tmp_path / "ana", "c1")["messages"]] == [
        "Ana's secret plan for the Kyoto trip",
        "echo: Ana's secret plan for the Kyoto trip",
    ]
    assert "Ana's secret plan for the Kyoto trip" not in [
        m["content"] for m in chat_on_disk(tmp_path / "ben", "c1")["messages"]
    ]
    bodies = [b for p, b in openai_server.requests if p == "/v1/chat/completions"]
    assert not any("Kyoto" in str(m.get("content")) for m in bodies[2]["messages"])  # Ben's
    assert (tmp_path / "ben" / ".vault.toml").read_text(encoding="utf-8") == TEMPLATE
    others = folders(tmp_path) - {"ana", "ben"}
    assert len(others) == 1 and others.pop().startswith("h-")  # ../../etc, hashed
    assert again[1] and again[1].startswith("sent") and hostile[1] and hostile[1].startswith("sent")


def folders(root: Path) -> set[str]:
    return {p.name for p in root.iterdir() if p.is_dir()}


async def test_with_key_owners_only_a_listed_key_names_anyone(
    tmp_path: Path, openai_server: OpenAIStub
) -> None:
    owners = tmp_path / "owners.json"
    digest = hashlib.sha256(openai_server.api_key.encode()).hexdigest()
    owners.write_text(json.dumps({digest: "ana"}), encoding="utf-8")
    vaults = tmp_path / "vaults"
    vaults.mkdir()
    (vaults / ".vault.toml").write_text(TEMPLATE, encoding="utf-8")
    app = create_app(
        People(vaults, "X-User", read_key_owners(owners)), ProxyOptions(openai_server.base_url)
    )
    turn = {"chat_id": "t", "messages": [{"role": "user", "content": "hi"}]}
    async with live_server(app) as url:
        _, note = await ask(url, openai_server.api_key, "hello", {"X-User": "mallory"})
        async with httpx.AsyncClient() as client:  # the turns API asks the same question
            listed = await client.post(
                f"{url}/api/turns",
                json=turn,
                headers={"Authorization": f"Bearer {openai_server.api_key}"},
            )
            claimed = await client.post(
                f"{url}/api/turns",
                json=turn,
                headers={"Authorization": "Bearer sk-someone-else", "X-User": "ana"},
            )
            anonymous = await client.post(f"{url}/api/turns", json=turn)
        await app.state.proxy.settle()
    assert note and note.startswith("sent")
    assert (vaults / "ana" / ".memory" / "c1.json").exists()
    assert not (vaults / "mallory").exists()
    assert listed.json()["rebuilt"] is True and (vaults / "ana" / ".memory" / "t.json").exists()
    assert claimed.status_code == 403 and "no user" in claimed.json()["error"]  # a header is no key
    assert anonymous.status_code == 403


@pytest.mark.parametrize(
    "content", ["not json", "[]", '{"short": "ana"}', '{"' + "a" * 64 + '": 7}']
)
def test_a_key_owners_file_that_cannot_be_used_says_why(tmp_path: Path, content: str) -> None:
    path = tmp_path / "owners.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(KeyOwnersError, match="owners"):
        read_key_owners(path)
    with pytest.raises(KeyOwnersError, match="Cannot read"):
        read_key_owners(tmp_path / "absent.json")
