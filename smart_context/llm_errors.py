"""The edge to OpenAI-compatible servers: API keys, and failures told in words a person can act on.

Shared by every caller of an OpenAI-compatible endpoint (the embedding backend here, the reference
sidecar's chat service), so a refused connection or a rejected key reads the same everywhere.
The ``openai`` package is imported only inside :func:`describe_openai_error`, when one of its
exceptions already exists, so importing this module stays cheap.
"""

from __future__ import annotations

import ipaddress
import os
from urllib.parse import urlsplit

#: Sent to loopback servers when no key is configured. Ollama, vLLM, LM Studio and llama.cpp
#: accept any key, but the ``openai`` client refuses to start without one.
LOCAL_PLACEHOLDER_KEY = "sk-no-key-required"

_SERVER_MESSAGE_LIMIT = 300


def is_loopback_url(url: str) -> bool:
    """True when ``url`` names this machine (``localhost``, ``127.0.0.0/8``, ``::1``)."""
    host = (urlsplit(url).hostname or "").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def resolve_api_key(base_url: str, api_key_env: str) -> str | None:
    """The key from the environment variable named ``api_key_env``.

    Falls back to :data:`LOCAL_PLACEHOLDER_KEY` for loopback servers, which usually need no key;
    ``None`` means a remote server and no key, and the caller should say
    :func:`missing_key_message`.
    """
    key = os.environ.get(api_key_env, "").strip()
    if key:
        return key
    return LOCAL_PLACEHOLDER_KEY if is_loopback_url(base_url) else None


def missing_key_message(base_url: str, api_key_env: str, what: str) -> str:
    """What to say when a remote endpoint is configured but its key is not."""
    return (
        f"No API key for the {what} endpoint at {base_url}: set the environment variable "
        f"{api_key_env} (servers on this machine, such as Ollama, need none)."
    )


def describe_openai_error(
    exc: BaseException,
    base_url: str,
    what: str,
    *,
    model: str | None = None,
    api_key_env: str | None = None,
    url_setting: str = "openai_base_url",
) -> str:
    """One sentence or two saying what went wrong with a call through ``openai`` and what to do.

    ``what`` names the endpoint in the user's words (``"embedding"``, ``"chat"``); ``model`` and
    ``api_key_env`` make the 404 and 401 advice precise when the caller knows them;
    ``url_setting`` is where the person sets ``base_url`` (e.g. ``"[llm] base_url"``).
    """
    import openai

    where = f"the {what} endpoint at {base_url}"
    if isinstance(exc, openai.APITimeoutError):
        return (
            f"{_cap(where)} did not answer in time. The server may be overloaded or still "
            "loading the model; try again, or raise the timeout."
        )
    if isinstance(exc, openai.APIConnectionError):
        cause = str(exc.__cause__ or exc) or type(exc).__name__
        return f"Cannot reach {where} ({cause}). Is the server running? Check {url_setting}."
    if isinstance(exc, openai.APIStatusError):
        return _describe_status(
            exc, where, base_url, model=model, api_key_env=api_key_env, url_setting=url_setting
        )
    if isinstance(exc, openai.APIResponseValidationError):
        return f"{_cap(where)} sent a reply that is not in the OpenAI format."
    return f"The call to {where} failed: {type(exc).__name__}: {exc}"


def _describe_status(
    exc: object,
    where: str,
    base_url: str,
    *,
    model: str | None,
    api_key_env: str | None,
    url_setting: str,
) -> str:
    """The advice for an HTTP error status (``exc`` is an ``openai.APIStatusError``)."""
    status = int(getattr(exc, "status_code", 0))
    said = _server_said(exc)
    model_name = f"'{model}'" if model else "the configured model"
    if status == 401:
        fix = f"set the environment variable {api_key_env}" if api_key_env else "check the API key"
        return f"{_cap(where)} rejected the API key (HTTP 401){said}; {fix}."
    if status == 403:
        return f"{_cap(where)} refused access to {model_name}{said}; check the key's permissions."
    if status == 404:
        return (
            f"Model {model_name} is not available at {base_url}{said}. Check the model name "
            f"(for Ollama: `ollama pull {model or '<model>'}`) and that {url_setting} ends in /v1."
        )
    if status == 429:
        # OpenAI answers 429 both for bursts and for an exhausted account; only one passes by
        # waiting.
        if getattr(exc, "code", None) == "insufficient_quota":
            return f"{_cap(where)} says the account is out of quota{said}; check its billing."
        return f"{_cap(where)} is rate-limiting requests{said}; wait a moment and try again."
    if status >= 500:
        return (
            f"{_cap(where)} failed with a server error (HTTP {status}){said}. "
            "Check the server's log, or try again later."
        )
    return f"{_cap(where)} refused the request (HTTP {status}){said}."


def _server_said(exc: object) -> str:
    """``" (server said: …)"`` from an OpenAI-style error body, or ``""`` when it said nothing."""
    body = getattr(exc, "body", None)
    text = body.get("message") if isinstance(body, dict) else body
    if not isinstance(text, str) or not text.strip():
        return ""
    text = " ".join(text.split())
    if len(text) > _SERVER_MESSAGE_LIMIT:
        text = text[: _SERVER_MESSAGE_LIMIT - 1] + "…"
    return f" (server said: {text})"


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]
