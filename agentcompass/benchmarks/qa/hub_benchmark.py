"""A judge-graded QA benchmark whose data is a public Hugging Face Hub dataset (``qa_hub.py`` loads it).

A subclass names its ``repo`` and the ``patterns`` of the files it reads, and turns the rows into ``QAItem``s
(``items_from``). The ``repo`` and ``revision`` params point at another copy or version; ``hub_timeout`` bounds
the wait for the Hub (a machine without network fails within it, naming the dataset, ``HF_ENDPOINT`` and
``data_dir``).
"""

from __future__ import annotations

import abc
from pathlib import Path
from typing import ClassVar

import msgspec

from ..._validate import Seconds
from ...dependencies import Requirement
from .hub_files import hub_files
from .judged import JudgedQA, JudgedQAParams, QAItem


class HubQAParams(JudgedQAParams, frozen=True):
    """``JudgedQAParams`` and: ``repo`` (another Hub dataset with the same layout), ``revision`` (branch, tag or
    commit; default ``main``), ``hub_timeout`` (seconds to wait for the Hub's answers; default 20)."""

    repo: str | None = None
    revision: str = "main"
    hub_timeout: Seconds = 20.0


class HubQA(JudgedQA):
    """A ``JudgedQA`` over a Hub dataset's files (see the module doc)."""

    Params: ClassVar[type[JudgedQAParams]] = HubQAParams
    #: the Hub download; optional: a copy already in the cache needs neither
    requirements: ClassVar[tuple[Requirement, ...]] = (
        Requirement("huggingface_hub>=1.1", "huggingface_hub", optional=True),
        Requirement("pyarrow>=14", "pyarrow", optional=True))
    #: the Hub dataset repo
    repo: ClassVar[str] = ""

    @abc.abstractmethod
    def patterns(self) -> list[str]:
        """The repo's files to read (fnmatch patterns over its paths)."""

    @abc.abstractmethod
    def items_from(self, files: dict[str, Path]) -> list[QAItem]:
        """The items in the downloaded files (repo path -> local file)."""

    def load_items(self) -> list[QAItem]:
        p = self.p
        assert isinstance(p, HubQAParams)
        repo = p.repo or self.repo
        files, got = hub_files(self.where, repo, self.patterns(), data_dir=self.data_dir, revision=p.revision,
                               timeout=p.hub_timeout)
        self.source = {"kind": "hub", **msgspec.to_builtins(got)}
        return self.items_from(files)


__all__ = ["HubQA", "HubQAParams"]
