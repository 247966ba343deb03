"""``smart-context proxy VAULT --upstream URL``: run the OpenAI-compatible proxy on this machine.

It listens on 127.0.0.1 (another address needs ``--allow-remote``: the proxy reads and writes
the vault's chats for whoever reaches it), on port 8766 unless told otherwise, beside ``serve``
on 8765, which shows the proxied chats with the panel.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from smart_context_hosts.sidecar.serve import (
    DEFAULT_HOST,
    ServeError,
    add_address_arguments,
    check_bind_host,
    resolve_vault,
    run_server,
    run_until_stopped,
    server_on,
)

DEFAULT_PORT = 8766


def positive_seconds(text: str) -> float:
    """A number of seconds over 0 (and finite), else the command refuses it."""
    try:
        seconds = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0 < seconds < float("inf"):
        raise argparse.ArgumentTypeError(f"{text} is not a number of seconds over 0")
    return seconds


def check_upstream(url: str) -> str:
    """``url`` when it is an http(s) URL with a host, else a :class:`ServeError` that says so."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ServeError(
            f"--upstream {url!r} is not an http(s) URL. Give the base URL your client would use, "
            "for example https://api.openai.com/v1 or http://127.0.0.1:11434/v1"
        )
    if parts.query or parts.fragment:
        raise ServeError(f"--upstream {url!r}: give the base URL alone, without ? or #")
    return url.strip().rstrip("/")


@dataclass(frozen=True)
class Team:
    """``--vaults DIR``: a vault per person under ``folder``, the person named by the key's
    owner (``key_owners``, a JSON file) or by ``user_header``."""

    folder: Path
    user_header: str | None = None
    key_owners: Path | None = None


def proxy(
    vault: Path | None,
    upstream: str,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    allow_remote: bool = False,
    chat_headers: tuple[str, ...] = (),
    prefix_chats: bool = False,
    timeout: float = 600.0,
    team: Team | None = None,
    user_chats: bool = False,
    keep_user_headers: bool = False,
    shape_timeout: float = 10.0,
) -> None:
    """Serve the proxy for ``vault`` (or a ``team``'s vaults) until interrupted; a
    :class:`ServeError` says why not."""
    check_bind_host(host, allow_remote)
    upstream = check_upstream(upstream)
    import uvicorn

    from smart_context_hosts.proxy.app import ProxyOptions, create_app
    from smart_context_hosts.proxy.vaults import People, read_key_owners
    from smart_context_hosts.sidecar.runtime import Sidecar

    options = ProxyOptions(
        upstream,
        chat_headers,
        prefix_chats,
        timeout,
        user_chats,
        keep_user_headers,
        shape_timeout,
    )
    if team is None:
        folder = resolve_vault(vault)
        app = create_app(Sidecar(folder), options, allow_remote=allow_remote)
    else:
        if vault is not None:
            raise ServeError("Give a VAULT or --vaults DIR, not both.")
        if team.user_header is None and team.key_owners is None:
            raise ServeError(
                "--vaults needs --user-header NAME or --key-owners FILE: who is asking"
            )
        folder = team.folder.expanduser().resolve()
        folder.mkdir(parents=True, exist_ok=True)
        owners = read_key_owners(team.key_owners) if team.key_owners else None
        app = create_app(
            People(folder, team.user_header, owners), options, allow_remote=allow_remote
        )
    sock, config = server_on(app, host, port)
    shown = "127.0.0.1" if host in ("0.0.0.0", "::") else host  # noqa: S104 (naming it only)
    print(
        f"Smart Context proxy: {'vaults under ' if team else 'vault '}{folder}, "
        f"upstream {upstream}\n"
        f"Point your client at http://{shown}:{sock.getsockname()[1]}/v1 and name each chat "
        "with the X-Smart-Context-Chat header (Ctrl+C to stop)",
        flush=True,
    )
    try:
        run_server(uvicorn.Server(config).serve(sockets=[sock]))
    finally:
        sock.close()


def add_proxy_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``proxy`` options, for the ``smart-context`` command line."""
    parser.add_argument(
        "vault", nargs="?", type=Path, default=None, help="the vault folder its chats are kept in"
    )
    parser.add_argument(
        "--upstream",
        required=True,
        help="the OpenAI-compatible server to forward to: the base URL your client would use",
    )
    add_address_arguments(parser, DEFAULT_PORT, "the proxy")
    parser.add_argument(
        "--chat-header",
        action="append",
        default=[],
        metavar="NAME",
        help="another request header that names the chat (repeatable)",
    )
    parser.add_argument(
        "--prefix-chats",
        action="store_true",
        help="when no chat is named, take one chat per first message (two chats that start "
        "alike become one)",
    )
    parser.add_argument(
        "--user-chats",
        action="store_true",
        help="when no chat is named, take the body's user as the chat (one chat per person)",
    )
    parser.add_argument(
        "--timeout", type=float, default=600.0, help="seconds the upstream may stay silent (600)"
    )
    parser.add_argument(
        "--shape-timeout",
        type=positive_seconds,
        default=10.0,
        metavar="SECONDS",
        help="seconds Smart Context may take to shape a request before it goes as it came (10)",
    )
    parser.add_argument(
        "--keep-user-headers",
        action="store_true",
        help="send Open WebUI's headers naming the user (name, id, e-mail, role) on to the "
        "upstream; by default the proxy reads them and drops them",
    )
    parser.add_argument(
        "--vaults",
        type=Path,
        metavar="DIR",
        help="instead of VAULT: a vault per person under DIR (with --user-header or --key-owners)",
    )
    parser.add_argument(
        "--user-header", metavar="NAME", help="with --vaults: the header that names the person"
    )
    parser.add_argument(
        "--key-owners",
        type=Path,
        metavar="FILE",
        help="with --vaults: JSON of each key's SHA-256 (hex) to its owner's name",
    )


def run_proxy(args: argparse.Namespace) -> int:
    """Run ``proxy`` from parsed arguments; returns the process exit code."""
    return run_until_stopped(
        "proxy",
        lambda: proxy(
            args.vault,
            args.upstream,
            host=args.host,
            port=args.port,
            allow_remote=args.allow_remote,
            chat_headers=tuple(args.chat_header),
            prefix_chats=args.prefix_chats,
            timeout=args.timeout,
            team=Team(args.vaults, args.user_header, args.key_owners) if args.vaults else None,
            user_chats=args.user_chats,
            keep_user_headers=args.keep_user_headers,
            shape_timeout=args.shape_timeout,
        ),
    )
