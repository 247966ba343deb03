from sidecar.pipeline.events import PipelineEvents
from sidecar.pipeline.types import PipelineContext

__all__ = ["PipelineContext", "PipelineEvents"]
