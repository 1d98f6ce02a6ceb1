"""``simpleqa``: OpenAI's SimpleQA (4,326 short fact-seeking questions), graded by a judge as correct, incorrect or
not attempted.

Data: the Hub dataset ``basicv8vc/SimpleQA`` (``simple_qa_test_set.csv``: ``metadata``, ``problem``, ``answer``; the
file simple-evals publishes). Task ids ``simpleqa-0000``...; the category is the metadata's ``topic``.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import ClassVar

from .hub_benchmark import HubQA
from .hub_files import read_rows
from .judge import Grader, LetterGrader
from .judged import QAItem

FILE = "simple_qa_test_set.csv"


def metadata_of(raw: str) -> dict[str, object]:
    """SimpleQA's ``metadata`` column (a Python dict literal), {} when it is not one."""
    if not raw or len(raw) > 100_000:
        return {}
    try:
        value = ast.literal_eval(raw)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return {}
    return value if isinstance(value, dict) else {}


class SimpleQA(HubQA):
    """SimpleQA (params: ``HubQAParams``)."""

    name: ClassVar[str] = "simpleqa"
    version: ClassVar[str] = "1"
    dimension: ClassVar[str] = "web_research"
    repo: ClassVar[str] = "basicv8vc/SimpleQA"

    def patterns(self) -> list[str]:
        return [FILE]

    def items_from(self, files: dict[str, Path]) -> list[QAItem]:
        out = []
        for n, row in enumerate(read_rows(files[FILE])):
            meta = metadata_of(row.get("metadata") or "")
            topic = meta.get("topic")
            out.append(QAItem(id=f"simpleqa-{n:04d}", question=row["problem"], answer=row["answer"],
                              category=str(topic) if topic else None,
                              metadata={"answer_type": str(meta.get("answer_type") or "")}))
        return out

    def grader_for(self, kind: str) -> Grader:
        return LetterGrader()


__all__ = ["SimpleQA"]
