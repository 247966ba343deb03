"""The HTTP API of the reference sidecar (docs/contract.md §7), as a Starlette application.

Every error is a JSON body ``{"status": "error", "error": "..."}`` with a 4xx or 5xx status;
a stack trace goes to the log, never to the client. Every response carries the security headers
of :mod:`smart_context_hosts.sidecar.security_headers`; the page's policy also allows, by hash, the
panels' inline scripts and styles.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import jinja2
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from smart_context.errors import ChatIdError
from smart_context.paths import check_chat_id
from smart_context.resources import static_dir
from smart_context_hosts.proxy.turns_api import ROUTES as TURN_ROUTES
from smart_context_hosts.proxy.vaults import OneVault
from smart_context_hosts.sidecar.chatfile import finite
from smart_context_hosts.sidecar.events import format_sse, to_json
from smart_context_hosts.sidecar.guard import LocalGuard
from smart_context_hosts.sidecar.host import CommandError
from smart_context_hosts.sidecar.inline_hashes import inline_hashes
from smart_context_hosts.sidecar.markdown import chat_with_html, event_with_html
from smart_context_hosts.sidecar.pipeline import PipelineEvent
from smart_context_hosts.sidecar.runtime import MessageRun, Sidecar
from smart_context_hosts.sidecar.security_headers import (
    CSP_HEADER,
    SECURITY_HEADERS,
    SecurityHeaders,
    content_security_policy,
)

MAX_MESSAGE_CHARS = 100_000
MAX_BODY_BYTES = 1_000_000
# The whole body, however it is sliced: a full MAX_BODY_BYTES over a slow remote link (about
# 300 kbit/s) still fits, and on loopback a body takes milliseconds.
BODY_TIMEOUT_SECONDS = 30.0
MAX_TITLE_CHARS = 200
KEEPALIVE_SECONDS = 15.0
PAGE_TEMPLATE = "app/index.html.j2"
SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
CALL_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")

log = logging.getLogger(__name__)


class BadRequest(Exception):
    """Input the API refuses; answered as ``{"status": "error", "error": message}``."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


def error_response(message: str, status: int, **extra: Any) -> JSONResponse:
    """The API's one error shape."""
    return JSONResponse({"status": "error", "error": message, **extra}, status_code=status)


def _sidecar(request: Request) -> Sidecar:
    sidecar: Sidecar = request.app.state.sidecar
    return sidecar


def _chat_id(request: Request) -> str:
    try:
        return check_chat_id(request.path_params["chat_id"])
    except ChatIdError as exc:
        raise BadRequest(str(exc)) from exc


async def _json_object(request: Request, *, required: bool) -> dict[str, Any]:
    """The request body as a JSON object (``{}`` for an empty body unless ``required``).

    The whole body must arrive within ``BODY_TIMEOUT_SECONDS`` (``app.state.body_timeout_seconds``
    when set), else 408: a client sending it a byte at a time would hold the request forever.
    """
    seconds = float(getattr(request.app.state, "body_timeout_seconds", BODY_TIMEOUT_SECONDS))
    body = bytearray()
    try:
        async with asyncio.timeout(seconds):
            async for chunk in request.stream():
                body += chunk
                if len(body) > MAX_BODY_BYTES:  # checked while reading: a huge body is never held
                    raise BadRequest(f"The request body is over {MAX_BODY_BYTES} bytes.", 413)
    except TimeoutError as exc:
        raise BadRequest(f"The request body did not arrive within {seconds:g} s.", 408) from exc
    if not body.strip():
        if required:
            raise BadRequest("The request body is empty: send a JSON object.")
        return {}
    try:
        data = json.loads(body, parse_constant=_refuse_constant)
    except RecursionError as exc:
        raise BadRequest("The request body is nested too deeply.") from exc
    except ValueError as exc:  # not JSON, not UTF-8, NaN, or an integer of over 4,300 digits
        raise BadRequest(f"The request body is not valid JSON ({exc}).") from exc
    if not isinstance(data, dict):
        raise BadRequest("The request body must be a JSON object.")
    try:
        json.dumps(data, ensure_ascii=False).encode("utf-8")  # a lone surrogate cannot be stored
    except UnicodeEncodeError as exc:
        raise BadRequest("The request body holds text that is not valid Unicode.") from exc
    return data


def _content(body: dict[str, Any]) -> str:
    """The message text of a body: ``content``, a non-empty string of bounded length."""
    content = body.get("content")
    if not isinstance(content, str) or not content.strip():
        raise BadRequest("'content' is required: the message text, a non-empty string.")
    if len(content) > MAX_MESSAGE_CHARS:
        raise BadRequest(f"The message is longer than {MAX_MESSAGE_CHARS} characters.", 413)
    return content


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


# -- routes -------------------------------------------------------------------------------


async def list_chats(request: Request) -> JSONResponse:
    """``GET /api/chats``."""
    memory = _sidecar(request).host.memory
    return JSONResponse({"chats": await memory.list_chats(), "damaged": await memory.set_aside()})


async def create_chat(request: Request) -> JSONResponse:
    """``POST /api/chats`` with an optional ``{"title"}``."""
    body = await _json_object(request, required=False)
    title = body.get("title")
    if title is not None and not isinstance(title, str):
        raise BadRequest("'title' must be a string.")
    if title is not None and len(title) > MAX_TITLE_CHARS:
        raise BadRequest(f"'title' is longer than {MAX_TITLE_CHARS} characters.")
    chat = await _sidecar(request).host.memory.create_chat(title.strip() if title else None)
    return JSONResponse(chat, status_code=201)


async def get_chat(request: Request) -> JSONResponse:
    """``GET /api/chats/{chat_id}``: the chat file's content."""
    chat_id = _chat_id(request)
    memory = _sidecar(request).host.memory
    exists = memory.exists(chat_id)
    data = await memory.load_chat(chat_id)  # a damaged file is set aside here
    warnings = [
        f"An earlier file of this chat could not be read. It was set aside, unchanged, as "
        f"{damaged['file']}: open it in a text editor to recover what it holds."
        for damaged in await memory.set_aside()
        if damaged["chat_id"] == chat_id
    ]
    if not exists and not warnings:
        return error_response(f"There is no chat {chat_id!r}.", 404)
    # in a thread: a long chat's first rendering must not stall the other requests
    data = await asyncio.to_thread(chat_with_html, data)
    try:
        return JSONResponse({**data, "warnings": warnings} if warnings else data)
    except ValueError:  # NaN or Infinity, written by a hand or another program: JSON has none
        log.warning("Chat %s holds NaN or Infinity; it is shown as null.", chat_id)
        warnings.append(
            "This chat's file holds a number JSON cannot carry (NaN or Infinity). It is shown "
            "as null here and kept in the file as it is."
        )
        return JSONResponse({**finite(data), "warnings": warnings})


async def post_message(request: Request) -> Response:
    """``POST /api/chats/{chat_id}/messages``: SSE when asked for, else JSON when complete."""
    chat_id = _chat_id(request)
    body = await _json_object(request, required=True)
    content = _content(body)
    run = _sidecar(request).send_message(chat_id, content)
    if "text/event-stream" in request.headers.get("accept", ""):
        return StreamingResponse(
            _message_stream(run), media_type="text/event-stream", headers=SSE_HEADERS
        )
    final = await run.result()
    data = await asyncio.to_thread(event_with_html, final.data)
    if final.name == "done":
        return JSONResponse(data)
    status = 502 if "assistant_message" in data else 500
    extra = {key: value for key, value in data.items() if key != "error"}
    return error_response(str(final.data.get("error")), status, **extra)


async def dry_run(request: Request) -> JSONResponse:
    """``POST /api/chats/{chat_id}/context``: what sending ``content`` now would use; nothing is
    stored and no model is called."""
    chat_id = _chat_id(request)
    body = await _json_object(request, required=True)
    content = _content(body)
    return JSONResponse(await _sidecar(request).pipeline.dry_run(chat_id, content))


async def answer_tool_call(request: Request) -> JSONResponse:
    """``POST /api/chats/{chat_id}/tool-calls/{call_id}`` with ``{"approve": bool}``: the
    user's answer to a tool call the reply is waiting on."""
    chat_id = _chat_id(request)
    call_id = request.path_params["call_id"]
    body = await _json_object(request, required=True)
    approve = body.get("approve")
    if not isinstance(approve, bool):
        raise BadRequest("'approve' is required: true to run the tool call, false to decline it.")
    approvals = _sidecar(request).tool_approvals
    if not CALL_ID.fullmatch(call_id) or not approvals.answer(chat_id, call_id, approve):
        return error_response(
            f"No tool call of chat {chat_id!r} is waiting for an answer under that id "
            "(it may have been answered already, or timed out).",
            404,
        )
    return JSONResponse({"status": "success", "call_id": call_id, "approved": approve})


async def _message_stream(run: MessageRun) -> AsyncIterator[str]:
    event: PipelineEvent
    async for event in run.events():
        data = event.data
        if event.name in ("done", "error"):  # the stored messages, with their HTML
            data = await asyncio.to_thread(event_with_html, data)
        yield format_sse(event.name, to_json(data))


async def run_command(request: Request) -> JSONResponse:
    """``POST /api/commands/{name}``: the JSON body is the keyword arguments."""
    name = request.path_params["name"]
    kwargs = await _json_object(request, required=False)
    try:
        result = await _sidecar(request).run_command(name, kwargs)
    except CommandError as exc:
        return error_response(str(exc), exc.status)
    try:
        return JSONResponse(result, status_code=_command_status(result))
    except (TypeError, ValueError):
        log.exception("Command %r returned a result that is not JSON.", name)
        return error_response(f"Command {name!r} returned a result that is not JSON.", 500)


# A command reports failure in its result (docs/contract.md §3); over HTTP it also gets a status.
_ERROR_STATUS = {
    "bad_arguments": 400,
    "not_found": 404,
    "conflict": 409,
    "unavailable": 503,
    "failed": 500,
}


def _command_status(result: Any) -> int:
    """200 for a success; for ``{"status": "error"}`` the status its ``reason`` names, 400 when
    it names none (a plugin's error is taken as the caller's to act on)."""
    if not isinstance(result, dict) or result.get("status") != "error":
        return 200
    return _ERROR_STATUS.get(str(result.get("reason")), 400)


async def events(request: Request) -> StreamingResponse:
    """``GET /api/events``: one server-sent event per ``host.emit``."""
    keepalive = float(request.app.state.keepalive_seconds)
    return StreamingResponse(
        _event_stream(_sidecar(request), keepalive),
        media_type="text/event-stream",
        headers=SSE_HEADERS,
    )


async def _event_stream(sidecar: Sidecar, keepalive: float) -> AsyncIterator[str]:
    hub = sidecar.host.events
    with hub.subscribe() as subscription:
        # The comment tells the client the stream is live; retry sets its reconnect delay.
        yield "retry: 3000\n: connected\n\n"
        while not hub.closed:
            event = await subscription.next(timeout=keepalive)
            if hub.closed:
                break  # the server is stopping: end the stream instead of being cancelled
            yield ": keep-alive\n\n" if event is None else event.encode()


async def page(request: Request) -> Response:
    """``GET /`` (``?chat=ID`` opens that chat): the chat page with the plugins' panels."""
    sidecar = _sidecar(request)
    chats = await sidecar.host.memory.list_chats()
    chat_id = _requested_chat(request.query_params.get("chat"), chats)
    panels = await sidecar.client_connected()
    llm = sidecar.host.llm
    boot = {
        "chat_id": chat_id,
        "model_configured": llm.chat_configured,
        "model_name": llm.model_name("chat"),
        # the page offers only what a plugin answers (e.g. no pins without long memory)
        "commands": sorted(sidecar.commands.handlers),
    }
    env: jinja2.Environment = request.app.state.templates
    try:
        template = env.get_template(PAGE_TEMPLATE)
    except jinja2.TemplateNotFound:
        log.error("The page template %s is missing from %s.", PAGE_TEMPLATE, static_dir())
        return HTMLResponse(
            f"<h1>The chat page is not installed</h1><p>{PAGE_TEMPLATE} is missing. "
            "The API under /api/ still works.</p>",
            status_code=500,
        )
    html = template.render(chats=chats, chat_id=chat_id, panels=panels, boot=boot)
    return HTMLResponse(html, headers={CSP_HEADER: _page_policy(panels)})


def _page_policy(panels: list[dict[str, Any]]) -> str:
    """The page's Content-Security-Policy: the strict one, plus the hashes of exactly the inline
    scripts and styles of the panels the page embeds (its own markup has none)."""
    found = [inline_hashes(str(panel["html"])) for panel in panels]
    return content_security_policy(
        script_hashes=[source for hashes in found for source in hashes.scripts],
        style_hashes=[source for hashes in found for source in hashes.styles],
    )


def _requested_chat(requested: str | None, chats: list[dict[str, Any]]) -> str | None:
    """The chat to open: the one asked for if its id is valid, else the most recent one."""
    if requested:
        try:
            return check_chat_id(requested)
        except ChatIdError:
            log.warning("Ignoring an invalid chat id in the page address.")
    return str(chats[0]["id"]) if chats else None


# -- application ----------------------------------------------------------------------------


async def _bad_request(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, BadRequest)
    return error_response(str(exc), exc.status)


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    if exc.status_code == 404:
        return error_response(f"There is nothing at {request.url.path}.", 404)
    if exc.status_code == 405:
        return error_response(f"{request.method} is not allowed on {request.url.path}.", 405)
    return error_response(exc.detail, exc.status_code)


async def _client_gone(request: Request, exc: Exception) -> Response:
    """The client hung up before its whole request body arrived: nothing went wrong here, and
    no one is left to answer, so one quiet line and an empty answer that uvicorn drops."""
    log.info("A client hung up mid-request on %s %s.", request.method, request.url.path)
    return Response(status_code=400)


async def _server_error(request: Request, exc: Exception) -> Response:
    log.error("Unexpected error on %s %s", request.method, request.url.path, exc_info=exc)
    response = error_response("Something went wrong in the sidecar; its log has the details.", 500)
    # Starlette sends this answer from outside the middleware stack, past SecurityHeaders.
    response.headers.update(SECURITY_HEADERS)
    return response


def create_app(
    sidecar: Sidecar, *, allow_remote: bool = False, keepalive_seconds: float = KEEPALIVE_SECONDS
) -> Starlette:
    """The Starlette app serving ``sidecar``; its lifespan starts and stops the plugins."""

    vaults = OneVault(sidecar)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await sidecar.start()
        try:
            yield
        finally:
            await vaults.close()  # the turns API's messages still being written
            await sidecar.stop()

    routes = [
        Route("/", page, methods=["GET"]),
        Route("/api/chats", list_chats, methods=["GET"]),
        Route("/api/chats", create_chat, methods=["POST"]),
        Route("/api/chats/{chat_id}", get_chat, methods=["GET"]),
        Route("/api/chats/{chat_id}/messages", post_message, methods=["POST"]),
        Route("/api/chats/{chat_id}/context", dry_run, methods=["POST"]),
        Route("/api/chats/{chat_id}/tool-calls/{call_id}", answer_tool_call, methods=["POST"]),
        Route("/api/commands/{name}", run_command, methods=["POST"]),
        Route("/api/events", events, methods=["GET"]),
        *TURN_ROUTES,  # the Open WebUI filter's (smart_context_hosts/proxy/turns_api.py)
        Mount("/static", StaticFiles(directory=static_dir(), check_dir=False), name="static"),
    ]
    app = Starlette(
        routes=routes,
        # SecurityHeaders outermost, so the guard's refusals carry the headers too.
        middleware=[Middleware(SecurityHeaders), Middleware(LocalGuard, allow_remote=allow_remote)],
        exception_handlers={
            BadRequest: _bad_request,
            ClientDisconnect: _client_gone,
            HTTPException: _http_error,
            Exception: _server_error,
        },
        lifespan=lifespan,
    )
    app.state.sidecar = sidecar
    app.state.vaults = vaults
    app.state.keepalive_seconds = keepalive_seconds
    app.state.templates = page_environment(static_dir())
    return app


def page_environment(folder: Path) -> jinja2.Environment:
    """Jinja for the page: autoescaped, and a missing variable is an error, not blank text."""
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(folder),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
    )
