"""``sealqa``: SealQA (fact-seeking questions where web search gives conflicting or unhelpful results), graded by a
judge as correct, incorrect or not attempted (SimpleQA's grading).

Data: the Hub dataset ``vtllms/sealqa``, one parquet file per subset at the repo's root: ``seal-0.parquet``
(``seal_0``, 111 questions, the default) and ``seal-hard.parquet`` (``seal_hard``, 254); columns ``question``,
``answer``, ``topic``. Task ids ``sealqa/seal_0/000``...; the category is the ``topic``.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar, Literal

from .hub_benchmark import HubQA, HubQAParams
from .hub_files import read_rows
from .judge import Grader, LetterGrader
from .judged import QAItem

FILES: dict[str, str] = {"seal_0": "seal-0.parquet", "seal_hard": "seal-hard.parquet"}


class SealQAParams(HubQAParams, frozen=True):
    """``HubQAParams`` and ``subset``: ``seal_0`` (default) or ``seal_hard``."""

    subset: Literal["seal_0", "seal_hard"] = "seal_0"


class SealQA(HubQA):
    """SealQA (params: ``SealQAParams``)."""

    name: ClassVar[str] = "sealqa"
    version: ClassVar[str] = "1"
    dimension: ClassVar[str] = "web_research"
    Params: ClassVar[type[SealQAParams]] = SealQAParams
    repo: ClassVar[str] = "vtllms/sealqa"

    def patterns(self) -> list[str]:
        assert isinstance(self.p, SealQAParams)
        return [FILES[self.p.subset]]

    def items_from(self, files: dict[str, Path]) -> list[QAItem]:
        assert isinstance(self.p, SealQAParams)
        subset = self.p.subset
        rows = read_rows(files[FILES[subset]], columns=["question", "answer", "topic"])
        return [QAItem(id=f"sealqa/{subset}/{n:03d}", question=str(r["question"]), answer=str(r["answer"]),
                       category=str(r["topic"]) if r.get("topic") else None)
                for n, r in enumerate(rows)]

    def grader_for(self, kind: str) -> Grader:
        return LetterGrader()


__all__ = ["SealQA", "SealQAParams"]
