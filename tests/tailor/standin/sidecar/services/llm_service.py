"""The LLM service: a model per category; ``complete`` answers an ``LLMResponse``.

The stand-in's models: ``responder(messages, category)`` writes each reply; ``embed`` gives
bag-of-words vectors (the idea of tests/fakes.py's ``word_vector``, in plain Python so that the
stand-in needs nothing of ours), so texts sharing words are close.
"""

import hashlib
import re
from dataclasses import dataclass

_WORD = re.compile(r"[a-z0-9]+")
_STOP = {"a", "an", "the", "and", "or", "of", "to", "in", "on", "for", "is", "it", "i", "you"}


def word_vector(text, dim=512):
    vector = [0.0] * dim
    for word in _WORD.findall(text.lower()):
        if word not in _STOP:
            digest = hashlib.blake2b(word[:5].encode(), digest_size=4).digest()
            vector[int.from_bytes(digest, "little") % dim] += 1.0
    return vector


@dataclass
class LLMResponse:
    content: str
    model: str


class LLMService:
    def __init__(self, responder, categories=None):
        self.responder = responder
        self.categories = dict(categories or {"fast": "standin/fast", "embedding": "standin/bow"})
        self.calls = []  # (category, messages)
        self.embedded = []  # (category, texts)

    def get_model_for_category(self, category):
        return self.categories.get(category)

    async def complete(self, messages, category="fast", model=None, stream=False, **kwargs):
        model_id = model or self.get_model_for_category(category)
        if not model_id:
            raise ValueError(f"No model configured for category: {category}")
        self.calls.append((category, messages))
        text = self.responder(messages, category)
        if stream:
            return _tokens(text)
        return LLMResponse(content=text, model=model_id)

    async def embed(self, texts, category="embedding"):
        if not self.get_model_for_category(category):
            raise ValueError(f"No model configured for category: {category}")
        self.embedded.append((category, list(texts)))
        return [word_vector(t) for t in texts]


async def _tokens(text):
    for word in text.split(" "):
        yield word + " "


_llm_service = None


def get_llm_service():
    if _llm_service is None:
        raise RuntimeError("LLMService not initialized")
    return _llm_service
