"""``frontierscience``: OpenAI's FrontierScience (160 expert science problems in two tracks), graded by a judge:
the olympiad track by ``VERDICT: CORRECT|INCORRECT`` against a short reference answer, the research track by
rubric points (``VERDICT: <points>`` of 10; the score is the fraction, correct at 7 points as the paper counts a
success).

Data: the Hub dataset ``openai/frontierscience``: ``olympiad/test.jsonl`` (100) and ``research/test.jsonl`` (60),
rows ``problem``, ``answer`` (the research track's rubric), ``subject``, ``task_group_id``. The problem is shown
verbatim (it carries its own answer-format instruction). Two research rows are identical, group id and all, so
task ids are the track and the row's index (``olympiad-000``, ``research-059``); the category is the track and
subject (``research/physics``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, ClassVar, Literal

import msgspec

from .hub_benchmark import HubQA, HubQAParams
from .hub_files import read_rows
from .judge import Grader, RubricGrader, VerdictGrader
from .judged import QAItem

TRACKS: dict[str, str] = {"olympiad": "olympiad/test.jsonl", "research": "research/test.jsonl"}


class FrontierScienceParams(HubQAParams, frozen=True):
    """``HubQAParams`` and ``track`` (``all``, default; ``olympiad``; ``research``) and ``success_points`` (rubric
    points a research answer needs to count as correct; default 7)."""

    track: Literal["all", "olympiad", "research"] = "all"
    success_points: Annotated[float, msgspec.Meta(gt=0, le=10)] = 7.0


class FrontierScience(HubQA):
    """FrontierScience (params: ``FrontierScienceParams``)."""

    name: ClassVar[str] = "frontierscience"
    version: ClassVar[str] = "1"
    dimension: ClassVar[str] = "science"
    Params: ClassVar[type[FrontierScienceParams]] = FrontierScienceParams
    repo: ClassVar[str] = "openai/frontierscience"

    def _tracks(self) -> list[str]:
        assert isinstance(self.p, FrontierScienceParams)
        return list(TRACKS) if self.p.track == "all" else [self.p.track]

    def patterns(self) -> list[str]:
        return [TRACKS[t] for t in self._tracks()]

    def items_from(self, files: dict[str, Path]) -> list[QAItem]:
        out = []
        for track in self._tracks():
            for n, row in enumerate(read_rows(files[TRACKS[track]])):
                subject = str(row.get("subject") or "").strip().lower()
                out.append(QAItem(id=f"{track}-{n:03d}", question=str(row["problem"]), answer=str(row["answer"]),
                                  kind="rubric" if track == "research" else "short",
                                  category=f"{track}/{subject}" if subject else track,
                                  metadata={"task_group_id": str(row.get("task_group_id") or "")}))
        return out

    def grader_for(self, kind: str) -> Grader:
        if kind == "rubric":
            assert isinstance(self.p, FrontierScienceParams)
            return RubricGrader(max_points=10.0, threshold=self.p.success_points)
        return VerdictGrader()


__all__ = ["FrontierScience", "FrontierScienceParams"]
