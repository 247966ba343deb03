"""Model-callable tools: registered ``@tool`` functions, a schema from each signature."""

import inspect
import json
import typing

_TYPES = {str: "string", int: "integer", float: "number", bool: "boolean"}


def _schema_type(annotation):
    if typing.get_origin(annotation) is typing.Union:
        inner = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(inner) == 1:
            return _schema_type(inner[0])
    return {"type": _TYPES.get(annotation, "string")}


def tool_schema(func):
    meta = func._tool_meta
    properties, required = {}, []
    for name, parameter in inspect.signature(func).parameters.items():
        if name == "self":
            continue
        annotation = parameter.annotation
        properties[name] = _schema_type(
            str if annotation is inspect.Parameter.empty else annotation
        )
        optional = typing.get_origin(annotation) is typing.Union and type(None) in typing.get_args(
            annotation
        )
        if parameter.default is inspect.Parameter.empty and not optional:
            required.append(name)
    parameters = {"type": "object", "properties": properties, "required": required}
    return {
        "type": "function",
        "function": {
            "name": meta["name"],
            "description": meta["description"],
            "parameters": parameters,
        },
    }


class ToolRegistry:
    def __init__(self):
        self._tools = {}
        self._schemas = {}

    def register(self, func):
        if not hasattr(func, "_tool_meta"):
            raise ValueError("a tool must be decorated with @tool")
        name = func._tool_meta["name"]
        self._tools[name] = func
        self._schemas[name] = tool_schema(func)

    def unregister(self, name):
        self._schemas.pop(name, None)
        return self._tools.pop(name, None) is not None

    def get_all_schemas(self):
        return list(self._schemas.values())

    @property
    def tool_names(self):
        return list(self._tools)

    async def execute(self, name, arguments):
        func = self._tools.get(name)
        if func is None:
            return f"Error: Tool '{name}' not found."
        try:
            result = func(**arguments)
            if inspect.isawaitable(result):
                result = await result
        except Exception as exc:  # noqa: BLE001 (the model reads the error, as in Tailor)
            return f"Error executing tool {name}: {exc}"
        return json.dumps(result) if isinstance(result, (dict, list)) else str(result)
