"""``qa_local``: a small bundled QA set (16 questions: short answers, multiple choice, one rubric question) that
runs offline, e.g. in CI with the scripted model as both agent and judge.

Data: ``local_data/questions.jsonl`` (``id``, ``question``, ``answer``, ``kind``, ``letter``, ``category``).
Short and multiple-choice answers are graded by the judge with SimpleQA's contract (correct / incorrect / not
attempted), the rubric question by rubric points (correct at 7 of 10); without ``judge_model`` the deterministic
match grades the short and multiple-choice questions (``sample_ids`` must then leave out the rubric question).
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path
from typing import ClassVar

import msgspec

from .judge import Grader, LetterGrader, RubricGrader
from .judged import JudgedQA, QAItem

DATA_FILE = Path(__file__).with_name("local_data") / "questions.jsonl"


@functools.cache
def bundled_items() -> tuple[QAItem, ...]:
    """The bundled questions, in file order."""
    lines = DATA_FILE.read_bytes().splitlines()
    return tuple(msgspec.json.decode(line, type=QAItem) for line in lines if line.strip())


class QALocal(JudgedQA):
    """The bundled offline QA set (params: ``JudgedQAParams``)."""

    name: ClassVar[str] = "qa_local"
    version: ClassVar[str] = "1"
    dimension: ClassVar[str] = "web_research"
    has_match: ClassVar[bool] = True

    def load_items(self) -> list[QAItem]:
        self.source = {"kind": "bundled", "file": "agentcompass/benchmarks/qa/local_data/questions.jsonl",
                       "sha256": hashlib.sha256(DATA_FILE.read_bytes()).hexdigest()}
        return list(bundled_items())

    def grader_for(self, kind: str) -> Grader:
        return RubricGrader() if kind == "rubric" else LetterGrader()


__all__ = ["QALocal", "bundled_items"]
