"""Every route of the HTTP API (docs/contract.md §7), including the errors, in-process."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from smart_context.resources import static_dir
from tests.sidecar.conftest import BASE_URL, ClientFactory, Recorder, chat_on_disk


def is_error(response: httpx.Response, status: int) -> str:
    assert response.status_code == status, response.text
    body = response.json()
    assert body["status"] == "error" and isinstance(body["error"], str) and body["error"]
    assert "Traceback" not in response.text
    return str(body["error"])


async def test_chats_create_list_get(api: ClientFactory) -> None:
    client, _ = await api()
    assert (await client.get("/api/chats")).json() == {"chats": [], "damaged": []}
    made = await client.post("/api/chats", json={"title": "Plans"})
    assert made.status_code == 201
    chat_id = made.json()["id"]
    assert made.json()["title"] == "Plans" and chat_id.isalnum()
    untitled = (await client.post("/api/chats")).json()
    listed = (await client.get("/api/chats")).json()["chats"]
    assert {c["id"] for c in listed} == {chat_id, untitled["id"]}
    assert set(listed[0]) == {"id", "title", "message_count", "updated_at"}
    chat = (await client.get(f"/api/chats/{chat_id}")).json()
    assert chat["messages"] == [] and chat["title"] == "Plans"


async def test_message_as_json_and_as_events(api: ClientFactory, vault: Path) -> None:
    client, _ = await api(Recorder())
    chat_id = (await client.post("/api/chats", json={})).json()["id"]
    answer = await client.post(f"/api/chats/{chat_id}/messages", json={"content": "Hello"})
    assert answer.status_code == 200
    body = answer.json()
    assert set(body) == {"user_message", "assistant_message"}
    assert body["assistant_message"]["notice"] == "no_model"

    streamed = await client.post(
        f"/api/chats/{chat_id}/messages",
        json={"content": "Again"},
        headers={"Accept": "text/event-stream"},
    )
    assert streamed.headers["content-type"].startswith("text/event-stream")
    assert "event: done\ndata: {" in streamed.text
    listed = (await client.get("/api/chats")).json()["chats"]
    # the two notices are stored, but the chat has the two messages the user wrote
    assert listed[0]["message_count"] == 2 and listed[0]["title"] == "Hello"
    assert len(chat_on_disk(vault, chat_id)["messages"]) == 4


async def test_commands(api: ClientFactory) -> None:
    client, _ = await api(Recorder())
    ok = await client.post("/api/commands/test.echo", json={"topics": ["A"], "chat_id": "c1"})
    assert ok.json() == {"status": "success", "got": {"topics": ["A"], "chat_id": "c1"}}
    assert (await client.post("/api/commands/test.echo")).json()["got"] == {}
    assert "Unknown command" in is_error(await client.post("/api/commands/nope", json={}), 404)
    failed = is_error(await client.post("/api/commands/test.boom", json={"reason": "why"}), 500)
    assert "boom: why" in failed and "test.boom" in failed
    assert "nope_arg" in is_error(
        await client.post("/api/commands/test.boom", json={"nope_arg": 1}), 400
    )
    is_error(await client.post("/api/commands/test.echo", content=b"[1, 2]"), 400)


@pytest.mark.parametrize(
    ("method", "path", "body", "status"),
    [
        ("POST", "/api/chats/c1/messages", b"{not json", 400),
        ("POST", "/api/chats/c1/messages", b"", 400),
        ("POST", "/api/chats/c1/messages", json.dumps({"text": "wrong key"}).encode(), 400),
        ("POST", "/api/chats/c1/messages", json.dumps({"content": "   "}).encode(), 400),
        ("POST", "/api/chats/c1/messages", json.dumps({"content": 12}).encode(), 400),
        ("POST", "/api/chats/c1/messages", json.dumps({"content": "x" * 100_001}).encode(), 413),
        ("POST", "/api/chats/c1/messages", b"x" * 1_000_001, 413),
        # an encoded "/" splits the path, so no route matches; ".." alone reaches the id check
        ("POST", "/api/chats/..%2F..%2Fetc/messages", json.dumps({"content": "x"}).encode(), 404),
        ("GET", "/api/chats/..%2F..%2Fetc", b"", 404),
        ("POST", "/api/chats/%2E%2E/messages", json.dumps({"content": "x"}).encode(), 400),
        ("GET", "/api/chats/%2E%2E", b"", 400),
        ("GET", "/api/chats/.hidden", b"", 400),
        ("GET", "/api/chats/nosuchchat", b"", 404),
        ("POST", "/api/chats", json.dumps({"title": 5}).encode(), 400),
        ("POST", "/api/chats", b"{", 400),
        (
            "POST",
            "/api/chats/c1/messages",
            b'{"content": ' + b"[" * 50_000 + b"]" * 50_000 + b"}",
            400,
        ),
        ("POST", "/api/chats/c1/messages", b'{"content": "hi \\ud800"}', 400),
        ("POST", "/api/chats/notes.embeddings/messages", b'{"content": "hi"}', 400),
        ("GET", "/api/nothing-here", b"", 404),
        ("DELETE", "/api/chats", b"", 405),
    ],
)
async def test_bad_input_is_a_json_error(
    api: ClientFactory, vault: Path, method: str, path: str, body: bytes, status: int
) -> None:
    client, _ = await api()
    is_error(await client.request(method, path, content=body), status)
    assert not (vault / ".memory" / "c1.json").exists()
    assert not (vault.parent / "etc.json").exists()


async def test_cross_site_posts_and_foreign_hosts_are_refused(api: ClientFactory) -> None:
    client, _ = await api(Recorder())
    evil = {"Origin": "https://evil.example"}
    assert "not allowed" in is_error(
        await client.post("/api/commands/test.echo", json={}, headers=evil), 403
    )
    same = {"Origin": BASE_URL}
    assert (await client.post("/api/commands/test.echo", json={}, headers=same)).status_code == 200
    rebinding = await client.get("/api/chats", headers={"Host": "evil.example:8765"})
    assert "not this machine" in is_error(rebinding, 403)


async def test_damaged_chat_is_reported_not_overwritten(api: ClientFactory, vault: Path) -> None:
    client, sidecar = await api()
    (vault / ".memory").mkdir()
    (vault / ".memory" / "c1.json").write_text("{broken", encoding="utf-8")
    with sidecar.host.events.subscribe() as sub:
        chat = (await client.get("/api/chats/c1")).json()
        event = await sub.next(timeout=2)
    assert chat["messages"] == []
    assert event is not None and event.name == "sidecar.chat_damaged"
    assert json.loads(event.data)["chat_id"] == "c1"
    kept = list((vault / ".memory").glob("c1.json.corrupt-*"))
    assert len(kept) == 1 and kept[0].read_text(encoding="utf-8") == "{broken"
    # the page is told which file was set aside: on the chat, and in the list of chats
    assert f".memory/{kept[0].name}" in chat["warnings"][0]
    listed = (await client.get("/api/chats")).json()
    assert listed["damaged"] == [{"chat_id": "c1", "file": f".memory/{kept[0].name}"}]
    # a new message starts the chat again and leaves the damaged copy as it was
    await client.post("/api/chats/c1/messages", json={"content": "hello again"})
    assert kept[0].read_text(encoding="utf-8") == "{broken"
    assert [c["id"] for c in (await client.get("/api/chats")).json()["chats"]] == ["c1"]


async def test_a_number_json_cannot_carry_does_not_break_the_chat(
    api: ClientFactory, vault: Path
) -> None:
    client, _ = await api()
    (vault / ".memory").mkdir()
    raw = b'{"messages": [{"id": "a", "role": "user", "content": "hi", "score": NaN}]}'
    (vault / ".memory" / "c1.json").write_bytes(raw)
    for _ in range(2):  # every load, not just the first
        answer = await client.get("/api/chats/c1")
        assert answer.status_code == 200
        chat = answer.json()
        assert chat["messages"][0]["score"] is None and "NaN" in chat["warnings"][0]
    assert (vault / ".memory" / "c1.json").read_bytes() == raw  # the file is kept as it is
    assert (await client.post("/api/chats/c1/messages", json={"content": "x"})).status_code == 200
    assert b"NaN" in (vault / ".memory" / "c1.json").read_bytes()


async def test_an_integer_too_long_to_read_is_a_400_not_a_500(api: ClientFactory) -> None:
    client, _ = await api(Recorder())
    huge = b'{"content": ' + b"9" * 5000 + b"}"
    assert "not valid JSON" in is_error(
        await client.post("/api/chats/c1/messages", content=huge), 400
    )
    assert "not valid JSON" in is_error(
        await client.post("/api/commands/test.echo", content=b'{"n": ' + b"1" * 4301 + b"}"), 400
    )
    is_error(await client.post("/api/commands/test.echo", content=b'{"n": NaN}'), 400)


async def test_page_renders_panels_and_boot(api: ClientFactory) -> None:
    if not (static_dir() / "app" / "index.html.j2").exists():
        pytest.skip("the page template is not written yet")
    client, _ = await api(Recorder())
    chat_id = (await client.post("/api/chats", json={"title": "<b>T</b>"})).json()["id"]
    page = await client.get(f"/?chat={chat_id}")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "<p id='test-panel-body'>hello</p>" in page.text  # the plugin's own HTML, as is
    assert "&lt;b&gt;T&lt;/b&gt;" in page.text and "<b>T</b>" not in page.text
    assert f'data-chat-id="{chat_id}"' in page.text
    boot_start = page.text.index('id="sc-boot">') + len('id="sc-boot">')
    boot = json.loads(page.text[boot_start : page.text.index("</script>", boot_start)])
    assert boot == {
        "chat_id": chat_id,
        "model_configured": False,
        "model_name": None,
        "commands": ["test.boom", "test.echo"],  # what the page may offer
    }
    default = await client.get("/?chat=../../etc")
    assert default.status_code == 200 and f'data-chat-id="{chat_id}"' in default.text


async def test_static_files(api: ClientFactory) -> None:
    client, _ = await api()
    assert (await client.get("/static/nope.js")).status_code == 404
    if (static_dir() / "app" / "app.css").exists():
        css = await client.get("/static/app/app.css")
        assert css.status_code == 200 and "text/css" in css.headers["content-type"]
