"""Built-in harnesses (agent loops): ``none``, ``openai_chat`` and ``shell_agent``.

Each harness module is imported lazily through the registry; a component declares its params as a msgspec
``Params`` struct (see ``agentcompass.params``). This package holds the text helper the harnesses and the
benchmarks share.
"""

from __future__ import annotations


def truncate_middle(text: str, limit: int) -> str:
    """Keep the head and the tail of ``text`` so the result has at most about ``limit`` characters."""
    if len(text) <= limit:
        return text
    half = max(limit // 2, 1)
    omitted = len(text) - 2 * half
    return f"{text[:half]}\n... [{omitted} characters omitted] ...\n{text[-half:]}"
