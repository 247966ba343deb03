"""The linear pipeline: input, context, prompt, llm, post_process, output.

As with Tailor's LangGraph graph, each node gets a fresh copy of the state and only the fields
it returns are kept: the context node returns ``metadata`` (and ``events_emitted``) only.
"""

import copy

from sidecar.pipeline.events import PipelineEvents
from sidecar.pipeline.types import PipelineContext
from sidecar.services.llm_service import get_llm_service

DEFAULT_SYSTEM = "You are a helpful assistant."


class DefaultPipeline:
    def __init__(self, brain):
        self.brain = brain

    async def _publish(self, event, state):
        await self.brain.publish(event, sequential=True, ctx=state)

    async def input_node(self, state):
        await self._publish(PipelineEvents.START, state)
        await self._publish(PipelineEvents.INPUT, state)
        return state.model_dump()

    async def context_node(self, state):
        if state.should_abort:
            return {}
        await self._publish(PipelineEvents.CONTEXT, state)
        return {"metadata": state.metadata, "events_emitted": state.events_emitted}

    async def prompt_node(self, state):
        if state.should_abort:
            return {}
        state.metadata["final_system_prompt"] = state.metadata.get("system_prompt", DEFAULT_SYSTEM)
        await self._publish(PipelineEvents.PROMPT, state)
        return state.model_dump()

    async def llm_node(self, state):
        if state.should_abort:
            return {}
        await self._publish(PipelineEvents.LLM, state)
        if not state.response:
            messages = [{"role": "system", "content": state.metadata["final_system_prompt"]}]
            messages += [
                {"role": m.get("role", "user"), "content": m.get("content", "")}
                for m in state.history
            ]
            messages.append({"role": "user", "content": state.message})
            reply = await get_llm_service().complete(
                messages, category=state.metadata.get("category", "fast")
            )
            state.response = reply.content
        return state.model_dump()

    async def post_process_node(self, state):
        if state.should_abort:
            return {}
        await self._publish(PipelineEvents.POST_PROCESS, state)
        return state.model_dump()

    async def output_node(self, state):
        await self._publish(PipelineEvents.OUTPUT, state)
        await self._publish(PipelineEvents.END, state)
        return state.model_dump()

    async def run(self, message, history=None, stream=False, metadata=None):
        channels = PipelineContext(
            message=message, original_message=message, history=history or []
        ).model_dump()
        channels["metadata"].update(metadata or {})
        channels["metadata"]["stream"] = stream
        channels["metadata"].setdefault("category", "fast")
        nodes = (
            self.input_node,
            self.context_node,
            self.prompt_node,
            self.llm_node,
            self.post_process_node,
            self.output_node,
        )
        for node in nodes:
            channels.update(await node(PipelineContext(**copy.deepcopy(channels))))
        return PipelineContext(**channels)

    async def stream_run(self, message, history=None, metadata=None):
        """Tokens of the reply; no pipeline event is published here (as in Tailor)."""
        meta = metadata or {}
        messages = [{"role": "system", "content": meta.get("system_prompt", DEFAULT_SYSTEM)}]
        messages += [
            {"role": m.get("role", "user"), "content": m.get("content", "")} for m in history or []
        ]
        messages.append({"role": "user", "content": message})
        tokens = await get_llm_service().complete(
            messages, category=meta.get("category", "fast"), stream=True
        )
        async for token in tokens:
            yield token
