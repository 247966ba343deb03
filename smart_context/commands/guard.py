"""What every command handler shares: argument checks, and errors as results, never a raise.

Handlers take keyword arguments and always return a dict: ``{"status": "success", ...}`` or
``{"status": "error", "error": "<what to do>"}`` (docs/contract.md §3).
"""

from __future__ import annotations

import functools
import inspect
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from smart_context.errors import ChatIdError, ConflictError, NotFoundError, SmartContextError
from smart_context.paths import ChatId, check_chat_id
from smart_context.services import Services

log = logging.getLogger("smart_context.commands")

Result = dict[str, Any]
Command = Callable[..., Awaitable[Result]]  # (services, **arguments) -> result
Handler = Callable[..., Awaitable[Result]]  # (**arguments) -> result, as the host calls it
MAX_TOPICS = 16
MAX_LABEL = 100


class BadArguments(SmartContextError):
    """A command was called with arguments it cannot use."""


# Why a command failed, for hosts that answer over HTTP (the sidecar maps them to 400, 404,
# 409, 503, 500).
BAD_ARGUMENTS = "bad_arguments"
NOT_FOUND = "not_found"  # the thing named does not exist (any more), e.g. a deleted memory
CONFLICT = "conflict"  # it exists, but its state refuses the command: an empty or damaged chat
UNAVAILABLE = "unavailable"
FAILED = "failed"


def _error(message: str, reason: str) -> Result:
    return {"status": "error", "error": message, "reason": reason}


def bind(command: Command, services: Services) -> Handler:
    """``command`` as the host calls it: keyword arguments in, a result out, whatever happens."""
    parameters = list(inspect.signature(command).parameters.values())[1:]
    signature = inspect.Signature(parameters)
    name = command.__name__.replace("_", " ")

    @functools.wraps(command)
    async def handler(**kwargs: Any) -> Result:
        try:
            signature.bind(**kwargs)
        except TypeError as exc:  # unexpected or missing keyword arguments
            return _error(f"{name}: {exc}", BAD_ARGUMENTS)
        try:
            return {"status": "success"} | await command(services, **kwargs)
        except (BadArguments, ChatIdError) as exc:
            return _error(str(exc), BAD_ARGUMENTS)
        except NotFoundError as exc:
            return _error(str(exc), NOT_FOUND)
        except ConflictError as exc:
            return _error(str(exc), CONFLICT)
        except SmartContextError as exc:  # e.g. the embedding endpoint cannot be reached
            return _error(str(exc), UNAVAILABLE)
        except Exception as exc:  # a handler must never raise into the host's command bus
            log.exception("Smart Context: command %s failed", command.__name__)
            return _error(f"Smart Context could not complete the command: {exc}", FAILED)

    handler.__signature__ = signature  # type: ignore[attr-defined]  # hosts check arguments by it
    return handler


def chat_id_argument(services: Services, chat_id: Any) -> ChatId:
    """The chat a command is about: the one named, or the one open now. Naming a chat does
    not open it: only the panel's own commands say which chat it shows (commands/topics.py)."""
    if chat_id is None or chat_id == "":
        if services.current_chat_id is None:
            raise BadArguments("No chat is open: pass chat_id.")
        return services.current_chat_id
    return check_chat_id(chat_id)


def topics_argument(topics: Any) -> list[str]:
    """A list of topic labels (``None``: no topics)."""
    if topics is None:
        return []
    if isinstance(topics, str) or not isinstance(topics, list):
        raise BadArguments(
            "topics must be a list of topic labels (an empty list clears the filter)."
        )
    if len(topics) > MAX_TOPICS:
        raise BadArguments(f"Select at most {MAX_TOPICS} topics at once.")
    labels = []
    for topic in topics:
        if not isinstance(topic, str) or not topic.strip() or len(topic) > MAX_LABEL:
            raise BadArguments(
                f"Each topic must be a non-empty label of at most {MAX_LABEL} characters."
            )
        labels.append(topic.strip())
    return labels
