"""A small offline MCP server for the example vault's chats, written with the official SDK.

The tools fit the three example chats (a weekend coding project, a Japan trip, sourdough):

- ``convert_units``: kitchen, temperature and distance units, grams to cups by ingredient
- ``hydration``: a dough's baker's percentage, starter included
- ``yen_to_euro``: yen to euro at a fixed example rate (:data:`YEN_PER_EURO`)
- ``time_in``: the time in an IANA time zone, now or at a given moment
- ``word_count``: words, characters, sentences and reading time of a text

Every result is deterministic for the same arguments (``time_in`` without ``at`` reads the
clock) and comes back both as text and as structured content. A bad argument is a tool error
the model can read and correct, never a crash of the server.

Run it with ``python -m smart_context_hosts.example_mcp`` (stdio, what an MCP client starts) or
``python -m smart_context_hosts.example_mcp --http --port 8765`` (streamable HTTP on 127.0.0.1; port
0 picks a free one and the address is printed on stderr).
"""

from __future__ import annotations

import argparse
import math
import re
import socket
import sys
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Annotated, Literal, TypedDict
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, TextContent
from pydantic import Field

SERVER_NAME = "smart-context-example"

YEN_PER_EURO = 160.0
"""The fixed example rate, 1 EUR = 160 JPY: roughly the 2024-2025 average, never fetched live,
so answers stay the same offline and in tests."""

WORDS_PER_MINUTE = 200
"""Silent reading speed used for ``word_count``'s reading time."""

ML_PER_US_CUP = 236.5882365

# Per unit, in the category's base unit: grams, millilitres, millimetres.
_MASS = {"g": 1.0, "kg": 1000.0, "oz": 28.349523125, "lb": 453.59237}
_VOLUME = {
    "ml": 1.0,
    "l": 1000.0,
    "tsp": ML_PER_US_CUP / 48,
    "tbsp": ML_PER_US_CUP / 16,
    "fl_oz": ML_PER_US_CUP / 8,
    "cup": ML_PER_US_CUP,
}
_LENGTH = {
    "mm": 1.0,
    "cm": 10.0,
    "m": 1000.0,
    "km": 1_000_000.0,
    "in": 25.4,
    "ft": 304.8,
    "mi": 1_609_344.0,
}

# Grams per US cup, spooned and levelled: the usual kitchen-chart figures, approximate.
GRAMS_PER_CUP = {
    "water": 236.6,
    "milk": 242.0,
    "flour": 125.0,
    "wholemeal_flour": 120.0,
    "rye_flour": 102.0,
    "sugar": 200.0,
    "salt": 288.0,
    "butter": 227.0,
    "honey": 340.0,
    "oil": 218.0,
    "rice": 185.0,
}

Unit = Literal[
    "g", "kg", "oz", "lb", "ml", "l", "tsp", "tbsp", "fl_oz", "cup",
    "C", "F", "K", "mm", "cm", "m", "km", "in", "ft", "mi",
]  # fmt: skip
Ingredient = Literal[
    "water", "milk", "flour", "wholemeal_flour", "rye_flour", "sugar", "salt", "butter",
    "honey", "oil", "rice",
]  # fmt: skip


class Conversion(TypedDict):
    value: float
    unit: str
    text: str


class Hydration(TypedDict):
    hydration_pct: float
    total_flour_g: float
    total_water_g: float
    starter_pct: float
    text: str


class YenInEuro(TypedDict):
    euro: float
    rate_yen_per_euro: float
    text: str


class TimeIn(TypedDict):
    timezone: str
    iso: str
    time: str
    weekday: str
    utc_offset: str
    abbreviation: str
    text: str


class WordCount(TypedDict):
    words: int
    characters: int
    characters_without_spaces: int
    sentences: int
    reading_minutes: float
    text: str


def _reply(data: Mapping[str, object]) -> CallToolResult:
    """``text`` is what the model reads; the whole result is the structured content, checked
    against the tool's published output schema by the SDK."""
    return CallToolResult(
        content=[TextContent(type="text", text=str(data["text"]))], structured_content=dict(data)
    )


def _fmt(number: float) -> str:
    """At most two decimals, no trailing zeros: ``2.5``, ``212``, ``0.07``."""
    return f"{number:,.2f}".rstrip("0").rstrip(".")


def _category(unit: str) -> str:
    for name, table in (("mass", _MASS), ("volume", _VOLUME), ("length", _LENGTH)):
        if unit in table:
            return name
    return "temperature"


def _to_celsius(value: float, unit: str) -> float:
    if unit == "F":
        return (value - 32) * 5 / 9
    return value - 273.15 if unit == "K" else value


def _from_celsius(value: float, unit: str) -> float:
    if unit == "F":
        return value * 9 / 5 + 32
    return value + 273.15 if unit == "K" else value


def convert_units(
    value: Annotated[float, Field(description="The amount to convert.")],
    from_unit: Annotated[Unit, Field(description="The unit of `value`.")],
    to_unit: Annotated[Unit, Field(description="The unit to convert to.")],
    ingredient: Annotated[
        Ingredient | None,
        Field(description="Needed only between weight and volume (grams to cups and back)."),
    ] = None,
) -> Annotated[CallToolResult, Conversion]:
    """Convert kitchen, temperature and distance units.

    Weight: g, kg, oz, lb. Volume: ml, l, tsp, tbsp, fl_oz, cup (US). Temperature: C, F, K.
    Length: mm, cm, m, km, in, ft, mi. Weight and volume convert into each other only for a
    named ingredient (e.g. 500 g of flour in cups), using approximate kitchen-chart densities.
    """
    source, target = _category(from_unit), _category(to_unit)
    if source == "temperature" or target == "temperature":
        if source != target:
            raise ToolError(f"Cannot convert {from_unit} to {to_unit}: only C, F and K mix.")
        celsius = _to_celsius(value, from_unit)
        if celsius < -273.15 - 1e-9:
            raise ToolError(f"{_fmt(value)} {from_unit} is below absolute zero.")
        result = _from_celsius(celsius, to_unit)
    elif source == target:
        table = {"mass": _MASS, "volume": _VOLUME, "length": _LENGTH}[source]
        result = value * table[from_unit] / table[to_unit]
    elif {source, target} == {"mass", "volume"}:
        if ingredient is None:
            raise ToolError(
                f"Converting {from_unit} to {to_unit} needs an ingredient (e.g. 'flour'): "
                "a cup of flour weighs about half as much as a cup of water."
            )
        grams_per_ml = GRAMS_PER_CUP[ingredient] / ML_PER_US_CUP
        if source == "mass":
            result = value * _MASS[from_unit] / grams_per_ml / _VOLUME[to_unit]
        else:
            result = value * _VOLUME[from_unit] * grams_per_ml / _MASS[to_unit]
    else:
        raise ToolError(f"Cannot convert {source} ({from_unit}) to {target} ({to_unit}).")
    what = f" of {ingredient.replace('_', ' ')}" if ingredient else ""
    text = f"{_fmt(value)} {from_unit}{what} = {_fmt(result)} {to_unit}"
    return _reply(Conversion(value=round(result, 4), unit=to_unit, text=text))


def hydration(
    flour_g: Annotated[float, Field(gt=0, description="Flour in the dough, grams.")],
    water_g: Annotated[float, Field(ge=0, description="Water in the dough, grams.")],
    starter_g: Annotated[
        float, Field(ge=0, description="Sourdough starter added, grams (0 for none).")
    ] = 0.0,
    starter_hydration_pct: Annotated[
        float,
        Field(gt=0, le=1000, description="The starter's own hydration in percent (100 = 1:1)."),
    ] = 100.0,
) -> Annotated[CallToolResult, Hydration]:
    """Baker's percentage of a dough: total water over total flour, the starter's flour and
    water counted in. 65-70% is an easy first sourdough; 80% is slack and sticky."""
    starter_flour = starter_g / (1 + starter_hydration_pct / 100)
    total_flour = flour_g + starter_flour
    total_water = water_g + starter_g - starter_flour
    pct = total_water / total_flour * 100
    text = f"Hydration {pct:.1f}% ({_fmt(total_water)} g water / {_fmt(total_flour)} g flour" + (
        ", starter included)" if starter_g else ")"
    )
    return _reply(
        Hydration(
            hydration_pct=round(pct, 1),
            total_flour_g=round(total_flour, 1),
            total_water_g=round(total_water, 1),
            starter_pct=round(starter_g / flour_g * 100, 1),
            text=text,
        )
    )


def yen_to_euro(
    yen: Annotated[float, Field(ge=0, description="An amount in Japanese yen.")],
) -> Annotated[CallToolResult, YenInEuro]:
    """Convert Japanese yen to euro at a fixed example rate of 160 yen per euro (not a live
    rate; good for budgeting, not for exact prices)."""
    euro = yen / YEN_PER_EURO
    text = f"¥{yen:,.0f} ≈ €{euro:,.2f} (at {YEN_PER_EURO:.0f} yen per euro)"
    return _reply(YenInEuro(euro=round(euro, 2), rate_yen_per_euro=YEN_PER_EURO, text=text))


def _zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ToolError(
            f"Unknown time zone {name[:60]!r}: use an IANA name such as 'Asia/Tokyo' or "
            "'Europe/Berlin'."
        ) from None


def time_in(
    timezone: Annotated[
        str, Field(max_length=64, description="An IANA time zone, e.g. 'Asia/Tokyo'.")
    ],
    at: Annotated[
        str | None,
        Field(
            max_length=64,
            description="An ISO 8601 moment to convert, e.g. '2025-04-03T09:00:00+02:00' "
            "(UTC when it has no offset). Default: now.",
        ),
    ] = None,
) -> Annotated[CallToolResult, TimeIn]:
    """The local time in a time zone: now, or at a given moment (to compare time zones)."""
    zone = _zone(timezone)
    if at is None:
        moment = datetime.now(UTC)
    else:
        try:
            moment = datetime.fromisoformat(at)
        except ValueError:
            raise ToolError(
                f"{at!r} is not an ISO 8601 moment such as '2025-04-03T09:00:00+02:00'."
            ) from None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
    local = moment.astimezone(zone)
    offset = local.strftime("%z")
    utc_offset = f"{offset[:3]}:{offset[3:]}"
    return _reply(
        TimeIn(
            timezone=timezone,
            iso=local.isoformat(),
            time=local.strftime("%H:%M"),
            weekday=local.strftime("%A"),
            utc_offset=utc_offset,
            abbreviation=local.tzname() or "",
            text=f"{local:%A %d %B %Y, %H:%M} in {timezone} (UTC{utc_offset})",
        )
    )


# Latin full stops end a sentence before a space; Japanese ones (\u3002 \uff01 \uff1f) need none.
_SENTENCE_END = re.compile("[.!?]+(?=\\s|$)|[\u3002\uff01\uff1f]+")


def word_count(
    text: Annotated[str, Field(max_length=1_000_000, description="The text to count.")],
) -> Annotated[CallToolResult, WordCount]:
    """Count the words, characters and sentences of a text and estimate its reading time."""
    words = len(text.split())
    stripped = text.strip()
    sentences = len(_SENTENCE_END.findall(stripped))
    if stripped and not _SENTENCE_END.search(stripped[-1:] + " "):
        sentences += 1  # a last sentence without its full stop
    minutes = math.ceil(words / WORDS_PER_MINUTE * 10) / 10
    return _reply(
        WordCount(
            words=words,
            characters=len(text),
            characters_without_spaces=sum(not c.isspace() for c in text),
            sentences=sentences,
            reading_minutes=minutes,
            text=f"{words} words, {sentences} sentences, about {_fmt(minutes)} min to read",
        )
    )


TOOLS = (convert_units, hydration, yen_to_euro, time_in, word_count)


def build_server() -> MCPServer:
    """The example server with its tools; building it configures logging, so it is done in
    the server's own process, never at import."""
    server: MCPServer = MCPServer(
        SERVER_NAME,
        instructions="Offline helpers for cooking, travel budgets, time zones and text length.",
        log_level="WARNING",
    )
    for tool in TOOLS:
        server.add_tool(tool)
    return server


async def _serve_http(server: MCPServer, port: int) -> None:
    import uvicorn  # the HTTP stack is needed only for --http

    app = server.streamable_http_app(host="127.0.0.1")
    # We bind the socket ourselves so that port 0 works and the real port can be announced.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(64)
    print(f"listening on http://127.0.0.1:{sock.getsockname()[1]}/mcp", file=sys.stderr, flush=True)
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    await uvicorn.Server(config).serve(sockets=[sock])


def main(argv: Sequence[str] | None = None) -> None:
    """Run the server over stdio, or streamable HTTP on 127.0.0.1 with ``--http``."""
    parser = argparse.ArgumentParser(
        prog="python -m smart_context_hosts.example_mcp",
        description="An offline example MCP server.",
    )
    parser.add_argument("--http", action="store_true", help="serve streamable HTTP, not stdio")
    parser.add_argument("--port", type=int, default=8765, help="HTTP port (0: any free port)")
    args = parser.parse_args(argv)
    server = build_server()
    if args.http:
        anyio.run(_serve_http, server, args.port)
    else:
        server.run("stdio")
