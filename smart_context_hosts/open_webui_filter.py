"""
title: Smart Context
description: Each message sent with the context it needs, chosen by Smart Context.
author: Smart Context
version: 0.1.0
license: MIT
required_open_webui_version: 0.6.0
"""

# An Open WebUI Filter function, in one file: paste it on Admin Panel -> Functions -> New (or
# POST it to /api/v1/functions/create), enable it, and make it global (the function's menu ->
# Global; POST /api/v1/functions/id/smart_context/toggle/global) or add it to models (Workspace
# -> Models -> a model -> Filters). It is no per-chat switch: it runs on every chat of the
# models it is on. It needs `smart-context serve VAULT` (or `smart-context proxy`) running
# where Open WebUI's server can reach it: the valve `url`.
#
# Before the model is called (inlet), it hands the chat's messages to Smart Context, which stores
# them as a vault chat and answers with the messages to send: the chat's system prompt first and
# unchanged, then what Smart Context chose. After the reply (outlet) it hands the reply back, to
# be stored with the record of what it was sent with (the panel's View context, `stats`). When
# Smart Context cannot be reached or fails, the messages go as they were: a chat never loses a
# reply because of it. Open WebUI's own background calls (titles, tags, follow-ups) are left alone.
#
# Standalone on purpose: it runs inside Open WebUI's process, so it imports only the standard
# library and pydantic (which Open WebUI has).

from __future__ import annotations

import asyncio
import contextlib
import json
import urllib.error
import urllib.request
from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import BaseModel, Field

Emitter = Callable[[dict[str, Any]], Awaitable[None]]


class Filter:
    class Valves(BaseModel):
        url: str = Field(
            default="http://127.0.0.1:8765",
            description="Where smart-context serve (or proxy) answers, seen from Open WebUI",
        )
        timeout: float = Field(default=10.0, description="Seconds to wait before sending as is")
        priority: int = Field(default=0, description="Order among filters (lower runs first)")

    def __init__(self) -> None:
        # no ``toggle``: a toggle filter runs only in chats whose button is on, and that button
        # is off in every new chat, so turns would go unshaped and unstored unnoticed
        self.valves = self.Valves()

    async def inlet(
        self,
        body: dict[str, Any],
        __metadata__: dict[str, Any] | None = None,
        __event_emitter__: Emitter | None = None,
    ) -> dict[str, Any]:
        metadata = __metadata__ or {}
        chat_id = metadata.get("chat_id")
        if metadata.get("task") or not chat_id or not isinstance(body.get("messages"), list):
            return body
        try:
            answer = await self._post(
                "/api/turns",
                {"chat_id": chat_id, "messages": body["messages"], "model": body.get("model")},
            )
        except (OSError, ValueError) as exc:  # unreachable, timed out, or not our answer
            await _status(__event_emitter__, f"Smart Context is off for this message: {exc}")
            return body
        messages = answer.get("messages")
        if answer.get("rebuilt") and isinstance(messages, list):
            body["messages"] = messages
        summary = answer.get("summary")
        if isinstance(summary, str):
            await _status(__event_emitter__, f"Smart Context: {summary}")
        return body

    async def outlet(
        self, body: dict[str, Any], __metadata__: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        metadata = __metadata__ or {}
        messages = body.get("messages")
        chat_id = metadata.get("chat_id") or body.get("chat_id")
        if metadata.get("task") or not chat_id or not isinstance(messages, list) or not messages:
            return body
        last = messages[-1]
        if not isinstance(last, dict) or last.get("role") != "assistant":
            return body
        reply: dict[str, Any] = {"chat_id": chat_id, "content": str(last.get("content") or "")}
        usage = last.get("usage")
        if isinstance(usage, dict):
            reply["usage"] = usage
        if isinstance(body.get("model"), str):
            reply["model"] = body["model"]
        # the reply is the user's either way: ours is a copy, and a failure to store it is ours
        with contextlib.suppress(OSError, ValueError):
            await self._post("/api/turns/reply", reply)
        return body

    async def _post(self, path: str, payload: dict[str, Any]) -> dict[str, Any]:
        url = self.valves.url.rstrip("/") + path
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"the url valve must be http(s), not {self.valves.url!r}")
        data = json.dumps(payload).encode("utf-8")
        timeout = self.valves.timeout

        def post() -> Any:
            request = urllib.request.Request(  # noqa: S310 (checked above: http or https)
                url, data=data, headers={"Content-Type": "application/json"}, method="POST"
            )
            try:
                with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310
                    return json.loads(response.read())
            except urllib.error.HTTPError as exc:
                raise ValueError(f"Smart Context answered {exc.code}") from exc

        answer = await asyncio.to_thread(post)
        if not isinstance(answer, dict):
            raise ValueError("Smart Context's answer is not a JSON object")
        return answer


async def _status(emit: Emitter | None, text: str) -> None:
    if emit is not None:
        await emit({"type": "status", "data": {"description": text[:200], "done": True}})
