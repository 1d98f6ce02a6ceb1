"""Text shortened for people and logs: the head and the tail kept, the middle counted."""

from __future__ import annotations


def truncate_middle(text: str, limit: int) -> str:
    """Keep the head and the tail of ``text`` so the result has at most about ``limit`` characters."""
    if len(text) <= limit:
        return text
    half = max(limit // 2, 1)
    omitted = len(text) - 2 * half
    return f"{text[:half]}\n... [{omitted} characters omitted] ...\n{text[-half:]}"
