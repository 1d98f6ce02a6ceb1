"""``gpqa_diamond``: GPQA Diamond (198 graduate-level multiple-choice science questions), graded by the letter
(``Answer: X``) as simple-evals does, or by a judge when ``judge_model`` is given and ``grading`` is ``judge``.

Data: the gated Hub dataset ``Idavidrein/gpqa`` (accept its terms, set ``HF_TOKEN``): ``gpqa_diamond.csv`` with
``Question``, ``Correct Answer``, ``Incorrect Answer 1..3``, ``Record ID``, ``High-level domain``. The four choices
are shuffled per task, deterministically: the order depends only on ``shuffle_seed`` and the record id, so a
task's letters are the same in every run. Task ids are the ``Record ID``; the category is the domain.
"""

from __future__ import annotations

import hashlib
import random
from pathlib import Path
from typing import ClassVar

from .hub_benchmark import HubQA, HubQAParams
from .hub_files import read_rows
from .judge import Grader, YesNoGrader
from .judged import JudgedQAParams, QAItem

FILE = "gpqa_diamond.csv"
LETTERS = "ABCD"
INSTRUCTION = ("Answer the following multiple-choice question. The last line of your reply must be of the form "
               "'Answer: X', where X is one of A, B, C or D. Think step by step before answering.\n\n")


class GPQAParams(HubQAParams, frozen=True):
    """``HubQAParams`` and ``shuffle_seed`` (the choices' order; default 0)."""

    shuffle_seed: int = 0


def shuffled(choices: list[str], seed: int, record_id: str) -> list[int]:
    """The order of ``choices`` (indices) for one record: the same for the same seed and id."""
    digest = hashlib.sha256(f"{seed}:{record_id}".encode()).digest()
    order = list(range(len(choices)))
    random.Random(int.from_bytes(digest[:8], "big")).shuffle(order)
    return order


class GPQADiamond(HubQA):
    """GPQA Diamond (params: ``GPQAParams``)."""

    name: ClassVar[str] = "gpqa_diamond"
    version: ClassVar[str] = "1"
    dimension: ClassVar[str] = "science"
    Params: ClassVar[type[GPQAParams]] = GPQAParams
    repo: ClassVar[str] = "Idavidrein/gpqa"
    has_match: ClassVar[bool] = True
    choice_letters: ClassVar[str] = "ABCD"

    def _grading(self, p: JudgedQAParams) -> str:
        # the official grading is the letter: the judge only when asked for by name
        if p.grading == "auto":
            return "match"
        return super()._grading(p)

    def patterns(self) -> list[str]:
        return [FILE]

    def items_from(self, files: dict[str, Path]) -> list[QAItem]:
        assert isinstance(self.p, GPQAParams)
        out = []
        for n, row in enumerate(read_rows(files[FILE])):
            rid = (row.get("Record ID") or "").strip() or f"gpqa-{n:03d}"
            choices = [row["Correct Answer"].strip()] + [row[f"Incorrect Answer {i}"].strip() for i in (1, 2, 3)]
            order = shuffled(choices, self.p.shuffle_seed, rid)
            lines = [f"{LETTERS[i]}) {choices[j]}" for i, j in enumerate(order)]
            question = row["Question"].strip() + "\n\n" + "\n".join(lines)
            letter = LETTERS[order.index(0)]
            out.append(QAItem(id=rid, question=question, prompt=INSTRUCTION + question,
                              answer=f"{letter}) {choices[0]}", kind="multiple_choice", letter=letter,
                              category=(row.get("High-level domain") or "").strip() or None))
        return out

    def grader_for(self, kind: str) -> Grader:
        return YesNoGrader()


__all__ = ["GPQADiamond", "GPQAParams", "shuffled"]
