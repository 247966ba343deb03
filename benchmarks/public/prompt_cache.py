"""Prompt caches as upstreams apply them: of a request's tokens, how many each one reads from its
cache and how many it writes to it, given the requests it saw before.

Every simulator takes a request as token ids (and, for Anthropic, its cache breakpoints as token
positions) with the time in seconds, and returns a :class:`Hit`: ``(cached, written)``.

- :func:`openai`: automatic; the longest prefix shared with an earlier request still alive,
  counted from 1,024 tokens on in 128-token steps (``1024 + (common - 1024) // 128 * 128``);
  a prefix lives 300 s after it was last used.
- :class:`AnthropicCache`: explicit breakpoints; a request reads the longest prefix written at
  an earlier breakpoint that it repeats exactly (1,024 tokens at least), and writes the tokens
  from there up to its own last breakpoint. A prefix lives 300 s, refreshed when read.
- :func:`vllm`: automatic prefix caching in 16-token blocks, kept for the whole run.
- :class:`LlamaCppSlot`: one slot keeps its last request; the next reuses their common prefix.

How a request is billed, in units of one new input token: :func:`billed` (a cached token at the
read price, a written one at the write price); a local server's cost is the tokens it must
prefill, ``sent - cached``.

The longest shared prefix against every earlier request is found without comparing requests:
each prefix a cache keeps is stored under its length and a 64-bit hash of its tokens
(:func:`prefix_hashes`, a polynomial hash computed for all prefixes at once with numpy), so a
request looks up its own prefixes, one per block, instead of scanning the requests before it.
Every request of a run is kept, not only the same chat's. A collision of two 64-bit hashes of
prefixes of the same length is ignored (about one in 2**64 per look-up).

:class:`Scorer` scores one run's chat requests (``messages`` and ``tools``) by every rule. A
request is rendered one simple, deterministic way: the tools' JSON, then per message
``<|role|>``, a line break, its text and a line break, each piece tokenized on its own (and once)
by the project's offline tokenizers (``quicktok``, as smart_context/budget/tokens.py counts):
o200k (gpt-4o, gpt-5) for OpenAI's and Anthropic's caches (Claude's tokenizer is not available
offline: o200k stands in), Llama 3's for vLLM's and llama.cpp's. Anthropic's two breakpoints are
placed alike for every client: after the leading system messages, and after the message before
the last user message.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

Tokens = npt.NDArray[np.integer]
Hashes = npt.NDArray[np.uint64]

OPENAI_MIN, OPENAI_STEP = 1024, 128
ANTHROPIC_MIN = 1024
ANTHROPIC_READ, ANTHROPIC_WRITE = 0.1, 1.25
VLLM_BLOCK = 16
LIFETIME = 300.0  # seconds an unused prefix lives at OpenAI and Anthropic

_BASE = np.uint64(0x100000001B3)  # odd: invertible modulo 2**64
_MIX1, _MIX2 = np.uint64(0x9E3779B97F4A7C15), np.uint64(0xBF58476D1CE4E5B9)


class Hit(NamedTuple):
    """What an upstream made of one request: tokens read from its cache, and written to it."""

    cached: int
    written: int = 0


def billed(sent: int, hit: Hit, read: float, write: float = 1.0) -> float:
    """A request of ``sent`` input tokens, in new-token units: new tokens at 1, cached ones at
    ``read``, written ones at ``write``."""
    new = sent - hit.cached - hit.written
    return new + read * hit.cached + write * hit.written


def prefix_hashes(tokens: Tokens) -> Hashes:
    """``out[i]`` identifies ``tokens[: i + 1]``: a polynomial hash modulo 2**64 of the tokens,
    each first mixed into 64 bits, so two sequences that differ in one token never collide."""
    n = len(tokens)
    x = np.asarray(tokens).astype(np.uint64) + np.uint64(1)
    x *= _MIX1
    x ^= x >> np.uint64(31)
    x *= _MIX2
    powers, inverses = _powers(max(1 << max(n - 1, 0).bit_length(), 1024))
    # h[i] = sum_j x[j] * BASE**(i-j) = BASE**(i+1) * sum_j x[j] * BASE**-(j+1), modulo 2**64
    return np.asarray(powers[:n] * np.cumsum(x * inverses[:n], dtype=np.uint64), dtype=np.uint64)


@functools.lru_cache(maxsize=4)
def _powers(n: int) -> tuple[Hashes, Hashes]:
    """``BASE**(i+1)`` and ``BASE**-(i+1)`` modulo 2**64, for ``i < n`` (uint64 wraps)."""
    inverse = np.uint64(pow(int(_BASE), -1, 2**64))
    powers = np.cumprod(np.full(n, _BASE, dtype=np.uint64), dtype=np.uint64)
    return powers, np.cumprod(np.full(n, inverse, dtype=np.uint64), dtype=np.uint64)


def common_prefix(a: Tokens, b: Tokens) -> int:
    """The number of leading tokens ``a`` and ``b`` share."""
    n = min(len(a), len(b))
    differ = np.flatnonzero(np.asarray(a[:n]) != np.asarray(b[:n]))
    return int(differ[0]) if differ.size else n


class Prefixes:
    """Prefixes kept by a cache, by length and hash, with when each was last used;
    ``lifetime``: seconds an unused one lives (``None``: for ever)."""

    def __init__(self, lifetime: float | None) -> None:
        self.lifetime = lifetime
        self.used: dict[tuple[int, int], float] = {}

    def alive(self, length: int, hashes: Hashes, now: float) -> bool:
        """Whether the request's first ``length`` tokens are kept and not expired."""
        seen = self.used.get((length, int(hashes[length - 1])))
        return seen is not None and (self.lifetime is None or now - seen <= self.lifetime)

    def touch(self, lengths: Sequence[int], hashes: Hashes, now: float) -> None:
        """The request's prefixes of these ``lengths``, kept (again) as used at ``now``."""
        for length in lengths:
            self.used[(length, int(hashes[length - 1]))] = now


class BlockCache:
    """An automatic prefix cache in blocks of ``block`` tokens: the request's longest prefix
    of whole blocks kept from an earlier one, nothing below ``minimum`` tokens; every block
    prefix of the request is kept (again) afterwards. Used as :func:`openai` and :func:`vllm`."""

    def __init__(self, block: int, minimum: int, lifetime: float | None) -> None:
        self.block, self.minimum = block, minimum
        self.kept = Prefixes(lifetime)

    def __call__(self, tokens: Tokens, now: float = 0.0) -> Hit:
        hashes = prefix_hashes(tokens)
        blocks = len(tokens) // self.block
        found = self._longest(hashes, blocks, now)
        # an unused prefix must be refreshed to live on; without expiry only new blocks matter
        first = 1 if self.kept.lifetime is not None else found + 1
        self.kept.touch(
            range(first * self.block, (blocks + 1) * self.block, self.block), hashes, now
        )
        cached = found * self.block
        return Hit(cached if cached >= self.minimum else 0)

    def _longest(self, hashes: Hashes, blocks: int, now: float) -> int:
        """The most whole blocks kept: a binary search, since a kept prefix's shorter block
        prefixes were kept with it, and used no earlier than it."""
        low, high = 0, blocks
        while low < high:
            middle = (low + high + 1) // 2
            if self.kept.alive(middle * self.block, hashes, now):
                low = middle
            else:
                high = middle - 1
        return low


def openai(lifetime: float = LIFETIME) -> BlockCache:
    """OpenAI's automatic cache (module docstring)."""
    return BlockCache(OPENAI_STEP, OPENAI_MIN, lifetime)


def vllm() -> BlockCache:
    """vLLM's automatic prefix caching (module docstring): nothing expires within a run."""
    return BlockCache(VLLM_BLOCK, 0, None)


class AnthropicCache:
    """Anthropic's cache at explicit breakpoints (module docstring)."""

    def __init__(self, minimum: int = ANTHROPIC_MIN, lifetime: float = LIFETIME) -> None:
        self.minimum = minimum
        self.kept = Prefixes(lifetime)
        self.lengths: set[int] = set()  # the lengths of the prefixes written so far

    def __call__(self, tokens: Tokens, breakpoints: Sequence[int], now: float = 0.0) -> Hit:
        hashes = prefix_hashes(tokens)
        read = next(
            (
                n
                for n in sorted(self.lengths, reverse=True)
                if self.minimum <= n <= len(tokens) and self.kept.alive(n, hashes, now)
            ),
            0,
        )
        marks = sorted({b for b in breakpoints if self.minimum <= b <= len(tokens)})
        written = max(0, marks[-1] - read) if marks else 0
        fresh = [*marks, read] if read else marks
        self.kept.touch(fresh, hashes, now)
        self.lengths.update(marks)
        return Hit(read, written)


class LlamaCppSlot:
    """One llama.cpp slot: it keeps the last request and reuses what the next shares of it."""

    def __init__(self) -> None:
        self.last: Tokens | None = None

    def __call__(self, tokens: Tokens, now: float = 0.0) -> Hit:
        cached = 0 if self.last is None else common_prefix(self.last, tokens)
        self.last = np.asarray(tokens)
        return Hit(cached)


class Pieces:
    """The token ids of the pieces requests are rendered from, each tokenized once."""

    def __init__(self, model: str) -> None:
        import quicktok  # the project's offline tokenizers (smart_context/budget/tokens.py)

        from smart_context.budget.tokens import encoding_of

        self.tokenizer = quicktok.get_encoding(encoding_of(model))
        self.known: dict[str, np.ndarray] = {}

    def ids(self, pieces: Sequence[str]) -> list[np.ndarray]:
        missing = [p for p in dict.fromkeys(pieces) if p not in self.known]
        if missing:
            flat, offsets = self.tokenizer.encode_batch(missing)
            for i, piece in enumerate(missing):
                self.known[piece] = flat[offsets[i] : offsets[i + 1]]
        return [self.known[p] for p in pieces]


def pieces_of(messages: Sequence[dict[str, Any]], tools: Any) -> tuple[list[str], int]:
    """A request rendered as a chat template would, deterministically: the tools' JSON, then
    ``<|role|>`` and the text of each message; and how many pieces come before the messages."""
    head = [json.dumps(tools, ensure_ascii=False, sort_keys=True)] if tools else []
    return head + [f"<|{m.get('role')}|>\n{text_of(m)}\n" for m in messages], len(head)


def text_of(message: dict[str, Any]) -> str:
    """A message's text as rendered: its content (its text parts' texts; other parts as JSON),
    its tool calls. A cache mark on a part (Anthropic's ``cache_control``) is not content: the
    provider caches the text, wherever the mark moves."""
    content = message.get("content")
    if isinstance(content, str):
        text = content
    elif isinstance(content, list):
        text = "".join(
            str(p.get("text", ""))
            if isinstance(p, dict) and p.get("type") == "text"
            else json.dumps(p, ensure_ascii=False, sort_keys=True)
            for p in content
        )
    else:
        text = json.dumps(content, ensure_ascii=False)
    calls = message.get("tool_calls")
    return text + (json.dumps(calls, ensure_ascii=False, sort_keys=True) if calls else "")


def breakpoints(messages: Sequence[dict[str, Any]], ends: np.ndarray, head: int) -> list[int]:
    """Where every client's request gets Anthropic's two cache marks: after the leading system
    messages (and the tools), and after the message before the last user message."""
    lead = next((i for i, m in enumerate(messages) if m.get("role") != "system"), len(messages))
    users = [i for i, m in enumerate(messages) if m.get("role") == "user"]
    last = users[-1] if users else len(messages) - 1
    return [int(ends[head + i - 1]) if head + i > 0 else 0 for i in (lead, last)]


@dataclass(frozen=True)
class Scored:
    """One request by every rule: ``sent`` and the caches' hits in o200k tokens (OpenAI,
    Anthropic), ``sent_local`` and theirs in Llama 3's (vLLM, llama.cpp)."""

    sent: int
    openai: int
    anthropic: Hit
    sent_local: int
    vllm: int
    llama_cpp: int

    def openai_bill(self, read: float) -> float:
        """The bill by OpenAI's rule with cached tokens at ``read``."""
        return billed(self.sent, Hit(self.openai), read)

    @property
    def anthropic_bill(self) -> float:
        """The bill by Anthropic's rule: reads at 0.1, writes at 1.25."""
        return billed(self.sent, self.anthropic, ANTHROPIC_READ, ANTHROPIC_WRITE)


class Scorer:
    """The caches one configuration's requests meet, in one run: one of each kind."""

    def __init__(self) -> None:
        self.o200k, self.llama3 = Pieces("gpt-5"), Pieces("llama3.1")
        self.openai, self.anthropic = openai(), AnthropicCache()
        self.vllm, self.llama_cpp = vllm(), LlamaCppSlot()

    def score(self, messages: Sequence[dict[str, Any]], now: float, tools: Any = None) -> Scored:
        pieces, head = pieces_of(messages, tools)
        ids = self.o200k.ids(pieces)
        tokens, local = np.concatenate(ids), np.concatenate(self.llama3.ids(pieces))
        marks = breakpoints(messages, np.cumsum([len(x) for x in ids]), head)
        return Scored(
            len(tokens),
            self.openai(tokens, now).cached,
            self.anthropic(tokens, marks, now),
            len(local),
            self.vllm(local, now).cached,
            self.llama_cpp(local, now).cached,
        )

    def size(self, messages: Sequence[dict[str, Any]]) -> int:
        """The o200k tokens of ``messages`` as rendered."""
        return sum(len(x) for x in self.o200k.ids(pieces_of(messages, None)[0]))
