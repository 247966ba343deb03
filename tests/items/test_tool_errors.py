"""A tool's refusal of its arguments in words: pydantic's real reports, as the Python SDK's
servers send them, become sentences that name the argument, with no pydantic and no link."""

from __future__ import annotations

from typing import Annotated, Any

import pytest
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from smart_context.mcp.tool_errors import MAX_PROBLEMS, explain_tool_error


class TimeInArguments(BaseModel):
    timezone: Annotated[str, Field(max_length=8)]
    at: str | None = None


class CountArguments(BaseModel):
    model_config = ConfigDict(extra="forbid")

    count: int
    ratio: float = 0.5
    loud: bool = False
    tags: list[str] = []
    options: dict[str, str] = {}
    level: Annotated[int, Field(gt=0)] = 1

    @field_validator("tags")
    @classmethod
    def no_blank_tags(cls, tags: list[str]) -> list[str]:
        if any(not t.strip() for t in tags):
            raise ValueError("A tag cannot be blank")
        return tags


def report(model: type[BaseModel], tool: str, arguments: dict[str, Any]) -> str:
    """What the SDK's server answers for this call: its prefix and pydantic's own text."""
    with pytest.raises(ValidationError) as caught:
        model.model_validate(arguments)
    return f"Error executing tool {tool}: {caught.value}"


def plain(text: str) -> None:
    assert "pydantic" not in text.lower()
    assert "http" not in text
    assert "[type=" not in text and "input_value" not in text


def test_a_missing_argument_is_named_with_what_was_given() -> None:
    raw = report(TimeInArguments, "time_in", {"zone": "Asia/Tokyo"})
    assert "errors.pydantic.dev" in raw  # the report this module exists for
    text = explain_tool_error("time_in", raw, {"zone": "Asia/Tokyo"})
    assert text == "time_in needs the argument “timezone” (it was given “zone”)."
    plain(text)


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({"count": "many"}, "“count” must be a whole number."),
        ({"count": 1.5}, "“count” must be a whole number."),
        ({"count": 1, "ratio": "half"}, "“ratio” must be a number."),
        ({"count": 1, "loud": "very"}, "“loud” must be true or false."),
        ({"count": 1, "tags": "a"}, "“tags” must be a list."),
        ({"count": 1, "options": [1]}, "“options” must be an object."),
        ({"count": 1, "level": 0}, "“level” must be greater than 0."),
        ({"count": 1, "tags": [" "]}, "“tags”: A tag cannot be blank."),
        ({"count": 1, "colour": "red"}, "count_things has no argument “colour”."),
    ],
)
def test_a_wrong_argument_says_what_it_must_be(arguments: dict[str, Any], expected: str) -> None:
    text = explain_tool_error("count_things", report(CountArguments, "count_things", arguments))
    assert text == expected
    plain(text)


def test_every_problem_is_named_once() -> None:
    raw = report(TimeInArguments, "time_in", {"timezone": "Pacific/Port_Moresby", "at": 5})
    text = explain_tool_error("time_in", raw, ["timezone", "at"])
    assert text == "“timezone” must have at most 8 characters; “at” must be text."
    plain(text)
    raw = report(CountArguments, "count_things", {"ratio": "x", "loud": "maybe"})
    text = explain_tool_error("count_things", raw, ["ratio", "loud"])
    assert text.startswith("count_things needs the argument “count”; “ratio” must be a number")
    plain(text)


def test_many_problems_are_counted_after_the_first_few() -> None:
    extra = {f"x{n}": n for n in range(MAX_PROBLEMS + 3)}
    raw = report(CountArguments, "count_things", {"count": 1, **extra})
    text = explain_tool_error("count_things", raw, extra)
    assert text.count("has no argument") == MAX_PROBLEMS
    assert text.endswith("; and 3 more.")


def test_other_errors_are_kept_without_links() -> None:
    assert explain_tool_error("time_in", "Unknown time zone 'Mars'.") == "Unknown time zone 'Mars'."
    linked = "It broke.\n    For further information visit https://errors.pydantic.dev/2/v/x\n"
    assert explain_tool_error("t", linked) == "It broke."
    assert explain_tool_error("t", "") == ""
