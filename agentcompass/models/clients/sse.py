"""Server-sent events: split a stream of text lines into ``(event, data)`` pairs (WHATWG SSE rules)."""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator


async def sse_events(lines: AsyncIterable[str]) -> AsyncIterator[tuple[str, str]]:
    """Yield ``(event name, data)`` per event; the name defaults to ``message``, data lines join with ``\\n``.

    ``lines`` are lines without their terminators (as ``httpx.Response.aiter_lines`` gives them). Comment
    lines (``:``) and ``id``/``retry`` fields are skipped; an event without data is not dispatched.
    """
    event = ""
    data: list[str] = []
    async for line in lines:
        if not line:
            if data:
                yield event or "message", "\n".join(data)
            event, data = "", []
            continue
        if line.startswith(":"):
            continue
        name, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        if name == "data":
            data.append(value)
        elif name == "event":
            event = value
    if data:  # a stream that ends without the final blank line
        yield event or "message", "\n".join(data)
