"""The LLM service: a model per category; ``complete`` answers an ``LLMResponse``.

The stand-in's models: ``responder(messages, category)`` writes each reply; ``embed`` gives
bag-of-words vectors (tests/fakes.py's ``word_vector``), so texts sharing words are close.
"""

from dataclasses import dataclass

from tests.fakes import word_vector


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
        return [word_vector(t, 512).tolist() for t in texts]


async def _tokens(text):
    for word in text.split(" "):
        yield word + " "


_llm_service = None


def get_llm_service():
    if _llm_service is None:
        raise RuntimeError("LLMService not initialized")
    return _llm_service
