"""Open WebUI 0.12's page, played from its own Python: run as

    OPEN_WEBUI_PYTHON tests/proxy/open_webui_page.py BASE_URL MODEL TEXT [TEXT ...]

It signs in, opens a socket.io session as the page does, and sends each text as the 0.12 page
sends a turn (src/lib/components/chat/Chat.svelte): one POST /api/chat/completions carrying
only the new ``user_message``, its ``parent_id``, the reply's ``id``, the ``chat_id`` and the
socket's ``session_id``, no history (the server loads it from its database) and the page's
``background_tasks``. It waits for each reply to be stored, then prints the chat as Open WebUI
holds it, as JSON: ``{"chat_id", "messages": [{"role", "content"}]}``.

Uses what Open WebUI's environment has (``python-socketio``); the tests' environment does not
need it. Used by tests/proxy/test_open_webui_live.py.
"""

from __future__ import annotations

import json
import sys
import time
import urllib.request
import uuid
from typing import Any

import socketio  # type: ignore[import-not-found]


def call(base: str, path: str, body: Any = None, token: str | None = None) -> Any:
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    data = None if body is None else json.dumps(body).encode()
    method = "GET" if body is None else "POST"
    request = urllib.request.Request(base + path, data=data, headers=headers, method=method)
    with urllib.request.urlopen(request, timeout=120) as answer:
        return json.loads(answer.read())


def reply_of(chat: dict[str, Any], message_id: str) -> dict[str, Any] | None:
    message = chat["chat"]["history"]["messages"].get(message_id)
    return message if message and message.get("done") and message.get("content") else None


def thread(chat: dict[str, Any]) -> list[dict[str, str]]:
    history = chat["chat"]["history"]
    out, at = [], history.get("currentId")
    while at:
        message = history["messages"][at]
        out.append({"role": message["role"], "content": message.get("content") or ""})
        at = message.get("parentId")
    return out[::-1]


def main(base: str, model: str, texts: list[str]) -> None:
    token = call(base, "/api/v1/auths/signin", {"email": "", "password": ""})["token"]
    sio = socketio.Client()
    sio.connect(
        base, socketio_path="/ws/socket.io", auth={"token": token}, transports=["websocket"]
    )
    sio.emit("user-join", {"auth": {"token": token}})
    chat_id = call(
        base,
        "/api/v1/chats/new",
        {"chat": {"title": "New Chat", "models": [model], "history": {"messages": {}}}},
        token,
    )["id"]
    parent: str | None = None
    for k, text in enumerate(texts):
        asked, reply = str(uuid.uuid4()), str(uuid.uuid4())
        user_message = {
            "id": asked,
            "parentId": parent,
            "childrenIds": [reply],
            "role": "user",
            "content": text,
            "timestamp": int(time.time()),
            "models": [model],
        }
        tasks: dict[str, Any] = {"follow_up_generation": False}
        if k == 0:
            tasks |= {"title_generation": True, "tags_generation": False}
        call(
            base,
            "/api/chat/completions",
            {
                "stream": True,
                "model": model,
                "params": {},
                "tool_ids": [],
                "features": {},
                "variables": {},
                "session_id": sio.get_sid(namespace="/"),
                "chat_id": chat_id,
                "id": reply,
                "parent_id": parent,
                "user_message": user_message,
                "background_tasks": tasks,
            },
            token,
        )
        deadline = time.monotonic() + 120
        while reply_of(call(base, f"/api/v1/chats/{chat_id}", None, token), reply) is None:
            if time.monotonic() > deadline:
                raise SystemExit(f"no reply to turn {k + 1} within 120 s")
            time.sleep(0.3)
        parent = reply
    chat = call(base, f"/api/v1/chats/{chat_id}", None, token)
    sio.disconnect()
    print(
        json.dumps(
            {"chat_id": chat_id, "title": chat["chat"].get("title"), "messages": thread(chat)}
        )
    )


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3:])
