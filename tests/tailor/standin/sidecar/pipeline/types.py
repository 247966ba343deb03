"""The pipeline context: a pydantic model, as in Tailor."""

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class PipelineContext(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)

    message: str
    original_message: str
    history: list[dict[str, Any]] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)
    response: str | None = None
    should_abort: bool = False
    abort_reason: str | None = None
    events_emitted: list[str] = Field(default_factory=list)
