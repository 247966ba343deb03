"""``@tool``: marks a function as a model-callable tool (metadata on ``_tool_meta``)."""

import functools
import inspect


def tool(name=None, description=None, category="general", visible_to_ui=True, **extra):
    def decorate(func):
        meta = {
            "name": name or func.__name__,
            "description": description or func.__doc__ or "",
            "category": category,
            "visible_to_ui": visible_to_ui,
            **extra,
        }
        if inspect.iscoroutinefunction(func):

            @functools.wraps(func)
            async def wrapper(*args, **kwargs):
                return await func(*args, **kwargs)

        else:

            @functools.wraps(func)
            def wrapper(*args, **kwargs):
                return func(*args, **kwargs)

        wrapper._tool_meta = meta
        return wrapper

    return decorate
