"""Rules, references and tools: the items a request's context is built from (docs/contract.md §8).

An item is known by its :attr:`Item.key` (type, server, name): sessions and request records store
only that, and look the item up again when they need its text ("store references, not
objects"). Everything else is what the vault says about it today. :attr:`Item.content_hash`
covers only the indexed text, so a new priority or include mode never costs an embedding.
An ``expansion`` item is never found by a message itself, only through the items agent
selection found for it (:mod:`.expand`).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Literal

from smart_context.items.lexical import CAMEL
from smart_context.items.schema import parameters

_WORD = re.compile(r"[^\W_]+")

ItemType = Literal["rule", "reference", "tool"]
IncludeMode = Literal["always", "manual", "agent", "expansion"]
ITEM_TYPES: tuple[ItemType, ...] = ("rule", "reference", "tool")
INCLUDE_MODES: tuple[IncludeMode, ...] = ("always", "manual", "agent", "expansion")

MIN_PRIORITY, MAX_PRIORITY = 0, 999  # the UI shows three digits: 001
# An item without a priority comes after every item that has one: writing `priority: 5` is how a
# person says "this one first", and saying nothing should never push another item down.
DEFAULT_PRIORITY = MAX_PRIORITY
FILE_INCLUDE: IncludeMode = "manual"  # a rule or reference reaches a chat only when asked for
TOOL_INCLUDE: IncludeMode = (
    "always"  # a tool's mode is tool -> server -> always (docs/contract.md §8)
)


@dataclass(frozen=True)
class Item:
    """One rule, reference or tool as the vault defines it now."""

    type: ItemType
    name: str
    description: str = ""
    priority: int = DEFAULT_PRIORITY
    include: IncludeMode = FILE_INCLUDE
    enabled: bool = True
    text: str = ""  # the body of a file; a tool's parameters, one per line
    source: str = ""  # the file's path in the vault (``rules/style.md``), a tool's server name
    server_name: str | None = None  # tools only
    # a tool's JSON schema as its server sent it: what the model gets, never indexed or compared
    input_schema: Mapping[str, Any] | None = field(
        default=None, compare=False, hash=False, repr=False
    )

    def __post_init__(self) -> None:
        if self.type not in ITEM_TYPES:
            raise ValueError(f"item type must be one of {ITEM_TYPES}, got {self.type!r}")
        if self.include not in INCLUDE_MODES:
            raise ValueError(f"include must be one of {INCLUDE_MODES}, got {self.include!r}")
        if (self.type == "tool") != (self.server_name is not None):
            raise ValueError("a tool needs its server_name, and only a tool has one")

    @cached_property
    def content_hash(self) -> str:
        """blake3 of :func:`index_text`: what would be embedded, computed when asked for."""
        from smart_context.vectors.codec import content_hash  # numpy: not for every import

        return content_hash(index_text(self))

    @property
    def key(self) -> str:
        """``type:server:name`` (``rule::Code Style``, ``tool:files:read_file``): the identity
        sessions and request records use. A name may hold ``:``; the server never does."""
        return f"{self.type}:{self.server_name or ''}:{self.name}"

    @property
    def priority_label(self) -> str:
        """The priority as the UI shows it: ``001``."""
        return f"{self.priority:03d}"

    def sort_key(self) -> tuple[int, str, int, str, str]:
        """Rules, then references, then tools; files by priority then name, tools by server then
        name. Case is ignored, then breaks ties, so the order is total."""
        return (
            ITEM_TYPES.index(self.type),
            self.server_name or "",
            self.priority if self.type != "tool" else 0,
            self.name.casefold(),
            self.name,
        )


def index_text(item: Item) -> str:
    """The text embedded for ``item`` (and hashed into its ``content_hash``): ``name:
    description`` then the body, so a search for the thing's name or purpose finds it as well
    as one for its content. A tool reads ``server tool: description`` then one line per
    parameter, ``parameter: description``, every name in words (``read_file`` is ``read
    file``, ``maxResults`` is ``max results``) and without the types and ``required`` that
    the UI shows. Measured (``benchmarks/public/bench_tools.py``, ``bench_tool_selection.py``):
    recall@5 on ToolLens' test queries 0.353 -> 0.360 (tune 0.342 -> 0.343); on our own set
    cosine alone 0.487 -> 0.533, the default (with BM25) 0.608 -> 0.606."""
    if item.server_name is not None:
        title = f"{spoken(item.server_name)} {spoken(item.name)}"
        body = _parameters_index_text(item)
    else:
        title, body = item.name, item.text
    head = f"{title}: {item.description}" if item.description else title
    return f"{head}\n\n{body}" if body else head


def spoken(identifier: str) -> str:
    """An identifier as lower-case words: ``read_file``, ``readFile`` and ``read-file`` are
    ``read file``; one without a letter or digit stays as it is."""
    plain = unicodedata.normalize("NFC", identifier)  # "e" + a combining accent is one letter
    words = _WORD.findall(CAMEL.sub(r"\1 \2", plain))
    return " ".join(words).lower() if words else identifier


def _parameters_index_text(item: Item) -> str:
    if item.input_schema is None:  # a tool made without its schema: the text it was given
        return item.text
    return "\n".join(
        f"{spoken(p.name)}: {p.description}" if p.description else spoken(p.name)
        for p in parameters(item.input_schema)
    )


@dataclass(frozen=True)
class ItemProblem:
    """Something wrong with one file (or folder) of the vault, in words its owner can act on.

    ``skipped`` says the file gave no item; otherwise the item loaded with a safe value for
    ``field``.
    """

    source: str
    message: str
    field: str | None = None
    skipped: bool = False

    def __str__(self) -> str:
        return f"{self.source}: {self.message}"
