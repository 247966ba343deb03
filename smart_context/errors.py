"""Our exception family. Every message is written for the person who has to act on it."""

from __future__ import annotations


class SmartContextError(Exception):
    """Base class of every error Smart Context raises on purpose."""


class ConfigError(SmartContextError):
    """A setting in ``.vault.toml`` is missing, mistyped or out of range."""

    def __init__(self, key: str, value: object, problem: str, file: str = ".vault.toml") -> None:
        self.key = key
        self.value = value
        self.file = file
        super().__init__(
            f"{file}: [plugins.smart_context] {key} = {value!r} is not valid: {problem}"
        )


class ChatIdError(SmartContextError, ValueError):
    """A chat id that is empty, too long, or would name a file outside ``.memory/``."""


class EmbeddingError(SmartContextError):
    """An embedding backend could not produce vectors (unreachable, misconfigured, bad reply)."""


class ExtractionError(SmartContextError):
    """Topic extraction produced nothing usable."""


class ToolServerError(SmartContextError):
    """An MCP server could not be started, reached or understood, or did not answer in time.

    A tool that ran and reported a failure is not this: that is a tool result with ``ok``
    false, for the model to read.
    """

    def __init__(self, server: str, problem: str) -> None:
        self.server = server
        self.problem = problem
        super().__init__(f"MCP server {server!r}: {problem}")


class MemoryDBError(SmartContextError):
    """The memory database could not be opened or used: newer schema, locked, unknown record."""


class NotFoundError(SmartContextError, LookupError):
    """A command named something that does not exist (any more): a stored memory, say."""


class ConflictError(SmartContextError):
    """A command that cannot act on what it names as that thing is now: a chat with no messages
    to filter, or one whose damaged file was set aside."""
