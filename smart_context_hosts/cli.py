"""``smart-context``: inspect what a chat would send, extract its topics, or serve the web app.

    smart-context context VAULT CHAT_ID [--topics A,B]   which messages go to the model, and why
    smart-context topics VAULT CHAT_ID                   run topic extraction and print the topics
    smart-context serve [VAULT]                          the reference sidecar with the panel
    smart-context proxy VAULT --upstream URL             Smart Context for any OpenAI client
    smart-context doctor VAULT                           damaged files and crash leftovers
    smart-context stats VAULT [--json]                   tokens sent per chat, against the whole
    smart-context memories VAULT [--json]                the stored memories, exported
    smart-context install-tailor VAULT [--force]         put the plugin into a Tailor vault

The commands run the plugin inside the reference sidecar's host, so they see exactly what a
request would: the vault's settings, its models, and the embedded offline default without one.
"""

from __future__ import annotations

import os

# Before numpy loads: the products on a request's path are small (a few sentences against a
# few thousand chunks), and OpenBLAS splitting one over both cores of a busy machine made it
# 10x slower (3 ms -> 34 ms, docs/benchmarks.md). A user's own setting wins; hosts that import the
# plugin keep theirs, this is only the reference sidecar and the command line.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import asyncio
import contextlib
import json
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from smart_context.context.assemble import assemble, plan_request, request_items
from smart_context.errors import SmartContextError
from smart_context.items.request import RequestContext
from smart_context.messages import History, conversation
from smart_context.paths import ChatId, check_chat_id
from smart_context.record import included_ids
from smart_context.shorten import shorten
from smart_context.topics.refresh import refresh
from smart_context_hosts.cli_checks import check_chat, check_loaded, check_topics
from smart_context_hosts.cli_items import show_items
from smart_context_hosts.cli_reports import (
    check_vault_folder,
    show_doctor,
    show_memories,
    show_stats,
)
from smart_context_hosts.cli_services import running_services

PREVIEW = 60
# 128 + SIGPIPE: the status a shell reports for `cat` when the reader of its output is gone, so
# a script that already tells a cut-short producer from a failed one (`set -o pipefail`) can
# tell ours too. Python ignores SIGPIPE and sees BrokenPipeError instead, so it is said in code.
EXIT_CLOSED_PIPE = 141
REPORTS = {"stats": show_stats, "memories": show_memories}  # read files only: no services
# --help is plain text: the module docstring's first paragraph, without its reST markup
DESCRIPTION = __doc__.split("\n\n")[0].replace("``", "")
VAULT_HELP = "the vault folder (the one with .vault.toml and .memory/)"
CHAT_HELP = "the chat's id: its file in the vault is .memory/CHAT_ID.json"


def _preview(text: Any) -> str:
    return shorten(str(text), PREVIEW)


async def show_context(
    vault: Path,
    chat_id: ChatId,
    topics: Sequence[str] | None,
    out: TextIO,
    message: str | None = None,
    as_json: bool = False,
) -> None:
    """Print which messages the next request of ``chat_id`` would send, and why; with
    ``message``, also the rules, references and tools it would be sent with
    (docs/contract.md §8)."""
    check_vault_folder(vault)
    check_chat(vault, chat_id)  # before the models load
    async with running_services(vault, list_tools=message is not None) as services:
        data = await services.chats.load(chat_id)
        check_loaded(vault, services.host.vault_path, chat_id)
        if topics is not None:
            check_topics(await services.chats.view(chat_id), chat_id, topics)
        history = conversation(data.get("messages"))
        decision = await assemble(services, chat_id, History(history), topics)
        request = None
        prompt: list[dict[str, Any]] = []
        record: dict[str, Any] = {}
        tools: list[dict[str, Any]] = []
        if message is not None:
            plan = plan_request(services, chat_id, History(history), message)
            prepared = await request_items(services, plan, decision, commit=False)
            prompt, request, record = prepared.messages, prepared.request, prepared.record
            tools = prepared.tools
    record = decision.record.as_dict() if request is None else record
    if as_json:
        result: dict[str, Any] = {"smart_context": record}
        if request is not None and message is not None:
            from smart_context_hosts.sidecar.pipeline import PipelineContext, prompt_messages

            # the messages exactly as the reference sidecar sends them (its own rule, reused)
            ctx = PipelineContext(message=message, original_message=message, history=prompt)
            result |= {
                "request_context": request.record(),
                "tools": tools,
                "messages": prompt_messages(ctx),
            }
        print(json.dumps(result, indent=2, ensure_ascii=False), file=out)
        return
    sent = set(included_ids(record, [m.get("id") for m in history]))
    sticky = set(record["sticky_ids"])
    scores = record.get("scores", {})
    topics_text = ", ".join(record["active_topics"]) or "none"
    cuts = ", ".join(f"{label} {cut}" for label, cut in record.get("cuts", {}).items())
    print(
        f"chat {chat_id}: mode {record['mode']}, topics: {topics_text}, "
        f"threshold {record['threshold']}" + (f" (cuts: {cuts})" if cuts else ""),
        file=out,
    )
    if "error" in record:
        print(f"note: {record['error']}", file=out)
    if record["mode"] == "fallback":
        print(f"{record['note']} (the closest came to {record['best_score']})\n", file=out)
    else:
        print(f"{len(sent)} of {record['total_messages']} messages in context\n", file=out)
    for m in history:
        mid = m.get("id")
        why = "sticky" if mid in sticky else (f"{scores[mid]:.3f}" if mid in scores else "")
        mark = "+" if mid in sent else "-"
        print(
            f"{mark} {mid!s:<10} {m.get('role')!s:<9} {why:>6}  {_preview(m.get('content'))}",
            file=out,
        )
    if request is not None:
        print(f"\nsent with, for {_preview(message)!r}:", file=out)
        _print_request(request, out, [str(t["function"]["name"]) for t in tools])
        _print_notes(record.get("knowledge") or [], out)


def _print_request(request: RequestContext, out: TextIO, sent_tools: Sequence[str]) -> None:
    """The request context's items by type, as View context groups them; with the tools, the
    plugin's own of ``sent_tools`` (the function names sent, which no item names)."""
    headings = {"rule": "rules", "reference": "references", "tool": "tools"}
    for kind, heading in headings.items():
        chosen = sorted(
            (c for c in request.items if c.item.type == kind), key=lambda c: c.item.sort_key()
        )
        lines = []
        for c in chosen:
            name = f"{c.item.server_name}.{c.item.name}" if c.item.server_name else c.item.name
            score = f"  {c.score:.2f}" if c.score is not None else ""
            priority = "   " if kind == "tool" else c.item.priority_label
            lines.append(f"    {priority} {c.mode:<9} {name}{score}")
        if kind == "tool":
            named = {f"{c.item.server_name}__{c.item.name}" for c in chosen}
            own = [n.replace("__", ".", 1) for n in sent_tools if n not in named]
            lines += [f"        {'built in':<9} {name}" for name in own]
        print(f"  {heading}:" + ("" if lines else " none"), file=out)
        for line in lines:
            print(line, file=out)
    if request.error:
        print(f"  note: {request.error}", file=out)


def _print_notes(notes: Sequence[dict[str, Any]], out: TextIO) -> None:
    """The vault notes the request cites (the knowledge base), best first."""
    print("  notes:" + ("" if notes else " none"), file=out)
    for note in notes:
        passages = f"{note['passages']} passage" + ("s" if note["passages"] != 1 else "")
        print(f"    {note['score']:.2f} {note['path']} ({passages})", file=out)


async def show_topics(vault: Path, chat_id: ChatId, out: TextIO, save: bool = False) -> None:
    """Run topic extraction for ``chat_id`` now and print the topics; with ``save``, also
    write them to the chat (as the background pass does), else the vault stays as it was."""
    check_vault_folder(vault)
    check_chat(vault, chat_id)  # never extract for a mistyped id
    async with running_services(vault, save=save) as services:
        await services.chats.load(chat_id)
        check_loaded(vault, services.host.vault_path, chat_id)
        await refresh(services.topic_pass, chat_id, full=True)  # the user asks: a new map
        view = await services.chats.view(chat_id)
    print(f"chat {chat_id}: {view.total_messages} messages", file=out)
    for topic in view.topics:
        if topic.get("sticky"):
            ids = ", ".join(map(str, topic.get("message_ids", [])))
            print(f"  [sticky] {topic['label']}: {ids}", file=out)
        else:
            print(f"  {topic['label']:<32} {topic.get('count', 0):>4} messages", file=out)
    if not save:
        print("(not saved: --save writes them to the chat, where the panel shows them)", file=out)


async def serve_memory(vault: Path) -> None:
    """Start the plugin's services for ``vault`` and serve its long memory as an MCP server over
    stdio (``smart-context mcp``)."""
    from smart_context.commands import make_commands
    from smart_context.mcp.server import serve_stdio

    # stdout carries the protocol alone
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, force=True)
    # it stores memories and pins for the client: it works on the vault itself
    async with running_services(vault, save=True) as services:
        await serve_stdio(make_commands(services))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="smart-context", description=DESCRIPTION)
    sub = parser.add_subparsers(dest="command", required=True)
    ctx = sub.add_parser("context", help="show which messages would go to the model, and why")
    ctx.add_argument("vault", type=Path, help=VAULT_HELP)
    ctx.add_argument("chat_id", help=CHAT_HELP)
    ctx.add_argument(
        "--topics",
        help="comma-separated topic labels to filter by (default: the chat's selected topics)",
    )
    top = sub.add_parser("topics", help="extract and print a chat's topics")
    top.add_argument("vault", type=Path, help=VAULT_HELP)
    top.add_argument("chat_id", help=CHAT_HELP)
    top.add_argument(
        "--save", action="store_true", help="write the topics to the chat (default: only show)"
    )
    ctx.add_argument(
        "--message", help="also show the rules, references and tools this message would get"
    )
    ctx.add_argument("--json", action="store_true", help="print JSON")
    items = sub.add_parser(
        "items", help="list the vault's rules, references and tools, or search them"
    )
    items.add_argument("vault", type=Path, help=VAULT_HELP)
    items.add_argument("--query", help="also show what agent selection adds for this message")
    items.add_argument("--chat", help="mark the items in this chat's session; use its settings")
    items.add_argument("--json", action="store_true", help="print JSON")
    mcp = sub.add_parser("mcp", help="serve the vault's long memory as an MCP server (stdio)")
    mcp.add_argument("vault", type=Path, help=VAULT_HELP)
    doctor = sub.add_parser("doctor", help="list damaged files and crash leftovers in a vault")
    doctor.add_argument("vault", type=Path, help=VAULT_HELP)
    stats = sub.add_parser("stats", help="tokens sent per chat, against the whole history")
    stats.add_argument("vault", type=Path, help=VAULT_HELP)
    stats.add_argument("--json", action="store_true", help="print JSON")
    memories = sub.add_parser("memories", help="export the vault's stored memories")
    memories.add_argument("vault", type=Path, help=VAULT_HELP)
    memories.add_argument("--json", action="store_true", help="print JSON")
    tailor = sub.add_parser("install-tailor", help="install the plugin into a Tailor vault")
    tailor.add_argument("vault", type=Path, help="the Tailor vault to install the plugin into")
    tailor.add_argument(
        "--force", action="store_true", help="comment out settings the plugin would refuse"
    )
    tailor.add_argument("--tailor", type=Path, help="your Tailor checkout, to name its Python")
    serve = sub.add_parser(
        "serve", help="run the reference sidecar: a local web chat with the panel"
    )
    from smart_context_hosts.sidecar.serve import add_serve_arguments

    add_serve_arguments(serve)
    prox = sub.add_parser(
        "proxy", help="an OpenAI-compatible server that puts Smart Context in front of another"
    )
    from smart_context_hosts.proxy.serve import add_proxy_arguments

    add_proxy_arguments(prox)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``smart-context`` console script.

    Whatever the command, a reader that stops reading (``smart-context context ... | head -1``)
    ends it quietly, as it ends ``cat``, with :data:`EXIT_CLOSED_PIPE`.
    """
    try:
        try:
            return run_command(build_parser().parse_args(argv))
        finally:
            sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's last flush
    except BrokenPipeError:
        _discard_stdout()
        return EXIT_CLOSED_PIPE


def _discard_stdout() -> None:
    """Point stdout at the null device: Python flushes it once more on exit, which would fail
    again and print a traceback after all."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        with contextlib.suppress(OSError, ValueError):  # a stdout with no file: nothing to do
            os.dup2(devnull, sys.stdout.fileno())
    finally:
        os.close(devnull)


def run_command(args: argparse.Namespace) -> int:
    """Run the command ``args`` names; returns the process exit code."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(message)s")
    try:
        if args.command == "serve":
            from smart_context_hosts.sidecar.serve import run_serve

            return run_serve(args)
        if args.command == "proxy":
            from smart_context_hosts.proxy.serve import run_proxy

            return run_proxy(args)
        if args.command == "install-tailor":
            from smart_context_hosts.install.tailor import run_install

            return run_install(args.vault, args.force, args.tailor, sys.stdout)
        if args.command == "doctor":
            return show_doctor(args.vault, sys.stdout)
        if args.command in REPORTS:
            return REPORTS[args.command](args.vault, args.json, sys.stdout, sys.stderr)
        if args.command == "mcp":
            asyncio.run(serve_memory(args.vault))
            return 0
        if args.command == "items":
            chat = None if args.chat is None else check_chat_id(args.chat)
            asyncio.run(show_items(args.vault, args.query, args.json, sys.stdout, chat))
            return 0
        chat_id = check_chat_id(args.chat_id)  # refuse a hostile id before touching anything
        if args.command == "context":
            topics = (
                [t.strip() for t in args.topics.split(",") if t.strip()] if args.topics else None
            )
            asyncio.run(
                show_context(args.vault, chat_id, topics, sys.stdout, args.message, args.json)
            )
        else:
            asyncio.run(show_topics(args.vault, chat_id, sys.stdout, args.save))
    except SmartContextError as exc:
        print(f"smart-context: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
