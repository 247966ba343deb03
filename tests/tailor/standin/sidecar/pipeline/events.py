"""The pipeline's event names."""


class PipelineEvents:
    START = "pipeline.start"
    END = "pipeline.end"
    INPUT = "pipeline.input"
    CONTEXT = "pipeline.context"
    PROMPT = "pipeline.prompt"
    LLM = "pipeline.llm"
    POST_PROCESS = "pipeline.post_process"
    OUTPUT = "pipeline.output"
