"""What a prompt cache makes a request cost (docs/contract.md §9, "The budget is a bill").

Every provider and local server that people run keeps a *prompt cache*: a request that begins
with the same tokens as an earlier one pays a fraction for that prefix (a local server skips
its prefill). A :class:`CacheModel` says, for one upstream, what that fraction is and when a
prefix counts:

- ``read``: the price of a cached input token, as a share of a new one (0 for a local server:
  its cost is the tokens it must prefill);
- ``write``: the price of a token written to the cache (1.25 at Anthropic, else 1);
- ``min_prefix`` and ``step``: nothing is cached below ``min_prefix`` tokens, and the cached
  part is counted in whole ``step`` s above it (OpenAI: from 1,024 on, in 128-token steps);
- ``lifetime``: seconds an unused prefix lives (0: until the server drops it);
- ``breakpoints``: the provider caches only at marks the request places (Anthropic).

:func:`cache_model` gives the defaults by model family, which the ``prompt_cache`` and
``cache_read_price`` settings override; a model it does not know gets :data:`NO_CACHE`, the
plain per-token bill. Pure: the figures are the providers' published prices (November 2026).
"""

from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass(frozen=True)
class CacheModel:
    """One upstream's prompt cache (module docstring)."""

    name: str
    read: float = 1.0
    write: float = 1.0
    min_prefix: int = 0
    step: int = 1
    lifetime: float = 300.0
    breakpoints: bool = False

    @property
    def caches(self) -> bool:
        """Whether a stable prefix is worth anything here (a read cheaper than a new token)."""
        return self.read < 1.0

    @property
    def local(self) -> bool:
        """A server on this machine: what it costs is the time to prefill (``read`` 0)."""
        return self.name == "local"

    def cached(self, common: int) -> int:
        """Of a prefix of ``common`` tokens shared with a cached request, the tokens the
        upstream serves from its cache."""
        if not self.caches or common < max(self.min_prefix, 1):
            return 0
        step = max(self.step, 1)
        base = self.min_prefix
        return base + (common - base) // step * step

    def billed(self, sent: int, cached: int, written: int = 0) -> float:
        """What a request of ``sent`` input tokens is billed, in new-token units, when
        ``cached`` of them are read from the cache and ``written`` written to it."""
        new = max(sent - cached - written, 0)
        return new + self.read * cached + self.write * written

    def cold(self, idle: float) -> bool:
        """Whether a prefix unused for ``idle`` seconds is gone."""
        return self.lifetime > 0 and idle > self.lifetime


def recall_share(cache: CacheModel) -> float:
    """The share of the budget for the older messages recalled with each message, when the
    ``recall_share`` setting is ``"auto"``: the dearer the kept history's tokens are to read,
    the more of the bill goes to the few chosen for the message. Tuned on REALTALK's tune chats
    (benchmarks/public/bench_cache.py --part tune): a local server's 8,000-token window kept
    0.718 / 0.760 of the questions' evidence at 0.2 / 0.25, prefilling 26% / 32% of what it was
    sent; GPT-4o (0.5) 0.775 / 0.833 at 0.2 / 0.3, billed 0.72 / 0.75 x the plain client."""
    if cache.local:
        return 0.25
    return 0.3 if cache.read >= 0.5 else 0.2


NO_CACHE = CacheModel("none", read=1.0, min_prefix=0, step=1, lifetime=0.0)
OPENAI = CacheModel("openai", read=0.5, min_prefix=1024, step=128, lifetime=300.0)
ANTHROPIC = CacheModel(
    "anthropic", read=0.1, write=1.25, min_prefix=1024, step=1, lifetime=300.0, breakpoints=True
)
DEEPSEEK = CacheModel("deepseek", read=0.1, min_prefix=64, step=64, lifetime=3600.0)
GEMINI = CacheModel("gemini", read=0.25, min_prefix=1024, step=1, lifetime=300.0)
LOCAL = CacheModel("local", read=0.0, min_prefix=0, step=1, lifetime=0.0)

KINDS = {m.name: m for m in (NO_CACHE, OPENAI, ANTHROPIC, DEEPSEEK, GEMINI, LOCAL)}

# model name prefix -> its cache, longest prefix first wins (a provider prefix is dropped)
FAMILIES: dict[str, CacheModel] = {
    "gpt-5": replace(OPENAI, read=0.1),
    "gpt-4.1": replace(OPENAI, read=0.25),
    "gpt-4o": OPENAI,
    "chatgpt-4o": OPENAI,
    "gpt-4.5": OPENAI,
    "o1": OPENAI,
    "o3": replace(OPENAI, read=0.25),
    "o4": replace(OPENAI, read=0.25),
    "claude": ANTHROPIC,
    "deepseek-chat": DEEPSEEK,
    "deepseek-reasoner": DEEPSEEK,
    "deepseek-v3": DEEPSEEK,
    "gemini-2": GEMINI,
    "gemini-3": replace(GEMINI, read=0.1),
    # what people serve themselves: llama.cpp, Ollama, vLLM, LM Studio
    "llama": LOCAL,
    "meta-llama": LOCAL,
    "qwen": LOCAL,
    "mistral": LOCAL,
    "mixtral": LOCAL,
    "gemma": LOCAL,
    "phi": LOCAL,
    "smollm": LOCAL,
    "gpt-oss": LOCAL,
}


def family_of(model: str | None) -> CacheModel:
    """The cache of ``model`` by its name: an Ollama tag (``name:size``) is a local server;
    a name this table does not know gets :data:`NO_CACHE`."""
    if not model or not model.strip():
        return NO_CACHE
    name = model.strip().lower().rsplit("/", 1)[-1]  # "openai/gpt-4o": the provider dropped
    bare = name.split(":", 1)[0]
    for prefix in sorted(FAMILIES, key=len, reverse=True):
        if bare.startswith(prefix):
            return FAMILIES[prefix]
    if ":" in name:  # llama3.2:3b, deepseek-r1:7b: how Ollama names what it runs
        return LOCAL
    return NO_CACHE


def cache_model(
    model: str | None, kind: str = "auto", read_price: float | None = None
) -> CacheModel:
    """The cache a request to ``model`` meets: the ``prompt_cache`` setting's ``kind``
    (``"auto"``: by the model's family), its read price overridden by ``read_price`` when
    given (the ``cache_read_price`` setting)."""
    found = family_of(model) if kind == "auto" else KINDS[kind]
    if read_price is not None and found.name != "none":
        found = replace(found, read=read_price)
    return found
