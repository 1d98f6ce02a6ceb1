"""``hle``: Humanity's Last Exam (2,500 expert questions; exact-answer and multiple-choice), graded by a judge
(``correct: yes|no``, the confidence it extracts giving ``calibration_error``). HLE defines no grading without a
judge: ``grading: match`` (asked for by name; ``auto`` without ``judge_model`` is refused) uses the multiple-choice
letter and the normalized exact answer, and the run records ``grading_is_official: false``.

Data: the gated Hub dataset ``cais/hle`` (accept its terms, set ``HF_TOKEN``): ``data/test-*.parquet`` with ``id``,
``question``, ``image``, ``answer``, ``answer_type`` (``exactMatch`` or ``multipleChoice``), ``category``. The
harnesses here are text-only, so questions with an image are skipped unless ``text_only`` is false (the image is
then not shown). Task ids are the dataset's ``id``; the category is its ``category``.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from .hub_benchmark import HubQA, HubQAParams
from .hub_files import read_rows
from .judge import Grader, YesNoGrader
from .judged import QAItem

PATTERN = "data/test-*.parquet"
EXACT_FORMAT = ("\n\nAnswer in this format:\nExplanation: <your explanation for your final answer>\n"
                "Exact Answer: <your succinct, final answer>\nConfidence: <your confidence in your answer, 0% to 100%>")
CHOICE_FORMAT = ("\n\nAnswer in this format:\nExplanation: <your explanation for your answer choice>\n"
                 "Answer: <the letter of your chosen answer>\nConfidence: <your confidence in your answer, 0% to 100%>")


class HLEParams(HubQAParams, frozen=True):
    """``HubQAParams`` and ``text_only`` (skip the questions with an image; default true)."""

    text_only: bool = True


class HLE(HubQA):
    """Humanity's Last Exam (params: ``HLEParams``)."""

    name: ClassVar[str] = "hle"
    version: ClassVar[str] = "1"
    dimension: ClassVar[str] = "science"
    Params: ClassVar[type[HLEParams]] = HLEParams
    repo: ClassVar[str] = "cais/hle"
    has_match: ClassVar[bool] = True
    match_in_auto: ClassVar[bool] = False

    def patterns(self) -> list[str]:
        return [PATTERN]

    def items_from(self, files: dict[str, Path]) -> list[QAItem]:
        assert isinstance(self.p, HLEParams)
        out = []
        for name in sorted(files):
            for row in read_rows(files[name], columns=["id", "question", "image", "answer", "answer_type",
                                                       "category"]):
                if self.p.text_only and row.get("image"):
                    continue
                choice = row.get("answer_type") == "multipleChoice"
                answer = str(row["answer"]).strip()
                question = str(row["question"])
                out.append(QAItem(id=str(row["id"]), question=question,
                                  prompt=question + (CHOICE_FORMAT if choice else EXACT_FORMAT), answer=answer,
                                  kind="multiple_choice" if choice else "exact",
                                  category=str(row["category"]) if row.get("category") else None,
                                  letter=answer.upper() if choice and len(answer) == 1 else None))
        return out

    def grader_for(self, kind: str) -> Grader:
        return YesNoGrader()


__all__ = ["HLE", "HLEParams"]
