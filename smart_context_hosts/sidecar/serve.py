"""``smart-context serve [VAULT]``: run the reference sidecar on this machine.

With no VAULT, the packaged example vault is copied once into a working folder
(``$SMART_CONTEXT_HOME/example-vault``, by default ``~/.local/share/smart-context/``) and served
from there, so the packaged copy is never changed. The server binds 127.0.0.1 unless told
otherwise, and serving other machines needs ``--allow-remote`` on purpose: the API reads and
writes your chats and has no login. A client too slow to send its request is dropped, and the
number of connections is bounded (:mod:`.connections`).
"""

from __future__ import annotations

import argparse
import asyncio
import errno
import ipaddress
import logging
import os
import shutil
import socket
import sys
import tempfile
import webbrowser
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from smart_context.allocator import collecting_between, fewer_arenas, quiet_collector
from smart_context.errors import SmartContextError
from smart_context.resources import example_vault_dir

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765
HOME_ENV = "SMART_CONTEXT_HOME"
EXAMPLE_VAULT_NAME = "example-vault"
GRACEFUL_SHUTDOWN_SECONDS = 3  # open event streams never end on their own
# What running the plugin leaves in a vault, never copied with the example vault: in a source
# checkout the packaged copy is the repository's, where a run on it leaves its caches, memory
# database, locks and set-aside files; a first copy holds the example as written.
NOT_COPIED = (
    "*.lock",
    "*.tmp",
    "__pycache__",
    "*.embeddings.json",
    "smart_context.sqlite*",
    "smart_context",
    "*.corrupt-*",
    "*.recovered-*",
)

if TYPE_CHECKING:
    import uvicorn
    from starlette.types import ASGIApp
    from uvicorn import Config

    from smart_context_hosts.sidecar.runtime import Sidecar

log = logging.getLogger(__name__)


class ServeError(SmartContextError):
    """The server cannot start; the message says why and what to do."""


def default_home() -> Path:
    """Where the sidecar keeps its own files: ``$SMART_CONTEXT_HOME`` or the XDG data folder."""
    if os.environ.get(HOME_ENV):
        return Path(os.environ[HOME_ENV]).expanduser()
    data_home = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(data_home).expanduser() / "smart-context"


def prepare_example_vault(home: Path | None = None, source: Path | None = None) -> Path:
    """The working copy of the example vault, copied from ``source`` the first time only.

    ``home`` defaults to :func:`default_home`, ``source`` to the packaged example vault.
    """
    target = (home or default_home()) / EXAMPLE_VAULT_NAME
    if target.exists():
        return target
    source = source or example_vault_dir()
    if not source.is_dir():
        raise ServeError(
            f"The example vault is missing from this installation ({source}). "
            "Pass the folder of a vault instead: smart-context serve PATH"
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    # Copy next to the target, then rename: an interrupted copy never looks like a vault.
    staging = Path(tempfile.mkdtemp(prefix=f".{EXAMPLE_VAULT_NAME}.", dir=target.parent))
    try:
        shutil.copytree(source, staging / "v", ignore=shutil.ignore_patterns(*NOT_COPIED))
        os.replace(staging / "v", target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback addresses (127.0.0.0/8, ::1)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_bind_host(host: str, allow_remote: bool) -> None:
    """Refuse a non-loopback address unless remote access was asked for explicitly."""
    if not is_loopback(host) and not allow_remote:
        raise ServeError(
            f"Refusing to listen on {host}: other machines could read and write your chats, "
            "and the API has no login. Use the default 127.0.0.1, or add --allow-remote if "
            "you really mean to serve your network."
        )


def server_on(app: ASGIApp, host: str, port: int, **options: Any) -> tuple[socket.socket, Config]:
    """A socket listening on ``host:port`` (:func:`bind_socket`) and the uvicorn config that
    serves ``app`` on it, as the commands serve (``options``: more for ``uvicorn.Config``)."""
    from smart_context_hosts.sidecar.connections import server_config

    sock = bind_socket(host, port)
    given: dict[str, Any] = {"timeout_graceful_shutdown": GRACEFUL_SHUTDOWN_SECONDS}
    given |= {"log_level": "info", **options}
    return sock, server_config(app, host=host, port=sock.getsockname()[1], **given)


@asynccontextmanager
async def serving(app: ASGIApp, **options: Any) -> AsyncIterator[str]:
    """``app`` served by uvicorn on a free loopback port while the block runs (tests and
    benchmarks; ``options``: as :func:`server_on`); yields the base URL."""
    import uvicorn

    sock, config = server_on(app, "127.0.0.1", 0, **options)
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        async with asyncio.timeout(10):
            while not server.started:  # noqa: ASYNC110 (uvicorn offers a flag, not an event)
                await asyncio.sleep(0.01)
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        await task
        sock.close()


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port``; a busy port is a :class:`ServeError`."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host.strip("[]"), port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
    except socket.gaierror as exc:
        raise ServeError(f"Cannot listen on {host!r}: {exc.strerror}.") from exc
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise ServeError(
                f"Port {port} on {host} is already in use (another smart-context serve?). "
                f"Stop that program or pick another port: --port {port + 1}"
            ) from exc
        raise ServeError(f"Cannot listen on {host}:{port}: {exc.strerror or exc}.") from exc
    sock.setblocking(False)
    return sock


def url_for(host: str, sock: socket.socket) -> str:
    """The address to open in a browser."""
    port = sock.getsockname()[1]
    shown = f"[{host.strip('[]')}]" if ":" in host else host
    if host in ("0.0.0.0", "::"):  # noqa: S104 (naming the address --allow-remote may bind)
        shown = "127.0.0.1"
    return f"http://{shown}:{port}/"


def resolve_vault(vault: Path | None) -> Path:
    """The vault to serve: ``vault`` if it is a folder, else the example vault's working copy."""
    if vault is None:
        return prepare_example_vault()
    vault = Path(vault).expanduser().resolve()
    if not vault.is_dir():
        raise ServeError(f"The vault folder {vault} does not exist (or is not a folder).")
    return vault


def serve(
    vault: Path | None,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    allow_remote: bool = False,
    open_browser: bool = False,
) -> None:
    """Serve ``vault`` (``None``: the example vault) until interrupted.

    Raises :class:`ServeError` or :class:`SidecarConfigError` with a message to show as is.
    """
    check_bind_host(host, allow_remote)
    folder = resolve_vault(vault)
    import uvicorn  # the web stack is needed only here

    from smart_context_hosts.sidecar.app import create_app
    from smart_context_hosts.sidecar.runtime import Sidecar

    sidecar = Sidecar(folder)
    sock, config = server_on(create_app(sidecar, allow_remote=allow_remote), host, port)
    url = url_for(host, sock)
    server = uvicorn.Server(config)
    print(f"Smart Context sidecar: vault {folder}\nOpen {url} (Ctrl+C to stop)", flush=True)
    run_server(_run_server(server, sock, sidecar, url if open_browser else None))


async def _run_server(
    server: uvicorn.Server, sock: socket.socket, sidecar: Sidecar, browser_url: str | None
) -> None:
    helpers = [asyncio.create_task(_close_streams_on_exit(server, sidecar))]
    if browser_url:
        helpers.append(asyncio.create_task(_open_when_started(server, browser_url)))
    try:
        await server.serve(sockets=[sock])
    finally:
        for task in helpers:
            task.cancel()
        sock.close()


async def _close_streams_on_exit(server: uvicorn.Server, sidecar: Sidecar) -> None:
    # uvicorn waits for open responses before stopping, and the browsers' event streams never
    # end by themselves: end them as soon as Ctrl+C arrives, instead of having them cancelled.
    while not server.should_exit:  # noqa: ASYNC110 (uvicorn offers a flag, not an event)
        await asyncio.sleep(0.1)
    sidecar.host.events.close()


async def _open_when_started(server: uvicorn.Server, url: str) -> None:
    while not server.started:  # noqa: ASYNC110 (uvicorn offers a flag, not an event)
        await asyncio.sleep(0.05)
    await asyncio.to_thread(webbrowser.open, url)


def port_number(text: str) -> int:
    """A ``--port`` value: 0 (any free port) to 65535, else the command refuses it (a port out
    of range was taken modulo 65536 by the socket: 99999 listened on 34463)."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is not a port: 0 (any free one) to 65535")
    return port


def add_address_arguments(parser: argparse.ArgumentParser, port: int, what: str) -> None:
    """``--host``, ``--port`` and ``--allow-remote``, for a command serving ``what``."""
    parser.add_argument("--host", default=DEFAULT_HOST, help="address to listen on (127.0.0.1)")
    parser.add_argument("--port", type=port_number, default=port, help=f"port ({port}; 0 = any)")
    parser.add_argument(
        "--allow-remote",
        action="store_true",
        help=f"allow a --host other machines can reach ({what} has no login)",
    )


def add_serve_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``serve`` options, for the ``smart-context`` command line."""
    parser.add_argument(
        "vault",
        nargs="?",
        type=Path,
        default=None,
        help="the vault folder (default: a working copy of the example vault)",
    )
    add_address_arguments(parser, DEFAULT_PORT, "the API")
    parser.add_argument(
        "--open", dest="open_browser", action="store_true", help="open the chat in the web browser"
    )


def run_serve(args: argparse.Namespace) -> int:
    """Run ``serve`` from parsed arguments; returns the process exit code."""
    return run_until_stopped(
        "serve",
        lambda: serve(
            args.vault,
            host=args.host,
            port=args.port,
            allow_remote=args.allow_remote,
            open_browser=args.open_browser,
        ),
    )


# How long a thread may keep the interpreter lock that another asks for (Python's default: 5 ms).
# The servers answer requests on one event loop while background passes (summaries, the budget's
# first read of a long chat) run Python in threads; each time the loop waits for the lock it
# waited up to 5 ms. At 1 ms (measured while topic maps still ran in threads too), 50
# people through one proxy: p99 added to the first byte 1.24 s against 1.66 s, 0.42 s against
# 0.81 s after the first minute (benchmarks/bench_team.py, one run each, same session).
SWITCH_INTERVAL = 0.001


# "asyncio" runs the servers on asyncio's own event loop where uvloop is installed (a
# comparison, or a suspected difference between the two); unset or "uvloop": uvloop's
LOOP_ENV = "SMART_CONTEXT_LOOP"
LOOPS = ("uvloop", "asyncio")


def run_server(main: Coroutine[Any, Any, None]) -> None:
    """Run a server command's ``main`` on uvloop's event loop where it is installed (the
    ``serve`` extra brings it on Linux and macOS), else on asyncio's. A server's event loop
    serves every request and relays every stream: asyncio's own loop, in Python, was about a
    quarter of the interpreter's time in a proxy serving 50 people (py-spy, ``--gil``).
    :data:`LOOP_ENV` names the loop; a name it does not know, or uvloop where it is not
    installed, is said in a log line and the server runs on the loop it can."""
    asked = os.environ.get(LOOP_ENV) or "uvloop"
    if asked not in LOOPS:
        log.warning(
            "%s=%r is not one of %s: the default event loop is used.",
            LOOP_ENV,
            asked,
            ", ".join(LOOPS),
        )
        asked = "uvloop"
    loop_factory = None
    if asked == "uvloop":
        try:
            import uvloop
        except ImportError:
            if os.environ.get(LOOP_ENV):  # asked for by name: say why it is not used
                log.warning(
                    "%s=uvloop, but uvloop is not installed: asyncio's loop is used.", LOOP_ENV
                )
        else:
            loop_factory = uvloop.new_event_loop
    with asyncio.Runner(loop_factory=loop_factory) as runner:
        runner.run(collecting_between(main))  # the collector's passes between requests


def run_until_stopped(command: str, run: Callable[[], None]) -> int:
    """Run a server command until Ctrl+C: 0, or 2 with the message when it cannot start."""
    logging.basicConfig(level=logging.INFO, format="%(levelname)s: %(name)s: %(message)s")
    sys.setswitchinterval(SWITCH_INTERVAL)  # this process is ours: a server command's
    quiet_collector()  # and so is its cycle collector (smart_context/allocator.py)
    fewer_arenas()  # and its allocator, before the server's threads start
    try:
        run()
    except SmartContextError as exc:  # a refused address, a bad setting or vault: said plainly
        print(f"smart-context {command}: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        pass
    finally:
        quiet_collector(False)
    return 0
