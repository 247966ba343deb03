"""``smart-context proxy``: an OpenAI-compatible server in front of another, as a Starlette app.

``POST /v1/chat/completions`` of a named chat goes through the vault's plugins
(:mod:`.relay`) and on to the upstream, streamed or not; every other request passes through
untouched, its key and all. The response says what happened in ``X-Smart-Context``: what was
sent of how much (``sent 1,204 of 18,930 tokens; filter: Sourdough``), or ``off`` and why the
request went as it came (no chat id, a client's background task, a failure of ours).

A stream passes through as it arrives, read on the side for the reply to store (and the answer
to Open WebUI's title call, for the vault chat's title: :mod:`.titles`). An upstream
error, timeout or 429 reaches the client with its status and body. An upstream that cannot be
reached at all is a 502 in OpenAI's error shape.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from functools import partial
from typing import Any
from urllib.parse import urlsplit

import httpx
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from smart_context.allocator import urgent
from smart_context.background import held
from smart_context.paths import chat_file, check_chat_id
from smart_context_hosts.proxy.body import read_body
from smart_context_hosts.proxy.conversation import split
from smart_context_hosts.proxy.identity import (
    background_task,
    lowered,
    prefix_chat,
    which_chat,
)
from smart_context_hosts.proxy.note import header_safe
from smart_context_hosts.proxy.own_tools import StreamFilter, requested, run_calls
from smart_context_hosts.proxy.relay import Relay, Turn
from smart_context_hosts.proxy.replies import Answer, StreamReader, error_said, whole_reply
from smart_context_hosts.proxy.titles import MAX_ANSWER_BYTES, asks_title, title_in, titled
from smart_context_hosts.proxy.turns_api import ROUTES as TURN_ROUTES
from smart_context_hosts.proxy.vaults import OneVault, Vaults
from smart_context_hosts.sidecar.guard import LocalGuard
from smart_context_hosts.sidecar.runtime import Sidecar
from smart_context_hosts.sidecar.tools import MAX_TOOL_ROUNDS, assistant_turn

HEADER = "X-Smart-Context"
# not forwarded either way (RFC 9110 §7.6.1), or set anew for the hop they take
HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "host",
        "content-length",
    }
)
# who is asking, as Open WebUI says it with ENABLE_FORWARD_USER_INFO_HEADERS: read by the
# proxy (a person's vault), not sent to the model's provider unless keep_user_headers
IDENTITY_HEADERS = frozenset(
    {
        "x-openwebui-user-name",
        "x-openwebui-user-id",
        "x-openwebui-user-email",
        "x-openwebui-user-role",
        "x-openwebui-user-jwt",
        "x-openwebui-auth-type",
    }
)
OPEN_WEBUI_HEADERS = "x-openwebui-"  # its session's headers (chat and message ids): never sent
# the upstream's own, set again by the server that answers the client (else sent twice)
SET_AGAIN = frozenset({"date", "server"})
NO_CHAT_ID = (
    "off; no chat id: send X-Smart-Context-Chat (or metadata.chat_id); from Open WebUI, set "
    "ENABLE_FORWARD_USER_INFO_HEADERS=true"
)
# A request the plugins have not shaped in this many seconds goes as it came: on a shared proxy a
# slow turn (a cold model, a huge chat's first index) must not hold a person's reply.
SHAPE_TIMEOUT = 10.0
MAX_BODY_BYTES = 64 * 1024 * 1024  # a 10,000-message history with its tools is about 5 MB
METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]
CLIENT_GONE = "The client closed the stream before the reply ended."
NO_ANSWER = "without sending a response"  # httpcore's words for a connection closed unanswered
STALE_TURN_SECONDS = 10.0  # a chat's next turn waits this long at most for the last one

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ProxyOptions:
    """``upstream``: the base URL the client would otherwise use (``https://api.openai.com/v1``);
    ``chat_headers``: more headers that name a chat; ``prefix_chats``: guess a chat from its
    first message when none is named, ``user_chats``: take the body's ``user`` as a chat (both
    opt-in: see docs/proxy.md); ``timeout``: seconds the upstream may stay silent;
    ``keep_user_headers``: send Open WebUI's headers naming the user on to the upstream (by
    default they are read, and dropped); ``shape_timeout``: seconds the plugins may take to
    shape a request before it goes as it came (they finish their work behind it)."""

    upstream: str
    chat_headers: Sequence[str] = ()
    prefix_chats: bool = False
    timeout: float = 600.0
    user_chats: bool = False
    keep_user_headers: bool = False
    shape_timeout: float = SHAPE_TIMEOUT


class Proxy:
    """The proxy's state: whose vault a request works on, the upstream client, and the replies
    being stored."""

    def __init__(
        self, vaults: Vaults, options: ProxyOptions, transport: httpx.AsyncBaseTransport | None
    ) -> None:
        self.vaults = vaults
        self.options = options
        self.client = httpx.AsyncClient(
            transport=transport,
            timeout=httpx.Timeout(options.timeout, connect=30.0),
            follow_redirects=False,
        )
        # per vault and chat: the turn under way, done once its reply is stored; the chat's
        # next turn waits for it, so it finds that reply in the chat
        self._turns: dict[tuple[int, str], asyncio.Future[None]] = {}
        self._storing: set[asyncio.Future[Any]] = set()  # held: the loop keeps tasks weakly
        self._warned: set[str] = set()

    def forwarded(self, headers: Sequence[tuple[str, str]], *, ours: bool) -> dict[str, str]:
        """A request's headers for the upstream (:func:`forwarded_headers`), without those the
        proxy read a chat or a person from."""
        private = {h.lower() for h in self.options.chat_headers}
        person = getattr(self.vaults, "user_header", None)
        if isinstance(person, str) and not self.options.keep_user_headers:
            private.add(person.lower())
        return forwarded_headers(
            headers, ours=ours, keep_user=self.options.keep_user_headers, private=private
        )

    def keep(self, work: Callable[[bytes], Awaitable[None]]) -> Callable[[bytes], None]:
        """``work`` as a callback that runs it in the background, held until done (a failure
        is logged: it is ours, the client has its answer)."""

        def start(data: bytes) -> None:
            held(self._storing, work(data), "Work on an answer failed.", log)

        return start

    def warn_once(self, text: str) -> None:
        """Log ``text`` as a warning, the first time only."""
        if text not in self._warned:
            self._warned.add(text)
            log.warning(text)

    def url(self, path: str, query: str) -> str:
        """Where a request for ``path`` goes: ``/v1/...`` under the upstream's base URL, any
        other path at the upstream's origin."""
        base = self.options.upstream.rstrip("/")
        if path == "/v1" or path.startswith("/v1/"):
            target = base + path[3:]
        else:
            parts = urlsplit(base)
            target = f"{parts.scheme}://{parts.netloc}{path}"
        return f"{target}?{query}" if query else target

    async def settle(self) -> None:
        """Wait until every reply received is stored, and what was read on the side of a
        passing answer (a title) is taken."""
        while pending := [f for f in self._turns.values() if not f.done()]:
            await asyncio.wait(pending, timeout=STALE_TURN_SECONDS)
            if any(not f.done() for f in pending):
                break  # a turn whose response never started: nothing of it will come
        if self._storing:
            await asyncio.wait(list(self._storing), timeout=STALE_TURN_SECONDS)

    async def before_turn(self, relay: Relay, chat_id: str) -> asyncio.Future[None]:
        """Wait for the chat's turn under way, if any, to be stored; then this one is under
        way, until the future returned is done. A turn whose response never started (its
        client gone at once) is waited for :data:`STALE_TURN_SECONDS` at most."""
        key = (id(relay), chat_id)
        waiting = self._turns.get(key)
        if waiting is not None and not waiting.done():
            await asyncio.wait([waiting], timeout=STALE_TURN_SECONDS)
        future = self._turns[key] = asyncio.get_running_loop().create_future()
        future.add_done_callback(
            lambda f: self._turns.pop(key, None) if self._turns.get(key) is f else None
        )
        return future

    def shaped_late(
        self, preparing: asyncio.Future[Turn], done: asyncio.Future[None], chat_id: str
    ) -> str:
        """The header of a turn not shaped within the time limit, which goes as it came: the
        plugins' work goes on behind it, held (the message is stored; the client's next request
        brings this reply back); ``done``, which the chat's next turn waits for, when it ends."""
        seconds = self.options.shape_timeout
        log.warning("Chat %s: not shaped in %g s; the request goes as it came.", chat_id, seconds)
        self.behind(preparing, done, chat_id)
        return f"off; not shaped in {seconds:g} s, so the request went as it came"

    def behind(
        self, preparing: asyncio.Future[Turn], done: asyncio.Future[None], chat_id: str
    ) -> None:
        """A turn's shaping left to finish on its own, held (a failure is logged); ``done``
        when it ends."""
        held(self._storing, preparing, f"Chat {chat_id}: shaping, finished late, failed.", log)
        preparing.add_done_callback(lambda _: None if done.done() else done.set_result(None))

    def store_soon(
        self,
        relay: Relay,
        turn: Turn,
        answer: Answer,
        error: str | None,
        done: asyncio.Future[None],
    ) -> None:
        """Store the reply in the background, then ``done`` (the turn's future from
        :meth:`before_turn`, which the chat's next turn waits for)."""
        task = asyncio.create_task(self._store(relay, turn, answer, error))
        self._storing.add(task)

        def stored(_: asyncio.Task[None]) -> None:
            self._storing.discard(task)
            if not done.done():
                done.set_result(None)

        task.add_done_callback(stored)

    async def _store(self, relay: Relay, turn: Turn, answer: Answer, error: str | None) -> None:
        try:
            await relay.finish(turn, answer, error)
        except Exception:  # the client has its reply; only our copy of it is missing
            log.exception("Chat %s: the reply could not be stored.", turn.chat.chat_id)


async def _take_title(
    proxy: Proxy, headers: Mapping[str, str], chat_id: str, answer: bytes
) -> None:
    """Give the vault chat ``chat_id`` the title in ``answer`` (Open WebUI's title call), when
    the chat is there and was not renamed (:mod:`.titles`)."""
    title = title_in(answer)
    vault = proxy.vaults.running(headers) if title else None  # one that ran a turn: none started
    if title is None or vault is None:
        return
    sidecar = vault.relay.sidecar
    if chat_file(sidecar.vault, check_chat_id(chat_id)).exists():
        await sidecar.host.memory.update_chat(chat_id, titled(title))


def _proxy(request: Request) -> Proxy:
    proxy: Proxy = request.app.state.proxy
    return proxy


def forwarded_headers(
    headers: Sequence[tuple[str, str]],
    *,
    ours: bool,
    keep_user: bool = False,
    private: Collection[str] = (),
) -> dict[str, str]:
    """The request's headers for the upstream (``ours``: without the chat-naming and task
    headers meant for the proxy, and asking for an uncompressed reply it can read). Never
    Open WebUI's session headers (its chat and message ids) or ``private`` ones (the headers
    the proxy reads a chat or a person from, lower case); the user's name, id, e-mail and role
    only with ``keep_user``."""
    out: dict[str, str] = {}
    for name, value in headers:
        key = name.lower()
        if (
            key in HOP_BY_HOP
            or key in private
            or (ours and (key.startswith("x-smart-context") or key == "accept-encoding"))
            or (key.startswith(OPEN_WEBUI_HEADERS) and not (keep_user and key in IDENTITY_HEADERS))
        ):
            continue
        out[key] = value
    if ours:
        out["accept-encoding"] = "identity"
    return out


def returned_headers(headers: httpx.Headers, note: str, *, decoded: bool = False) -> dict[str, str]:
    """The upstream's response headers for the client, with ours (``decoded``: the body goes
    as httpx decoded it, so no longer in the upstream's content encoding)."""
    out = {
        k: v
        for k, v in headers.items()
        if k.lower() not in HOP_BY_HOP
        and k.lower() not in SET_AGAIN
        and not (decoded and k.lower() == "content-encoding")
    }
    out[HEADER] = note
    return out


async def chat_completions(request: Request) -> Response:
    with urgent():  # the cycle collector's passes wait until the request goes upstream
        send = await _prepared(request)
    return send if isinstance(send, Response) else await send()


async def _prepared(request: Request) -> Response | Callable[[], Awaitable[Response]]:
    """A chat request read and shaped by the vault's plugins, to send upstream; or to send as
    it came, with why; or the proxy's own error answer."""
    proxy = _proxy(request)
    raw = await _body(request)
    if raw is None:
        return _error(413, f"The request body is over {MAX_BODY_BYTES} bytes.")
    headers = lowered(request.headers.items())
    named = which_chat(headers, {}, proxy.options.chat_headers)  # by a header, before parsing
    running = proxy.vaults.running(headers) if named is not None else None
    known = running.relay.bodies.get(named.chat_id) if running and named else None
    read = read_body(raw, known)
    body = read.data if read is not None else None  # None: not JSON, or nested past the limit
    if not isinstance(body, dict):
        return partial(_pass, request, raw, "off; the body is not a JSON object")
    task = background_task(headers, body)
    if task is not None:
        titles = None  # Open WebUI's title for the chat, taken for the vault chat
        if named is not None and asks_title(body):
            titles = partial(_take_title, proxy, headers, named.chat_id)
        return partial(_pass, request, raw, header_safe(f"off; {task}"), titles)
    parts = split(body.get("messages"))
    if parts is None:
        return partial(_pass, request, raw, "off; no user message with text")
    chat = which_chat(headers, body, proxy.options.chat_headers, proxy.options.user_chats)
    if chat is None and proxy.options.prefix_chats:
        chat = prefix_chat(parts)
    if chat is None:
        proxy.warn_once(
            "A chat request came with no chat id, so it went upstream as it came: not shaped, "
            "not stored. Name each chat with the X-Smart-Context-Chat header (or "
            "metadata.chat_id); Open WebUI sends its chat id only when it runs with "
            "ENABLE_FORWARD_USER_INFO_HEADERS=true."
        )
        return partial(_pass, request, raw, NO_CHAT_ID)
    future: asyncio.Future[None] | None = None
    try:
        vault = await proxy.vaults.of(headers)
        if isinstance(vault, str):
            return partial(_pass, request, raw, header_safe(f"off; {vault}"))
        if read is not None and read.known is not None and named is not None:
            vault.relay.bodies.put(named.chat_id, read.known)  # a turn: the next continues it
        future = await proxy.before_turn(vault.relay, chat.chat_id)
        preparing = asyncio.ensure_future(
            vault.relay.prepare(chat, parts, body, proxy.options.upstream)
        )
        try:
            finished = (await asyncio.wait([preparing], timeout=proxy.options.shape_timeout))[0]
        except asyncio.CancelledError:  # the client left: the plugins' work goes on, held
            proxy.behind(preparing, future, chat.chat_id)
            raise
        if finished:
            turn = preparing.result()
            content = encoded(turn.body)  # (a body nested past Python's limit cannot be written)
    except Exception as exc:  # the client's request still goes: a failure of ours costs no reply
        log.exception("Chat %s: Smart Context failed; the request goes as it came.", chat.chat_id)
        if future is not None:
            future.set_result(None)  # nothing of this turn will be stored
        return partial(
            _pass, request, raw, header_safe(f"off; failed: {type(exc).__name__}: {exc}")
        )
    if not finished:
        return partial(_pass, request, raw, proxy.shaped_late(preparing, future, chat.chat_id))
    headers = proxy.forwarded(request.headers.items(), ours=True)
    headers["content-type"] = "application/json"
    url = proxy.url(request.url.path, request.url.query)
    return partial(_send_turn, _Route(proxy, vault.relay, turn, url, headers, future), content)


@dataclass(frozen=True)
class _Route:
    """One prepared turn on its way: where its requests go (the first, and those after our
    tools ran) with the client's headers, and ``done``, the future its chat's next turn
    waits for."""

    proxy: Proxy
    relay: Relay
    turn: Turn
    url: str
    headers: dict[str, str]
    done: asyncio.Future[None]

    async def send(self, body: dict[str, Any] | bytes) -> httpx.Response:
        """``body`` (or its JSON) to the upstream; the response, its body still to read.

        Sent once more when the upstream closed the connection without a word of answer: a
        kept-alive connection it closed as the request went out (a server that closes idle
        connections after a few seconds, as uvicorn does after 5, races the next request on
        them); the pool has let that connection go and gives the request another. The close
        shows as the connection's end before an answer, a write that failed, or a read that
        failed (the system resets a connection closed with the request unread), each before
        the response's head came: a server whose answer came is never asked twice."""
        content = body if isinstance(body, bytes) else encoded(body)
        try:
            return await self._send_once(content)
        except (httpx.RemoteProtocolError, httpx.WriteError, httpx.ReadError) as exc:
            if isinstance(exc, httpx.RemoteProtocolError) and NO_ANSWER not in str(exc):
                raise
            log.info("The upstream closed a connection unanswered (%r): sent again.", exc)
        return await self._send_once(content)

    async def _send_once(self, content: bytes) -> httpx.Response:
        request = self.proxy.client.build_request(
            "POST", self.url, headers=self.headers, content=content
        )
        return await self.proxy.client.send(request, stream=True)

    def store(self, answer: Answer, error: str | None) -> None:
        """The reply, or why there is none, stored in the background."""
        self.proxy.store_soon(self.relay, self.turn, answer, error, self.done)


def encoded(body: dict[str, Any]) -> bytes:
    """A request body as the upstream reads it."""
    return json.dumps(body, ensure_ascii=False).encode("utf-8")


async def _send_turn(route: _Route, content: bytes) -> Response:
    """The turn's request (``content``: its body, written) to the upstream, and the response
    to the client; the reply is stored on the side."""
    turn, note = route.turn, route.turn.summary
    try:
        response = await route.send(content)
        if response.status_code < 400 and turn.body.get("stream"):
            return StreamingResponse(
                _relay_stream(route, response),
                status_code=response.status_code,
                headers=returned_headers(response.headers, note),
            )
        data = await _whole(response)
        if response.status_code < 400 and turn.own.definitions:
            response, data = await _own_rounds(route, response, data)
    except httpx.HTTPError as exc:
        route.store(Answer(), f"The model server did not answer: {exc!r}")
        return _unreached(exc, note)
    if response.status_code >= 400:
        route.store(Answer(), error_said(response.status_code, data))
    else:
        route.store(whole_reply(data), None)
    return Response(
        data,
        status_code=response.status_code,
        headers=returned_headers(response.headers, note, decoded=True),
    )


async def _whole(response: httpx.Response) -> bytes:
    try:
        return await response.aread()
    finally:
        await response.aclose()


async def _own_rounds(
    route: _Route, response: httpx.Response, data: bytes
) -> tuple[httpx.Response, bytes]:
    """A whole reply that calls our tools: they run, and the model is asked again, until it
    answers without them (at most MAX_TOOL_ROUNDS rounds); what it calls of the client's goes
    back to the client, without ours."""
    names = route.turn.own.names
    body = route.turn.body
    for _ in range(MAX_TOOL_ROUNDS):
        answer = whole_reply(data)
        ours = [c for c in answer.tool_calls if _function(c) in names]
        if not ours or len(ours) < len(answer.tool_calls):
            break
        body = await _after_own_calls(route, body, answer.text, ours)
        response = await route.send(body)
        data = await _whole(response)
        if response.status_code >= 400:
            return response, data
    return response, without_own_calls(data, names)


def _function(call: dict[str, Any]) -> str:
    function = call.get("function")
    return str(function.get("name")) if isinstance(function, dict) else ""


def without_own_calls(data: bytes, names: frozenset[str]) -> bytes:
    """A whole reply with our tool calls taken out (the client knows only its own)."""
    try:
        reply = json.loads(data)
        message = reply["choices"][0]["message"]
        calls = message["tool_calls"]
    except (ValueError, KeyError, IndexError, TypeError):
        return data
    if not isinstance(calls, list) or not any(_function(c) in names for c in calls):
        return data
    kept = [c for c in calls if _function(c) not in names]
    if kept:
        message["tool_calls"] = kept
    else:
        message.pop("tool_calls", None)
        if reply["choices"][0].get("finish_reason") == "tool_calls":
            reply["choices"][0]["finish_reason"] = "stop"
    return json.dumps(reply).encode("utf-8")


async def _after_own_calls(
    route: _Route, body: dict[str, Any], text: str, ours: list[dict[str, Any]]
) -> dict[str, Any]:
    """``body`` with the model's turn that called our tools, and their results, after it."""
    calls = requested(ours)
    relay, turn = route.relay, route.turn
    results = await run_calls(relay.sidecar.run_command, turn.chat.chat_id, calls, turn.own.names)
    return {**body, "messages": [*body["messages"], assistant_turn(text, calls), *results]}


async def _relay_stream(route: _Route, response: httpx.Response) -> AsyncIterator[bytes]:
    """The upstream's stream, each piece passed on as it arrives and read on the side; with
    tools of ours offered, filtered of our calls, which run before the model is asked again
    and its new stream follows (:mod:`.own_tools`). The reply is stored as soon as the stream
    says ``[DONE]``, before the client hears it, so the chat's next turn finds it."""
    reader = StreamReader()
    names = route.turn.own.names
    body = route.turn.body
    stored = False

    def store(error: str | None) -> None:
        nonlocal stored
        if not stored:
            stored = True
            answer = reader.close()
            if answer.finished and error == CLIENT_GONE:  # a client gone after the end lost nothing
                error = None
            elif error is None and not answer.finished:
                error = "The model server's stream ended before the reply did."
            route.store(answer, error)

    def passed(out: bytes) -> bytes:
        reader.feed(out)
        if reader.done:
            store(None)
        return out

    error: str | None = CLIENT_GONE
    try:
        for round_ in range(MAX_TOOL_ROUNDS + 1):
            own = StreamFilter(names, last_round=round_ == MAX_TOOL_ROUNDS) if names else None
            async for piece in response.aiter_raw():
                out = own.feed(piece) if own is not None else piece
                if out:
                    yield passed(out)
            await response.aclose()
            if own is None:
                break
            out = own.close()
            if out:
                yield passed(out)
            if not own.must_ask_again():
                break
            body = await _after_own_calls(route, body, "".join(own.text), own.calls)
            response = await route.send(body)
            if response.status_code >= 400:
                data = await _whole(response)
                error = error_said(response.status_code, data)
                yield _stream_error(error)  # not read as the reply: the turn ends in error
                return
        error = None
    except httpx.HTTPError as exc:
        error = f"The model server's stream broke off: {exc}"
        if names:  # the client saw our rounds end: it needs to hear why nothing follows
            yield _stream_error(error)
    finally:
        await response.aclose()
        store(error)


def _stream_error(message: str) -> bytes:
    """An error event and the stream's end, as OpenAI-compatible servers send one mid-stream."""
    event = {"error": {"message": message, "type": "smart_context_proxy"}}
    return f"data: {json.dumps(event)}\n\ndata: [DONE]\n\n".encode()


async def passthrough(request: Request) -> Response:
    """Any other path: to the upstream and back, untouched."""
    raw = await _body(request)
    if raw is None:
        return _error(413, f"The request body is over {MAX_BODY_BYTES} bytes.")
    return await _pass(request, raw, None)


async def _pass(
    request: Request,
    raw: bytes,
    note: str | None,
    seen: Callable[[bytes], Awaitable[None]] | None = None,
) -> Response:
    """``raw`` to the upstream as the client sent it; the answer streamed back as it comes
    (``seen``: given the whole answer after, when it succeeded, asked uncompressed)."""
    proxy = _proxy(request)
    headers = proxy.forwarded(request.headers.items(), ours=False)
    if seen is not None:
        headers["accept-encoding"] = "identity"  # read on the side as it passes
    upstream = proxy.client.build_request(
        request.method,
        proxy.url(request.url.path, request.url.query),
        headers=headers,
        content=raw,
    )
    try:
        response = await proxy.client.send(upstream, stream=True)
    except httpx.HTTPError as exc:
        return _unreached(exc, note)
    headers = {
        k: v
        for k, v in response.headers.items()
        if k.lower() not in HOP_BY_HOP and k.lower() not in SET_AGAIN
    }
    if note is not None:
        headers[HEADER] = note
    if response.status_code != 200:
        seen = None
    pieces = _raw(response, None if seen is None else proxy.keep(seen))
    return StreamingResponse(pieces, status_code=response.status_code, headers=headers)


async def _raw(
    response: httpx.Response, seen: Callable[[bytes], None] | None = None
) -> AsyncIterator[bytes]:
    """The upstream's answer as it comes; ``seen`` is given it whole (up to
    :data:`~smart_context_hosts.proxy.titles.MAX_ANSWER_BYTES`) once it has all passed."""
    kept = bytearray()
    try:
        async for piece in response.aiter_raw():
            if seen is not None and len(kept) < MAX_ANSWER_BYTES:
                kept += piece
            yield piece
        if seen is not None:
            seen(bytes(kept))
    except httpx.HTTPError as exc:
        log.warning("The upstream's answer broke off: %s", exc)
    finally:
        await response.aclose()


async def _body(request: Request) -> bytes | None:
    """The whole request body, or ``None`` when it is over :data:`MAX_BODY_BYTES`."""
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_BODY_BYTES:
            return None
    return bytes(body)


def _unreached(exc: httpx.HTTPError, note: str | None) -> JSONResponse:
    """What the client gets when the upstream gave no answer: 504 when it stayed silent past
    the timeout, else 502."""
    if isinstance(exc, httpx.TimeoutException):
        return _error(
            504, f"Smart Context proxy: the upstream did not answer in time ({exc!r})", note
        )
    return _error(502, f"Smart Context proxy: the upstream could not be reached: {exc}", note)


def _error(status: int, message: str, note: str | None = None) -> JSONResponse:
    """An error of the proxy itself, in OpenAI's error shape."""
    headers = {HEADER: note} if note else None
    return JSONResponse(
        {"error": {"message": message, "type": "smart_context_proxy", "code": status}},
        status_code=status,
        headers=headers,
    )


def create_app(
    vaults: Sidecar | Vaults,
    options: ProxyOptions,
    transport: httpx.AsyncBaseTransport | None = None,
    *,
    allow_remote: bool = False,
) -> Starlette:
    """The proxy for one vault's sidecar (started and stopped by the app's lifespan), or for
    the vaults of several people (:class:`~.vaults.People`). ``transport``: how to reach the
    upstream (tests), else the network. The sidecar's guard keeps web pages away (a
    DNS-rebinding page, a cross-site POST): the proxy writes chats."""
    one: Sidecar | None = None
    chosen: Vaults
    if isinstance(vaults, Sidecar):
        one, chosen = vaults, OneVault(vaults)
    else:
        chosen = vaults
    proxy = Proxy(chosen, options, transport)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        if one is not None:
            await one.start()
        try:
            yield
        finally:
            await proxy.settle()
            await proxy.client.aclose()
            await chosen.close()
            if one is not None:
                await one.stop()

    app = Starlette(
        routes=[
            Route("/v1/chat/completions", chat_completions, methods=["POST"]),
            *TURN_ROUTES,
            Route("/{path:path}", passthrough, methods=METHODS),
        ],
        middleware=[Middleware(LocalGuard, allow_remote=allow_remote)],
        lifespan=lifespan,
    )
    app.state.proxy = proxy
    app.state.vaults = chosen
    return app


def note_of(headers: Mapping[str, str]) -> str | None:
    """The ``X-Smart-Context`` header of a response (tests, the benchmark)."""
    return headers.get(HEADER) or headers.get(HEADER.lower())
