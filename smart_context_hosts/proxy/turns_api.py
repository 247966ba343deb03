"""Chat turns for a client that calls its model itself: the Open WebUI filter
(``integrations/open_webui/smart_context_filter.py``) and any other front end with hooks
before and after its model call.

- ``POST /api/turns`` ``{"chat_id", "messages", "model"?}``: the client's messages are stored as
  the vault chat and rebuilt by the plugins, as the proxy does; the answer is
  ``{"messages", "summary", "rebuilt"}``. When the request is not a chat turn, or anything of
  ours fails, ``messages`` are the client's own, ``rebuilt`` is false and ``summary`` says why:
  the client sends them as they were.
- ``POST /api/turns/reply`` ``{"chat_id", "content", "model"?, "usage"?}``: the model's reply to
  the chat's last turn, stored with the record of what it was sent with.

``serve`` and ``proxy`` both answer them, for the vault they serve.
"""

from __future__ import annotations

import logging
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from smart_context_hosts.proxy.conversation import split
from smart_context_hosts.proxy.identity import Chat, background_task, lowered, safe_chat_id
from smart_context_hosts.proxy.relay import Relay
from smart_context_hosts.proxy.replies import Answer, read_usage
from smart_context_hosts.proxy.vaults import Vaults

MAX_REPLY_CHARS = 1_000_000

log = logging.getLogger(__name__)


async def _relay(request: Request) -> Relay | JSONResponse:
    """The relay of the vault the request works on (the app's ``state.vaults``)."""
    vaults: Vaults = request.app.state.vaults
    found = await vaults.of(lowered(request.headers.items()))
    return (
        _refused(f"Smart Context is off: {found}", 403) if isinstance(found, str) else found.relay
    )


async def _object(request: Request) -> dict[str, Any] | JSONResponse:
    try:
        body = await request.json()
    except ValueError as exc:
        return _refused(f"The request body is not valid JSON ({exc}).")
    return body if isinstance(body, dict) else _refused("The request body must be a JSON object.")


def _refused(message: str, status: int = 400) -> JSONResponse:
    return JSONResponse({"status": "error", "error": message}, status_code=status)


def _chat(body: dict[str, Any]) -> Chat | None:
    given = body.get("chat_id")
    if isinstance(given, str | int) and str(given).strip():
        return Chat(safe_chat_id(str(given).strip()), "chat_id")
    return None


async def _turn_request(request: Request) -> tuple[dict[str, Any], Chat, Relay] | JSONResponse:
    """The body, the chat it names and the relay of the vault it works on; or the refusal."""
    body = await _object(request)
    if isinstance(body, JSONResponse):
        return body
    chat = _chat(body)
    if chat is None:
        return _refused("chat_id is required: the client's id of the conversation.")
    relay = await _relay(request)
    return relay if isinstance(relay, JSONResponse) else (body, chat, relay)


async def start_turn(request: Request) -> JSONResponse:
    asked = await _turn_request(request)
    if isinstance(asked, JSONResponse):
        return asked
    body, chat, relay = asked
    messages = body.get("messages")
    if not isinstance(messages, list):
        return _refused("messages is required: the conversation as the client would send it.")

    def unchanged(why: str) -> JSONResponse:
        return JSONResponse({"messages": messages, "summary": f"off; {why}", "rebuilt": False})

    task = background_task({}, body)
    parts = split(messages)
    if task is not None:
        return unchanged(task)
    if parts is None:
        return unchanged("no user message with text")
    try:
        turn = await relay.prepare(chat, parts, {"model": body.get("model"), "messages": []})
    except Exception as exc:  # the client sends its own messages: a failure of ours costs nothing
        log.exception(
            "Chat %s: Smart Context failed; the client's messages go as they are.", chat.chat_id
        )
        return unchanged(f"failed: {type(exc).__name__}: {exc}")
    relay.hold(turn)
    return JSONResponse(
        {"messages": turn.body["messages"], "summary": turn.summary, "rebuilt": True}
    )


async def finish_turn(request: Request) -> JSONResponse:
    asked = await _turn_request(request)
    if isinstance(asked, JSONResponse):
        return asked
    body, chat, relay = asked
    content = body.get("content")
    if not isinstance(content, str) or len(content) > MAX_REPLY_CHARS:
        return _refused(
            f"content is required: the reply's text, at most {MAX_REPLY_CHARS} characters."
        )
    turn = relay.take(chat.chat_id)
    if turn is None:
        return _refused(f"Chat {chat.chat_id} has no turn waiting for its reply.", 404)
    answer = Answer(text=content, finished=True)
    read_usage(answer, body)  # the client's word for the model and the server's counts
    try:
        await relay.finish(turn, answer)
    except Exception as exc:  # the client has its reply; only our copy of it is missing
        log.exception("Chat %s: the reply could not be stored.", chat.chat_id)
        return _refused(f"The reply could not be stored: {type(exc).__name__}: {exc}", 500)
    return JSONResponse({"status": "success"})


ROUTES = [
    Route("/api/turns", start_turn, methods=["POST"]),
    Route("/api/turns/reply", finish_turn, methods=["POST"]),
]
